/**
 * Moving an install: copying the embedded Deno KV store of a data directory
 * into an empty PostgreSQL database (`toolgate db copy`). The source is read
 * only through the {@linkcode Store} interface and is left as it was; the
 * target gets every record with its id, times, secrets and exact bytes.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { APPROVALS_LIST_MAX } from "./kv/approvals.ts";
import { KV_FILE, openKvStore } from "./kv/kv_store.ts";
import type { PostgresImporter } from "./postgres/import.ts";
import { IMPORT_KINDS, type ImportCounts, type ImportKind } from "./postgres/_import_rows.ts";
import { DataKey } from "./data_key.ts";
import { ensureKey } from "./key_check.ts";
import type { OpenStoreOptions } from "./open.ts";
import type { StoredDelivery } from "./records.ts";
import type { Store } from "./store.ts";

/** What a copy wrote, by kind of record. */
export type CopyCounts = ImportCounts;

/** A kind of record a copy counts. */
export type CopyKind = ImportKind;

/** Every kind of record, in the order a copy reports them. */
export const COPY_KINDS: readonly CopyKind[] = IMPORT_KINDS;

/** Options of {@linkcode copyStore}. */
export interface CopyStoreOptions<V> {
  /** The source: a data directory whose Deno KV store is copied (`url` must be unset). */
  from: OpenStoreOptions;
  /** The target: a `postgres://` URL of an empty database (migrated by the copy). */
  to: string;
  /**
   * Checks the target once the copy is committed (the caller verifies the
   * audit chain there: `src/store` does not know how).
   */
  verify: (target: Store) => Promise<V>;
  /** Called as records are written: the kind and how many of it so far. @default none */
  onProgress?: (kind: CopyKind, copied: number) => void;
  /**
   * A server that published its state on the source within this many ms
   * counts as running, and the copy is refused. @default 5000
   */
  serverStatusMaxAgeMs?: number;
  /** Most rows one statement writes. @default 1000 */
  batchRows?: number;
}

/** Result of {@linkcode copyStore}. */
export interface CopyStoreResult<V> {
  /** The source's KV file. */
  from: string;
  /** The target database, without its password. */
  to: string;
  /** Records copied, by kind. */
  counts: CopyCounts;
  /** What `verify` returned. */
  verified: V;
}

/** Audit entries read per page of the source. */
const AUDIT_PAGE_SIZE = 1000;

/**
 * Copies the Deno KV store of `from.dataDir` into the empty PostgreSQL
 * database `to`: webhook registrations (ids, secrets, times) and incoming
 * counters, upstreams, keychain entries, API keys, virtual servers, pins of
 * upstream definitions, stored policy rules, approvals, memory notes, pending
 * deliveries (events with their exact bodies, fan-out entries, delivery
 * records with their attempts), dead letters with their bodies, delivery
 * logs, the audit chain (each entry's stored bytes, and the head) and
 * incoming jobs with their bodies. Version stamps are new; claims and server
 * states are not copied. The source is only read.
 *
 * The target is checked before anything is done (a database holding any
 * toolgate data is refused), migrated, then written in one transaction
 * holding its tables locked: a copy that fails leaves no data behind, and
 * can be run again. Afterwards `verify` runs on the target.
 *
 * @returns The counts and what `verify` returned.
 * @throws {GatewayError} `USAGE` when `from` names a PostgreSQL store or `to`
 * is not a `postgres://` URL; `NOT_FOUND` when the data directory has no KV
 * store; `CONFLICT` when the target holds data or a server runs on the
 * source; `STORE_UNAVAILABLE` when the database cannot be reached;
 * `STORE_CORRUPT` when a source record cannot be read.
 * @example
 * ```ts
 * import { verifyAuditChain } from "../audit/mod.ts";
 *
 * const { counts, verified } = await copyStore({
 *   from: { dataDir: "/home/me/.toolgate" },
 *   to: "postgres://toolgate@db/toolgate",
 *   verify: (target) => verifyAuditChain(target),
 * });
 * ```
 */
export async function copyStore<V>(options: CopyStoreOptions<V>): Promise<CopyStoreResult<V>> {
  const { from, to, verify, onProgress, serverStatusMaxAgeMs = 5000, batchRows } = options;
  if (from.url) {
    throw new GatewayError(
      "USAGE",
      "Cannot copy from a PostgreSQL store: the source is the data directory's Deno KV store",
    );
  }
  if (from.memory) throw new GatewayError("USAGE", "Cannot copy from an in-memory store");
  if (!/^postgres(ql)?:\/\/\S+$/.test(to)) {
    throw new GatewayError(
      "USAGE",
      "Invalid --to: expected a postgres://user:password@host:port/database URL",
    );
  }
  const file = `${from.dataDir}/${KV_FILE}`;
  await requireFile(file);

  // The PostgreSQL adapter and driver load only for a copy (not with every command).
  const [
    { describeDatabase, openPostgres },
    { importIntoPostgres, nonEmptyTables, notEmpty },
    { migrate },
    { PostgresStore },
  ] = await Promise.all([
    import("./postgres/connection.ts"),
    import("./postgres/import.ts"),
    import("./postgres/migrations.ts"),
    import("./postgres/postgres_store.ts"),
  ]);
  const sql = openPostgres(to, from.pool);
  // The import seals inside its transaction: with a key of its own, unguarded
  // (the target's guard reads the target outside it); the check is recorded after.
  const dataKey = new DataKey({ dataDir: from.dataDir, key: from.secretKey });
  const target = new PostgresStore(
    sql,
    from.dataDir,
    new DataKey({ dataDir: from.dataDir, key: from.secretKey }),
  );
  try {
    // Refused before anything is written, migrations included.
    const taken = await nonEmptyTables(sql);
    if (taken.length) throw notEmpty(describeDatabase(sql), taken);
    const source = await openKvStore({ dataDir: from.dataDir, secretKey: from.secretKey });
    let counts: CopyCounts;
    try {
      const running = await source.upstreams.listServerStatuses(serverStatusMaxAgeMs);
      if (running.length) {
        const pids = running.map((status) => status.pid).join(", ");
        throw new GatewayError(
          "CONFLICT",
          `Cannot copy ${file}: a toolgate server is running on it (pid ${pids}); ` +
            "stop it first, so that nothing it writes during the copy is left behind",
        );
      }
      await migrate(sql);
      counts = await importIntoPostgres(sql, (importer) => copyAll(source, importer), {
        onBatch: onProgress,
        batchRows,
        dataKey,
      });
    } finally {
      await source.close();
    }
    await ensureKey(target, { claim: false });
    const verified = await verify(target);
    return { from: file, to: target.location, counts, verified };
  } finally {
    await target.close();
  }
}

async function requireFile(path: string): Promise<void> {
  try {
    const info = await Deno.stat(path);
    if (info.isFile) return;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) {
      throw new GatewayError("STORE_CORRUPT", `Cannot read ${path}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
  throw new GatewayError(
    "NOT_FOUND",
    `Nothing to copy: ${path} does not exist; set TOOLGATE_HOME to the data directory to copy`,
  );
}

/** Reads every kind of record from `source` and queues it on `importer`. */
async function copyAll(source: Store, importer: PostgresImporter): Promise<void> {
  const outgoing = await source.webhooks.listOutgoing();
  for (const webhook of outgoing) await importer.outgoingWebhook(webhook);
  for (const endpoint of await source.webhooks.listIncoming()) {
    await importer.incomingWebhook(endpoint);
    await importer.incomingStats(endpoint.id, await source.webhooks.incomingStats(endpoint.id));
  }
  for (const upstream of await source.upstreams.list()) await importer.upstream(upstream);
  for (const { name, record } of await source.keychain.list()) {
    await importer.keychainEntry(name, record);
  }
  for (const record of await source.apiKeys.list()) await importer.apiKey(record);
  for (const record of await source.servers.list()) await importer.virtualServer(record);
  for (const record of await source.pins.list()) await importer.toolPin(record);
  for (const record of await source.policies.list()) await importer.policy(record);
  await copyApprovals(source, importer);
  await copyMemory(source, importer);
  await copyPending(source, importer);
  for (const record of await source.deliveries.listDlq()) {
    await importer.dlq(record, await source.deliveries.readDlqBody(record));
  }
  for (const webhook of outgoing) await copyLog(source, importer, webhook.id);
  await copyAudit(source, importer);
  // Pending jobs (with their retry schedule), then failed jobs, kept as they are.
  const jobs = [...await source.incoming.list(), ...await source.incoming.listFailed()];
  for (const job of jobs) {
    const body = await source.incoming.readBody(job);
    // A job completed meanwhile is gone with its body.
    if (body) await importer.incomingJob(job, body);
  }
}

async function copyApprovals(source: Store, importer: PostgresImporter): Promise<void> {
  // The interface lists a page at a time: one listing of every approval. A Deno KV
  // listing reads at most APPROVALS_LIST_MAX records: one that long may have missed some.
  const approvals = await source.approvals.list({ limit: Number.MAX_SAFE_INTEGER });
  if (approvals.length >= APPROVALS_LIST_MAX) {
    throw new GatewayError(
      "INTERNAL",
      `Cannot copy the approvals: the source holds ${APPROVALS_LIST_MAX} or more, ` +
        `and one listing reads at most ${APPROVALS_LIST_MAX}`,
    );
  }
  for (const record of approvals) await importer.approval(record);
}

async function copyMemory(source: Store, importer: PostgresImporter): Promise<void> {
  // The interface pages by prefix only: one listing of every note, checked whole.
  const { entries, truncated } = await source.memory.list({ limit: Number.MAX_SAFE_INTEGER });
  if (truncated) throw new GatewayError("INTERNAL", "Cannot list every memory note at once");
  for (const entry of entries) await importer.memoryNote(entry);
}

/** Pending deliveries, and the events they send. */
async function copyPending(source: Store, importer: PostgresImporter): Promise<void> {
  const pending = await source.deliveries.listPending();
  // Fan-out entries keep the order of their event's fan-out list.
  const fanoutIndex = new Map<string, number>();
  const events = new Set<string>();
  for (const delivery of pending) await importDelivery(importer, delivery, fanoutIndex, events);
  for (const eventId of events) {
    const stored = await source.deliveries.readEvent(eventId);
    if (stored) await importer.event(stored.event);
  }
}

function importDelivery(
  importer: PostgresImporter,
  delivery: StoredDelivery,
  fanoutIndex: Map<string, number>,
  events: Set<string>,
): Promise<void> {
  const eventId = delivery.record.event_id;
  events.add(eventId);
  if (!delivery.fanout) return importer.delivery(delivery);
  const index = fanoutIndex.get(eventId) ?? 0;
  fanoutIndex.set(eventId, index + 1);
  return importer.delivery(delivery, index);
}

async function copyLog(
  source: Store,
  importer: PostgresImporter,
  webhookId: string,
): Promise<void> {
  const ids = await source.deliveries.listLogIds(webhookId);
  if (!ids.length) return;
  // Newest first, as read: the ids are oldest first.
  const entries = (await source.deliveries.readLog(webhookId, ids.length)).reverse();
  if (entries.length !== ids.length) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored delivery log of ${webhookId} is unreadable: ${ids.length} ids, ${entries.length} entries`,
    );
  }
  for (const [i, entry] of entries.entries()) {
    await importer.deliveryLogEntry(webhookId, ids[i], entry);
  }
}

async function copyAudit(source: Store, importer: PostgresImporter): Promise<void> {
  // Entries up to the head read first: a consistent chain, whatever is appended meanwhile.
  const { head } = await source.audit.readHead();
  if (!head) return;
  for await (
    const page of source.audit.pages({ before: head.seq + 1, pageSize: AUDIT_PAGE_SIZE })
  ) {
    for (const record of page) {
      if (!record.bytes) {
        throw new GatewayError(
          "STORE_CORRUPT",
          `Cannot copy audit entry ${record.seq}: it is unreadable in the source; run toolgate audit verify`,
        );
      }
      await importer.auditEntry({ seq: record.seq, bytes: record.bytes });
    }
  }
  // The tree's tiles up to the head's tree size (a longer partial tile is cut to it). Level 0 is
  // the entries' (src/audit/stored_tiles.ts): only what a prune kept of it is stored and copied.
  const size = head.tree ?? 0;
  for (let level = 0, nodes = size; nodes > 0; level++, nodes = Math.floor(nodes / 32)) {
    const refs = Array.from({ length: Math.ceil(nodes / 32) }, (_, index) => ({ level, index }));
    for (let i = 0; i < refs.length; i += AUDIT_PAGE_SIZE) {
      const some = refs.slice(i, i + AUDIT_PAGE_SIZE);
      const tiles = await source.audit.readTiles(some);
      for (const [j, ref] of some.entries()) {
        const want = Math.min(32, nodes - ref.index * 32) * 32;
        const tile = tiles[j];
        if (level === 0) {
          if (tile) await importer.auditTile({ ...ref, hashes: tile.subarray(0, want) });
          continue;
        }
        if (!tile || tile.length < want) {
          throw new GatewayError(
            "STORE_CORRUPT",
            `Cannot copy audit tree tile ${level}/${ref.index}: it is missing or short in the source; run toolgate audit verify`,
          );
        }
        await importer.auditTile({ ...ref, hashes: tile.subarray(0, want) });
      }
    }
  }
  importer.auditHead(head);
  importer.auditSigning(
    await source.audit.readKeys(),
    await source.audit.readCheckpoint(),
    await source.audit.readPruned(),
  );
}
