/**
 * Reads of the Deno KV delivery outbox: pending and orphaned deliveries, an
 * event with its chunked body, the deliveries version, and the collection of
 * an event nothing refers to.
 *
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../../errors/mod.ts";
import {
  deliveriesPrefix,
  deliveriesVersionKey,
  eventDeliveriesPrefix,
  outboxBodyKey,
  outboxEventKey,
  outboxFanoutKey,
  outboxFanoutPrefix,
} from "./keys.ts";
import {
  BytesSchema,
  DeliveryRecordSchema,
  fanoutDeliveries,
  FanoutRecordSchema,
  type OutboxEvent,
  type StoredDelivery,
} from "../records.ts";
import { parseRecord } from "../_records.ts";
import { byEventId } from "../_delivery_contract.ts";
import type { DeliveryHandle } from "./_delivery_claims.ts";
import { BODY_CHUNK_BYTES, chunkCount } from "./_delivery_plan.ts";

const StoredEventSchema = z.strictObject({
  id: z.string(),
  type: z.string(),
  timestamp: z.string(),
  size: z.number().int().min(0),
  body: BytesSchema.optional(),
  traceparent: z.string().optional(),
  /** See {@linkcode OutboxEvent.webhook_ids}: kept for up to {@linkcode MAX_CHECKED_WEBHOOKS}. */
  webhook_ids: z.array(z.string()).optional(),
});

/** Signals new pending deliveries to the process that delivers them. */
export async function bumpDeliveriesVersion(store: DeliveryHandle): Promise<void> {
  await store.retry(() => store.kv.atomic().sum(deliveriesVersionKey(), 1n).commit());
}

/** Reads the counter bumped whenever deliveries are queued by another path (replay, CLI). */
export async function deliveriesVersion(store: DeliveryHandle): Promise<bigint> {
  const entry = await store.get<Deno.KvU64>(deliveriesVersionKey());
  return entry.value?.value ?? 0n;
}

/**
 * Every pending delivery in either form, by event id (oldest first); a
 * delivery record wins over a fan-out entry of the same webhook. Not one
 * snapshot, but every delivery pending from the call's start to its end is
 * listed: the fan-out records are read before the delivery records, as a
 * delivery only ever moves from its fan-out entry to a record of its own
 * (read the other way round, one moving between the two reads was in neither).
 */
export async function listPendingDeliveries(store: DeliveryHandle): Promise<StoredDelivery[]> {
  return await store.retry(async () => {
    const fanouts: StoredDelivery[] = [];
    for await (const entry of store.kv.list({ prefix: outboxFanoutPrefix() })) {
      const eventId = String(entry.key[entry.key.length - 1]);
      const fanout = parseRecord(FanoutRecordSchema, entry.value, `fan-out of ${eventId}`);
      for (const record of fanoutDeliveries(eventId, fanout)) {
        fanouts.push({ record, versionstamp: entry.versionstamp, fanout: true });
      }
    }
    const out: StoredDelivery[] = [];
    const own = new Set<string>();
    for await (const entry of store.kv.list({ prefix: deliveriesPrefix() })) {
      const record = parseRecord(
        DeliveryRecordSchema,
        entry.value,
        `delivery ${entry.key.join("/")}`,
      );
      own.add(`${record.event_id}/${record.webhook_id}`);
      out.push({ record, versionstamp: entry.versionstamp, fanout: false });
    }
    for (const stored of fanouts) {
      if (!own.has(`${stored.record.event_id}/${stored.record.webhook_id}`)) out.push(stored);
    }
    return out.sort(byEventId);
  });
}

export async function readChunks(
  store: DeliveryHandle,
  chunkKey: (chunk: number) => Deno.KvKey,
  size: number,
  what: string,
): Promise<Uint8Array> {
  const chunks = chunkCount(size);
  const body = new Uint8Array(size);
  for (let i = 0; i < chunks; i += 10) {
    const keys: Deno.KvKey[] = [];
    for (let j = i; j < Math.min(chunks, i + 10); j++) keys.push(chunkKey(j));
    const entries = await store.retry(() => store.kv.getMany<Uint8Array[]>(keys));
    entries.forEach((entry, k) => {
      const chunk = entry.value;
      if (!(chunk instanceof Uint8Array)) {
        throw new GatewayError("STORE_CORRUPT", `Stored ${what} is unreadable: chunk missing`);
      }
      body.set(chunk, (i + k) * BODY_CHUNK_BYTES);
    });
  }
  return body;
}

/**
 * Pending deliveries (records of their own and fan-out entries) whose event
 * record is missing, at most `limit`, by event id: what a store that lost an
 * event's body while a delivery of it waited leaves. Reads every pending
 * delivery once, streaming (the outbox is normally small).
 */
export async function listOrphanDeliveries(
  store: DeliveryHandle,
  limit: number,
): Promise<StoredDelivery[]> {
  const out: StoredDelivery[] = [];
  // A record and its event are read together (one snapshot): a delivery that
  // ends while the list runs, its event collected with it, is no orphan.
  const orphaned = async (key: Deno.KvKey, versionstamp: string, eventId: string) => {
    const [record, event] = await store.retry(() =>
      store.kv.getMany([key, outboxEventKey(eventId)])
    );
    return record.versionstamp === versionstamp && event.versionstamp === null;
  };
  await store.retry(async () => {
    out.length = 0;
    for await (const entry of store.reader.list({ prefix: deliveriesPrefix() })) {
      const record = parseRecord(
        DeliveryRecordSchema,
        entry.value,
        `delivery ${entry.key.join("/")}`,
      );
      if (!await orphaned(entry.key, entry.versionstamp, record.event_id)) continue;
      out.push({ record, versionstamp: entry.versionstamp, fanout: false });
      if (out.length >= limit) return;
    }
    for await (const entry of store.reader.list({ prefix: outboxFanoutPrefix() })) {
      const eventId = String(entry.key[entry.key.length - 1]);
      if (!await orphaned(entry.key, entry.versionstamp, eventId)) continue;
      const fanout = parseRecord(FanoutRecordSchema, entry.value, `fan-out of ${eventId}`);
      const own = await ownDeliveryWebhooks(store, eventId);
      for (const record of fanoutDeliveries(eventId, fanout)) {
        if (own.has(record.webhook_id)) continue;
        out.push({ record, versionstamp: entry.versionstamp, fanout: true });
      }
      if (out.length >= limit) return;
    }
  });
  return out;
}

/** An outbox event and the versionstamp of its stored record, or `null`. */
export async function readOutboxEvent(
  store: DeliveryHandle,
  eventId: string,
): Promise<{ event: OutboxEvent; versionstamp: string } | null> {
  const entry = await store.retry(() => store.kv.get(outboxEventKey(eventId)));
  if (entry.value === null || entry.versionstamp === null) return null;
  const stored = parseRecord(StoredEventSchema, entry.value, `event ${eventId}`);
  const body = stored.body ??
    await readChunks(store, (i) => outboxBodyKey(eventId, i), stored.size, `event ${eventId}`);
  if (body.byteLength !== stored.size) {
    throw new GatewayError("STORE_CORRUPT", `Stored event ${eventId} is unreadable: wrong size`);
  }
  return {
    event: {
      id: stored.id,
      type: stored.type,
      timestamp: stored.timestamp,
      body,
      ...(stored.traceparent !== undefined ? { traceparent: stored.traceparent } : {}),
      ...(stored.webhook_ids ? { webhook_ids: stored.webhook_ids } : {}),
    },
    versionstamp: entry.versionstamp,
  };
}

/**
 * Deletes an outbox event when no pending delivery refers to it any more.
 *
 * @returns Whether the event is gone.
 */
export async function collectEventIfUnreferenced(
  store: DeliveryHandle,
  eventId: string,
): Promise<boolean> {
  return await store.retry(async () => {
    const [entry, fanout] = await store.kv.getMany([
      outboxEventKey(eventId),
      outboxFanoutKey(eventId),
    ]);
    if (entry.value === null) return true;
    if (fanout.value !== null) return false;
    for await (const _ of store.kv.list({ prefix: eventDeliveriesPrefix(eventId) }, { limit: 1 })) {
      return false;
    }
    const stored = parseRecord(StoredEventSchema, entry.value, `event ${eventId}`);
    const atomic = store.kv.atomic().check(entry).check(fanout).delete(entry.key);
    for (let i = 0; i < chunkCount(stored.size); i++) atomic.delete(outboxBodyKey(eventId, i));
    return (await atomic.commit()).ok;
  });
}

/** The webhook ids of an event's own delivery records. */
export async function ownDeliveryWebhooks(
  store: DeliveryHandle,
  eventId: string,
): Promise<Set<string>> {
  return await store.retry(async () => {
    const out = new Set<string>();
    for await (const entry of store.reader.list({ prefix: eventDeliveriesPrefix(eventId) })) {
      out.add(String(entry.key[entry.key.length - 1]));
    }
    return out;
  });
}
