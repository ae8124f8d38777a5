/**
 * A router's claims on incoming jobs in the store: made for the jobs it
 * takes, renewed while they wait or run, and given back for those it does
 * not complete. Private to `src/webhooks`.
 *
 * @module
 */
import { newId } from "../ids.ts";
import type { Store } from "../store/mod.ts";

/** The claims one router holds, and those that go back to the store. */
export class JobClaims {
  /** The owner of this router's claims on jobs. */
  readonly owner: string = newId("inr");
  #store: Store;
  #now: () => number;
  #ttlMs: number;
  /** When claims were last renewed (epoch ms). */
  #renewedAt = -Infinity;
  /** Jobs whose claims go back to the store (not completed here after all). */
  #toRelease = new Set<string>();

  /**
   * @param store Where the claims are held.
   * @param now Clock in ms.
   * @param ttlMs Life of a claim without renewal.
   */
  constructor(store: Store, now: () => number, ttlMs: number) {
    this.#store = store;
    this.#now = now;
    this.#ttlMs = ttlMs;
  }

  /** A claim made now, for jobs this router takes. */
  claim(): { owner: string; until: number } {
    return { owner: this.owner, until: this.#now() + this.#ttlMs };
  }

  /** Gives the claim on job `id` back on the next poll. */
  release(id: string): void {
    this.#toRelease.add(id);
  }

  /**
   * One poll's care of the claims: renews them (a few times per life, while
   * `holding` any) and gives back those released, except jobs `queued` here
   * again meanwhile.
   *
   * @returns Whether claims went back (those jobs wait in the store again).
   */
  async maintain(holding: boolean, queued: ReadonlySet<string>): Promise<boolean> {
    const now = this.#now();
    // Claims last claimTtlMs: renewed a few times per life, not on every poll.
    if (holding && now - this.#renewedAt >= this.#ttlMs / 4) {
      await this.#store.incoming.renewClaims(this.owner, now + this.#ttlMs);
      this.#renewedAt = now;
    }
    if (!this.#toRelease.size) return false;
    const ids = [...this.#toRelease];
    // Not one claimed again and queued here meanwhile.
    const free = ids.filter((id) => !queued.has(id));
    await this.#store.incoming.releaseClaims(this.owner, free);
    for (const id of ids) this.#toRelease.delete(id);
    return true;
  }
}
