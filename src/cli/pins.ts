/**
 * `toolgate tools pins|diff|approve|reject`: the pins of upstream tools,
 * prompts and resource templates, and the administrator's decisions on
 * quarantined ones. They work on the store (running servers follow within
 * `plugins.upstream_settings.poll_ms`, at once on PostgreSQL), each decision
 * an audit entry.
 *
 * @module
 */
import type { Command } from "commander";
import { createAuditLog } from "../audit/mod.ts";
import { type PinView, ToolPins } from "../pins/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

async function withPins<T>(context: CliContext, run: (pins: ToolPins) => Promise<T>): Promise<T> {
  const store = await context.store();
  const audit = createAuditLog({ store });
  try {
    return await run(new ToolPins({ store, audit: (input) => audit.append(input) }));
  } finally {
    await audit.close();
  }
}

function describe(pin: PinView): string {
  switch (pin.status) {
    case "pinned":
      return "pinned";
    case "changed":
      return `quarantined: ${pin.changed.join(", ")} changed`;
    case "new":
      return "held: new, waiting for approval";
    default:
      return `rejected by ${pin.decided_by ?? "?"} (${pin.changed.join(", ")})`;
  }
}

/** Registers `pins`, `diff`, `approve` and `reject` under the `tools` command group. */
export function registerPins(tools: Command, context: CliContext): void {
  tools.command("pins")
    .description("list the pins of upstream tools, prompts and resource templates")
    .option("--changed", "only those quarantined, held or rejected")
    .option("--json", "print them as JSON")
    .action(async (options: { changed?: boolean; json?: boolean }) => {
      const pins = await withPins(context, (p) => p.list({ changed: options.changed }));
      if (options.json) {
        context.printJson(pins);
        return;
      }
      if (!pins.length) {
        context.print(
          options.changed
            ? "No changed pins: every upstream offers what was pinned."
            : "No pins yet: upstream tools are pinned when a server first lists them.",
        );
        return;
      }
      context.print(table(
        ["TOOL", "KIND", "STATUS", "PINNED SHA-256", "UPDATED"],
        pins.map((pin) => [
          pin.tool,
          pin.kind,
          describe(pin),
          pin.pinned_sha256?.slice(0, 12) ?? "-",
          pin.updated_at,
        ]),
      ));
    });

  tools.command("diff")
    .description("show how an upstream changed a pinned tool (a unified diff)")
    .argument("<tool>", "the tool's name (as clients see it)")
    .option("--json", "print both definitions and the diff as JSON")
    .action(async (tool: string, options: { json?: boolean }) => {
      const pin = await withPins(context, (p) => p.diff(tool));
      if (options.json) {
        context.printJson(pin);
        return;
      }
      context.print(
        pin.diff
          ? `${pin.tool}: ${describe(pin)}\n${pin.diff.trimEnd()}`
          : `${pin.tool}: ${describe(pin)}; its upstream offers what was pinned`,
      );
    });

  for (const decision of ["approve", "reject"] as const) {
    const command = tools.command(decision)
      .description(
        decision === "approve"
          ? "approve what an upstream offers now: it becomes the pin and is listed again"
          : "reject an upstream's changed definition: the tool stays out while it is offered",
      )
      .argument(decision === "approve" ? "[tool]" : "<tool>", "the tool's name (as clients see it)")
      .option("--json", "print the pins decided as JSON");
    if (decision === "approve") {
      command.option("--all", "approve every quarantined or held definition");
    }
    command
      .action(async (tool: string | undefined, options: { all?: boolean; json?: boolean }) => {
        if (!tool && !options.all) {
          throw usage(
            `Missing <tool>: name the tool to ${decision}` +
              " or pass --all (toolgate tools pins --changed lists them)",
          );
        }
        if (tool && options.all) throw usage("Invalid arguments: give <tool> or --all, not both");
        const decided = await withPins(context, async (pins) => {
          if (options.all) return await pins.approve("*", "admin");
          return decision === "approve"
            ? await pins.approve(tool!, "admin")
            : await pins.reject(tool!, "admin");
        });
        if (options.json) {
          context.printJson(decided);
          return;
        }
        if (!decided.length) {
          context.print("Nothing to approve: no pin is quarantined or held.");
          return;
        }
        for (const pin of decided) {
          context.print(
            decision === "approve"
              ? `Approved ${pin.tool}: pinned ${
                pin.pinned_sha256?.slice(0, 12)
              }; running servers list it again`
              : `Rejected the change of ${pin.tool}: it stays out while its upstream offers it`,
          );
        }
      });
  }
}
