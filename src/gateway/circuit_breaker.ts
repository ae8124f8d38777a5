/**
 * A per-tool circuit breaker: opens after `threshold` consecutive failures,
 * rejects fast while open, and closes by itself after `resetAfterMs`.
 *
 * @module
 */

/** Circuit state as shown in `tool.failed` (`circuit_state`). */
export type CircuitState = "closed" | "open";

/** Options of {@linkcode CircuitBreaker}. */
export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. @default 5 */
  threshold?: number;
  /** How long the circuit stays open, in ms. @default 30000 */
  resetAfterMs?: number;
  /** Called when the circuit opens. */
  onOpen?: (info: { failureCount: number; threshold: number; resetAfterMs: number }) => void;
  /** Called when the circuit closes again. */
  onClose?: (info: { downtimeMs: number }) => void;
  /** Clock. @default Date.now */
  now?: () => number;
}

/** One tool's circuit breaker. */
export class CircuitBreaker {
  readonly threshold: number;
  readonly resetAfterMs: number;
  #failures = 0;
  #openedAt: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #onOpen: CircuitBreakerOptions["onOpen"];
  #onClose: CircuitBreakerOptions["onClose"];
  #now: () => number;

  /** @param options Threshold, reset interval, callbacks and clock. */
  constructor(options: CircuitBreakerOptions = {}) {
    const { threshold = 5, resetAfterMs = 30_000, onOpen, onClose, now = Date.now } = options;
    if (!Number.isInteger(threshold) || threshold < 1) {
      throw new RangeError(`Invalid circuit threshold: ${threshold} is not a positive integer`);
    }
    if (!(resetAfterMs > 0)) {
      throw new RangeError(`Invalid circuit reset interval: ${resetAfterMs} is not positive`);
    }
    this.threshold = threshold;
    this.resetAfterMs = resetAfterMs;
    this.#onOpen = onOpen;
    this.#onClose = onClose;
    this.#now = now;
  }

  /** Current state. */
  get state(): CircuitState {
    return this.#openedAt === undefined ? "closed" : "open";
  }

  /** Consecutive failures counted so far. */
  get failureCount(): number {
    return this.#failures;
  }

  /** When the circuit will close, in ms since the epoch (open only). */
  get closesAt(): number | undefined {
    return this.#openedAt === undefined ? undefined : this.#openedAt + this.resetAfterMs;
  }

  /** Records a success: the consecutive-failure count starts again. */
  recordSuccess(): void {
    this.#failures = 0;
  }

  /** Records a failure; opens the circuit when the threshold is reached. */
  recordFailure(): void {
    if (this.#openedAt !== undefined) return;
    this.#failures++;
    if (this.#failures < this.threshold) return;
    this.#openedAt = this.#now();
    this.#timer = setTimeout(() => this.#close(), this.resetAfterMs);
    this.#onOpen?.({
      failureCount: this.#failures,
      threshold: this.threshold,
      resetAfterMs: this.resetAfterMs,
    });
  }

  #close(): void {
    if (this.#openedAt === undefined) return;
    const downtimeMs = Math.max(0, this.#now() - this.#openedAt);
    this.#openedAt = undefined;
    this.#timer = undefined;
    this.#failures = 0;
    this.#onClose?.({ downtimeMs });
  }

  /** Stops the reset timer (shutdown); the state is kept. */
  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
