/**
 * The Deno KV dead-letter queue's records: listed (a page through the order
 * index), counted, read with their bodies, replayed and deleted.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import {
  deliveriesVersionKey,
  deliveryKey,
  dlqBodyKey,
  dlqCountKey,
  dlqKey,
  dlqOrderPrefix,
  dlqPrefix,
  dlqWebhookOrderPrefix,
  outboxBodyKey,
  outboxEventKey,
} from "./keys.ts";
import {
  type DeliveryRecord,
  dlqAfter,
  type DlqPosition,
  type DlqRecord,
  DlqRecordSchema,
  type ListDlqPageOptions,
  sortDlq,
} from "../records.ts";
import { parseRecord } from "../_records.ts";
import { checkDlqPageLimit, replayEvent } from "../_delivery_contract.ts";
import type { DeliveryHandle } from "./_delivery_claims.ts";
import { apply, bodyMutations, eventMutations, opMutations } from "./_delivery_plan.ts";
import {
  commitInParts,
  ensureDlqIndex,
  listAllDlq,
  MAX_DLQ_ROUNDS,
  readKeys,
} from "./_dlq_index.ts";
import { readChunks } from "./_outbox_reads.ts";
import { DeliveryWriter } from "./_delivery_writer.ts";

/** The exact body of an event as a dead-letter record of it keeps it, or `null`. */
export async function findDlqBody(
  store: DeliveryHandle,
  eventId: string,
): Promise<Uint8Array | null> {
  const found = await store.retry(async () => {
    for await (const entry of store.reader.list({ prefix: dlqPrefix() })) {
      const record = parseRecord(
        DlqRecordSchema,
        entry.value,
        `DLQ record ${String(entry.key[2])}`,
      );
      if (record.event_id === eventId && !record.body_lost) return record;
    }
    return null;
  });
  return found ? await readDlqBody(store, found) : null;
}

/**
 * Dead-letter records, oldest failure first: every one (filtered), or with
 * `limit` a page read through the order index (about `limit` reads).
 */
export async function listDlqRecords(
  store: DeliveryHandle,
  options: ListDlqPageOptions = {},
): Promise<DlqRecord[]> {
  const { webhook, after, limit } = options;
  if (limit === undefined) {
    return sortDlq(
      (await listAllDlq(store)).filter((record) =>
        (webhook === undefined || record.webhook_id === webhook) &&
        (after === undefined || dlqAfter(record, after))
      ),
    );
  }
  checkDlqPageLimit(limit);
  await ensureDlqIndex(store);
  const prefix = webhook === undefined ? dlqOrderPrefix() : dlqWebhookOrderPrefix(webhook);
  const out: DlqRecord[] = [];
  let cursor: DlqPosition | undefined = after;
  while (out.length < limit) {
    const want = limit - out.length;
    const from: DlqPosition | undefined = cursor;
    const positions = await store.retry(async () => {
      const found: DlqPosition[] = [];
      const selector = from
        ? { prefix, start: [...prefix, from.failed_at, from.dlq_id] }
        : { prefix };
      for await (const entry of store.kv.list(selector, { limit: want + 1, batchSize: want + 1 })) {
        const n = entry.key.length;
        const position = { failed_at: String(entry.key[n - 2]), dlq_id: String(entry.key[n - 1]) };
        if (from && !dlqAfter(position, from)) continue;
        found.push(position);
        if (found.length === want) break;
      }
      return found;
    });
    const entries = await readKeys(store, positions.map((p) => dlqKey(p.dlq_id)));
    entries.forEach((entry, i) => {
      if (entry.value === null) return;
      const record = parseRecord(DlqRecordSchema, entry.value, `DLQ record ${positions[i].dlq_id}`);
      // An entry the record moved away from (never left by the writer) is skipped.
      if (
        record.failed_at === positions[i].failed_at &&
        (webhook === undefined || record.webhook_id === webhook)
      ) {
        out.push(record);
      }
    });
    if (positions.length < want) break;
    cursor = positions.at(-1);
  }
  return out;
}

/** How many dead-letter records there are (the index's count). */
export async function countDlqRecords(store: DeliveryHandle): Promise<number> {
  await ensureDlqIndex(store);
  const entry = await store.get<Deno.KvU64>(dlqCountKey());
  return Number(entry.value?.value ?? 0n);
}

/** One dead-letter record, or `null`. */
export async function getDlqRecord(
  store: DeliveryHandle,
  dlqId: string,
): Promise<DlqRecord | null> {
  const entry = await store.retry(() => store.kv.get(dlqKey(dlqId)));
  return entry.value === null ? null : parseRecord(DlqRecordSchema, entry.value, dlqId);
}

/** The exact body bytes of a dead-lettered event. */
export async function readDlqBody(store: DeliveryHandle, record: DlqRecord): Promise<Uint8Array> {
  if (record.body) return record.body;
  return await readChunks(
    store,
    (i) => dlqBodyKey(record.dlq_id, i),
    record.size,
    `DLQ record ${record.dlq_id}`,
  );
}

/**
 * Queues a fresh delivery for a dead-letter record (same event id and body,
 * fresh retry schedule) and bumps the deliveries version so a running
 * dispatcher picks it up. The record stays until the delivery succeeds.
 *
 * @returns `"already_queued"` when a delivery of that event to that webhook is pending.
 */
export async function requeueDlqRecord(
  store: DeliveryHandle,
  record: DlqRecord,
  body: Uint8Array,
  timestamp: string,
  now: number = Date.now(),
): Promise<"queued" | "already_queued"> {
  const event = replayEvent(record, timestamp, body);
  const chunkWrites = bodyMutations(body, (i) => outboxBodyKey(event.id, i), 0);
  const delivery: DeliveryRecord = {
    event_id: record.event_id,
    event_type: record.event_type,
    webhook_id: record.webhook_id,
    attempt_count: 0,
    next_attempt_at: now,
    created_at: new Date(now).toISOString(),
    attempts: [],
    dlq_id: record.dlq_id,
  };
  const key = deliveryKey(record.event_id, record.webhook_id);
  const put = opMutations({ op: "put_delivery", delivery }, 0);
  for (let round = 1;; round++) {
    // The event record as read guards the commit: a collection of the event
    // between the chunk writes and the commit would take their chunks away.
    const [existing, stored] = await readKeys(store, [key, outboxEventKey(event.id)]);
    if (existing.versionstamp !== null) return "already_queued";
    // The record's webhook list gains this one (a record without a list keeps none).
    const listed = stored.value === null
      ? []
      : (stored.value as { webhook_ids?: unknown }).webhook_ids;
    const webhookIds = Array.isArray(listed)
      ? [...new Set([...listed.map(String), record.webhook_id])]
      : undefined;
    const meta = eventMutations({ ...event, ...(webhookIds ? { webhook_ids: webhookIds } : {}) }, 0)
      .filter((m) => m.primary);
    // Large bodies: chunks first (idempotent), then the record and delivery atomically.
    await commitInParts(store, chunkWrites, 10);
    const result = await store.retry(() => {
      const atomic = store.kv.atomic()
        .check({ key, versionstamp: null })
        .check({ key: stored.key, versionstamp: stored.versionstamp });
      apply(atomic, meta);
      apply(atomic, put);
      return atomic.sum(deliveriesVersionKey(), 1n).commit();
    });
    if (result.ok) return "queued";
    if (round >= MAX_DLQ_ROUNDS) {
      throw new GatewayError(
        "UNAVAILABLE",
        `Cannot replay ${record.dlq_id}: its event kept changing (${round} attempts)`,
      );
    }
  }
}

/** Deletes dead-letter records and their bodies. */
export async function deleteDlqRecords(
  store: DeliveryHandle,
  records: readonly Pick<DlqRecord, "dlq_id" | "size">[],
): Promise<void> {
  const writer = new DeliveryWriter(store);
  await Promise.all(
    records.map((r) => writer.write([{ op: "delete_dlq", dlq_id: r.dlq_id, size: r.size }])),
  );
}
