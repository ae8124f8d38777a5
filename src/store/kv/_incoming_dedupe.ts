/**
 * Reservations of senders' delivery ids at incoming endpoints in Deno KV:
 * reserved while a payload is accepted, confirmed once it was, released
 * when it was not. Private to `src/store/kv`.
 *
 * @module
 */
import { incomingDedupeKey } from "./keys.ts";
import type { DedupeReservation, ReserveDedupeOptions } from "../records.ts";
import type { IncomingKvHandle as KvStore } from "./_incoming_claims.ts";

/** A remembered delivery id, as stored. */
interface DedupeRecord {
  job_id: string;
  reserved_at: number;
  expires_at: number;
  confirmed: boolean;
}

/** Reserves a sender's delivery id at an endpoint (see `IncomingStore.reserveDedupeKey`). */
export async function reserveIncomingDedupeKey(
  store: KvStore,
  options: ReserveDedupeOptions,
): Promise<DedupeReservation> {
  const { endpoint_id, delivery_id, job_id, now, ttl_ms, stale_ms } = options;
  const key = incomingDedupeKey(endpoint_id, delivery_id);
  return await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get<DedupeRecord>(key);
      const held = entry.value;
      // Deno KV expires keys lazily: the record's own expiry decides.
      if (
        held && held.expires_at > now &&
        (held.confirmed || held.reserved_at + stale_ms > now)
      ) {
        return { status: "duplicate", job_id: held.job_id, confirmed: held.confirmed };
      }
      const record: DedupeRecord = {
        job_id,
        reserved_at: now,
        expires_at: now + ttl_ms,
        confirmed: false,
      };
      const result = await store.kv.atomic().check(entry).set(key, record, { expireIn: ttl_ms })
        .commit();
      if (result.ok) return { status: "reserved" };
    }
  });
}

/**
 * Changes the reservation of a delivery id while `jobId` holds it (nothing
 * when another job holds it, or none does), with a checked commit retried
 * until it lands.
 *
 * @param change The commit's write for the held record, or `undefined` for none.
 */
async function changeHeldDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
  change: (atomic: Deno.AtomicOperation, key: Deno.KvKey, held: DedupeRecord) => boolean,
): Promise<void> {
  const key = incomingDedupeKey(endpointId, deliveryId);
  await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get<DedupeRecord>(key);
      if (!entry.value || entry.value.job_id !== jobId) return;
      const atomic = store.kv.atomic().check(entry);
      if (!change(atomic, key, entry.value)) return;
      if ((await atomic.commit()).ok) return;
    }
  });
}

/** Marks the reservation `jobId` holds as accepted. */
export async function confirmIncomingDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
): Promise<void> {
  await changeHeldDedupeKey(store, endpointId, deliveryId, jobId, (atomic, key, held) => {
    if (held.confirmed) return false;
    const left = Math.max(1, held.expires_at - Date.now());
    atomic.set(key, { ...held, confirmed: true }, { expireIn: left });
    return true;
  });
}

/** Drops the reservation `jobId` holds. */
export async function releaseIncomingDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
): Promise<void> {
  await changeHeldDedupeKey(store, endpointId, deliveryId, jobId, (atomic, key) => {
    atomic.delete(key);
    return true;
  });
}
