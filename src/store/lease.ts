/**
 * The delivery lease: among the server processes sharing a data directory,
 * the one holding it sends webhook deliveries; the others only record them.
 *
 * @module
 */
import { z } from "zod";
import { deliveryLeaseKey } from "./keys.ts";
import type { Store } from "./store.ts";

const LeaseSchema = z.object({
  owner: z.string(),
  pid: z.number().int(),
  hostname: z.string(),
  expires_at: z.number(),
});

/** Who holds the lease, and until when (epoch ms). */
export type DeliveryLease = z.infer<typeof LeaseSchema>;

/** Options of {@linkcode claimDeliveryLease}. */
export interface ClaimLeaseOptions {
  /** This process's owner id. */
  owner: string;
  /** How long the lease lasts without renewal, in ms. */
  ttlMs: number;
  /** Clock, epoch ms. @default Date.now */
  now?: number;
}

/** Whether the process that holds `lease` is known to be gone (same host, no such pid). */
function holderIsGone(lease: DeliveryLease): boolean {
  if (lease.hostname !== Deno.hostname() || lease.pid === Deno.pid) return false;
  try {
    Deno.statSync(`/proc/${lease.pid}`);
    return false;
  } catch (error) {
    // Without /proc (macOS) nothing is known: the lease simply expires.
    if (!(error instanceof Deno.errors.NotFound)) return false;
    try {
      Deno.statSync("/proc/self");
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Takes or renews the lease: succeeds when it is free, expired, held by a
 * process that no longer runs on this host, or already ours.
 *
 * @returns Whether this process holds the lease now.
 */
export async function claimDeliveryLease(
  store: Store,
  options: ClaimLeaseOptions,
): Promise<boolean> {
  const { owner, ttlMs, now = Date.now() } = options;
  return await store.retry(async () => {
    const entry = await store.kv.get(deliveryLeaseKey());
    const held = LeaseSchema.safeParse(entry.value);
    if (
      held.success && held.data.owner !== owner && held.data.expires_at > now &&
      !holderIsGone(held.data)
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
export async function releaseDeliveryLease(store: Store, owner: string): Promise<void> {
  await store.retry(async () => {
    const entry = await store.kv.get(deliveryLeaseKey());
    const held = LeaseSchema.safeParse(entry.value);
    if (!held.success || held.data.owner !== owner) return;
    await store.kv.atomic().check(entry).delete(deliveryLeaseKey()).commit();
  });
}
