/**
 * The delivery lease: among the server processes sharing a data directory,
 * the one holding it sends webhook deliveries; the others only record them.
 *
 * @module
 */
import { deliveryLeaseKey } from "./keys.ts";
import { leaseHolderIsGone } from "../_rules.ts";
import type { KvHandle } from "./_handle.ts";
import { type ClaimLeaseOptions, type DeliveryLease, DeliveryLeaseSchema } from "../records.ts";

/**
 * Takes or renews the lease: succeeds when it is free, expired, held by a
 * process that no longer runs on this host, or already ours.
 *
 * @returns Whether this process holds the lease now.
 */
export async function claimDeliveryLease(
  store: KvHandle,
  options: ClaimLeaseOptions,
): Promise<boolean> {
  const { owner, ttlMs, now = Date.now() } = options;
  return await store.retry(async () => {
    const entry = await store.kv.get(deliveryLeaseKey());
    const held = DeliveryLeaseSchema.safeParse(entry.value);
    if (
      held.success && held.data.owner !== owner && held.data.expires_at > now &&
      !leaseHolderIsGone(held.data)
    ) {
      return false;
    }
    const lease: DeliveryLease = {
      owner,
      pid: Deno.pid,
      hostname: Deno.hostname(),
      expires_at: now + ttlMs,
    };
    const result = await store.kv.atomic().check(entry).set(deliveryLeaseKey(), lease).commit();
    return result.ok;
  });
}

/** Gives the lease up, if this process holds it. */
export async function releaseDeliveryLease(store: KvHandle, owner: string): Promise<void> {
  await store.retry(async () => {
    const entry = await store.kv.get(deliveryLeaseKey());
    const held = DeliveryLeaseSchema.safeParse(entry.value);
    if (!held.success || held.data.owner !== owner) return;
    await store.kv.atomic().check(entry).delete(deliveryLeaseKey()).commit();
  });
}
