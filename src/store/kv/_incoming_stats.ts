/**
 * The counters of an incoming endpoint in Deno KV (received, rejected,
 * failed, last received). Private to `src/store/kv`.
 *
 * @module
 */
import { incomingStatsKey } from "./keys.ts";
import type { IncomingKvHandle as KvStore } from "./_incoming_claims.ts";

/** Adds counter deltas of an incoming endpoint in one commit. */
export async function addIncomingStats(
  store: KvStore,
  id: string,
  deltas: { received?: number; rejected?: number; failed?: number },
  lastReceivedAt?: string,
): Promise<void> {
  await store.retry(async () => {
    let atomic = store.kv.atomic();
    for (const counter of ["received", "rejected", "failed"] as const) {
      const delta = deltas[counter] ?? 0;
      if (delta > 0) atomic = atomic.sum(incomingStatsKey(id, counter), BigInt(delta));
    }
    if (lastReceivedAt) atomic = atomic.set(incomingStatsKey(id, "last"), lastReceivedAt);
    await atomic.commit();
  });
}
