/**
 * The units of a group-committing delivery writer, alike on both adapters:
 * which waiting units one commit takes within the database's bounds, and
 * what each unit gets back.
 *
 * @module
 */
import type { WriteResult } from "./records.ts";
import type { StoreCost } from "./store.ts";

/** The most one commit holds; a unit past them alone commits alone (or is split). */
export interface CommitBounds {
  /** Records written or deleted. */
  mutations: number;
  /** Checks in the commit (`Infinity` where the database has none). */
  checks: number;
  /** Bytes of keys (`Infinity` where unbounded). */
  keyBytes: number;
  /** Bytes in all, keys included. */
  bytes: number;
}

/** What a unit adds to a commit: a {@linkcode StoreCost}, with its checks where it has any. */
export interface UnitCost extends StoreCost {
  /** Checks it adds. @default 0 */
  checks?: number;
}

/**
 * Takes the units of the next commit from the head of `queue`, in order: as
 * many as fit `bounds` together, and always the first (a unit past the
 * bounds comes alone).
 *
 * @returns The units taken (removed from `queue`).
 */
export function takeBatch<U extends { readonly cost: UnitCost }>(
  queue: U[],
  bounds: CommitBounds,
): U[] {
  const batch: U[] = [];
  let mutations = 0;
  let checks = 0;
  let keyBytes = 0;
  let bytes = 0;
  while (queue.length) {
    const { cost } = queue[0];
    const nextMutations = mutations + cost.mutations;
    const nextChecks = checks + (cost.checks ?? 0);
    const nextKeyBytes = keyBytes + cost.keyBytes;
    const nextBytes = bytes + cost.bytes;
    if (
      batch.length &&
      (nextMutations > bounds.mutations || nextChecks > bounds.checks ||
        nextKeyBytes > bounds.keyBytes || nextBytes > bounds.bytes)
    ) break;
    batch.push(queue.shift()!);
    mutations = nextMutations;
    checks = nextChecks;
    keyBytes = nextKeyBytes;
    bytes = nextBytes;
  }
  return batch;
}

/**
 * What one unit gets back: the versionstamp of each op and, when some of its
 * `collect_event` ops did not delete their event, their event ids.
 */
export function writeResult(versionstamps: string[], uncollected: string[]): WriteResult {
  return uncollected.length
    ? { versionstamps, collected: false, uncollected }
    : { versionstamps, collected: true };
}
