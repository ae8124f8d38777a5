/**
 * PostgreSQL adapter: importing records exactly as another store holds them
 * (`toolgate db copy`). Where the adapter's own writes make new ids, times
 * and stamps, an import keeps each record's id, times, secrets and bytes as
 * given: it writes rows with SQL, a kind at a time, in bounded batches (set
 * statements over arrays), all inside one transaction that holds every
 * toolgate table locked. So an import lands whole or not at all, and no
 * other process writes to the tables meanwhile.
 *
 * Version stamps are not imported: every row gets the import's stamp.
 * Claims are not either (nothing is claimed after an import).
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { StoredApprovalSchema } from "../_rules.ts";
import { DataKey } from "../data_key.ts";
import { sealIncoming, sealOutgoing } from "../_sealed_secrets.ts";
import {
  type ApiKeyRecord,
  ApiKeyRecordSchema,
  type ApprovalRecord,
  type AuditCheckpoint,
  AuditCheckpointSchema,
  type AuditEntryWrite,
  type AuditHead,
  AuditHeadSchema,
  type AuditLogKey,
  AuditLogKeySchema,
  type AuditPruned,
  AuditPrunedSchema,
  type AuditTileWrite,
  BytesSchema,
  type DeliveryLogEntry,
  DeliveryLogEntrySchema,
  DeliveryRecordSchema,
  type DlqRecord,
  DlqRecordSchema,
  type IncomingJob,
  IncomingJobSchema,
  type IncomingStats,
  type IncomingWebhook,
  IncomingWebhookSchema,
  type KeychainRecord,
  KeychainRecordSchema,
  type MemoryEntry,
  type OutboxEvent,
  type OutgoingWebhook,
  OutgoingWebhookSchema,
  type PolicyRecord,
  PolicyRecordSchema,
  type StoredDelivery,
  type ToolPinRecord,
  ToolPinRecordSchema,
  type UpstreamRecord,
  UpstreamRecordSchema,
  type VirtualServerRecord,
  VirtualServerRecordSchema,
} from "../records.ts";
import { bumpCounter, nextStamp, type Tx } from "./_context.ts";
import { describeDatabase, type Sql, withStore } from "./connection.ts";
import { MIGRATIONS_TABLE } from "./migrations.ts";
import {
  IMPORT_KINDS,
  IMPORT_WRITERS,
  type ImportCounts,
  type ImportKind,
} from "./_import_rows.ts";

export { IMPORT_KINDS, type ImportCounts, type ImportKind } from "./_import_rows.ts";

/** Options of {@linkcode importIntoPostgres}. */
export interface ImportOptions {
  /** Most rows one statement writes. @default 1000 */
  batchRows?: number;
  /** Bytes after which a batch is written (one row may go past it). @default 8 MiB */
  batchBytes?: number;
  /** Longest wait for the table locks, in ms, before the import gives up. @default 5000 */
  lockTimeoutMs?: number;
  /** Called after each batch is written, with the running count of its kind. */
  onBatch?: (kind: ImportKind, count: number) => void;
  /** The target's key: webhook secrets are sealed with it. @default the data directory's, in memory */
  dataKey?: DataKey;
}

/** Tables that are not data: the schema's bookkeeping, filled by the migrations. */
const BOOKKEEPING_TABLES: ReadonlySet<string> = new Set([
  MIGRATIONS_TABLE,
  "toolgate_meta",
  "toolgate_counters",
]);

/** Bytes counted per row beside its values. */
const ROW_OVERHEAD_BYTES = 64;

const encoder = new TextEncoder();

/**
 * The toolgate tables of the database's current schema (none before the
 * first migration).
 */
async function toolgateTables(sql: Sql | Tx): Promise<string[]> {
  const rows = await sql<{ table_name: string }[]>`
    select table_name::text as table_name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE'
      and table_name like 'toolgate\\_%'
    order by table_name`;
  return rows.map((row) => row.table_name);
}

async function tablesWithRows(sql: Sql | Tx): Promise<string[]> {
  const out: string[] = [];
  for (const table of await toolgateTables(sql)) {
    if (BOOKKEEPING_TABLES.has(table)) continue;
    const [row] = await sql<{ any: boolean }[]>`select exists (select from ${sql(table)}) as any`;
    if (row.any) out.push(table);
  }
  return out;
}

/**
 * The toolgate tables that hold data (any row), in name order: empty for a
 * database never used by toolgate or only migrated. The schema's
 * bookkeeping (applied migrations, counters) does not count.
 *
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be reached.
 */
export function nonEmptyTables(sql: Sql): Promise<string[]> {
  return withStore(sql, () => tablesWithRows(sql));
}

/** `CONFLICT`: the target holds data. */
export function notEmpty(database: string, tables: readonly string[]): GatewayError {
  const shown = tables.slice(0, 4).join(", ") + (tables.length > 4 ? ", …" : "");
  return new GatewayError(
    "CONFLICT",
    `Cannot copy into the database at ${database}: it is not empty ` +
      `(${shown} ${tables.length === 1 ? "holds" : "hold"} rows); ` +
      "copy into an empty database (create a new one, e.g. with createdb)",
    { details: { tables } },
  );
}

/** Whether PostgreSQL gave up waiting for a lock (`lock_timeout`). */
function isLockTimeout(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "55P03";
}

interface Pending {
  rows: unknown[];
  bytes: number;
}

type Writer = (tx: Tx, rows: never[], stamp: string) => Promise<void>;

/**
 * Writes records into the tables of a migrated, empty database, in the
 * transaction {@linkcode importIntoPostgres} opened: each method queues one
 * record (validated with its schema first), and a kind's queue is written
 * with one statement whenever it reaches the batch bounds.
 */
export class PostgresImporter {
  /** Records written so far, by kind. */
  readonly counts: ImportCounts = Object.fromEntries(
    IMPORT_KINDS.map((kind) => [kind, 0]),
  ) as unknown as ImportCounts;
  #tx: Tx;
  #key: DataKey;
  #stamp: string;
  #batchRows: number;
  #batchBytes: number;
  #onBatch?: (kind: ImportKind, count: number) => void;
  #pending = new Map<ImportKind, Pending>();
  #head: AuditHead | null = null;
  #keys: AuditLogKey[] = [];
  #checkpoint: AuditCheckpoint | null = null;
  #pruned: AuditPruned | null = null;

  /** @internal Made by {@linkcode importIntoPostgres}. */
  constructor(tx: Tx, stamp: string, options: ImportOptions) {
    const { batchRows = 1000, batchBytes = 8 * 1024 * 1024, onBatch, dataKey } = options;
    this.#key = dataKey ?? new DataKey({ dataDir: ".", memory: true });
    if (!Number.isInteger(batchRows) || batchRows < 1) {
      throw new RangeError(`Invalid batchRows: ${batchRows} is not a positive integer`);
    }
    if (!(batchBytes > 0)) {
      throw new RangeError(`Invalid batchBytes: ${batchBytes} is not positive`);
    }
    this.#tx = tx;
    this.#stamp = stamp;
    this.#batchRows = batchRows;
    this.#batchBytes = batchBytes;
    this.#onBatch = onBatch;
  }

  /** Queues an outgoing webhook (its id, secret and `created_at` as given). */
  async outgoingWebhook(record: OutgoingWebhook): Promise<void> {
    const value = parseRecord(OutgoingWebhookSchema, record, `webhook ${record?.id}`);
    const sealed = await sealOutgoing(this.#key, value);
    return await this.#add("outgoing_webhooks", sealed, jsonBytes(sealed));
  }

  /** Queues an incoming endpoint. */
  async incomingWebhook(record: IncomingWebhook): Promise<void> {
    const value = parseRecord(IncomingWebhookSchema, record, `endpoint ${record?.id}`);
    const sealed = await sealIncoming(this.#key, value);
    return await this.#add("incoming_webhooks", sealed, jsonBytes(sealed));
  }

  /** Queues the counters of an incoming endpoint (all-zero counters are not written). */
  incomingStats(endpointId: string, stats: IncomingStats): Promise<void> {
    const { received, rejected, failed, last_received_at } = stats;
    for (
      const [name, value] of [["received", received], ["rejected", rejected], [
        "failed",
        failed,
      ]] as const
    ) {
      if (!Number.isSafeInteger(value) || value < 0) {
        throw new GatewayError(
          "STORE_CORRUPT",
          `Stored counters of endpoint ${endpointId} are unreadable: ${name} is ${value}`,
        );
      }
    }
    if (!received && !rejected && !failed && !last_received_at) return Promise.resolve();
    const row = { endpoint_id: endpointId, received, rejected, failed, last_received_at };
    return this.#add("incoming_stats", row, endpointId.length + 40);
  }

  /** Queues an upstream registration. */
  upstream(record: UpstreamRecord): Promise<void> {
    const value = parseRecord(UpstreamRecordSchema, record, `upstream ${record?.name}`);
    return this.#add("upstreams", value, jsonBytes(value));
  }

  /** Queues a keychain entry. */
  keychainEntry(name: string, record: KeychainRecord): Promise<void> {
    const value = parseRecord(KeychainRecordSchema, record, `keychain entry ${name}`);
    const bytes = value.backend === "file" ? value.iv.byteLength + value.data.byteLength : 0;
    return this.#add("keychain", { name, record: value }, name.length + bytes);
  }

  /** Queues an API key record (its hash; keys themselves are never stored). */
  apiKey(record: ApiKeyRecord): Promise<void> {
    const value = parseRecord(ApiKeyRecordSchema, record, `API key ${record?.id}`);
    return this.#add("api_keys", value, jsonBytes(value));
  }

  /** Queues a virtual server definition. */
  virtualServer(record: VirtualServerRecord): Promise<void> {
    const value = parseRecord(VirtualServerRecordSchema, record, `virtual server ${record?.name}`);
    return this.#add("virtual_servers", value, jsonBytes(value));
  }

  /** Queues the pin of an upstream definition. */
  toolPin(record: ToolPinRecord): Promise<void> {
    const value = parseRecord(
      ToolPinRecordSchema,
      record,
      `pin ${record?.plugin}/${record?.kind}/${record?.name}`,
    );
    return this.#add("tool_pins", value, jsonBytes(value));
  }

  /** Queues a stored policy rule. */
  policy(record: PolicyRecord): Promise<void> {
    const value = parseRecord(PolicyRecordSchema, record, `policy ${record?.name}`);
    return this.#add("policies", value, jsonBytes(value));
  }

  /** Queues an approval (its id, status and times as given). */
  approval(record: ApprovalRecord): Promise<void> {
    const value = parseRecord(StoredApprovalSchema, record, `approval ${record?.id}`);
    return this.#add("approvals", value, jsonBytes(value));
  }

  /**
   * Queues a memory note: its value's JSON text, which is the text it was
   * stored as (`JSON.stringify` of a parsed JSON value gives it back).
   *
   * @throws {GatewayError} `INTERNAL` when the text's size is not `size_bytes`.
   */
  memoryNote(entry: MemoryEntry): Promise<void> {
    const json = JSON.stringify(entry.value);
    const size = json === undefined ? -1 : encoder.encode(json).byteLength;
    if (size !== entry.size_bytes) {
      throw new GatewayError(
        "INTERNAL",
        `Cannot import memory value ${
          JSON.stringify(entry.key)
        }: its JSON text is ${size} bytes, the source stores ${entry.size_bytes}`,
      );
    }
    const row = { key: encoder.encode(entry.key), json, updated_at: entry.updated_at };
    return this.#add("memory", row, row.key.byteLength + size);
  }

  /** Queues an outbox event with its exact body. */
  event(event: OutboxEvent): Promise<void> {
    parseRecord(BytesSchema, event.body, `event ${event.id}`);
    return this.#add("events", event, event.body.byteLength + event.id.length);
  }

  /**
   * Queues a pending delivery: a fan-out entry (at `index` in its event's
   * fan-out list) or a delivery record with its attempts.
   */
  delivery(delivery: StoredDelivery, index = 0): Promise<void> {
    const record = parseRecord(
      DeliveryRecordSchema,
      delivery.record,
      `delivery ${delivery.record?.event_id}/${delivery.record?.webhook_id}`,
    );
    const row = { record, fanout: delivery.fanout, index };
    return this.#add("deliveries", row, jsonBytes(record));
  }

  /** Queues a dead-letter record with its exact body. */
  dlq(record: DlqRecord, body: Uint8Array): Promise<void> {
    const { size: _size, body: _inline, ...stored } = parseRecord(
      DlqRecordSchema,
      record,
      `DLQ record ${record?.dlq_id}`,
    );
    parseRecord(BytesSchema, body, `DLQ record ${record.dlq_id}`);
    if (body.byteLength !== record.size) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored DLQ record ${record.dlq_id} is unreadable: its body is ${body.byteLength} bytes, not ${record.size}`,
      );
    }
    return this.#add("dlq", { record: stored, body }, jsonBytes(stored) + body.byteLength);
  }

  /** Queues one entry of a webhook's delivery log, under its entry id. */
  deliveryLogEntry(webhookId: string, entryId: string, entry: DeliveryLogEntry): Promise<void> {
    const value = parseRecord(DeliveryLogEntrySchema, entry, `log of ${webhookId}`);
    const row = { webhook_id: webhookId, entry_id: entryId, entry: value };
    return this.#add("delivery_log", row, jsonBytes(value) + webhookId.length + entryId.length);
  }

  /** Queues an audit entry: its stored bytes, at its seq. */
  auditEntry(entry: AuditEntryWrite): Promise<void> {
    if (!Number.isSafeInteger(entry.seq) || entry.seq < 1) {
      throw new GatewayError("STORE_CORRUPT", `Stored audit entry ${entry.seq} has a bad seq`);
    }
    parseRecord(BytesSchema, entry.bytes, `audit entry ${entry.seq}`);
    return this.#add("audit_entries", entry, entry.bytes.byteLength);
  }

  /** Sets the head of the audit chain (written when the import ends). */
  auditHead(head: AuditHead): void {
    this.#head = parseRecord(AuditHeadSchema, head, "audit head");
  }

  /** Queues a tile of the audit log's tree. */
  auditTile(tile: AuditTileWrite): Promise<void> {
    if (!(tile.hashes instanceof Uint8Array) || tile.hashes.byteLength % 32) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored audit tree tile ${tile.level}/${tile.index} is unreadable`,
      );
    }
    return this.#add("audit_tiles", tile, tile.hashes.byteLength);
  }

  /** Sets the audit log's signing keys, latest checkpoint and prune mark (written when the import ends). */
  auditSigning(
    keys: readonly AuditLogKey[],
    checkpoint: AuditCheckpoint | null,
    pruned: AuditPruned | null = null,
  ): void {
    this.#pruned = pruned && parseRecord(AuditPrunedSchema, pruned, "audit prune mark");
    this.#keys = keys.map((key) => parseRecord(AuditLogKeySchema, key, `audit log key ${key.id}`));
    this.#checkpoint = checkpoint &&
      parseRecord(AuditCheckpointSchema, checkpoint, "audit checkpoint");
  }

  /** Queues an incoming job with its exact body. */
  incomingJob(job: IncomingJob, body: Uint8Array): Promise<void> {
    const value = parseRecord(IncomingJobSchema, job, `incoming job ${job?.id}`);
    parseRecord(BytesSchema, body, `incoming job ${job.id}`);
    if (body.byteLength !== value.body_bytes) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored body of incoming job ${job.id} is incomplete`,
      );
    }
    return this.#add("incoming_jobs", { job: value, body }, jsonBytes(value) + body.byteLength);
  }

  /** Writes every queued record and the audit head. */
  async finish(): Promise<void> {
    for (const kind of IMPORT_KINDS) await this.#flush(kind);
    if (this.#head) {
      const head = this.#head;
      await this.#tx`
        insert into toolgate_audit_head (id, seq, hash, timestamp, tree, version)
        values (true, ${head.seq}, ${head.hash}, ${head.timestamp}, ${head.tree ?? null},
          ${this.#stamp})`;
    }
    for (const key of this.#keys) {
      await this.#tx`insert into toolgate_audit_keys (id, record) values (${key.id}, ${
        this.#tx.json(key)
      })`;
    }
    const current = this.#keys.find((key) => key.retired_at === undefined);
    if (current) {
      await this.#tx`
        insert into toolgate_meta (key, value) values ('audit_current_key', to_jsonb(${current.id}::text))`;
    }
    if (this.#pruned) {
      await this.#tx`
        insert into toolgate_meta (key, value) values ('audit_pruned', ${
        this.#tx.json(this.#pruned)
      })`;
    }
    if (this.#checkpoint) {
      await this.#tx`
        insert into toolgate_audit_checkpoint (id, size, note)
        values (true, ${this.#checkpoint.size}, ${this.#checkpoint.note})`;
    }
  }

  async #add(kind: ImportKind, row: unknown, bytes: number): Promise<void> {
    let pending = this.#pending.get(kind);
    if (!pending) this.#pending.set(kind, pending = { rows: [], bytes: 0 });
    pending.rows.push(row);
    pending.bytes += bytes + ROW_OVERHEAD_BYTES;
    if (pending.rows.length >= this.#batchRows || pending.bytes >= this.#batchBytes) {
      await this.#flush(kind);
    }
  }

  async #flush(kind: ImportKind): Promise<void> {
    const pending = this.#pending.get(kind);
    if (!pending?.rows.length) return;
    this.#pending.delete(kind);
    await (IMPORT_WRITERS[kind] as Writer)(this.#tx, pending.rows as never[], this.#stamp);
    this.counts[kind] += pending.rows.length;
    this.#onBatch?.(kind, this.counts[kind]);
  }
}

function jsonBytes(value: unknown): number {
  return JSON.stringify(value).length;
}

/**
 * Imports records into a migrated database, in one transaction: it locks
 * every toolgate table against writers (waiting at most `lockTimeoutMs`),
 * checks that none holds data, hands `fill` an importer, writes what is
 * still queued when `fill` returns, and bumps the change counters so
 * listening instances look. When `fill` or a write fails, nothing is left.
 *
 * @returns What was imported, by kind.
 * @throws {GatewayError} `CONFLICT` when a table holds data, or another
 * process holds the tables past `lockTimeoutMs`; `STORE_UNAVAILABLE` when the
 * database cannot be reached; `STORE_CORRUPT` for a record that does not
 * parse (nothing is written then).
 * @example
 * ```ts
 * const counts = await importIntoPostgres(sql, async (importer) => {
 *   for (const webhook of await source.webhooks.listOutgoing()) {
 *     await importer.outgoingWebhook(webhook);
 *   }
 * });
 * ```
 */
export async function importIntoPostgres(
  sql: Sql,
  fill: (importer: PostgresImporter) => Promise<void>,
  options: ImportOptions = {},
): Promise<ImportCounts> {
  const { lockTimeoutMs = 5000 } = options;
  if (!Number.isInteger(lockTimeoutMs) || lockTimeoutMs < 1) {
    throw new RangeError(`Invalid lockTimeoutMs: ${lockTimeoutMs} is not a positive integer`);
  }
  const database = describeDatabase(sql);
  try {
    return await withStore(sql, () =>
      sql.begin(async (tx) => {
        await tx`select set_config('lock_timeout', ${String(lockTimeoutMs)}, true)`;
        const tables = (await toolgateTables(tx)).filter((t) => t !== MIGRATIONS_TABLE);
        if (!tables.includes("toolgate_audit_entries")) {
          throw new GatewayError(
            "INTERNAL",
            `Cannot import into the database at ${database}: it is not migrated`,
          );
        }
        // Writers wait until the import commits; readers do not.
        await tx.unsafe(`lock table ${tables.map(quoteIdentifier).join(", ")} in exclusive mode`);
        const taken = await tablesWithRows(tx);
        if (taken.length) throw notEmpty(database, taken);
        const importer = new PostgresImporter(tx, await nextStamp(tx), options);
        await fill(importer);
        await importer.finish();
        await bumpCounter(tx, "registrations");
        await bumpCounter(tx, "deliveries");
        return importer.counts;
      }) as Promise<ImportCounts>);
  } catch (error) {
    if (isLockTimeout(error)) {
      throw new GatewayError(
        "CONFLICT",
        `Cannot copy into the database at ${database}: another process is writing to it; ` +
          "copy into an empty database no toolgate uses",
        { cause: error },
      );
    }
    throw error;
  }
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
