/**
 * PostgreSQL adapter: the audit chain, one per database whatever the number
 * of instances writing to it.
 *
 * Entries are rows of `toolgate_audit_entries`, keyed by seq, holding the
 * canonical JSON bytes as given and the version stamp of the commit that
 * wrote them. The head is the one row of `toolgate_audit_head` (seq, hash and
 * timestamp of the last entry, and a version stamp). A commit is one call of
 * the function `toolgate_audit_commit`: it locks the head row (the first
 * commit inserts it, guarded by the primary key), and moves it only when it
 * still has the stamp the caller read, the entry it points at still has the
 * stamp read, and the first new seq is free; else it writes nothing and
 * returns null, and the caller re-reads and retries. Of two instances that
 * read the same head only one moves it: the other waits for the row lock,
 * then finds a newer stamp. So the chain never forks and no seq is used
 * twice. Without outbox deliveries or staged incoming jobs the call is the
 * whole commit: one statement, one round trip. With them, the call, the
 * delivery and job writes and `commit` go in one transaction on a reserved
 * connection, pipelined: three round trips. Hashing and the chain rules live
 * in `src/audit`.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import type { AuditLimits, AuditStore, StagedWrites } from "../store.ts";
import {
  type AuditChainState,
  type AuditCheckpoint,
  AuditCheckpointSchema,
  type AuditCommitGuard,
  type AuditCommitOutbox,
  type AuditEntryWrite,
  type AuditHead,
  AuditHeadSchema,
  type AuditLogKey,
  AuditLogKeySchema,
  type AuditPruned,
  AuditPrunedSchema,
  type AuditRecord,
  type AuditTileRef,
  type AuditTileWrite,
  type DeliveryOp,
  type ReadAuditRecordPagesOptions,
} from "../records.ts";
import type postgres from "postgres";
import type { Sql } from "./connection.ts";
import type { PgContext, Tx } from "./_context.ts";
import { checkAuditBatch, sortLogKeys } from "../_rules.ts";
import { applyDeliveryOps } from "./deliveries.ts";
import { applyStagedWrites } from "./incoming.ts";

/**
 * Largest entry, in bytes of canonical JSON: the Deno KV adapter's limit,
 * so that both adapters keep (and summarize) the same entries.
 */
export const AUDIT_MAX_ENTRY_BYTES = 540_000;

/** Most entries (plus staged writes and deliveries) in one commit. */
export const AUDIT_COMMIT_MAX_MUTATIONS = 5_000;

/** Byte budget of one commit. */
export const AUDIT_COMMIT_MAX_BYTES = 8 * 1024 * 1024;

/** Bytes counted per entry row beside its bytes (seq, version, row header). */
const ROW_OVERHEAD_BYTES = 40;

/** Bytes of entries one page of {@linkcode AuditStore.pages} holds at most (one entry always fits). */
const PAGE_MAX_BYTES = 16 * 1024 * 1024;

interface HeadRow {
  seq: number | null;
  hash: string | null;
  timestamp: string | null;
  tree: number | null;
  version: string | null;
}

function toHead(row: HeadRow | undefined): AuditHead | null {
  if (!row || row.seq === null) return null;
  return parseRecord(
    AuditHeadSchema,
    {
      seq: row.seq,
      hash: row.hash,
      timestamp: row.timestamp,
      ...(row.tree === null ? {} : { tree: row.tree }),
    },
    "audit head",
  );
}

/** Bytes counted per tile row beside its hashes. */
const TILE_ROW_OVERHEAD_BYTES = 40;

function toRecord(row: { seq: number; bytes: Uint8Array; version: string }): AuditRecord {
  return { seq: row.seq, bytes: plainBytes(row.bytes), versionstamps: [row.version] };
}

/** The bytes of `parts`, one after another. */
function concat(parts: readonly Uint8Array[]): Uint8Array {
  const all = new Uint8Array(parts.reduce((total, bytes) => total + bytes.byteLength, 0));
  let offset = 0;
  for (const bytes of parts) {
    all.set(bytes, offset);
    offset += bytes.byteLength;
  }
  return all;
}

/** The driver's bytea values are Buffers: records hold plain `Uint8Array`s. */
function plainBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** What storing one entry of `byteLength` bytes costs: one row. */
function entryCost(byteLength: number): { mutations: number; bytes: number } {
  return { mutations: 1, bytes: byteLength + ROW_OVERHEAD_BYTES };
}

class PgAuditStore implements AuditStore {
  readonly limits: AuditLimits = Object.freeze({
    maxEntryBytes: AUDIT_MAX_ENTRY_BYTES,
    commitMaxMutations: AUDIT_COMMIT_MAX_MUTATIONS,
    commitMaxBytes: AUDIT_COMMIT_MAX_BYTES,
    // Rows have no key budget of their own: bytes and rows bound a commit.
    commitMaxKeyBytes: Number.MAX_SAFE_INTEGER,
    keyBytesPerMutation: 0,
  });
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  entryCost(byteLength: number): { mutations: number; bytes: number } {
    return entryCost(byteLength);
  }

  async readHead(): Promise<{ head: AuditHead | null; versionstamp: string | null }> {
    const [row] = await this.#ctx.run((sql) =>
      sql<HeadRow[]>`
        select seq::float8 as seq, hash, timestamp, tree::float8 as tree, version
        from toolgate_audit_head where id`
    );
    return { head: toHead(row), versionstamp: row?.version ?? null };
  }

  async readHeadAndNext(seq: number): Promise<{ head: AuditHead | null; nextExists: boolean }> {
    // One statement: the head and the next entry are read from one snapshot.
    const [row] = await this.#ctx.run((sql) =>
      sql<(HeadRow & { next_exists: boolean })[]>`
        select h.seq::float8 as seq, h.hash, h.timestamp, h.tree::float8 as tree, h.version,
          exists (select 1 from toolgate_audit_entries where seq = ${seq + 1}) as next_exists
        from (select 1) as one left join toolgate_audit_head h on h.id`
    );
    return { head: toHead(row), nextExists: row.next_exists };
  }

  async readRecord(seq: number): Promise<AuditRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ seq: number; bytes: Uint8Array; version: string }[]>`
        select seq::float8 as seq, bytes, version from toolgate_audit_entries where seq = ${seq}`
    );
    return row ? toRecord(row) : null;
  }

  async readChainState(_hintSeq = 0): Promise<AuditChainState> {
    // One statement, one snapshot: no need to chase a moving head like KV.
    const [row] = await this.#ctx.run((sql) =>
      sql<
        (HeadRow & {
          next_exists: boolean;
          tail_bytes: Uint8Array | null;
          tail_version: string | null;
        })[]
      >`
        select h.seq::float8 as seq, h.hash, h.timestamp, h.tree::float8 as tree, h.version,
          exists (
            select 1 from toolgate_audit_entries where seq = coalesce(h.seq, 0) + 1
          ) as next_exists,
          t.bytes as tail_bytes, t.version as tail_version
        from (select 1) as one
        left join toolgate_audit_head h on h.id
        left join toolgate_audit_entries t on t.seq = h.seq`
    );
    const head = toHead(row);
    const seq = head?.seq ?? 0;
    if (row.next_exists) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot append to the audit log: entry ${seq + 1} is stored after the head (seq ${seq}); ` +
          "run toolgate audit verify",
      );
    }
    const tail = head && row.tail_bytes !== null && row.tail_version !== null
      ? toRecord({ seq, bytes: row.tail_bytes, version: row.tail_version })
      : null;
    return { head, headVersionstamp: head ? row.version : null, tail };
  }

  async commit(
    guard: AuditCommitGuard,
    entries: readonly AuditEntryWrite[],
    head: AuditHead,
    outbox?: AuditCommitOutbox,
    writes: readonly StagedWrites[] = [],
    tiles: readonly AuditTileWrite[] = [],
  ): Promise<string | null> {
    checkAuditBatch(
      entries,
      { maxEntryBytes: AUDIT_MAX_ENTRY_BYTES, maxMutations: AUDIT_COMMIT_MAX_MUTATIONS },
      (bytes) => entryCost(bytes).mutations,
      tiles.length,
    );
    const ops = outbox?.ops ?? [];
    const call = (sql: Sql) =>
      // One statement text (one prepared statement) for any batch. The entries travel as one
      // bytea: an array of bytea costs the driver and the server more to encode and parse.
      sql<{ stamp: string | null }[]>`
        select toolgate_audit_commit(
          ${guard.headVersionstamp}::text, ${guard.tailSeq}::bigint,
          ${[...guard.tailVersionstamps]}::text[],
          ${entries.map(({ seq }) => seq)}::bigint[],
          ${entries.map(({ bytes }) => bytes.byteLength)}::integer[],
          ${concat(entries.map(({ bytes }) => bytes))}::bytea,
          ${head.seq}::bigint, ${head.hash}::text, ${head.timestamp}::text,
          ${head.tree ?? null}::bigint,
          ${tiles.map(({ level }) => level)}::smallint[],
          ${tiles.map(({ index }) => index)}::bigint[],
          ${tiles.map(({ hashes }) => hashes.byteLength)}::integer[],
          ${concat(tiles.map(({ hashes }) => hashes))}::bytea,
          ${outbox?.bumpVersion ?? false}::boolean
        ) as stamp`;
    if (!ops.length && !writes.length) {
      // The call is the whole commit: one statement in a transaction of its own.
      const [row] = await this.#ctx.run((sql) => call(sql));
      return row.stamp;
    }
    return await this.#ctx.run(async (sql) => {
      const reserved = await sql.reserve();
      try {
        return await commitWithWrites(reserved, call, ops, writes);
      } finally {
        reserved.release();
      }
    });
  }

  tileCost(tiles: number, bytes: number): { mutations: number; bytes: number; keyBytes: number } {
    return { mutations: tiles, bytes: bytes + tiles * TILE_ROW_OVERHEAD_BYTES, keyBytes: 0 };
  }

  async readTiles(refs: readonly AuditTileRef[]): Promise<(Uint8Array | null)[]> {
    if (!refs.length) return [];
    const rows = await this.#ctx.run((sql) =>
      sql<{ ord: number; hashes: Uint8Array | null }[]>`
        select u.ord::float8 as ord, t.hashes
        from unnest(${refs.map(({ level }) => level)}::smallint[],
          ${refs.map(({ index }) => index)}::bigint[]) with ordinality as u (level, idx, ord)
        left join toolgate_audit_tiles t on t.level = u.level and t.idx = u.idx
        order by u.ord`
    );
    return rows.map((row, i) => {
      if (row.hashes === null) return null;
      if (row.hashes.byteLength % 32) {
        throw new GatewayError(
          "STORE_CORRUPT",
          `Stored audit tree tile ${refs[i].level}/${
            refs[i].index
          } is unreadable; run toolgate audit verify`,
        );
      }
      return plainBytes(row.hashes);
    });
  }

  async readKeys(): Promise<AuditLogKey[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ id: string; record: unknown }[]>`select id, record from toolgate_audit_keys`
    );
    const keys = rows.map((row) =>
      parseRecord(AuditLogKeySchema, row.record, `audit log key ${row.id}`)
    );
    return sortLogKeys(keys);
  }

  async addKey(
    key: AuditLogKey,
    retiring: { id: string; retired_at: string } | null,
  ): Promise<boolean> {
    return await this.#ctx.transaction(async (tx) => {
      // The current key's id, in toolgate_meta: locked, so two instances cannot both add one.
      await tx`
        insert into toolgate_meta (key, value) values ('audit_current_key', 'null'::jsonb)
        on conflict (key) do nothing`;
      const [current] = await tx<{ value: string | null }[]>`
        select value #>> '{}' as value from toolgate_meta where key = 'audit_current_key' for update`;
      if ((current?.value ?? null) !== (retiring?.id ?? null)) return false;
      if (retiring) {
        const updated = await tx`
          update toolgate_audit_keys
          set record = record || jsonb_build_object('retired_at', ${retiring.retired_at}::text)
          where id = ${retiring.id}`;
        if (updated.count !== 1) return false;
      }
      await tx`insert into toolgate_audit_keys (id, record) values (${key.id}, ${tx.json(key)})`;
      await tx`
        update toolgate_meta set value = to_jsonb(${key.id}::text) where key = 'audit_current_key'`;
      return true;
    });
  }

  async readCheckpoint(): Promise<AuditCheckpoint | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ size: number; note: string }[]>`
        select size::float8 as size, note from toolgate_audit_checkpoint where id`
    );
    return row ? parseRecord(AuditCheckpointSchema, row, "audit checkpoint") : null;
  }

  async putCheckpoint(checkpoint: AuditCheckpoint): Promise<boolean> {
    const rows = await this.#ctx.run((sql) =>
      sql`
        insert into toolgate_audit_checkpoint (id, size, note)
        values (true, ${checkpoint.size}, ${checkpoint.note})
        on conflict (id) do update set size = excluded.size, note = excluded.note
        where toolgate_audit_checkpoint.size < excluded.size
        returning size`
    );
    return rows.length === 1;
  }

  async readPruned(): Promise<AuditPruned | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ value: unknown }[]>`select value from toolgate_meta where key = 'audit_pruned'`
    );
    return row ? parseRecord(AuditPrunedSchema, row.value, "audit prune mark") : null;
  }

  async keepTiles(tiles: readonly AuditTileWrite[]): Promise<void> {
    if (!tiles.length) return;
    // As commit's tiles: the hashes one after another, the lengths saying where each ends.
    await this.#ctx.run((sql) =>
      sql`
        insert into toolgate_audit_tiles (level, idx, hashes)
        select batch.level, batch.idx, substring(${
        concat(tiles.map(({ hashes }) => hashes))
      }::bytea from batch.start::integer for batch.length)
        from (
          select u.level, u.idx, u.length, sum(u.length) over (order by u.ord) - u.length + 1 as start
          from unnest(${tiles.map(({ level }) => level)}::smallint[],
            ${tiles.map(({ index }) => index)}::bigint[],
            ${tiles.map(({ hashes }) => hashes.byteLength)}::integer[]) with ordinality
            as u (level, idx, length, ord)
        ) as batch
        on conflict (level, idx) do update set hashes = excluded.hashes
        where octet_length(toolgate_audit_tiles.hashes) < octet_length(excluded.hashes)`
    );
  }

  async prune(pruned: AuditPruned): Promise<number> {
    await this.#ctx.run((sql) =>
      sql`
        insert into toolgate_meta (key, value) values ('audit_pruned', ${sql.json(pruned)})
        on conflict (key) do update set value = excluded.value
        where (toolgate_meta.value ->> 'through')::bigint < ${pruned.through}`
    );
    const mark = await this.readPruned();
    const through = mark?.through ?? 0;
    const deleted = await this.#ctx.run((sql) =>
      sql`delete from toolgate_audit_entries where seq <= ${through}`
    );
    return deleted.count;
  }

  async *pages(options: ReadAuditRecordPagesOptions = {}): AsyncGenerator<AuditRecord[]> {
    const { after = 0, before, pageSize = 1000, skip } = options;
    if (!Number.isInteger(pageSize) || pageSize < 16) {
      throw new GatewayError(
        "INTERNAL",
        `Invalid pageSize ${pageSize}: use an integer of 16 or more`,
      );
    }
    let next = after + 1;
    for (;;) {
      if (before !== undefined && next >= before) return;
      const upper = before ?? Number.MAX_SAFE_INTEGER;
      // At most pageSize entries, cut after PAGE_MAX_BYTES (the first always stays).
      const rows = await this.#ctx.run((sql) => {
        // Entries the reader does not want stay in the database (see ReadAuditRecordPagesOptions.skip).
        const wanted = skip && skip.needles.length
          ? sql`and (
              substring(bytes from 1 for octet_length(convert_to(${skip.prefix}, 'UTF8')))
                <> convert_to(${skip.prefix}, 'UTF8')
              or not exists (
                select from unnest(${skip.needles as string[]}::text[]) as needle
                where position(convert_to(needle, 'UTF8') in bytes) = 0))`
          : sql``;
        return sql<{ seq: number; bytes: Uint8Array; version: string; listed: number }[]>`
          select seq::float8 as seq, bytes, version, listed::float8 as listed from (
            select seq, bytes, version, count(*) over () as listed,
              sum(octet_length(bytes)) over (order by seq) - octet_length(bytes) as preceding
            from (
              select seq, bytes, version from toolgate_audit_entries
              where seq >= ${next} and seq < ${upper} ${wanted}
              order by seq limit ${pageSize}
            ) as listed_rows
          ) as page
          where preceding < ${PAGE_MAX_BYTES}
          order by seq`;
      });
      if (!rows.length) return;
      yield rows.map(toRecord);
      const full = rows[0].listed === pageSize || rows.length < rows[0].listed;
      if (!full) return;
      next = rows[rows.length - 1].seq + 1;
    }
  }
}

/**
 * Commits the entries (`call`), then their delivery ops and staged incoming
 * jobs, in one transaction on `reserved`, pipelined: `begin` and the call
 * (one round trip, for the stamp the writes carry), the writes (one), then
 * `commit` (one). A lost race rolls back and returns null; any other
 * failure rolls back and is thrown.
 */
async function commitWithWrites(
  reserved: postgres.ReservedSql,
  call: (sql: Sql) => postgres.PendingQuery<{ stamp: string | null }[]>,
  ops: readonly DeliveryOp[],
  writes: readonly StagedWrites[],
): Promise<string | null> {
  // Queries on one connection run in the order they are sent.
  const begun = reserved`begin`.execute();
  const called = call(reserved).execute();
  try {
    const [, [{ stamp }]] = await Promise.all([begun, called]);
    if (stamp === null) {
      await reserved`rollback`;
      return null;
    }
    // The reserved connection is in the transaction: to these it is one.
    const tx = reserved as unknown as Tx;
    await Promise.all([
      ops.length ? applyDeliveryOps(tx, ops, stamp) : undefined,
      writes.length ? applyStagedWrites(tx, writes) : undefined,
    ]);
    await reserved`commit`;
    return stamp;
  } catch (error) {
    // Sent after whatever is still in flight; harmless when no transaction is open.
    await reserved`rollback`.catch(() => {});
    throw error;
  }
}

/** The audit chain, on PostgreSQL. */
export function createAuditStore(ctx: PgContext): AuditStore {
  return new PgAuditStore(ctx);
}
