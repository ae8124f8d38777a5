/**
 * One tool's circuit breakers kept per key (the destination a call goes to,
 * e.g. `https://api.example.com:443` for `http_request`), so one dead
 * destination opens the circuit for its own calls only.
 *
 * Only keys that failed are held: a key with no failure has no breaker (a
 * call to it costs one map lookup), a success drops a closed key's breaker,
 * and a breaker that closes after its reset interval is dropped. At most
 * `maxKeys` are held; a new failing key then replaces the least recently
 * failed key whose circuit is closed, and while every held circuit is open a
 * new key is not tracked (its failures count nowhere) until one closes.
 *
 * @module
 */
import { CircuitBreaker, type CircuitState } from "./circuit_breaker.ts";

/** Options of {@linkcode KeyedBreakers}. */
export interface KeyedBreakersOptions {
  /** Consecutive failures of one key that open its circuit. @default 5 */
  threshold?: number;
  /** How long a key's circuit stays open, in ms. @default 30000 */
  resetAfterMs?: number;
  /** Most keys held at once. @default 100 */
  maxKeys?: number;
  /** Called when a key's circuit opens. */
  onOpen?: (
    key: string,
    info: { failureCount: number; threshold: number; resetAfterMs: number },
  ) => void;
  /** Called when a key's circuit closes again. */
  onClose?: (key: string, info: { downtimeMs: number }) => void;
  /**
   * Called when a failing key is not tracked because `maxKeys` circuits are
   * open; once until one of them closes.
   */
  onFull?: (key: string) => void;
  /** Clock. @default Date.now */
  now?: () => number;
}

/** A key whose circuit is open. */
export interface OpenKey {
  key: string;
  /** When it closes, in ms since the epoch. */
  closesAt: number;
}

/** Circuit breakers of one tool, one per key, bounded in number. */
export class KeyedBreakers {
  readonly threshold: number;
  readonly resetAfterMs: number;
  readonly maxKeys: number;
  /** In order of their last failure, least recent first. */
  #breakers = new Map<string, CircuitBreaker>();
  #onOpen: KeyedBreakersOptions["onOpen"];
  #onClose: KeyedBreakersOptions["onClose"];
  #onFull: KeyedBreakersOptions["onFull"];
  #now: () => number;
  #full = false;

  /** @param options Threshold, reset interval, bound, callbacks and clock. */
  constructor(options: KeyedBreakersOptions = {}) {
    const {
      threshold = 5,
      resetAfterMs = 30_000,
      maxKeys = 100,
      onOpen,
      onClose,
      onFull,
      now = Date.now,
    } = options;
    if (!Number.isInteger(maxKeys) || maxKeys < 1) {
      throw new RangeError(`Invalid circuit key bound: ${maxKeys} is not a positive integer`);
    }
    // Checks threshold and interval the way every breaker will.
    new CircuitBreaker({ threshold, resetAfterMs });
    this.threshold = threshold;
    this.resetAfterMs = resetAfterMs;
    this.maxKeys = maxKeys;
    this.#onOpen = onOpen;
    this.#onClose = onClose;
    this.#onFull = onFull;
    this.#now = now;
  }

  /** Keys held (with failures or an open circuit). */
  get size(): number {
    return this.#breakers.size;
  }

  /** The state of `key`'s circuit (`closed` when it has none). */
  state(key: string): CircuitState {
    return this.#breakers.get(key)?.state ?? "closed";
  }

  /** When `key`'s circuit closes, in ms since the epoch (open only). */
  closesAt(key: string): number | undefined {
    return this.#breakers.get(key)?.closesAt;
  }

  /** Records a success of `key`: a closed circuit's breaker is dropped. */
  recordSuccess(key: string): void {
    const breaker = this.#breakers.get(key);
    // An open one stays open (a call that started before it opened succeeded).
    if (breaker?.state === "closed") this.#breakers.delete(key);
  }

  /** Records a failure of `key`; opens its circuit when the threshold is reached. */
  recordFailure(key: string): void {
    let breaker = this.#breakers.get(key);
    if (breaker) {
      // Most recently failed last.
      this.#breakers.delete(key);
      this.#breakers.set(key, breaker);
    } else {
      if (this.#breakers.size >= this.maxKeys && !this.#evictClosed()) {
        if (!this.#full) this.#onFull?.(key);
        this.#full = true;
        return;
      }
      breaker = this.#create(key);
      this.#breakers.set(key, breaker);
    }
    breaker.recordFailure();
  }

  /** The keys whose circuit is open, least recently failed first. */
  open(): OpenKey[] {
    const open: OpenKey[] = [];
    for (const [key, breaker] of this.#breakers) {
      if (breaker.state === "open") open.push({ key, closesAt: breaker.closesAt! });
    }
    return open;
  }

  /** Stops every reset timer (shutdown); the states are kept. */
  dispose(): void {
    for (const breaker of this.#breakers.values()) breaker.dispose();
  }

  /** Drops the least recently failed closed breaker; `false` when all are open. */
  #evictClosed(): boolean {
    for (const [key, breaker] of this.#breakers) {
      if (breaker.state === "closed") {
        this.#breakers.delete(key);
        return true;
      }
    }
    return false;
  }

  #create(key: string): CircuitBreaker {
    const breaker: CircuitBreaker = new CircuitBreaker({
      threshold: this.threshold,
      resetAfterMs: this.resetAfterMs,
      now: this.#now,
      onOpen: (info) => this.#onOpen?.(key, info),
      onClose: (info) => {
        // Closed and idle: nothing left to remember about the key.
        if (this.#breakers.get(key) === breaker) this.#breakers.delete(key);
        this.#full = false;
        this.#onClose?.(key, info);
      },
    });
    return breaker;
  }
}
