/**
 * The queue behind both adapters' group commit: units wait while a commit
 * runs, then the next drain takes as many as fit. Private to `src/store`.
 *
 * @module
 */

/** Options of {@linkcode CommitQueue}. */
export interface CommitQueueOptions {
  /** How long a drain waits for more units to join it, in ms. @default 0 */
  lingerMs?: number;
}

/**
 * Units waiting for a commit, and the one drain running at a time. `drain`
 * takes units from the front of the array it is given, until it is empty.
 */
export class CommitQueue<U> {
  #units: U[] = [];
  #running: Promise<void> | null = null;
  #lingerMs: number;
  #drain: (units: U[]) => Promise<void>;

  /**
   * @param drain Commits units taken from the front of `units`; called again while any wait.
   * @param options How long a drain lingers.
   * @throws {RangeError} when `lingerMs` is negative.
   */
  constructor(drain: (units: U[]) => Promise<void>, options: CommitQueueOptions = {}) {
    const { lingerMs = 0 } = options;
    if (!(lingerMs >= 0)) throw new RangeError(`Invalid lingerMs: ${lingerMs} is not 0 or more`);
    this.#drain = drain;
    this.#lingerMs = lingerMs;
  }

  /** Units waiting. */
  get length(): number {
    return this.#units.length;
  }

  /** Queues a unit and starts a drain unless one runs. */
  push(unit: U): void {
    this.#units.push(unit);
    this.#kick();
  }

  /** Resolves once every queued unit went through a drain. */
  async flush(): Promise<void> {
    while (this.#running) await this.#running;
  }

  #kick(): void {
    if (this.#running) return;
    const linger = this.#lingerMs;
    const drain = linger > 0
      ? new Promise<void>((resolve) => setTimeout(resolve, linger)).then(() =>
        this.#drain(this.#units)
      )
      : this.#drain(this.#units);
    this.#running = drain.finally(() => {
      this.#running = null;
      if (this.#units.length) this.#kick();
    });
  }
}
