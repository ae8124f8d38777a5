/**
 * PostgreSQL adapter: the delivery outbox (events and their pending
 * deliveries), the dead-letter queue and the per-webhook delivery logs.
 *
 * A pending delivery is one row of `toolgate_deliveries`, keyed by event and
 * webhook, in one of two forms, as in the Deno KV adapter: an entry of its
 * event's fan-out record (`fanout`: owed its first attempt; the entries of
 * one event share its type, creation time and due time) or a delivery record
 * of its own (a retry, or a DLQ replay). A delivery record wins over a fan-out
 * entry of the same webhook: `put_delivery` turns the row into a record of
 * its own, and `put_fanout` (which writes an event's whole fan-out list,
 * deleting the entries it no longer names) leaves such rows alone.
 *
 * Every row keeps the version stamp of the transaction that last wrote it
 * ({@linkcode nextStamp}); reads hand it out and `collect_event` deletes an
 * event only while its stamp is unchanged and no row of `toolgate_deliveries`
 * refers to it (the storage contract's rule: an event lives as long as any
 * delivery of it is pending, whatever the requester believes). Writes go through a
 * group-committing {@linkcode DeliveryWriter}: concurrent units share one
 * transaction (each unit stays atomic), applied in few set-based statements,
 * pipelined on one connection.
 *
 * Several instances share the tables: writes are upserts keyed by primary
 * key, a collection is a conditional delete, a DLQ replay an insert guarded
 * by the primary key, and claims of due deliveries take `for update skip
 * locked` rows under one transaction-level advisory lock, so a fan-out is
 * claimed whole by one instance.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { CommitQueue } from "../_commit_queue.ts";
import { z } from "zod";
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import {
  BytesSchema,
  DELIVERY_LOG_SIZE,
  type DeliveryLogEntry,
  DeliveryLogEntrySchema,
  type DeliveryOp,
  DeliveryRecordSchema,
  type DlqRecord,
  DlqRecordSchema,
  type FanoutRecord,
  FanoutRecordSchema,
  type ListDlqPageOptions,
  newLogEntryId,
  type OutboxEvent,
  type StoredDelivery,
  type WriteResult,
} from "../records.ts";
import type { DeliveryStore, DeliveryWriter, StoreCost } from "../store.ts";
import { bumpCounter, nextStamp, type PgContext, readCounter, type Tx } from "./_context.ts";
import { isConnectionError, type Sql } from "./connection.ts";

/** Tables of this part, in migration 1. */
export const DELIVERIES_SCHEMA = `
  create table toolgate_outbox_events (
    event_id text collate "C" primary key,
    event_type text not null,
    event_timestamp text not null,
    body bytea not null,
    traceparent text,
    version text not null
  );
  create table toolgate_deliveries (
    event_id text collate "C" not null,
    webhook_id text collate "C" not null,
    fanout boolean not null,
    fanout_index integer not null default 0,
    event_type text not null,
    attempt_count integer not null default 0,
    next_attempt_at bigint not null,
    created_at text not null,
    attempts jsonb not null default '[]',
    dlq_id text,
    version text not null,
    claimed_by text,
    claim_expires_at bigint,
    primary key (event_id, webhook_id)
  );
  create index toolgate_deliveries_due on toolgate_deliveries (next_attempt_at);
  create index toolgate_deliveries_claimed on toolgate_deliveries (claimed_by)
    where claimed_by is not null;
  create table toolgate_dlq (
    dlq_id text collate "C" primary key,
    record jsonb not null,
    body bytea not null
  );
  create index toolgate_dlq_order on toolgate_dlq (((record->>'failed_at') collate "C"), dlq_id);
  create index toolgate_dlq_webhook_order on toolgate_dlq (
    ((record->>'webhook_id') collate "C"), ((record->>'failed_at') collate "C"), dlq_id);
  create table toolgate_delivery_log (
    webhook_id text collate "C" not null,
    entry_id text collate "C" not null,
    entry jsonb not null,
    primary key (webhook_id, entry_id)
  );
`;

/**
 * The advisory lock every {@linkcode DeliveryStore.claimDue} transaction
 * holds, so that two instances never split one fan-out between them:
 * "tgclaim" in ASCII.
 */
export const CLAIM_LOCK_KEY = 0x7467636c61696dn;

// Bounds of one group commit (a unit larger than them commits alone).
const BATCH_MAX_ROWS = 10_000;
const BATCH_MAX_BYTES = 16 * 1024 * 1024;

/** Attempts at a transaction that a deadlock or serialization failure rolled back. */
const MAX_TRANSACTION_ATTEMPTS = 5;

/** Bytes counted per row beside its keys and values. */
const ROW_OVERHEAD_BYTES = 40;

// ---------------------------------------------------------------------------
// Validation and cost

const OutboxEventSchema = z.object({
  id: z.string(),
  type: z.string(),
  timestamp: z.string(),
  body: BytesSchema,
  traceparent: z.string().optional(),
});

const DeliveryOpSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("put_event"), event: OutboxEventSchema }),
  z.object({ op: z.literal("put_delivery"), delivery: DeliveryRecordSchema }),
  z.object({ op: z.literal("delete_delivery"), event_id: z.string(), webhook_id: z.string() }),
  z.object({
    op: z.literal("put_fanout"),
    event_id: z.string(),
    fanout: FanoutRecordSchema.extend({ webhook_ids: z.array(z.string()) }),
    claim: z.object({ owner: z.string().min(1), until: z.number() }).optional(),
  }),
  z.object({
    op: z.literal("log"),
    webhook_id: z.string(),
    entry_id: z.string(),
    entry: DeliveryLogEntrySchema,
  }),
  z.object({ op: z.literal("delete_log"), webhook_id: z.string(), entry_id: z.string() }),
  z.object({
    op: z.literal("put_dlq"),
    record: DlqRecordSchema.omit({ size: true, body: true }),
    body: BytesSchema,
  }),
  z.object({ op: z.literal("delete_dlq"), dlq_id: z.string() }),
  z.object({
    op: z.literal("collect_event"),
    event_id: z.string(),
    versionstamp: z.string(),
  }),
]);

/**
 * Rejects ops that would store what cannot be read back: the rows would
 * otherwise fail every later read of the outbox.
 *
 * @throws {GatewayError} `INTERNAL` naming the first bad op.
 */
function checkOps(ops: readonly DeliveryOp[]): void {
  for (const [index, op] of ops.entries()) {
    const parsed = DeliveryOpSchema.safeParse(op);
    if (parsed.success) continue;
    const issue = parsed.error.issues[0];
    const kind = String(op?.op);
    const where = issue?.path.length ? ` at ${issue.path.join(".")}` : "";
    throw new GatewayError(
      "INTERNAL",
      `Cannot write delivery ops: op ${index} (${kind}) is invalid${where}: ${issue?.message}`,
    );
  }
}

function refuseCollect(ops: readonly DeliveryOp[]): void {
  if (ops.some((op) => op.op === "collect_event")) {
    throw new GatewayError("INTERNAL", "Cannot write a collect_event op inside another commit");
  }
}

/** A rough size of a value as stored (JSON text), without serializing it. */
function approxBytes(value: unknown): number {
  switch (typeof value) {
    case "string":
      return value.length + 2;
    case "number":
    case "bigint":
      return 8;
    case "boolean":
      return 5;
    case "object": {
      if (value === null) return 4;
      if (value instanceof Uint8Array) return value.byteLength;
      let size = 2;
      if (Array.isArray(value)) {
        for (const item of value) size += approxBytes(item) + 1;
      } else {
        const record = value as Record<string, unknown>;
        for (const key in record) size += key.length + 4 + approxBytes(record[key]);
      }
      return size;
    }
    default:
      return 0;
  }
}

/** Rows written or deleted by `op`, and their rough bytes. */
function opCost(op: DeliveryOp): StoreCost {
  let mutations = 1;
  let keyBytes: number;
  let valueBytes = 0;
  switch (op.op) {
    case "put_event":
      keyBytes = op.event.id.length;
      valueBytes = op.event.type.length + op.event.timestamp.length + op.event.body.byteLength +
        (op.event.traceparent?.length ?? 0);
      break;
    case "put_delivery":
      keyBytes = op.delivery.event_id.length + op.delivery.webhook_id.length;
      valueBytes = approxBytes(op.delivery);
      break;
    case "delete_delivery":
      keyBytes = op.event_id.length + op.webhook_id.length;
      break;
    case "put_fanout": {
      // One delete of the entries it drops, one row per entry it names.
      const ids = op.fanout.webhook_ids;
      mutations += ids.length;
      keyBytes = op.event_id.length * (ids.length + 1);
      for (const id of ids) keyBytes += id.length;
      valueBytes = ids.length *
        (op.fanout.event_type.length + op.fanout.created_at.length + ROW_OVERHEAD_BYTES);
      break;
    }
    case "log":
      keyBytes = op.webhook_id.length + op.entry_id.length;
      valueBytes = approxBytes(op.entry);
      break;
    case "delete_log":
      keyBytes = op.webhook_id.length + op.entry_id.length;
      break;
    case "put_dlq":
      keyBytes = op.record.dlq_id.length;
      valueBytes = approxBytes(op.record) + op.body.byteLength;
      break;
    case "delete_dlq":
      keyBytes = op.dlq_id.length;
      break;
    case "collect_event":
      keyBytes = op.event_id.length + op.versionstamp.length;
      break;
  }
  return { mutations, keyBytes, bytes: keyBytes + valueBytes + ROW_OVERHEAD_BYTES * mutations };
}

function opsCost(ops: readonly DeliveryOp[]): StoreCost {
  const total: StoreCost = { mutations: 0, keyBytes: 0, bytes: 0 };
  for (const op of ops) {
    const cost = opCost(op);
    total.mutations += cost.mutations;
    total.keyBytes += cost.keyBytes;
    total.bytes += cost.bytes;
  }
  return total;
}

// ---------------------------------------------------------------------------
// Applying ops

/**
 * Splits ops into layers, in order: an op goes one layer past the last op
 * before it that touches the same rows, so the ops of one layer touch
 * distinct rows and commute, and each layer can be written with one
 * statement per kind of op. The `collect_event` ops form the last layer:
 * whether an event is still referenced is decided on what the commit leaves.
 */
function layers(ops: readonly DeliveryOp[]): number[][] {
  const out: number[][] = [];
  const last = new Map<string, number>();
  // Per event: the last layer of any op on its deliveries, and of put_fanout.
  const anyDelivery = new Map<string, number>();
  const fanout = new Map<string, number>();
  const place = (index: number, layer: number) => {
    (out[layer] ??= []).push(index);
    return layer;
  };
  const collections: number[] = [];
  for (const [index, op] of ops.entries()) {
    switch (op.op) {
      case "collect_event":
        // Decided on what the whole commit leaves: after every other op.
        collections.push(index);
        break;
      case "put_delivery":
      case "delete_delivery": {
        const eventId = op.op === "put_delivery" ? op.delivery.event_id : op.event_id;
        const webhookId = op.op === "put_delivery" ? op.delivery.webhook_id : op.webhook_id;
        const key = `d\0${eventId}\0${webhookId}`;
        const layer = place(
          index,
          1 + Math.max(last.get(key) ?? -1, fanout.get(eventId) ?? -1),
        );
        last.set(key, layer);
        anyDelivery.set(eventId, Math.max(anyDelivery.get(eventId) ?? -1, layer));
        break;
      }
      case "put_fanout": {
        const layer = place(index, 1 + (anyDelivery.get(op.event_id) ?? -1));
        fanout.set(op.event_id, layer);
        anyDelivery.set(op.event_id, layer);
        break;
      }
      default: {
        const key = rowKey(op);
        const layer = place(index, 1 + (last.get(key) ?? -1));
        last.set(key, layer);
      }
    }
  }
  if (collections.length) out.push(collections);
  return out;
}

function rowKey(
  op: Exclude<DeliveryOp, { op: "put_delivery" | "delete_delivery" | "put_fanout" }>,
): string {
  switch (op.op) {
    case "put_event":
      return `e\0${op.event.id}`;
    case "collect_event":
      return `e\0${op.event_id}`;
    case "log":
    case "delete_log":
      return `l\0${op.webhook_id}\0${op.entry_id}`;
    case "put_dlq":
      return `q\0${op.record.dlq_id}`;
    case "delete_dlq":
      return `q\0${op.dlq_id}`;
  }
}

/** Ops of one layer, by kind. */
type ByKind = { [K in DeliveryOp["op"]]: { index: number; op: Extract<DeliveryOp, { op: K }> }[] };

function byKind(ops: readonly DeliveryOp[], indexes: readonly number[]): ByKind {
  const out: ByKind = {
    put_event: [],
    put_delivery: [],
    delete_delivery: [],
    put_fanout: [],
    log: [],
    delete_log: [],
    put_dlq: [],
    delete_dlq: [],
    collect_event: [],
  };
  for (const index of indexes) {
    const op = ops[index];
    (out[op.op] as { index: number; op: DeliveryOp }[]).push({ index, op });
  }
  // Rows in key order: transactions of several instances lock them in the same order.
  for (const list of Object.values(out) as { op: DeliveryOp }[][]) {
    if (list.length > 1) list.sort((a, b) => compareText(sortKey(a.op), sortKey(b.op)));
  }
  return out;
}

function sortKey(op: DeliveryOp): string {
  switch (op.op) {
    case "put_delivery":
      return `${op.delivery.event_id}\0${op.delivery.webhook_id}`;
    case "delete_delivery":
      return `${op.event_id}\0${op.webhook_id}`;
    case "put_fanout":
      return op.event_id;
    default:
      return rowKey(op);
  }
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `bytes` in base64, for `decode(…, 'base64')`. */
function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** A due time as stored: whole ms (a fraction waits for the next one). */
function dueMs(at: number): number {
  return Math.ceil(at);
}

/**
 * Writes `ops` in `tx`, stamping every row they write with `stamp`. The
 * statements are pipelined on the transaction's connection, in layer order.
 *
 * @returns The indexes of the `collect_event` ops that deleted their event.
 */
async function applyOps(tx: Tx, ops: readonly DeliveryOp[], stamp: string): Promise<Set<number>> {
  const collected = new Set<number>();
  const queries: Promise<unknown>[] = [];
  // Each query is sent when made, so the server runs them in this order.
  const send = <T>(query: { execute(): T }): T => query.execute();
  for (const layer of layers(ops)) {
    const kinds = byKind(ops, layer);
    if (kinds.put_event.length) {
      // Bodies travel as base64 text: the driver cannot send an array of bytea.
      const e = kinds.put_event.map(({ op }) => op.event);
      const bodies = e.map((event) => base64(event.body));
      queries.push(send(tx`
        insert into toolgate_outbox_events
          (event_id, event_type, event_timestamp, body, traceparent, version)
        select u.event_id, u.event_type, u.event_timestamp, decode(u.body, 'base64'),
          u.traceparent, ${stamp}
        from unnest(${e.map((event) => event.id)}::text[], ${e.map((event) => event.type)}::text[],
          ${e.map((event) => event.timestamp)}::text[], ${bodies}::text[],
          ${e.map((event) => event.traceparent ?? null)}::text[])
          as u(event_id, event_type, event_timestamp, body, traceparent)
        on conflict (event_id) do update set
          event_type = excluded.event_type, event_timestamp = excluded.event_timestamp,
          body = excluded.body, traceparent = excluded.traceparent, version = excluded.version`));
    }
    if (kinds.put_delivery.length) {
      const d = kinds.put_delivery.map(({ op }) => op.delivery);
      const due = d.map((r) => dueMs(r.next_attempt_at));
      const createdAt = d.map((r) => r.created_at);
      const attempts = d.map((r) => JSON.stringify(r.attempts));
      const dlqIds = d.map((r) => r.dlq_id ?? null);
      // A claim stays as it was: the claimer itself writes its deliveries' outcomes.
      queries.push(send(tx`
        insert into toolgate_deliveries (
          event_id, webhook_id, fanout, fanout_index, event_type, attempt_count,
          next_attempt_at, created_at, attempts, dlq_id, version)
        select u.event_id, u.webhook_id, false, 0, u.event_type, u.attempt_count,
          u.next_attempt_at, u.created_at, u.attempts::jsonb, u.dlq_id, ${stamp}
        from unnest(
          ${d.map((r) => r.event_id)}::text[], ${d.map((r) => r.webhook_id)}::text[],
          ${d.map((r) => r.event_type)}::text[], ${d.map((r) => r.attempt_count)}::int[],
          ${due}::bigint[], ${createdAt}::text[], ${attempts}::text[], ${dlqIds}::text[]
        ) as u(event_id, webhook_id, event_type, attempt_count, next_attempt_at, created_at,
          attempts, dlq_id)
        on conflict (event_id, webhook_id) do update set
          fanout = false, fanout_index = 0, event_type = excluded.event_type,
          attempt_count = excluded.attempt_count, next_attempt_at = excluded.next_attempt_at,
          created_at = excluded.created_at, attempts = excluded.attempts,
          dlq_id = excluded.dlq_id, version = excluded.version`));
    }
    if (kinds.delete_delivery.length) {
      const d = kinds.delete_delivery.map(({ op }) => op);
      // A fan-out entry of the same webhook is not this record: it stays.
      queries.push(send(tx`
        delete from toolgate_deliveries t
        using unnest(${d.map((o) => o.event_id)}::text[], ${d.map((o) => o.webhook_id)}::text[])
          as u(event_id, webhook_id)
        where t.event_id = u.event_id and t.webhook_id = u.webhook_id and not t.fanout`));
    }
    if (kinds.put_fanout.length) queries.push(...putFanouts(tx, kinds.put_fanout, stamp, send));
    if (kinds.log.length) {
      const l = kinds.log.map(({ op }) => op);
      queries.push(send(tx`
        insert into toolgate_delivery_log (webhook_id, entry_id, entry)
        select u.webhook_id, u.entry_id, u.entry::jsonb
        from unnest(${l.map((o) => o.webhook_id)}::text[], ${l.map((o) => o.entry_id)}::text[],
          ${l.map((o) => JSON.stringify(o.entry))}::text[]) as u(webhook_id, entry_id, entry)
        on conflict (webhook_id, entry_id) do update set entry = excluded.entry`));
    }
    if (kinds.delete_log.length) {
      const l = kinds.delete_log.map(({ op }) => op);
      queries.push(send(tx`
        delete from toolgate_delivery_log t
        using unnest(${l.map((o) => o.webhook_id)}::text[], ${l.map((o) => o.entry_id)}::text[])
          as u(webhook_id, entry_id)
        where t.webhook_id = u.webhook_id and t.entry_id = u.entry_id`));
    }
    for (const { op } of kinds.put_dlq) {
      const { size: _size, body: _body, ...record } = op.record as DlqRecord;
      queries.push(send(tx`
        insert into toolgate_dlq (dlq_id, record, body)
        values (${record.dlq_id}, ${JSON.stringify(record)}::text::jsonb, ${op.body})
        on conflict (dlq_id) do update set record = excluded.record, body = excluded.body`));
    }
    if (kinds.delete_dlq.length) {
      queries.push(send(tx`
        delete from toolgate_dlq
        where dlq_id = any(${kinds.delete_dlq.map(({ op }) => op.dlq_id)}::text[])`));
    }
    if (kinds.collect_event.length) {
      const c = kinds.collect_event;
      const query = send(tx<{ op: number }[]>`
        delete from toolgate_outbox_events t
        using unnest(${c.map(({ op }) => op.event_id)}::text[],
          ${c.map(({ op }) => op.versionstamp)}::text[], ${c.map(({ index }) => index)}::int[])
          as u(event_id, version, op)
        where t.event_id = u.event_id and t.version = u.version
          -- The storage contract's rule: an event lives while any delivery of it is pending.
          and not exists (select from toolgate_deliveries d where d.event_id = t.event_id)
        returning u.op`);
      queries.push(query.then((rows) => rows.forEach((row) => collected.add(row.op))));
    }
  }
  await Promise.all(queries);
  return collected;
}

/** The statements of a layer's `put_fanout` ops (each on another event). */
function putFanouts(
  tx: Tx,
  ops: ByKind["put_fanout"],
  stamp: string,
  send: <T>(query: { execute(): T }) => T,
): Promise<unknown>[] {
  const events: string[] = [];
  const entries: {
    event_id: string;
    webhook_id: string;
    index: number;
    fanout: FanoutRecord;
    claim?: { owner: string; until: number };
  }[] = [];
  for (const { op } of ops) {
    events.push(op.event_id);
    const claim = (op as { claim?: { owner: string; until: number } }).claim;
    const seen = new Set<string>();
    for (const webhookId of op.fanout.webhook_ids) {
      if (seen.has(webhookId)) continue;
      entries.push({
        event_id: op.event_id,
        webhook_id: webhookId,
        index: seen.size,
        fanout: op.fanout,
        claim,
      });
      seen.add(webhookId);
    }
  }
  entries.sort((a, b) =>
    compareText(a.event_id, b.event_id) || compareText(a.webhook_id, b.webhook_id)
  );
  const rows = {
    event_id: entries.map((e) => e.event_id),
    webhook_id: entries.map((e) => e.webhook_id),
    index: entries.map((e) => e.index),
    event_type: entries.map((e) => e.fanout.event_type),
    next_attempt_at: entries.map((e) => dueMs(e.fanout.next_attempt_at)),
    created_at: entries.map((e) => e.fanout.created_at),
    claimed_by: entries.map((e) => e.claim?.owner ?? null),
    claim_expires_at: entries.map((e) => e.claim ? dueMs(e.claim.until) : null),
  };
  const queries: Promise<unknown>[] = [
    // The entries the new list no longer names.
    send(tx`
      delete from toolgate_deliveries t
      where t.fanout and t.event_id = any(${events}::text[])
        and not exists (
          select from unnest(${rows.event_id}::text[], ${rows.webhook_id}::text[])
            as u(event_id, webhook_id)
          where u.event_id = t.event_id and u.webhook_id = t.webhook_id)`),
  ];
  if (rows.event_id.length) {
    // A delivery record of the same webhook wins. An entry kept keeps its claim, unless
    // the op claims its entries.
    queries.push(send(tx`
      insert into toolgate_deliveries (
        event_id, webhook_id, fanout, fanout_index, event_type, attempt_count,
        next_attempt_at, created_at, attempts, version, claimed_by, claim_expires_at)
      select u.event_id, u.webhook_id, true, u.fanout_index, u.event_type, 0,
        u.next_attempt_at, u.created_at, '[]', ${stamp}, u.claimed_by, u.claim_expires_at
      from unnest(${rows.event_id}::text[], ${rows.webhook_id}::text[], ${rows.index}::int[],
        ${rows.event_type}::text[], ${rows.next_attempt_at}::bigint[], ${rows.created_at}::text[],
        ${rows.claimed_by}::text[], ${rows.claim_expires_at}::bigint[])
        as u(event_id, webhook_id, fanout_index, event_type, next_attempt_at, created_at,
          claimed_by, claim_expires_at)
      on conflict (event_id, webhook_id) do update set
        fanout_index = excluded.fanout_index, event_type = excluded.event_type,
        next_attempt_at = excluded.next_attempt_at, created_at = excluded.created_at,
        version = excluded.version,
        claimed_by = coalesce(excluded.claimed_by, toolgate_deliveries.claimed_by),
        claim_expires_at = case when excluded.claimed_by is null
          then toolgate_deliveries.claim_expires_at else excluded.claim_expires_at end
      where toolgate_deliveries.fanout`));
  }
  return queries;
}

/**
 * Writes delivery ops (no `collect_event`) inside the caller's transaction,
 * stamping what they write with `stamp`: how deliveries ride in the audit
 * log's commit.
 *
 * @throws {GatewayError} `INTERNAL` when `ops` holds a `collect_event` or an
 * op that does not parse (nothing is written then).
 */
export async function applyDeliveryOps(
  tx: Tx,
  ops: readonly DeliveryOp[],
  stamp: string,
): Promise<void> {
  refuseCollect(ops);
  checkOps(ops);
  if (ops.length) await applyOps(tx, ops, stamp);
}

/** Whether PostgreSQL rolled the transaction back for a deadlock or a serialization failure. */
function isTransient(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "40P01" || code === "40001";
}

/** Runs `operation` in a transaction, again after a deadlock or a serialization failure. */
async function retrying<T>(ctx: PgContext, operation: (tx: Tx) => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await ctx.transaction(operation);
    } catch (error) {
      if (attempt >= MAX_TRANSACTION_ATTEMPTS || !isTransient(error)) throw error;
    }
  }
}

/**
 * Sets the claim expiry of `owner`'s claims (all, or those of `keys`) to
 * `until`, or gives them back (`null`). Rows are locked in key order, as the
 * writer's transactions lock them: an update in scan order could deadlock
 * with a commit of the same rows.
 *
 * @returns How many claims it changed.
 */
async function updateClaims(
  ctx: PgContext,
  owner: string,
  change: { until: number | null; keys?: readonly { event_id: string; webhook_id: string }[] },
): Promise<number> {
  const { until, keys } = change;
  const result = await retrying(ctx, (tx) =>
    tx`
      update toolgate_deliveries t set
        claimed_by = case when ${until === null} then null else t.claimed_by end,
        claim_expires_at = ${until === null ? null : dueMs(until)}
      from (
        select d.event_id, d.webhook_id from toolgate_deliveries d
        where d.claimed_by = ${owner}
          and (${keys === undefined}
            or (d.event_id, d.webhook_id) in (
              select * from unnest(${(keys ?? []).map((k) => k.event_id)}::text[],
                ${(keys ?? []).map((k) => k.webhook_id)}::text[])))
        order by d.event_id, d.webhook_id
        for update
      ) l
      where t.event_id = l.event_id and t.webhook_id = l.webhook_id`);
  return result.count;
}

/** Commits `ops` in one transaction of their own. */
function commitOps(
  ctx: PgContext,
  ops: readonly DeliveryOp[],
): Promise<{ stamp: string; collected: Set<number> }> {
  return retrying(ctx, async (tx) => {
    const stamp = await nextStamp(tx);
    const collected = ops.length ? await applyOps(tx, ops, stamp) : new Set<number>();
    return { stamp, collected };
  });
}

// ---------------------------------------------------------------------------
// Group commit

interface Unit {
  ops: readonly DeliveryOp[];
  cost: StoreCost;
  resolve: (result: WriteResult) => void;
  reject: (error: unknown) => void;
}

/**
 * Group-commits delivery writes: each {@linkcode PostgresDeliveryWriter.write}
 * call is one unit, committed in one transaction with the other units waiting
 * at the time. A `collect_event` that finds its event changed deletes
 * nothing; the rest commits.
 */
export class PostgresDeliveryWriter implements DeliveryWriter {
  #ctx: PgContext;
  #queue: CommitQueue<Unit>;

  /**
   * @param ctx The store's context.
   * @param options `lingerMs`: how long a commit waits for more units to
   * join it. @default 0
   */
  constructor(ctx: PgContext, options: { lingerMs?: number } = {}) {
    this.#ctx = ctx;
    this.#queue = new CommitQueue((queue) => this.#drain(queue), options);
  }

  /** Units waiting to be committed. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Queues `ops` for the next group commit, as one atomic unit.
   *
   * @returns Once committed: the stamp of the commit for every op, and
   * whether every `collect_event` deleted its event.
   * @throws {GatewayError} `INTERNAL` when an op does not parse (before
   * anything is queued); `STORE_UNAVAILABLE` when the database cannot be reached.
   */
  write(ops: readonly DeliveryOp[]): Promise<WriteResult> {
    try {
      checkOps(ops);
    } catch (error) {
      return Promise.reject(error);
    }
    const cost = opsCost(ops);
    return new Promise<WriteResult>((resolve, reject) => {
      this.#queue.push({ ops: [...ops], cost, resolve, reject });
    });
  }

  /** Resolves once every queued write is committed (or failed). */
  flush(): Promise<void> {
    return this.#queue.flush();
  }

  async #drain(queue: Unit[]): Promise<void> {
    while (queue.length) {
      const batch: Unit[] = [];
      let rows = 0;
      let bytes = 0;
      while (queue.length) {
        const { cost } = queue[0];
        if (
          batch.length &&
          (rows + cost.mutations > BATCH_MAX_ROWS || bytes + cost.bytes > BATCH_MAX_BYTES)
        ) break;
        batch.push(queue.shift()!);
        rows += cost.mutations;
        bytes += cost.bytes;
      }
      await this.#commit(batch);
    }
  }

  async #commit(batch: Unit[]): Promise<void> {
    try {
      const { stamp, collected } = await commitOps(this.#ctx, batch.flatMap((unit) => unit.ops));
      let offset = 0;
      for (const unit of batch) {
        unit.resolve(unitResult(unit, offset, stamp, collected));
        offset += unit.ops.length;
      }
    } catch (error) {
      if (batch.length === 1 || isConnectionError(error)) {
        for (const unit of batch) unit.reject(error);
        return;
      }
      // One unit's failure must not fail the others: each commits alone.
      for (const unit of batch) {
        try {
          const { stamp, collected } = await commitOps(this.#ctx, unit.ops);
          unit.resolve(unitResult(unit, 0, stamp, collected));
        } catch (unitError) {
          unit.reject(unitError);
        }
      }
    }
  }
}

function unitResult(
  unit: Unit,
  offset: number,
  stamp: string,
  collected: ReadonlySet<number>,
): WriteResult {
  const uncollected: string[] = [];
  unit.ops.forEach((op, i) => {
    if (op.op === "collect_event" && !collected.has(offset + i)) uncollected.push(op.event_id);
  });
  const versionstamps = new Array(unit.ops.length).fill(stamp);
  return uncollected.length
    ? { versionstamps, collected: false, uncollected }
    : { versionstamps, collected: true };
}

// ---------------------------------------------------------------------------
// Reads and maintenance

interface DeliveryRow {
  event_id: string;
  webhook_id: string;
  fanout: boolean;
  event_type: string;
  attempt_count: number;
  next_attempt_at: number;
  created_at: string;
  attempts: unknown;
  dlq_id: string | null;
  version: string;
}

/** A row of `toolgate_deliveries` as a stored delivery, validated. */
function storedDelivery(row: DeliveryRow): StoredDelivery {
  const record = parseRecord(
    DeliveryRecordSchema,
    {
      event_id: row.event_id,
      event_type: row.event_type,
      webhook_id: row.webhook_id,
      attempt_count: row.fanout ? 0 : row.attempt_count,
      next_attempt_at: row.next_attempt_at,
      created_at: row.created_at,
      attempts: row.fanout ? [] : row.attempts,
      ...(!row.fanout && row.dlq_id !== null ? { dlq_id: row.dlq_id } : {}),
    },
    row.fanout
      ? `fan-out of ${row.event_id} (${row.webhook_id})`
      : `delivery ${row.event_id}/${row.webhook_id}`,
  );
  return { record, versionstamp: row.version, fanout: row.fanout };
}

const StoredEventRowSchema = z.object({
  event_id: z.string(),
  event_type: z.string(),
  event_timestamp: z.string(),
  body: BytesSchema,
  traceparent: z.string().nullable(),
  version: z.string(),
});

/** A plain `Uint8Array` copy of the driver's `Buffer`. */
function plainBytes(value: unknown): unknown {
  return value instanceof Uint8Array ? new Uint8Array(value) : value;
}

function compareEventIds(a: StoredDelivery, b: StoredDelivery): number {
  return compareText(a.record.event_id, b.record.event_id);
}

/** Options of {@linkcode DeliveryStore.claimDue}. */
export interface ClaimDueDeliveriesOptions {
  /** The claiming process's owner id. */
  owner: string;
  /** When the claims lapse unless renewed (epoch ms). */
  until: number;
  /** The clock, epoch ms: claims that lapsed by then are free. */
  now: number;
  /** Only deliveries due before this (epoch ms). */
  dueBefore: number;
  /** At most this many deliveries (a fan-out's other entries come on top). */
  limit: number;
  /** Leave the deliveries of these webhooks alone. @default [] */
  excludeWebhooks?: readonly string[];
}

/**
 * Claims pending deliveries due before `dueBefore`, earliest first: those
 * nobody holds (or whose claim lapsed by `now`), leaving rows another
 * transaction is writing (`for update skip locked`) and excluded webhooks
 * alone. A fan-out is claimed whole: with one of its entries, every free
 * entry of that event's fan-out comes too, past `limit` if need be. Claims
 * run one at a time across instances (an advisory lock), so no two instances
 * split a fan-out.
 *
 * @returns The claimed deliveries, earliest due first.
 * @throws {GatewayError} `INTERNAL` on bad options (empty owner, limit below 1, times not finite).
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be reached.
 * @example
 * ```ts
 * const now = Date.now();
 * const mine = await claimDueDeliveries(ctx, {
 *   owner: "srv_1", until: now + 30_000, now, dueBefore: now + 1000, limit: 100,
 * });
 * ```
 */
export async function claimDueDeliveries(
  ctx: PgContext,
  options: ClaimDueDeliveriesOptions,
): Promise<StoredDelivery[]> {
  checkClaimOptions(options);
  const { owner, until, dueBefore, limit, excludeWebhooks = [] } = options;
  // Stored times are whole ms: a claim lapsed by a fractional `now` lapsed by its floor.
  const now = Math.floor(options.now);
  const rows = await retrying(ctx, async (tx) => {
    await tx`select pg_advisory_xact_lock(${CLAIM_LOCK_KEY.toString()}::bigint)`;
    return await tx<DeliveryRow[]>`
      with picked as (
        select event_id, webhook_id, fanout from toolgate_deliveries
        where next_attempt_at < ${dueMs(dueBefore)}
          and (claimed_by is null or claim_expires_at <= ${now})
          and webhook_id <> all(${[...excludeWebhooks]}::text[])
        order by next_attempt_at, event_id, webhook_id
        limit ${limit}
        for update skip locked
      ), rest as (
        select t.event_id, t.webhook_id from toolgate_deliveries t
        where t.fanout and t.event_id in (select event_id from picked where fanout)
          and (t.claimed_by is null or t.claim_expires_at <= ${now})
        for update
      ), claimed as (
        select event_id, webhook_id from picked union select event_id, webhook_id from rest
      )
      update toolgate_deliveries t set claimed_by = ${owner}, claim_expires_at = ${dueMs(until)}
      from claimed c
      where t.event_id = c.event_id and t.webhook_id = c.webhook_id
      returning t.event_id, t.webhook_id, t.fanout, t.event_type,
        t.attempt_count, t.next_attempt_at::float8 as next_attempt_at, t.created_at,
        t.attempts, t.dlq_id, t.version`;
  });
  return [...rows].sort((a, b) =>
    a.next_attempt_at - b.next_attempt_at || compareText(a.event_id, b.event_id) ||
    compareText(a.webhook_id, b.webhook_id)
  ).map(storedDelivery);
}

/** Refuses claim options the Deno KV adapter refuses, with its messages. */
function checkClaimOptions(options: ClaimDueDeliveriesOptions): void {
  const { owner, now, until, dueBefore, limit } = options;
  if (typeof owner !== "string" || owner === "") {
    throw new GatewayError("INTERNAL", "Cannot claim deliveries: the owner is empty");
  }
  if (!Number.isInteger(limit) || limit < 1) {
    throw new GatewayError("INTERNAL", `Invalid limit ${limit}: use an integer of 1 or more`);
  }
  for (const [name, value] of [["now", now], ["until", until], ["dueBefore", dueBefore]]) {
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new GatewayError("INTERNAL", `Invalid ${name} ${value}: use epoch milliseconds`);
    }
  }
}

/** The delivery outbox, DLQ and delivery logs, on PostgreSQL. */
export class PostgresDeliveryStore implements DeliveryStore {
  /** Several instances send at once, each what it claimed. */
  readonly sharedClaims = true;
  #ctx: PgContext;

  /** @param ctx The store's context. */
  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  /** A group-committing writer. */
  writer(options?: { lingerMs?: number }): DeliveryWriter {
    return new PostgresDeliveryWriter(this.#ctx, options);
  }

  /**
   * What `ops` add to another commit: rows written or deleted, and rough bytes.
   *
   * @throws {GatewayError} `INTERNAL` when `ops` holds a `collect_event` op.
   */
  opsCost(ops: readonly DeliveryOp[]): StoreCost {
    refuseCollect(ops);
    return opsCost(ops);
  }

  /** Signals new pending deliveries to the process that delivers them. */
  async bumpVersion(): Promise<void> {
    await this.#ctx.run((sql) => bumpCounter(sql, "deliveries"));
  }

  /** The counter bumped whenever deliveries are queued by another path (replay, CLI). */
  version(): Promise<bigint> {
    return this.#ctx.run((sql) => readCounter(sql, "deliveries"));
  }

  /** See {@linkcode claimDueDeliveries}. */
  claimDue(options: ClaimDueDeliveriesOptions): Promise<StoredDelivery[]> {
    return claimDueDeliveries(this.#ctx, options);
  }

  /** Extends every claim `owner` holds to `until`; returns how many it holds. */
  renewClaims(owner: string, until: number): Promise<number> {
    return updateClaims(this.#ctx, owner, { until });
  }

  /** Gives back the claims `owner` holds: all of them, or those of `keys`. */
  async releaseClaims(
    owner: string,
    keys?: readonly { event_id: string; webhook_id: string }[],
  ): Promise<void> {
    if (keys && !keys.length) return;
    await updateClaims(this.#ctx, owner, { until: null, keys });
  }

  /**
   * Every pending delivery in either form, by event id (oldest first): per
   * event, the delivery records by webhook id, then the fan-out entries in
   * the order of their record.
   */
  async listPending(): Promise<StoredDelivery[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<DeliveryRow[]>`
        select event_id, webhook_id, fanout, event_type, attempt_count,
          next_attempt_at::float8 as next_attempt_at, created_at, attempts, dlq_id, version
        from toolgate_deliveries
        order by event_id, fanout, fanout_index, webhook_id`
    );
    return rows.map(storedDelivery).sort(compareEventIds);
  }

  /**
   * Pending deliveries whose event row is missing (what a store that lost an
   * event's body while a delivery of it waited leaves), at most `limit`, by
   * event id (every delivery of the last event listed, even past `limit`).
   */
  async listOrphans(limit: number): Promise<StoredDelivery[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<DeliveryRow[]>`
        select event_id, webhook_id, fanout, event_type, attempt_count,
          next_attempt_at::float8 as next_attempt_at, created_at, attempts, dlq_id, version
        from toolgate_deliveries d
        where d.event_id in (
          -- Whole events: a fan-out is dead-lettered whole.
          select distinct o.event_id from toolgate_deliveries o
          where not exists (select from toolgate_outbox_events e where e.event_id = o.event_id)
          order by o.event_id limit ${limit})
        order by event_id, webhook_id`
    );
    return rows.map(storedDelivery);
  }

  /** The exact body of an event as a dead-letter record of it keeps it, or `null`. */
  async findDlqBody(eventId: string): Promise<Uint8Array | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ body: Uint8Array }[]>`
        select body from toolgate_dlq
        where record->>'event_id' = ${eventId} and not coalesce((record->>'body_lost')::boolean, false)
        limit 1`
    );
    return row ? new Uint8Array(row.body) : null;
  }

  /** An outbox event and the version stamp of its stored row, or `null`. */
  async readEvent(eventId: string): Promise<{ event: OutboxEvent; versionstamp: string } | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql`
        select event_id, event_type, event_timestamp, body, traceparent, version
        from toolgate_outbox_events where event_id = ${eventId}`
    );
    if (!row) return null;
    const stored = parseRecord(
      StoredEventRowSchema,
      { ...row, body: plainBytes(row.body) },
      `event ${eventId}`,
    );
    return {
      event: {
        id: stored.event_id,
        type: stored.event_type,
        timestamp: stored.event_timestamp,
        body: stored.body,
        ...(stored.traceparent !== null ? { traceparent: stored.traceparent } : {}),
      },
      versionstamp: stored.version,
    };
  }

  /** Deletes an outbox event no pending delivery refers to; says whether it is gone. */
  async collectEventIfUnreferenced(eventId: string): Promise<boolean> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ deleted: boolean; present: boolean }[]>`
        with gone as (
          delete from toolgate_outbox_events e
          where e.event_id = ${eventId}
            and not exists (select from toolgate_deliveries d where d.event_id = ${eventId})
          returning 1
        )
        select exists (select from gone) as deleted,
          exists (select from toolgate_outbox_events where event_id = ${eventId}) as present`
    );
    return row.deleted || !row.present;
  }

  /**
   * Dead-letter records, oldest failure first, then by id (without their
   * bodies: see {@linkcode readDlqBody}); a page with `limit`, read through
   * the `toolgate_dlq_order` indexes.
   */
  async listDlq(options: ListDlqPageOptions = {}): Promise<DlqRecord[]> {
    const { webhook, after, limit } = options;
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 0)) {
      throw new GatewayError("USAGE", `Invalid limit ${limit}: use a whole number from 0`);
    }
    const rows = await this.#ctx.run((sql) => {
      const byHook = webhook === undefined
        ? sql``
        : sql`and (record->>'webhook_id') collate "C" = ${webhook}`;
      const from = after === undefined ? sql`` : sql`
        and ((record->>'failed_at') collate "C", dlq_id) >
          (${after.failed_at}::text collate "C", ${after.dlq_id}::text collate "C")`;
      return sql<{ dlq_id: string; record: unknown; size: number }[]>`
        select dlq_id, record, octet_length(body) as size from toolgate_dlq
        where true ${byHook} ${from}
        order by (record->>'failed_at') collate "C", dlq_id
        ${limit === undefined ? sql`` : sql`limit ${limit}`}`;
    });
    return rows.map(dlqRecord);
  }

  /** How many dead-letter records there are. */
  async countDlq(): Promise<number> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ count: number }[]>`select count(*)::int as count from toolgate_dlq`
    );
    return row.count;
  }

  /** One dead-letter record (without its body), or `null`. */
  async getDlq(dlqId: string): Promise<DlqRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ dlq_id: string; record: unknown; size: number }[]>`
        select dlq_id, record, octet_length(body) as size from toolgate_dlq
        where dlq_id = ${dlqId}`
    );
    return row ? dlqRecord(row) : null;
  }

  /**
   * The exact body bytes of a dead-lettered event.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the record is gone or its
   * body is not `record.size` bytes.
   */
  async readDlqBody(record: DlqRecord): Promise<Uint8Array> {
    if (record.body) return record.body;
    const [row] = await this.#ctx.run((sql) =>
      sql<{ body: Uint8Array }[]>`select body from toolgate_dlq where dlq_id = ${record.dlq_id}`
    );
    if (!row) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored DLQ record ${record.dlq_id} is unreadable: its body is missing`,
      );
    }
    const body = new Uint8Array(row.body);
    if (body.byteLength !== record.size) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored DLQ record ${record.dlq_id} is unreadable: wrong size`,
      );
    }
    return body;
  }

  /**
   * Queues a fresh delivery for a dead-letter record (same event id and body,
   * fresh schedule), re-puts its event and bumps the deliveries version, in
   * one transaction. The record stays until the delivery succeeds.
   *
   * @returns `"already_queued"` when a delivery record of that event to that
   * webhook is pending (nothing is written then).
   */
  requeueDlq(
    record: DlqRecord,
    body: Uint8Array,
    timestamp: string,
    now: number = Date.now(),
  ): Promise<"queued" | "already_queued"> {
    return retrying(this.#ctx, async (tx) => {
      const stamp = await nextStamp(tx);
      // A fan-out entry of the same webhook gives way to the record; a record does not.
      const inserted = await tx`
        insert into toolgate_deliveries (
          event_id, webhook_id, fanout, fanout_index, event_type, attempt_count,
          next_attempt_at, created_at, attempts, dlq_id, version)
        values (${record.event_id}, ${record.webhook_id}, false, 0, ${record.event_type}, 0,
          ${dueMs(now)}, ${new Date(now).toISOString()}, '[]', ${record.dlq_id}, ${stamp})
        on conflict (event_id, webhook_id) do update set
          fanout = false, fanout_index = 0, event_type = excluded.event_type,
          attempt_count = 0, next_attempt_at = excluded.next_attempt_at,
          created_at = excluded.created_at, attempts = excluded.attempts,
          dlq_id = excluded.dlq_id, version = excluded.version
        where toolgate_deliveries.fanout
        returning 1`;
      if (!inserted.length) return "already_queued";
      await applyOps(tx, [{
        op: "put_event",
        event: { id: record.event_id, type: record.event_type, timestamp, body },
      }], stamp);
      await bumpCounter(tx, "deliveries");
      return "queued";
    });
  }

  /** Deletes dead-letter records and their bodies. */
  async deleteDlq(records: readonly Pick<DlqRecord, "dlq_id" | "size">[]): Promise<void> {
    if (!records.length) return;
    await this.#ctx.run((sql) =>
      sql`delete from toolgate_dlq where dlq_id = any(${records.map((r) => r.dlq_id)}::text[])`
    );
  }

  /** The newest entries of a webhook's delivery log, newest first. */
  async readLog(webhookId: string, limit: number = DELIVERY_LOG_SIZE): Promise<DeliveryLogEntry[]> {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new TypeError(`Invalid limit: ${limit} is not a positive integer`);
    }
    const rows = await this.#ctx.run((sql) =>
      sql<{ entry: unknown }[]>`
        select entry from toolgate_delivery_log where webhook_id = ${webhookId}
        order by entry_id desc limit ${limit}`
    );
    return rows.map(({ entry }) =>
      parseRecord(DeliveryLogEntrySchema, entry, `log of ${webhookId}`)
    );
  }

  /** Appends one entry to a webhook's delivery log and trims it, in one transaction. */
  async appendLog(webhookId: string, entry: DeliveryLogEntry): Promise<void> {
    const entry_id = newLogEntryId(Date.parse(entry.at) || Date.now());
    const ops: DeliveryOp[] = [{ op: "log", webhook_id: webhookId, entry_id, entry }];
    checkOps(ops);
    await retrying(this.#ctx, async (tx) => {
      await applyOps(tx, ops, await nextStamp(tx));
      await trim(tx, webhookId, DELIVERY_LOG_SIZE);
    });
  }

  /** Deletes all but the newest `keep` entries of a webhook's log; returns how many went. */
  trimLog(webhookId: string, keep: number = DELIVERY_LOG_SIZE): Promise<number> {
    return this.#ctx.run((sql) => trim(sql, webhookId, keep));
  }

  /** The entry ids of a webhook's delivery log, oldest first. */
  async listLogIds(webhookId: string): Promise<string[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ entry_id: string }[]>`
        select entry_id from toolgate_delivery_log where webhook_id = ${webhookId}
        order by entry_id`
    );
    return rows.map((row) => row.entry_id);
  }

  /** Deletes a webhook's whole delivery log. */
  async deleteLog(webhookId: string): Promise<void> {
    await this.trimLog(webhookId, 0);
  }
}

function dlqRecord(row: { dlq_id: string; record: unknown; size: number }): DlqRecord {
  const stored = row.record !== null && typeof row.record === "object" ? row.record : {};
  return parseRecord(
    DlqRecordSchema,
    { ...stored, size: Number(row.size) },
    `DLQ record ${row.dlq_id}`,
  );
}

async function trim(sql: Sql | Tx, webhookId: string, keep: number): Promise<number> {
  const result = await sql`
    delete from toolgate_delivery_log
    where webhook_id = ${webhookId} and entry_id in (
      select entry_id from toolgate_delivery_log where webhook_id = ${webhookId}
      order by entry_id desc offset ${Math.max(0, Math.floor(keep))})`;
  return result.count;
}

/** The delivery outbox, DLQ and delivery logs, on PostgreSQL. */
export function createDeliveryStore(ctx: PgContext): DeliveryStore {
  return new PostgresDeliveryStore(ctx);
}
