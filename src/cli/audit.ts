/**
 * `toolgate audit …`: list, verify and export the hash-chained audit log.
 *
 * @module
 */
import type { Command } from "commander";
import { join } from "node:path";
import {
  AUDIT_KINDS,
  type AuditLog,
  AuditProofs,
  checkpointsFromText,
  type CheckpointSource,
  createAuditLog,
  loadLogKeys,
  MAX_LIST_LIMIT,
  pruneAuditLog,
  rotateLogKey,
  verifyAuditTree,
} from "../audit/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

function parseLimit(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < 1 || value > MAX_LIST_LIMIT) {
    throw usage(`Invalid --limit "${raw}": expected a whole number from 1 to ${MAX_LIST_LIMIT}`);
  }
  return value;
}

function parseAfter(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) throw usage(`Invalid --after "${raw}": expected a seq number`);
  return Number(raw);
}

function parseKind(raw: string | undefined): string | undefined {
  if (raw === undefined || AUDIT_KINDS.includes(raw)) return raw;
  throw usage(`Invalid --kind "${raw}": expected one of ${AUDIT_KINDS.join(", ")}`);
}

function parseSince(raw: string | undefined): Date | undefined {
  if (raw === undefined) return undefined;
  const relative = /^(\d+)(s|m|h|d)$/.exec(raw);
  if (relative) {
    const unit = { s: 1e3, m: 6e4, h: 36e5, d: 864e5 }[relative[2] as "s" | "m" | "h" | "d"];
    return new Date(Date.now() - Number(relative[1]) * unit);
  }
  const date = new Date(raw);
  if (Number.isNaN(date.getTime())) {
    throw usage(
      `Invalid --since "${raw}": expected an ISO date (2026-11-22T10:00:00Z) or a duration (30m, 2h, 7d)`,
    );
  }
  return date;
}

async function withLog<T>(context: CliContext, run: (log: AuditLog) => Promise<T>): Promise<T> {
  const log = createAuditLog({ store: await context.store() });
  try {
    return await run(log);
  } finally {
    await log.close();
  }
}

/** Registers the `audit` command group. */
export function registerAudit(program: Command, context: CliContext): void {
  const audit = program.command("audit").description("inspect the append-only audit log");

  audit.command("list")
    .description("list audit entries, oldest first")
    .option("--tool <name>", "only entries of this tool")
    .option("--kind <kind>", `only entries of this kind (${AUDIT_KINDS.join(", ")})`)
    .option(
      "--caller <name>",
      "only entries of this caller: an API key's name or id, or a kind (admin, local, key)",
    )
    .option(
      "--since <time>",
      "only entries at or after an ISO time or a duration ago (30m, 2h, 7d)",
    )
    .option("--after <seq>", "only entries after this seq")
    .option("--limit <n>", `most entries (1-${MAX_LIST_LIMIT}, default 100)`)
    .option("--json", "print {entries, next_after} as JSON")
    .action(async (options: {
      tool?: string;
      kind?: string;
      caller?: string;
      since?: string;
      after?: string;
      limit?: string;
      json?: boolean;
    }) => {
      const query = {
        tool: options.tool,
        kind: parseKind(options.kind),
        caller: parseCaller(options.caller),
        since: parseSince(options.since),
        after: parseAfter(options.after),
        limit: parseLimit(options.limit),
      };
      const page = await withLog(context, (log) => log.list(query));
      if (options.json) {
        context.printJson(page);
        return;
      }
      if (page.entries.length === 0) {
        context.print("No audit entries match.");
        return;
      }
      context.print(table(
        ["SEQ", "TIME", "KIND", "TOOL", "CALLER", "OUTCOME", "HASH"],
        page.entries.map((entry) => [
          String(entry.seq),
          entry.timestamp,
          entry.kind,
          entry.tool,
          entry.caller ? entry.caller.name ?? entry.caller.kind : "-",
          describeOutcome(entry.outcome),
          entry.entry_hash.slice(0, 19) + "…",
        ]),
      ));
      if (page.next_after !== null) {
        // The same filters (a duration as the time it meant), the next page.
        const next = [
          ...(query.tool !== undefined ? ["--tool", query.tool] : []),
          ...(query.kind !== undefined ? ["--kind", query.kind] : []),
          ...(query.caller !== undefined ? ["--caller", query.caller] : []),
          ...(query.since !== undefined ? ["--since", query.since.toISOString()] : []),
          ...(query.limit !== undefined ? ["--limit", String(query.limit)] : []),
          "--after",
          String(page.next_after),
        ].map(shellWord);
        context.print(`More entries: toolgate audit list ${next.join(" ")}`);
      }
    });

  audit.command("verify")
    .description(
      "walk the whole chain and rebuild the tree; check earlier checkpoints; exit 1 naming what is wrong",
    )
    .option(
      "--checkpoint <file|url>",
      "a checkpoint published earlier (a signed note, or a history file of JSON lines); " +
        "default: the history file and the latest stored checkpoint",
    )
    .option("--key <verifier-key>", "trust this verifier key beside the store's own")
    .option("--json", "print the result as JSON")
    .action(async (options: { checkpoint?: string; key?: string; json?: boolean }) => {
      const progress = context.io.stderrIsTty && !context.io.env.NO_COLOR
        ? (what: string) => ({ checked, total }: { checked: number; total: number }) =>
          context.io.stderr(`\r${what} ${checked}/${total}`)
        : undefined;
      const result = await withLog(
        context,
        (log) => log.verify({ onProgress: progress?.("verifying chain") }),
      );
      if (progress) context.io.stderr("\n");
      if (!result.ok) {
        if (options.json) context.printJson(result);
        throw new GatewayError(
          "STORE_CORRUPT",
          `Audit chain broken at seq ${result.seq} (${result.reason}): ${result.message}`,
          { details: result },
        );
      }
      const store = await context.store();
      const checkpoints = await checkpointSources(context, options.checkpoint);
      const tree = await verifyAuditTree(store, {
        checkpoints,
        keys: options.key ? [options.key] : [],
        onProgress: progress?.("verifying tree"),
      });
      if (progress) context.io.stderr("\n");
      if (options.json) context.printJson({ ...result, tree });
      if (!tree.ok) {
        throw new GatewayError(
          "STORE_CORRUPT",
          `Audit tree check failed (${tree.reason}): ${tree.message}`,
          {
            details: tree,
          },
        );
      }
      if (!options.json) {
        context.print(`Audit chain intact: ${result.count} entries, head ${result.head_hash}`);
        context.print(
          `Audit tree intact: ${tree.tree_size} entries, root ${tree.root}; ` +
            `consistent with ${tree.checkpoints} checkpoint${tree.checkpoints === 1 ? "" : "s"}`,
        );
      }
    });

  audit.command("prune")
    .description(
      "drop the bodies of entries before a seq or time, exporting them first; proofs and checkpoints still verify",
    )
    .requiredOption("--before <time|seq>", "a seq, an ISO time, or a duration ago (90d, 12h)")
    .option("--export <file>", "write the pruned entries to this file as JSON lines first")
    .option("--json", "print {through, pruned, entry} as JSON")
    .action(async (options: { before: string; export?: string; json?: boolean }) => {
      const before = /^[1-9]\d*$/.test(options.before)
        ? Number(options.before)
        : parseSince(options.before)!;
      const store = await context.store();
      let file: Deno.FsFile | undefined;
      if (options.export) {
        try {
          file = await Deno.open(options.export, { write: true, createNew: true, mode: 0o600 });
        } catch (error) {
          throw usage(`Cannot create --export ${options.export}: ${(error as Error).message}`);
        }
      }
      const encoder = new TextEncoder();
      let result;
      try {
        result = await withLog(context, (log) =>
          pruneAuditLog(log, store, {
            before,
            exportLine: file && (async (line) => {
              await file!.write(encoder.encode(line));
            }),
          }));
        await file?.sync();
      } finally {
        file?.close();
      }
      if (options.json) {
        context.printJson(result);
        return;
      }
      context.print(
        result.pruned
          ? `Pruned ${result.pruned} entries (through seq ${result.through})` +
            (options.export ? `, exported to ${options.export}` : "")
          : `Nothing to prune${result.through ? ` (pruned through seq ${result.through})` : ""}`,
      );
    });

  audit.command("key")
    .description("print the log's verifier key (signed-note format) and its older keys")
    .option(
      "--rotate",
      "make a new signing key; the old one stays listed so what it signed verifies",
    )
    .option("--json", "print the keys as JSON")
    .action(async (options: { rotate?: boolean; json?: boolean }) => {
      const store = await context.store();
      const config = await context.config();
      const name = config.audit.origin ?? `toolgate/${await store.deploymentId()}`;
      const keys = options.rotate
        ? await rotateLogKey({ store, name })
        : await loadLogKeys({ store, name, create: false });
      if (options.json) {
        context.printJson({ verifier_key: keys.signer.verifierKey, keys: keys.listed });
        return;
      }
      context.print(keys.signer.verifierKey);
      for (const old of keys.listed.slice(1)) {
        context.print(`# retired ${old.retired_at ?? "?"}: ${old.verifier_key}`);
      }
    });

  audit.command("checkpoint")
    .description("print the latest signed checkpoint (C2SP tlog-checkpoint)")
    .action(async () => {
      const latest = await (await context.store()).audit.readCheckpoint();
      if (!latest) {
        throw new GatewayError(
          "NOT_FOUND",
          "No checkpoint yet: a running server makes one after each entry",
        );
      }
      context.io.stdout(latest.note);
    });

  audit.command("prove")
    .description("print the inclusion proof of entry <seq> in the latest checkpoint's tree")
    .argument("<seq>", "the entry's seq")
    .option("--size <n>", "a tree size of an earlier checkpoint instead")
    .action(async (rawSeq: string, options: { size?: string }) => {
      if (!/^[1-9]\d*$/.test(rawSeq)) throw usage(`Invalid seq "${rawSeq}": expected a seq number`);
      if (options.size !== undefined && !/^[1-9]\d*$/.test(options.size)) {
        throw usage(`Invalid --size "${options.size}": expected a tree size`);
      }
      const store = await context.store();
      const proofs = new AuditProofs(store);
      const size = options.size !== undefined
        ? Number(options.size)
        : (await store.audit.readCheckpoint())?.size ?? await proofs.treeSize();
      context.printJson(await proofs.inclusion(Number(rawSeq), size));
    });

  audit.command("export")
    .description("write every entry as one JSON object per line, for external log systems")
    .option("--format <format>", "output format (jsonl)", "jsonl")
    .option("--tool <name>", "only entries of this tool")
    .option("--kind <kind>", "only entries of this kind")
    .option("--caller <name>", "only entries of this caller (API key name or id, or a kind)")
    .option("--since <time>", "only entries at or after an ISO time or a duration ago")
    .option("--after <seq>", "only entries after this seq")
    .action(async (options: {
      format: string;
      tool?: string;
      kind?: string;
      caller?: string;
      since?: string;
      after?: string;
    }) => {
      if (options.format !== "jsonl") {
        throw usage(`Invalid --format "${options.format}": expected jsonl`);
      }
      const filter = {
        tool: options.tool,
        kind: parseKind(options.kind),
        caller: parseCaller(options.caller),
        since: parseSince(options.since),
        after: parseAfter(options.after),
      };
      const showProgress = context.io.stderrIsTty && !context.io.env.NO_COLOR;
      await withLog(context, async (log) => {
        let count = 0;
        let buffer = "";
        for await (const entry of log.entries(filter)) {
          buffer += JSON.stringify(entry) + "\n";
          count++;
          if (buffer.length > 64 * 1024) {
            context.io.stdout(buffer);
            buffer = "";
            if (showProgress) context.io.stderr(`\rexported ${count}`);
          }
        }
        context.io.stdout(buffer);
        if (showProgress) context.io.stderr(`\rexported ${count}\n`);
      });
    });
}

/** The checkpoints `audit verify` checks: `--checkpoint`, else the history file and the latest stored. */
async function checkpointSources(
  context: CliContext,
  given: string | undefined,
): Promise<CheckpointSource[]> {
  if (given !== undefined) {
    let text: string;
    if (/^https?:\/\//.test(given)) {
      const response = await fetch(given);
      text = await response.text();
      if (!response.ok) {
        throw new GatewayError(
          "NOT_FOUND",
          `Cannot read the checkpoint at ${given}: HTTP ${response.status}`,
        );
      }
    } else {
      try {
        text = await Deno.readTextFile(given);
      } catch (error) {
        throw usage(`Cannot read --checkpoint ${given}: ${(error as Error).message}`);
      }
    }
    try {
      return checkpointsFromText(text, given);
    } catch (error) {
      throw usage(`Invalid --checkpoint ${given}: ${(error as Error).message}`);
    }
  }
  const config = await context.config();
  const file = config.audit.checkpoints.file ?? join(config.dataDir, "checkpoints.log");
  const sources: CheckpointSource[] = [];
  try {
    sources.push(...checkpointsFromText(await Deno.readTextFile(file), file));
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot read the checkpoint history ${file}: ${(error as Error).message}`,
      );
    }
  }
  const latest = await (await context.store()).audit.readCheckpoint();
  if (latest) sources.push({ note: latest.note, source: "the store's latest checkpoint" });
  return sources;
}

/** `--caller`: a non-empty name, id or kind. */
function parseCaller(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!raw.trim()) {
    throw usage(`Invalid --caller "": give an API key's name or id, or admin, local or key`);
  }
  return raw.trim();
}

function describeOutcome(outcome: Record<string, unknown>): string {
  if (outcome.ok === true) return `ok ${outcome.latency_ms ?? "?"} ms`;
  if (outcome.ok === false) return String(outcome.error_code ?? "failed");
  if (outcome.accepted === true) return "accepted";
  return JSON.stringify(outcome).slice(0, 40);
}

/** `word` as one shell word: quoted only when it needs it. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
