/**
 * `toolgate approvals list|show|approve|deny`: calls held for approval by
 * `require_approval` policies, and the administrator's decisions. They work
 * on the store: a caller waiting in a server sees the decision within a
 * quarter second, and an approved call nobody waits for runs in a server.
 *
 * @module
 */
import type { Command } from "commander";
import { Approvals, approvalView } from "../approvals/mod.ts";
import { createAuditLog } from "../audit/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { createRedactor } from "../redact.ts";
import type { ApprovalRecord } from "../store/mod.ts";
import { type CliContext, table, usage } from "./context.ts";
import { startQuietRuntime } from "./tools.ts";

const STATUSES = ["pending", "approved", "denied", "expired"] as const;

async function withApprovals<T>(
  context: CliContext,
  run: (approvals: Approvals) => Promise<T>,
): Promise<T> {
  const store = await context.store();
  const audit = createAuditLog({ store });
  try {
    return await run(new Approvals({ store, audit: (input) => audit.append(input) }));
  } finally {
    await audit.close();
  }
}

function age(record: ApprovalRecord): string {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(record.created_at)) / 1000));
  return seconds < 120
    ? `${seconds}s`
    : seconds < 7200
    ? `${Math.round(seconds / 60)}m`
    : `${Math.round(seconds / 3600)}h`;
}

/** Registers the `approvals` command group. */
export function registerApprovals(program: Command, context: CliContext): void {
  const approvals = program.command("approvals")
    .description("calls held for approval by require_approval policies");

  approvals.command("list")
    .description("list approvals, newest first")
    .option("--status <status>", `only ${STATUSES.join(", ")}`)
    .option("--json", "print them as JSON")
    .action(async (options: { status?: string; json?: boolean }) => {
      if (options.status && !STATUSES.includes(options.status as "pending")) {
        throw usage(`Invalid --status ${options.status}: use one of ${STATUSES.join(", ")}`);
      }
      const config = await context.config();
      const redact = createRedactor({ patterns: config.redact.patterns });
      const records = await withApprovals(
        context,
        (a) => a.list(options.status ? { status: options.status as "pending" } : {}),
      );
      if (options.json) {
        context.printJson(records.map((r) => approvalView(r, redact)));
        return;
      }
      if (!records.length) {
        context.print(options.status ? `No ${options.status} approvals.` : "No approvals.");
        return;
      }
      context.print(table(
        ["ID", "STATUS", "TOOL", "CALLER", "POLICY", "AGE"],
        records.map((r) => [r.id, r.status, r.tool, r.caller_ref, r.policy, age(r)]),
      ));
    });

  approvals.command("show")
    .description("show one approval as JSON (its arguments redacted, its result once it ran)")
    .argument("<id>", "its id (apr_…)")
    .action(async (id: string) => {
      const config = await context.config();
      const redact = createRedactor({ patterns: config.redact.patterns });
      const record = await withApprovals(context, (a) => a.get(id));
      if (!record) {
        throw new GatewayError(
          "NOT_FOUND",
          `No approval ${id} (toolgate approvals list shows them)`,
          {
            details: { approval_id: id },
          },
        );
      }
      context.printJson(approvalView(record, redact));
    });

  for (const decision of ["approve", "deny"] as const) {
    approvals.command(decision)
      .description(
        decision === "approve" ? "approve a held call: it runs once" : "deny a held call",
      )
      .argument("<id>", "its id (apr_…)")
      .option("--reason <text>", "why (recorded, shown to the caller)")
      .option("--json", "print the approval as JSON")
      .action(async (id: string, options: { reason?: string; json?: boolean }) => {
        if (options.reason !== undefined && options.reason.length > 1024) {
          throw usage(`Invalid --reason: ${options.reason.length} characters; at most 1024`);
        }
        const config = await context.config();
        const redact = createRedactor({ patterns: config.redact.patterns });
        // A one-shot runtime (no upstreams): its approval.decided event is recorded for the
        // server to deliver, as a one-shot tool call's events are.
        const runtime = await startQuietRuntime(context, false, () => false);
        let record;
        try {
          record = await runtime.approvals.decide(
            id,
            decision === "approve" ? "approved" : "denied",
            {
              by: "admin",
              caller: { kind: "admin" },
              ...(options.reason ? { reason: options.reason } : {}),
            },
          );
        } finally {
          await runtime.close();
        }
        if (options.json) context.printJson(approvalView(record, redact));
        else {
          context.print(
            decision === "approve"
              ? `Approved ${id}: ${record.tool} runs now (its caller, or a server, runs it once)`
              : `Denied ${id}: the call of ${record.tool} does not run`,
          );
        }
      });
  }
}
