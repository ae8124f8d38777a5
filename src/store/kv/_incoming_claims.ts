/**
 * Claims on incoming jobs, kept in the memory of one {@linkcode KvHandle}
 * (one server per KV file runs the jobs), and the checks of a claim's
 * fields. Private to `src/store/kv`.
 *
 * @module
 */
import type { KvHandle } from "./_handle.ts";
import type { IncomingClaim } from "../records.ts";

/** The handle, with the claims on incoming jobs it keeps in memory. */
export type IncomingKvHandle = KvHandle & { readonly incomingClaims: IncomingClaims };

/**
 * Claims on incoming jobs, in one {@linkcode KvStore} handle's memory (the
 * modules of `src/store` only). A claim may be set before its job is
 * written (a job accepted by the claimer), and goes when the job is
 * completed, when released, or when another owner claims the job after it
 * lapsed.
 */
export class IncomingClaims {
  /** Claims by job id, live or lapsed. */
  #held = new Map<string, IncomingClaim>();
  /** Claim scans in flight. */
  #scans = 0;
  /** Jobs completed while a scan was in flight: it may have listed them. */
  #gone = new Set<string>();

  /** Claims held, live or lapsed. */
  get size(): number {
    return this.#held.size;
  }

  /** Whether job `id` may be claimed at `now`: no live claim, not completed during a scan. */
  free(id: string, now: number): boolean {
    const held = this.#held.get(id);
    return (held === undefined || held.until <= now) && !this.#gone.has(id);
  }

  /** Claims job `id` (replacing any claim on it). */
  set(id: string, claim: IncomingClaim): void {
    this.#held.set(id, { owner: claim.owner, until: claim.until });
  }

  /** Drops claims that lapsed at `now` (their jobs are anyone's). */
  prune(now: number): void {
    for (const [id, held] of this.#held) if (held.until <= now) this.#held.delete(id);
  }

  /** Extends `owner`'s claims to `until`; returns how many it holds. */
  renew(owner: string, until: number): number {
    let count = 0;
    for (const held of this.#held.values()) {
      if (held.owner !== owner) continue;
      held.until = until;
      count++;
    }
    return count;
  }

  /** Gives back `owner`'s claims: all, or those of the jobs `ids`. */
  release(owner: string, ids?: readonly string[]): void {
    for (const id of ids ?? [...this.#held.keys()]) {
      if (this.#held.get(id)?.owner === owner) this.#held.delete(id);
    }
  }

  /** Drops the claims of completed jobs. */
  completed(ids: readonly string[]): void {
    for (const id of ids) {
      this.#held.delete(id);
      // A scan in flight may have listed the job before it went.
      if (this.#scans) this.#gone.add(id);
    }
  }

  /** Runs a claim scan: jobs completed while it runs are never claimed by it. */
  async scan<T>(run: () => Promise<T>): Promise<T> {
    this.#scans++;
    try {
      return await run();
    } finally {
      if (--this.#scans === 0) this.#gone.clear();
    }
  }
}
