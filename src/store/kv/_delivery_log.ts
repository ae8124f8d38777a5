/**
 * The per-webhook delivery log on Deno KV: read newest first, appended
 * through the writer, trimmed and deleted.
 *
 * @module
 */
import { deliveryLogPrefix } from "./keys.ts";
import { DELIVERY_LOG_SIZE, type DeliveryLogEntry, DeliveryLogEntrySchema } from "../records.ts";
import { parseRecord } from "../_records.ts";
import { deliveryLogOp } from "../_delivery_contract.ts";
import type { DeliveryHandle } from "./_delivery_claims.ts";
import { DeliveryWriter } from "./_delivery_writer.ts";

/** The newest entries of a webhook's delivery log, newest first. */
export async function readDeliveryLog(
  store: DeliveryHandle,
  webhookId: string,
  limit: number = DELIVERY_LOG_SIZE,
): Promise<DeliveryLogEntry[]> {
  return await store.retry(async () => {
    const out: DeliveryLogEntry[] = [];
    const entries = store.kv.list({ prefix: deliveryLogPrefix(webhookId) }, {
      reverse: true,
      limit,
    });
    for await (const entry of entries) {
      out.push(parseRecord(DeliveryLogEntrySchema, entry.value, `log of ${webhookId}`));
    }
    return out;
  });
}

/** Appends one entry to a webhook's delivery log and trims it. */
export async function appendDeliveryLog(
  store: DeliveryHandle,
  webhookId: string,
  entry: DeliveryLogEntry,
): Promise<void> {
  const op = deliveryLogOp(webhookId, entry);
  await new DeliveryWriter(store).write([op]);
  await trimDeliveryLog(store, webhookId);
}

async function deleteKeys(store: DeliveryHandle, keys: Deno.KvKey[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 500) {
    const part = keys.slice(i, i + 500);
    await store.retry(() => {
      const atomic = store.kv.atomic();
      for (const key of part) atomic.delete(key);
      return atomic.commit();
    });
  }
}

/**
 * Deletes all but the newest `keep` entries of a webhook's delivery log.
 *
 * @returns How many entries were deleted.
 */
export async function trimDeliveryLog(
  store: DeliveryHandle,
  webhookId: string,
  keep: number = DELIVERY_LOG_SIZE,
): Promise<number> {
  const stale: Deno.KvKey[] = await store.retry(async () => {
    const keys: Deno.KvKey[] = [];
    let seen = 0;
    const entries = store.kv.list({ prefix: deliveryLogPrefix(webhookId) }, { reverse: true });
    for await (const entry of entries) {
      if (++seen > keep) keys.push(entry.key);
    }
    return keys;
  });
  await deleteKeys(store, stale);
  return stale.length;
}

/** The entry ids of a webhook's delivery log, oldest first. */
export async function listDeliveryLogIds(
  store: DeliveryHandle,
  webhookId: string,
): Promise<string[]> {
  return await store.retry(async () => {
    const ids: string[] = [];
    for await (const entry of store.kv.list({ prefix: deliveryLogPrefix(webhookId) })) {
      ids.push(String(entry.key[entry.key.length - 1]));
    }
    return ids;
  });
}

/** Deletes a webhook's whole delivery log (after the webhook was removed). */
export async function deleteDeliveryLog(store: DeliveryHandle, webhookId: string): Promise<void> {
  await trimDeliveryLog(store, webhookId, 0);
}
