/**
 * Timeouts of one fixed length for many short operations, on one timer.
 *
 * A tool call or a webhook attempt that arms `setTimeout` and clears it when
 * it finishes costs a timer object, its registration and its cancellation per
 * operation, almost always for nothing. With one length per queue, deadlines
 * come in the order operations start, so the oldest operation still running
 * is the first in a `Map`'s insertion order: one timer, armed for that
 * operation's deadline, is enough. When it fires it expires what is due and
 * re-arms for the new oldest; an operation that finished first is just
 * deleted.
 *
 * @module
 */

/** Options of {@linkcode DeadlineQueue}. */
export interface DeadlineQueueOptions {
  /** Whether a pending operation's timeout keeps the process alive. @default true */
  ref?: boolean;
  /** The clock, in ms. @default performance.now */
  now?: () => number;
}

/** The longest delay `setTimeout` takes (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Pending {
  deadline: number;
  onExpire: () => void;
}

/**
 * Runs `onExpire` for each operation still pending `ms` after it was added.
 * The timer is never cleared: with nothing pending it no longer keeps the
 * process alive, and when it fires it re-arms only if something is pending.
 *
 * @example
 * ```ts
 * const timeouts = new DeadlineQueue(30_000);
 * const controller = new AbortController();
 * const cancel = timeouts.add(() => controller.abort());
 * try {
 *   await fetch("https://example.com", { signal: controller.signal });
 * } finally {
 *   cancel();
 * }
 * ```
 */
export class DeadlineQueue {
  /** The timeout of every operation, in ms. */
  readonly ms: number;
  #ref: boolean;
  #now: () => number;
  #pending = new Map<number, Pending>();
  #nextId = 0;
  #timer: number | undefined;

  /**
   * @param ms The timeout of every operation, in ms (≥ 0).
   * @param options Timer and clock.
   */
  constructor(ms: number, options: DeadlineQueueOptions = {}) {
    if (!(ms >= 0) || !Number.isFinite(ms)) {
      throw new RangeError(`DeadlineQueue: ms must be a finite number ≥ 0, got ${ms}`);
    }
    const { ref = true, now = () => performance.now() } = options;
    this.ms = ms;
    this.#ref = ref;
    this.#now = now;
  }

  /** Operations added and not yet cancelled or expired. */
  get size(): number {
    return this.#pending.size;
  }

  /**
   * Starts an operation's timeout.
   *
   * @returns Cancels it (the operation finished); safe to call twice, or
   * after it expired.
   */
  add(onExpire: () => void): () => void {
    const id = this.#nextId++;
    const deadline = this.#now() + this.ms;
    this.#pending.set(id, { deadline, onExpire });
    if (this.#timer === undefined) this.#arm(deadline);
    else if (this.#ref && this.#pending.size === 1) Deno.refTimer(this.#timer);
    return () => {
      if (!this.#pending.delete(id)) return;
      if (this.#pending.size === 0 && this.#timer !== undefined) Deno.unrefTimer(this.#timer);
    };
  }

  #arm(deadline: number): void {
    // Longer delays than a timer takes are served in steps: #fire re-arms.
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, deadline - this.#now()));
    this.#timer = setTimeout(() => this.#fire(), delay) as unknown as number;
    if (!this.#ref) Deno.unrefTimer(this.#timer);
  }

  #fire(): void {
    this.#timer = undefined;
    const now = this.#now();
    const due: Pending[] = [];
    for (const [id, pending] of this.#pending) {
      if (pending.deadline > now) break;
      this.#pending.delete(id);
      due.push(pending);
    }
    const next = this.#pending.values().next();
    if (!next.done) this.#arm(next.value.deadline);
    // Every due operation expires even if one callback throws; the first
    // error is then thrown as a timer callback's would be.
    let failed: { error: unknown } | undefined;
    for (const { onExpire } of due) {
      try {
        onExpire();
      } catch (error) {
        failed ??= { error };
      }
    }
    if (failed) throw failed.error;
  }
}
