/**
 * Stored audit log: the chain head and the entries.
 *
 * Each entry is stored as the UTF-8 bytes of its canonical JSON, split into
 * parts of at most {@linkcode AUDIT_PART_BYTES} (a KV value holds 64 KiB) under
 * `["audit", "entry", seq, part]`. The head `["audit", "head"]` holds the seq,
 * hash and timestamp of the last entry and is rewritten in the same atomic
 * commit as the entries it covers, so checking its versionstamp serializes
 * appenders across processes. Hashing and the chain rules live in
 * `src/audit`; this module only moves bytes.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import {
  auditCheckpointKey,
  auditCurrentKeyKey,
  auditEntriesPrefix,
  auditEntryKey,
  auditEntryPartKey,
  auditHeadKey,
  auditLogKeyKey,
  auditLogKeysPrefix,
  auditPrunedKey,
  auditTileKey,
} from "./keys.ts";
import { applyDeliveryOps } from "./deliveries.ts";
import { applyStagedWrites } from "./_staged.ts";
import { checkAuditBatch, sortLogKeys } from "../_rules.ts";
import type { StagedWrites } from "../store.ts";
import type { KvHandle } from "./_handle.ts";
import { parseRecord } from "../_records.ts";
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
  type ReadAuditRecordPagesOptions,
} from "../records.ts";

/** Largest part of an entry's bytes stored under one key. */
export const AUDIT_PART_BYTES = 60_000;

/** Largest entry, in bytes of canonical JSON (9 parts). */
export const AUDIT_MAX_ENTRY_BYTES = 9 * AUDIT_PART_BYTES;

/** Most mutations in one commit (the Deno KV limit). */
export const AUDIT_COMMIT_MAX_MUTATIONS = 1000;

/**
 * Byte budget of one commit, keys included. Deno KV refuses commits over
 * 819 200 bytes; the margin covers the head record and key encoding.
 */
export const AUDIT_COMMIT_MAX_BYTES = 700_000;

/** Bytes counted per stored part for its key. */
const KEY_OVERHEAD_BYTES = 40;

/** Key bytes counted per tile (`["audit", "tile", level, index]`). */
const TILE_KEY_BYTES = 32;

/** KV cost of writing `tiles` tiles holding `bytes` bytes of hashes. */
export function auditTileCost(
  tiles: number,
  bytes: number,
): { mutations: number; bytes: number; keyBytes: number } {
  return {
    mutations: tiles,
    bytes: bytes + tiles * TILE_KEY_BYTES,
    keyBytes: tiles * TILE_KEY_BYTES,
  };
}

/** KV cost of storing one entry of `byteLength` bytes. */
export function auditEntryCost(byteLength: number): { mutations: number; bytes: number } {
  const mutations = Math.max(1, Math.ceil(byteLength / AUDIT_PART_BYTES));
  return { mutations, bytes: byteLength + mutations * KEY_OVERHEAD_BYTES };
}

function parseHead(value: unknown): AuditHead {
  const parsed = AuditHeadSchema.safeParse(value);
  if (!parsed.success) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored audit head is unreadable: ${parsed.error.issues[0]?.message}`,
    );
  }
  return parsed.data;
}

/** Reads the head (on the read handle); `head` is `null` for an empty log. */
export async function readAuditHead(
  store: KvHandle,
): Promise<{ head: AuditHead | null; versionstamp: string | null }> {
  const entry = await store.get(auditHeadKey());
  return {
    head: entry.value === null ? null : parseHead(entry.value),
    versionstamp: entry.versionstamp,
  };
}

/**
 * Reads the head and whether an entry is stored right after it, in one
 * consistent read (used to tell a concurrent append from a stale head).
 */
export async function readAuditHeadAndNext(
  store: KvHandle,
  seq: number,
): Promise<{ head: AuditHead | null; nextExists: boolean }> {
  const [head, next] = await store.retry(() =>
    store.kv.getMany([auditHeadKey(), auditEntryPartKey(seq + 1, 0)])
  );
  return {
    head: head.value === null ? null : parseHead(head.value),
    nextExists: next.versionstamp !== null,
  };
}

function toRecord(seq: number, parts: Deno.KvEntry<unknown>[]): AuditRecord {
  const versionstamps = parts.map((part) => part.versionstamp);
  const chunks: Uint8Array[] = [];
  for (const [index, part] of parts.entries()) {
    if (part.key[3] !== index || !(part.value instanceof Uint8Array)) {
      return { seq, bytes: null, versionstamps };
    }
    chunks.push(part.value);
  }
  if (chunks.length === 1) return { seq, bytes: chunks[0], versionstamps };
  const bytes = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return { seq, bytes, versionstamps };
}

/** Reads the stored entry at `seq` (on the read handle), or `null` when none is stored. */
export function readAuditRecord(store: KvHandle, seq: number): Promise<AuditRecord | null> {
  return readRecord(store, store.reader, seq);
}

async function readRecord(store: KvHandle, kv: Deno.Kv, seq: number): Promise<AuditRecord | null> {
  const parts = await store.retry(async () => {
    const out: Deno.KvEntry<unknown>[] = [];
    for await (const part of kv.list({ prefix: auditEntryKey(seq) })) out.push(part);
    return out;
  });
  return parts.length ? toRecord(seq, parts) : null;
}

/**
 * Reads what an appender needs: the head, its versionstamp and the entry it
 * points at.
 *
 * @param hintSeq The head seq the caller expects (saves a read when right).
 * @throws {GatewayError} `STORE_CORRUPT` when the head is unreadable, or an
 * entry is stored after the head (appending would overwrite it).
 */
export async function readAuditChainState(store: KvHandle, hintSeq = 0): Promise<AuditChainState> {
  let guess = hintSeq;
  for (let round = 0; round < 100; round++) {
    const [headEntry, next] = await store.retry(() =>
      store.kv.getMany([auditHeadKey(), auditEntryPartKey(guess + 1, 0)])
    );
    const head = headEntry.value === null ? null : parseHead(headEntry.value);
    const seq = head?.seq ?? 0;
    if (seq !== guess) {
      guess = seq;
      continue;
    }
    if (next.versionstamp !== null) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot append to the audit log: entry ${seq + 1} is stored after the head (seq ${seq}); ` +
          "run toolgate audit verify",
      );
    }
    // On the writer handle, like the commit that will check these versionstamps.
    const tail = seq === 0 ? null : await readRecord(store, store.kv, seq);
    return { head, headVersionstamp: headEntry.versionstamp, tail };
  }
  throw new GatewayError(
    "UNAVAILABLE",
    "Cannot read the audit head: it kept changing while being read",
  );
}

/**
 * Writes `entries` and the new `head` in one atomic commit, provided the head
 * and the entry it points at are unchanged since they were read and nothing
 * is stored at the first new seq. Delivery records in `outbox` and the
 * staged `writes` of the entries (incoming jobs) are written in the same
 * commit (sized by the caller with `deliveryOpsCost` and each write's
 * `cost`). Retries "database is locked".
 *
 * @returns The commit's versionstamp, or `null` when a check failed (another
 * writer appended first: re-read and try again).
 * @throws {GatewayError} `INTERNAL` when the batch is empty or over the KV
 * limits (the caller sizes batches with {@linkcode auditEntryCost}).
 */
export async function commitAuditEntries(
  store: KvHandle,
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
    (bytes) => auditEntryCost(bytes).mutations,
    tiles.length,
  );
  return await store.retry(async () => {
    let op = store.kv.atomic().check({ key: auditHeadKey(), versionstamp: guard.headVersionstamp });
    if (guard.tailSeq > 0) {
      if (guard.tailVersionstamps.length === 0) {
        op = op.check({ key: auditEntryPartKey(guard.tailSeq, 0), versionstamp: null });
      }
      for (const [part, versionstamp] of guard.tailVersionstamps.entries()) {
        op = op.check({ key: auditEntryPartKey(guard.tailSeq, part), versionstamp });
      }
    }
    const first = entries[0]?.seq ?? head.seq + 1;
    op = op.check({ key: auditEntryPartKey(first, 0), versionstamp: null });
    for (const entry of entries) {
      for (let part = 0, offset = 0; offset < entry.bytes.length; part++) {
        const end = offset + AUDIT_PART_BYTES;
        op = op.set(auditEntryPartKey(entry.seq, part), entry.bytes.subarray(offset, end));
        offset = end;
      }
    }
    for (const tile of tiles) op = op.set(auditTileKey(tile.level, tile.index), tile.hashes);
    op = op.set(auditHeadKey(), head);
    if (outbox) applyDeliveryOps(op, outbox.ops, outbox.bumpVersion);
    applyStagedWrites(op, writes);
    const result = await op.commit();
    return result.ok ? result.versionstamp : null;
  });
}

/** Most keys in one `getMany` (the Deno KV limit). */
const GET_MANY_MAX = 10;

/** Reads tiles (on the read handle), ten keys per read, the reads in parallel. */
export async function readAuditTiles(
  store: KvHandle,
  refs: readonly AuditTileRef[],
): Promise<(Uint8Array | null)[]> {
  const reads: Promise<Deno.KvEntryMaybe<unknown>[]>[] = [];
  for (let i = 0; i < refs.length; i += GET_MANY_MAX) {
    const keys = refs.slice(i, i + GET_MANY_MAX).map(({ level, index }) =>
      auditTileKey(level, index)
    );
    reads.push(store.retry(() => store.reader.getMany(keys)));
  }
  const entries = (await Promise.all(reads)).flat();
  return entries.map((entry, i) => {
    if (entry.value === null) return null;
    if (!(entry.value instanceof Uint8Array) || entry.value.length % 32) {
      const { level, index } = refs[i];
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored audit tree tile ${level}/${index} is unreadable; run toolgate audit verify`,
      );
    }
    return entry.value;
  });
}

/** The log's signing keys, the current one first. */
export async function readAuditLogKeys(store: KvHandle): Promise<AuditLogKey[]> {
  const keys = await store.retry(async () => {
    const out: AuditLogKey[] = [];
    for await (const entry of store.reader.list({ prefix: auditLogKeysPrefix() })) {
      out.push(
        parseRecord(AuditLogKeySchema, entry.value, `audit log key ${String(entry.key[2])}`),
      );
    }
    return out;
  });
  return sortLogKeys(keys);
}

/** Adds a signing key, retiring the current one, if the current one is still `retiring`. */
export async function addAuditLogKey(
  store: KvHandle,
  key: AuditLogKey,
  retiring: { id: string; retired_at: string } | null,
): Promise<boolean> {
  return await store.retry(async () => {
    const current = await store.kv.get<string>(auditCurrentKeyKey());
    if ((current.value ?? null) !== (retiring?.id ?? null)) return false;
    let op = store.kv.atomic().check(current).set(auditCurrentKeyKey(), key.id)
      .set(auditLogKeyKey(key.id), key);
    if (retiring) {
      const old = await store.kv.get(auditLogKeyKey(retiring.id));
      if (old.value === null) return false;
      const record = parseRecord(AuditLogKeySchema, old.value, `audit log key ${retiring.id}`);
      op = op.check(old).set(auditLogKeyKey(retiring.id), {
        ...record,
        retired_at: retiring.retired_at,
      });
    }
    return (await op.commit()).ok;
  });
}

/** The latest stored checkpoint. */
export async function readAuditCheckpoint(store: KvHandle): Promise<AuditCheckpoint | null> {
  const entry = await store.get(auditCheckpointKey());
  return entry.value === null
    ? null
    : parseRecord(AuditCheckpointSchema, entry.value, "audit checkpoint");
}

/** Stores a checkpoint unless one of the same or a larger size is stored. */
export async function putAuditCheckpoint(
  store: KvHandle,
  checkpoint: AuditCheckpoint,
): Promise<boolean> {
  return await store.retry(async () => {
    for (;;) {
      const stored = await store.kv.get(auditCheckpointKey());
      if (stored.value !== null) {
        const latest = parseRecord(AuditCheckpointSchema, stored.value, "audit checkpoint");
        if (latest.size >= checkpoint.size) return false;
      }
      const result = await store.kv.atomic().check(stored).set(auditCheckpointKey(), checkpoint)
        .commit();
      if (result.ok) return true;
    }
  });
}

/** How far entries were pruned. */
export async function readAuditPruned(store: KvHandle): Promise<AuditPruned | null> {
  const entry = await store.get(auditPrunedKey());
  return entry.value === null
    ? null
    : parseRecord(AuditPrunedSchema, entry.value, "audit prune mark");
}

/** Most deletions in one commit while pruning. */
const PRUNE_BATCH = 500;

/** Stores each of `tiles` unless a copy at least as long is stored, in checked commits. */
export async function keepAuditTiles(
  store: KvHandle,
  tiles: readonly AuditTileWrite[],
): Promise<void> {
  // 100 checks and sets a commit: Deno KV allows 100 checks, 1000 mutations, 800 KB.
  for (let i = 0; i < tiles.length; i += 100) {
    const some = tiles.slice(i, i + 100);
    const keys = some.map((tile) => auditTileKey(tile.level, tile.index));
    await store.retry(async () => {
      for (;;) {
        const stored: Deno.KvEntryMaybe<unknown>[] = [];
        for (let j = 0; j < keys.length; j += GET_MANY_MAX) {
          stored.push(...await store.kv.getMany(keys.slice(j, j + GET_MANY_MAX)));
        }
        let op = store.kv.atomic();
        for (const [j, tile] of some.entries()) {
          const value = stored[j].value;
          if (value instanceof Uint8Array && value.length >= tile.hashes.length) continue;
          op = op.check(stored[j]).set(keys[j], tile.hashes);
        }
        if ((await op.commit()).ok) return;
      }
    });
  }
}

/** Moves the prune mark forward, then deletes the bodies of the entries up to it. */
export async function pruneAuditEntries(store: KvHandle, pruned: AuditPruned): Promise<number> {
  await store.retry(async () => {
    for (;;) {
      const stored = await store.kv.get(auditPrunedKey());
      if (stored.value !== null) {
        const mark = parseRecord(AuditPrunedSchema, stored.value, "audit prune mark");
        if (mark.through >= pruned.through) return;
      }
      if ((await store.kv.atomic().check(stored).set(auditPrunedKey(), pruned).commit()).ok) return;
    }
  });
  let deleted = 0;
  for (;;) {
    const keys = await store.retry(async () => {
      const out: Deno.KvKey[] = [];
      const selector = { start: auditEntryKey(1), end: auditEntryKey(pruned.through + 1) };
      for await (const part of store.kv.list(selector, { limit: PRUNE_BATCH })) out.push(part.key);
      return out;
    });
    if (!keys.length) return deleted;
    await store.retry(async () => {
      let op = store.kv.atomic();
      for (const key of keys) op = op.delete(key);
      await op.commit();
    });
    deleted += new Set(keys.map((key) => key[2])).size;
  }
}

/**
 * Streams stored entries in seq order, one page (one KV read on the read
 * handle) at a time, so a log of any length is read in bounded memory. Each
 * page read retries "database is locked"; pages are separate reads, not one
 * snapshot.
 */
export async function* readAuditRecordPages(
  store: KvHandle,
  options: ReadAuditRecordPagesOptions = {},
): AsyncGenerator<AuditRecord[]> {
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
    const selector: Deno.KvListSelector = before === undefined
      ? { prefix: auditEntriesPrefix(), start: auditEntryKey(next) }
      : { start: auditEntryKey(next), end: auditEntryKey(before) };
    const parts = await store.retry(async () => {
      const out: Deno.KvEntry<unknown>[] = [];
      const pages = store.reader.list(selector, { limit: pageSize, batchSize: pageSize });
      for await (const part of pages) {
        out.push(part);
      }
      return out;
    });
    let full = parts.length === pageSize;
    const records: AuditRecord[] = [];
    let group: Deno.KvEntry<unknown>[] = [];
    for (const part of parts) {
      const seq = part.key[2];
      if (typeof seq !== "number") {
        // Keys of other types sort after every number: no entry follows.
        full = false;
        break;
      }
      if (!Number.isInteger(seq)) continue;
      if (group.length && group[0].key[2] !== seq) {
        records.push(toRecord(group[0].key[2] as number, group));
        group = [];
      }
      group.push(part);
    }
    // The last group of a full page may be cut short: it is read again next page
    // (a page always holds more parts than the largest entry has).
    if (group.length && !full) records.push(toRecord(group[0].key[2] as number, group));
    if (records.length) yield records;
    if (!full) return;
    if (!records.length) {
      throw new GatewayError("STORE_CORRUPT", `Stored audit entry ${next} has too many parts`);
    }
    next = records[records.length - 1].seq + 1;
  }
}
