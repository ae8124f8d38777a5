/**
 * An endpoint's counters (received, rejected, failed, last received): noted
 * in memory on the request's path and added to the store on the next poll.
 * Private to `src/webhooks`.
 *
 * @module
 */
import type { Store } from "../store/mod.ts";

interface StatsDelta {
  received: number;
  rejected: number;
  last?: string;
}

/** Counter deltas per endpoint, not yet written. */
export class IncomingStats {
  #store: Store;
  #log: (message: string) => void;
  #stats = new Map<string, StatsDelta>();

  /**
   * @param store Where the counters are added.
   * @param log Where a failed write is said.
   */
  constructor(store: Store, log: (message: string) => void) {
    this.#store = store;
    this.#log = log;
  }

  /** Counts a payload of endpoint `id` received (at `at`) or rejected. */
  count(id: string, counter: "received" | "rejected", at?: string): void {
    const delta = this.#stats.get(id) ?? { received: 0, rejected: 0 };
    delta[counter]++;
    if (at) delta.last = at;
    this.#stats.set(id, delta);
  }

  /** Counts a failed `?wait=true` call of endpoint `id`, written at once. */
  countFailed(id: string): void {
    this.#store.webhooks.addIncomingStats(id, { failed: 1 }).catch((e) =>
      this.#log(`incoming: stats failed: ${(e as Error).message}`)
    );
  }

  /** Adds the counted deltas to the store. */
  async flush(): Promise<void> {
    const pending = [...this.#stats];
    this.#stats.clear();
    for (const [id, delta] of pending) {
      await this.#store.webhooks.addIncomingStats(id, delta, delta.last);
    }
  }
}
