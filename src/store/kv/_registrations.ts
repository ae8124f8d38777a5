/**
 * Writes of registrations (upstreams, virtual servers, pins, policies) that
 * every process notices: each bumps the registrations version in the same
 * commit. Private to `src/store/kv`.
 *
 * @module
 */
import { registrationsVersionKey } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";

/**
 * Deletes the registration at `key` and bumps the registrations version,
 * checked against the entry read (read again when it changed meanwhile).
 *
 * @returns Whether it existed.
 */
export async function removeRegistration(store: KvHandle, key: Deno.KvKey): Promise<boolean> {
  return await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get(key);
      if (entry.value === null) return false;
      const result = await store.kv.atomic()
        .check(entry)
        .delete(key)
        .sum(registrationsVersionKey(), 1n)
        .commit();
      if (result.ok) return true;
    }
  });
}
