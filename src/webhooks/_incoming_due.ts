/**
 * The due times of the retries a router scheduled, so that it looks for
 * jobs in the store once one falls due. Private to `src/webhooks`.
 *
 * @module
 */

/** Due times (epoch ms) of scheduled retries, ascending. */
export class RetryDueTimes {
  #dueTimes: number[] = [];

  /** Remembers a retry's due time, to claim it once due. */
  watch(at: number): void {
    const times = this.#dueTimes;
    let i = times.length;
    while (i > 0 && times[i - 1] > at) i--;
    times.splice(i, 0, at);
  }

  /** Whether a watched retry fell due by `now` (those are forgotten: a claim takes them). */
  due(now: number): boolean {
    let due = 0;
    while (due < this.#dueTimes.length && this.#dueTimes[due] <= now) due++;
    if (due) this.#dueTimes.splice(0, due);
    return due > 0;
  }
}
