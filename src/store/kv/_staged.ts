/**
 * Writes that one module of `src/store` hands to another's commit, so that
 * both become durable together (an incoming job rides in the commit of its
 * audit entry).
 *
 * @module
 */

import type { StagedWrites } from "../store.ts";

/**
 * KV writes that another module's commit carries for this one (the audit
 * log writes an incoming job in the commit of its entry). Opaque outside
 * `src/store`: built by `stageIncomingJob`.
 */
export interface KvStagedWrites extends StagedWrites {
  /** The mutations, for modules of `src/store/kv` only. */
  readonly sets: readonly { key: Deno.KvKey; value: unknown }[];
}

/** Adds staged writes to an atomic operation. For modules of `src/store` only. */
export function applyStagedWrites(
  atomic: Deno.AtomicOperation,
  writes: readonly StagedWrites[],
): void {
  for (const { sets } of writes as readonly KvStagedWrites[]) {
    for (const { key, value } of sets) atomic.set(key, value);
  }
}
