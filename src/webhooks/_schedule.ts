/**
 * A timer wheel of one: a min-heap of due times served by a single timer.
 * Private to `src/webhooks`.
 *
 * @module
 */

interface Slot<T> {
  at: number;
  seq: number;
  item: T;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

/** Items due at given times, handed to `onDue` (in due order) once their time comes. */
export class Schedule<T> {
  #heap: Slot<T>[] = [];
  #seq = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;
  #onDue: (items: T[]) => void;
  #now: () => number;

  /**
   * @param onDue Receives the items whose time has come.
   * @param now Clock in epoch milliseconds.
   */
  constructor(onDue: (items: T[]) => void, now: () => number) {
    this.#onDue = onDue;
    this.#now = now;
  }

  /** Items waiting. */
  get size(): number {
    return this.#heap.length;
  }

  /** Schedules `item` at epoch milliseconds `at`. */
  add(at: number, item: T): void {
    const heap = this.#heap;
    heap.push({ at, seq: this.#seq++, item });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i], heap[parent])) break;
      [heap[i], heap[parent]] = [heap[parent], heap[i]];
      i = parent;
    }
    if (at < this.#timerAt) this.#arm();
  }

  /** Drops every item and the timer. */
  clear(): void {
    this.#heap = [];
    this.#disarm();
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  #arm(): void {
    this.#disarm();
    const first = this.#heap[0];
    if (!first) return;
    this.#timerAt = first.at;
    const delay = Math.min(Math.max(0, first.at - this.#now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => this.#fire(), delay);
  }

  #fire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = this.#now();
    const due: T[] = [];
    while (this.#heap.length && this.#heap[0].at <= now) due.push(this.#pop().item);
    this.#arm();
    if (due.length) this.#onDue(due);
  }

  #pop(): Slot<T> {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop()!;
    if (heap.length) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && before(heap[left], heap[smallest])) smallest = left;
        if (right < heap.length && before(heap[right], heap[smallest])) smallest = right;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [heap[smallest], heap[i]];
        i = smallest;
      }
    }
    return top;
  }
}

function before<T>(a: Slot<T>, b: Slot<T>): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
