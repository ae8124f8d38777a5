/**
 * PostgreSQL adapter: the audit chain, one per database whatever the number
 * of instances writing to it.
 *
 * Entries are rows of `toolgate_audit_entries`, keyed by seq, holding the
 * canonical JSON bytes as given and the version stamp of the commit that
 * wrote them. The head is the one row of `toolgate_audit_head` (seq, hash and
 * timestamp of the last entry, and a version stamp). A commit moves the head
 * with `update … where version = <the stamp read>` (the first one inserts
 * it, guarded by the primary key), so of two instances that read the same
 * head only one moves it: the other's update finds a newer version once the
 * first commits, writes nothing, and its caller re-reads and retries. The
 * entries, the outbox deliveries and staged incoming jobs are written in the
 * same transaction, after the head row is locked: the chain never forks and
 * no seq is used twice. Hashing and the chain rules live in `src/audit`.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import type { AuditLimits, AuditStore, StagedWrites } from "../store.ts";
import {
  type AuditChainState,
  type AuditCommitGuard,
  type AuditCommitOutbox,
  type AuditEntryWrite,
  type AuditHead,
  AuditHeadSchema,
  type AuditRecord,
  type ReadAuditRecordPagesOptions,
} from "../records.ts";
import { bumpCounter, nextStamp, type PgContext, type Tx } from "./_context.ts";
import { checkAuditBatch } from "../_rules.ts";
import { applyDeliveryOps } from "./deliveries.ts";
import { applyStagedWrites } from "./incoming.ts";

/** Tables of this part, in migration 1. */
export const AUDIT_SCHEMA = `
  create table toolgate_audit_head (
    id boolean primary key default true check (id),
    seq bigint not null check (seq >= 1),
    hash text not null,
    timestamp text not null,
    version text not null
  );
  create table toolgate_audit_entries (
    seq bigint primary key check (seq >= 1),
    bytes bytea not null,
    version text not null
  );
`;

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

/** Type oid of `bytea`, for arrays of bytes. */
const BYTEA_OID = 17;

/** Thrown inside a commit's transaction to roll it back when the chain moved. */
class ChainMoved extends Error {}

interface HeadRow {
  seq: number | null;
  hash: string | null;
  timestamp: string | null;
  version: string | null;
}

function toHead(row: HeadRow | undefined): AuditHead | null {
  if (!row || row.seq === null) return null;
  return parseRecord(
    AuditHeadSchema,
    { seq: row.seq, hash: row.hash, timestamp: row.timestamp },
    "audit head",
  );
}

function toRecord(row: { seq: number; bytes: Uint8Array; version: string }): AuditRecord {
  return { seq: row.seq, bytes: plainBytes(row.bytes), versionstamps: [row.version] };
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
        select seq::float8 as seq, hash, timestamp, version
        from toolgate_audit_head where id`
    );
    return { head: toHead(row), versionstamp: row?.version ?? null };
  }

  async readHeadAndNext(seq: number): Promise<{ head: AuditHead | null; nextExists: boolean }> {
    // One statement: the head and the next entry are read from one snapshot.
    const [row] = await this.#ctx.run((sql) =>
      sql<(HeadRow & { next_exists: boolean })[]>`
        select h.seq::float8 as seq, h.hash, h.timestamp, h.version,
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
        select h.seq::float8 as seq, h.hash, h.timestamp, h.version,
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
  ): Promise<string | null> {
    checkAuditBatch(
      entries,
      { maxEntryBytes: AUDIT_MAX_ENTRY_BYTES, maxMutations: AUDIT_COMMIT_MAX_MUTATIONS },
      (bytes) => entryCost(bytes).mutations,
    );
    try {
      return await this.#ctx.transaction(async (tx) => {
        const stamp = await nextStamp(tx);
        await moveHead(tx, guard, head, stamp);
        await checkTail(tx, guard);
        const first = entries[0].seq;
        const [taken] = await tx`select 1 from toolgate_audit_entries where seq = ${first}`;
        if (taken) throw new ChainMoved();
        // Arrays, not a values list: one statement text (one prepared statement) for any batch.
        const seqs = entries.map(({ seq }) => seq);
        const bytes = tx.array(entries.map(({ bytes }) => bytes), BYTEA_OID);
        await tx`
          insert into toolgate_audit_entries (seq, bytes, version)
          select seq, bytes, ${stamp}
          from unnest(${seqs}::bigint[], ${bytes}::bytea[]) as batch (seq, bytes)
          on conflict (seq) do update set bytes = excluded.bytes, version = excluded.version`;
        if (outbox) {
          if (outbox.ops.length) await applyDeliveryOps(tx, outbox.ops, stamp);
          if (outbox.bumpVersion) await bumpCounter(tx, "deliveries");
        }
        if (writes.length) await applyStagedWrites(tx, writes);
        return stamp;
      });
    } catch (error) {
      if (error instanceof ChainMoved) return null;
      throw error;
    }
  }

  async *pages(options: ReadAuditRecordPagesOptions = {}): AsyncGenerator<AuditRecord[]> {
    const { after = 0, before, pageSize = 1000 } = options;
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
      const rows = await this.#ctx.run((sql) =>
        sql<{ seq: number; bytes: Uint8Array; version: string; listed: number }[]>`
          select seq::float8 as seq, bytes, version, listed::float8 as listed from (
            select seq, bytes, version, count(*) over () as listed,
              sum(octet_length(bytes)) over (order by seq) - octet_length(bytes) as preceding
            from (
              select seq, bytes, version from toolgate_audit_entries
              where seq >= ${next} and seq < ${upper}
              order by seq limit ${pageSize}
            ) as listed_rows
          ) as page
          where preceding < ${PAGE_MAX_BYTES}
          order by seq`
      );
      if (!rows.length) return;
      yield rows.map(toRecord);
      const full = rows[0].listed === pageSize || rows.length < rows[0].listed;
      if (!full) return;
      next = rows[rows.length - 1].seq + 1;
    }
  }
}

/** Moves the head, provided it is still the one the guard read; else rolls back. */
async function moveHead(
  tx: Tx,
  guard: AuditCommitGuard,
  head: AuditHead,
  stamp: string,
): Promise<void> {
  // Under READ COMMITTED, an update that waited for another commit's row lock
  // re-checks its condition on the row that commit left: a moved head fails it.
  const moved = guard.headVersionstamp === null
    ? await tx`
      insert into toolgate_audit_head (id, seq, hash, timestamp, version)
      values (true, ${head.seq}, ${head.hash}, ${head.timestamp}, ${stamp})
      on conflict (id) do nothing
      returning 1`
    : await tx`
      update toolgate_audit_head
      set seq = ${head.seq}, hash = ${head.hash}, timestamp = ${head.timestamp}, version = ${stamp}
      where id and version = ${guard.headVersionstamp}
      returning 1`;
  if (!moved.length) throw new ChainMoved();
}

/**
 * Checks the entry the head pointed at is the one the guard read (its stamp),
 * or absent when the guard expects it absent. Entries are written only under
 * the head's row lock, which the caller holds.
 */
async function checkTail(tx: Tx, guard: AuditCommitGuard): Promise<void> {
  if (guard.tailSeq <= 0) return;
  const [row] = await tx<{ version: string }[]>`
    select version from toolgate_audit_entries where seq = ${guard.tailSeq}`;
  const expected = guard.tailVersionstamps;
  const unchanged = expected.length === 0
    ? row === undefined
    : row !== undefined && expected.every((stamp) => stamp === row.version);
  if (!unchanged) throw new ChainMoved();
}

/** The audit chain, on PostgreSQL. */
export function createAuditStore(ctx: PgContext): AuditStore {
  return new PgAuditStore(ctx);
}
