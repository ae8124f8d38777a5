/**
 * Delivery ops applied in a PostgreSQL transaction: the set-based statements
 * of each layer, pipelined on the transaction's connection, and the
 * transaction run again after a deadlock or a serialization failure.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type { DeliveryOp, DlqRecord, FanoutRecord } from "../records.ts";
import { nextStamp, type PgContext, type Tx } from "./_context.ts";
import { checkOps, refuseCollect } from "./_delivery_check.ts";
import { type ByKind, byKind, compareText, layers } from "./_delivery_layers.ts";

/** Attempts at a transaction that a deadlock or serialization failure rolled back. */
const MAX_TRANSACTION_ATTEMPTS = 5;

/** `bytes` in base64, for `decode(…, 'base64')`. */
function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** A due time as stored: whole ms (a fraction waits for the next one). */
export function dueMs(at: number): number {
  return Math.ceil(at);
}

/**
 * Writes `ops` in `tx`, stamping every row they write with `stamp`. The
 * statements are pipelined on the transaction's connection, in layer order.
 *
 * @returns The indexes of the `collect_event` ops that deleted their event.
 */
export async function applyOps(
  tx: Tx,
  ops: readonly DeliveryOp[],
  stamp: string,
): Promise<Set<number>> {
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
export async function retrying<T>(ctx: PgContext, operation: (tx: Tx) => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await ctx.transaction(operation);
    } catch (error) {
      if (attempt >= MAX_TRANSACTION_ATTEMPTS || !isTransient(error)) throw error;
    }
  }
}

/** Commits `ops` in one transaction of their own. */
export function commitOps(
  ctx: PgContext,
  ops: readonly DeliveryOp[],
): Promise<{ stamp: string; collected: Set<number> }> {
  return retrying(ctx, async (tx) => {
    const stamp = await nextStamp(tx);
    const collected = ops.length ? await applyOps(tx, ops, stamp) : new Set<number>();
    return { stamp, collected };
  });
}
