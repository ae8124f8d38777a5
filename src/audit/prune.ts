/**
 * Retention: `toolgate audit prune` and `audit.retention` drop the bodies
 * of old entries, after exporting them as JSON lines, and keep what the
 * tree needs (the level-0 tiles of the pruned entries, which appends do not
 * write, are stored first), so the remaining log, its proofs
 * and the checkpoints published before still verify. The pruned range is
 * recorded in the store (the chain is checked from the first kept entry,
 * linked to the last pruned one's hash) and in the log itself, as an
 * `audit.pruned` entry.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { GatewayError } from "../errors/mod.ts";
import type { Store } from "../store/mod.ts";
import type { AuditLog } from "./audit_log.ts";
import type { AuditEntry } from "./entry.ts";
import { PrunedTiles } from "./stored_tiles.ts";
import { TreeError } from "./tiles.ts";

/** Options of {@linkcode pruneAuditLog}. */
export interface PruneAuditOptions {
  /** Prune entries before this seq, or written before this time. */
  before: number | Date;
  /** Receives each pruned entry's JSON line (with its newline) before anything is deleted. @default none */
  exportLine?: (line: string) => Promise<void>;
  /** Clock. @default Date.now */
  now?: () => number;
}

/** What {@linkcode pruneAuditLog} did. */
export interface PruneAuditResult {
  /** Entries up to this seq are pruned now (0: none ever). */
  through: number;
  /** Entries pruned by this call. */
  pruned: number;
  /** The `audit.pruned` entry recording it (none when nothing was pruned). */
  entry?: AuditEntry;
}

/**
 * Prunes entries before `before` (never the last one: appends link to it).
 *
 * @throws {GatewayError} `USAGE` for a bad `before`, `UNAVAILABLE` when the
 * tree does not cover the log yet (start the server once).
 */
export async function pruneAuditLog(
  log: AuditLog,
  store: Store,
  options: PruneAuditOptions,
): Promise<PruneAuditResult> {
  const { before, exportLine, now = Date.now } = options;
  if (typeof before === "number" && (!Number.isSafeInteger(before) || before < 1)) {
    throw new GatewayError("USAGE", `Invalid before ${before}: use a seq of 1 or more`);
  }
  if (before instanceof Date && !Number.isFinite(before.getTime())) {
    throw new GatewayError("USAGE", "Invalid before: use an ISO 8601 time");
  }
  const { head } = await store.audit.readHead();
  const mark = await store.audit.readPruned();
  const from = mark?.through ?? 0;
  if (!head) return { through: from, pruned: 0 };
  if ((head.tree ?? 0) < head.seq) {
    throw new GatewayError(
      "UNAVAILABLE",
      "Cannot prune: the audit tree does not cover the log yet; start the server once to build it",
    );
  }
  const limit = head.seq - 1;
  const digest = createHash("sha256");
  let last: AuditEntry | undefined;
  let count = 0;
  try {
    // Level 0 of the tree is the entries': their tiles are stored before they go.
    const tiles = await PrunedTiles.after(store, from);
    for await (const entry of log.entries({ after: from })) {
      if (entry.seq > limit) break;
      const old = typeof before === "number"
        ? entry.seq < before
        : Date.parse(entry.timestamp) < before.getTime();
      if (!old) break;
      const line = `${JSON.stringify(entry)}\n`;
      digest.update(line);
      await exportLine?.(line);
      await tiles.add(entry.seq, entry.entry_hash);
      last = entry;
      count++;
    }
    await tiles.finish();
  } catch (error) {
    if (!(error instanceof TreeError)) throw error;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot prune: ${error.message[0].toLowerCase()}${
        error.message.slice(1)
      }; run toolgate audit verify`,
      { cause: error },
    );
  }
  if (!last) return { through: from, pruned: 0 };
  await store.audit.prune({
    through: last.seq,
    hash: last.entry_hash,
    at: new Date(now()).toISOString(),
  });
  const entry = await log.append({
    kind: "audit.pruned",
    tool: "audit",
    input: {
      from_seq: from + 1,
      through_seq: last.seq,
      through_hash: last.entry_hash,
      before: typeof before === "number" ? before : before.toISOString(),
      exported: exportLine !== undefined,
      export_sha256: `sha256:${digest.digest("hex")}`,
    },
    outcome: { ok: true, entries: count },
  });
  return { through: last.seq, pruned: count, entry };
}

/** Options of {@linkcode scheduleRetention}. */
export interface RetentionOptions {
  log: AuditLog;
  store: Store;
  /** Entries older than this are pruned, in ms. */
  maxAgeMs: number;
  /** How often, in ms. */
  everyMs: number;
  /** Where each run exports what it prunes (`audit-pruned-<time>.jsonl`). @default no export */
  exportDir?: string;
  /** Told of each run's outcome. */
  onRun?: (run: { pruned?: PruneAuditResult; error?: unknown }) => void;
  /** Clock. @default Date.now */
  now?: () => number;
}

/** Runs {@linkcode pruneAuditLog} now and every `everyMs` (`audit.retention`). @returns Stops it. */
export function scheduleRetention(options: RetentionOptions): () => Promise<void> {
  const { log, store, maxAgeMs, everyMs, exportDir, onRun, now = Date.now } = options;
  let running: Promise<void> | undefined;
  const run = async () => {
    let file: Deno.FsFile | undefined;
    try {
      const at = now();
      const encoder = new TextEncoder();
      const path = exportDir &&
        `${exportDir}/audit-pruned-${new Date(at).toISOString().replaceAll(":", "")}.jsonl`;
      const pruned = await pruneAuditLog(log, store, {
        before: new Date(at - maxAgeMs),
        now,
        exportLine: path
          ? async (line) => {
            file ??= await Deno.open(path, { write: true, createNew: true, mode: 0o600 });
            await file.write(encoder.encode(line));
          }
          : undefined,
      });
      await file?.sync();
      onRun?.({ pruned });
    } catch (error) {
      onRun?.({ error });
    } finally {
      file?.close();
    }
  };
  const tick = () => {
    running ??= run().finally(() => running = undefined);
  };
  const first = setTimeout(tick, 0);
  const timer = setInterval(tick, everyMs);
  Deno.unrefTimer(timer as unknown as number);
  return async () => {
    clearTimeout(first);
    clearInterval(timer);
    await running;
  };
}
