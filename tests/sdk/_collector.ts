/**
 * Collects values pushed by callbacks (event handlers) and waits for one
 * that matches, with a deadline.
 *
 * @module
 */

/** Values pushed so far, and a way to wait for the next matching one. */
export class Collector<T> {
  readonly items: T[] = [];
  #waiters = new Set<() => void>();

  /** Records a value (use as a handler: `client.on(name, collector.push)`). */
  push = (item: T): void => {
    this.items.push(item);
    for (const wake of this.#waiters) wake();
  };

  /**
   * The first value (already pushed or still to come) that matches.
   *
   * @throws {Error} naming `what` when none arrives within `timeoutMs`.
   */
  async until(what: string, match: (item: T) => boolean, timeoutMs = 10_000): Promise<T> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = this.items.find(match);
      if (found !== undefined) return found;
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new Error(`No ${what} within ${timeoutMs} ms; got ${JSON.stringify(this.items)}`);
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      let wake!: () => void;
      await new Promise<void>((resolve) => {
        wake = resolve;
        this.#waiters.add(wake);
        timer = setTimeout(resolve, left);
      });
      this.#waiters.delete(wake);
      clearTimeout(timer);
    }
  }
}
