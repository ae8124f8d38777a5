/**
 * Token buckets: the bucket math (one function, used by the in-memory
 * buckets and mirrored by the PostgreSQL adapter's statement) and buckets in
 * one process's memory, for the Deno KV adapter (one server per data
 * directory).
 *
 * @module
 */

/** A token bucket's shape: how many tokens it holds at most and how fast it refills. */
export interface RateRule {
  /** The most tokens the bucket holds (the burst). */
  capacity: number;
  /** Tokens added per ms. */
  refillPerMs: number;
  /** The rate as written (`10/s`), for messages. */
  rate: string;
}

/** A bucket's state. */
export interface BucketState {
  /** Tokens left (fractional while refilling). */
  tokens: number;
  /** When `tokens` was computed, in ms since the epoch. */
  updatedMs: number;
}

/** The answer of taking one token. */
export interface RateTake {
  /** Whether a token was taken (the call may go on). */
  ok: boolean;
  /** Whole tokens left after this take. */
  remaining: number;
  /** When refused, ms until one token is there; 0 when taken. */
  retryAfterMs: number;
}

/** Tolerance of the float arithmetic: a bucket at 0.9999999999 tokens holds one. */
export const TOKEN_EPSILON = 1e-9;

/**
 * Refills a bucket by the time elapsed (never backwards: a clock behind the
 * bucket's adds nothing) up to its capacity, then takes one token if there
 * is one. A missing bucket starts full.
 *
 * @returns The bucket's next state and the answer.
 */
export function takeToken(
  bucket: BucketState | undefined,
  rule: RateRule,
  now: number,
): { state: BucketState; take: RateTake } {
  const elapsed = bucket ? Math.max(0, now - bucket.updatedMs) : 0;
  const tokens = bucket
    ? Math.min(rule.capacity, bucket.tokens + elapsed * rule.refillPerMs)
    : rule.capacity;
  const updatedMs = bucket ? Math.max(bucket.updatedMs, now) : now;
  return { state: { tokens: tokensAfter(tokens), updatedMs }, take: tokensAnswer(tokens, rule) };
}

function tokensAfter(tokens: number): number {
  return tokens >= 1 - TOKEN_EPSILON ? Math.max(0, tokens - 1) : tokens;
}

/** The answer for a bucket that held `tokens` before the take. */
export function tokensAnswer(tokens: number, rule: RateRule): RateTake {
  if (tokens >= 1 - TOKEN_EPSILON) {
    return {
      ok: true,
      remaining: Math.floor(Math.max(0, tokens - 1) + TOKEN_EPSILON),
      retryAfterMs: 0,
    };
  }
  return {
    ok: false,
    remaining: 0,
    retryAfterMs: Math.max(1, Math.ceil((1 - tokens) / rule.refillPerMs)),
  };
}

/** Buckets in this process's memory, at most `maxBuckets` (full ones are dropped first). */
export class MemoryRateLimitStore {
  #buckets = new Map<string, BucketState>();
  #max: number;

  /** @param maxBuckets How many buckets to keep before dropping those that refilled. */
  constructor(maxBuckets = 10_000) {
    this.#max = maxBuckets;
  }

  take(key: string, rule: RateRule, now: number): Promise<RateTake> {
    const { state, take } = takeToken(this.#buckets.get(key), rule, now);
    if (!this.#buckets.has(key) && this.#buckets.size >= this.#max) this.#evict(now);
    this.#buckets.set(key, state);
    return Promise.resolve(take);
  }

  /** Drops buckets idle for an hour (a bucket refilled since is the same as none), else the oldest. */
  #evict(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (now - bucket.updatedMs > 3_600_000) this.#buckets.delete(key);
    }
    if (this.#buckets.size >= this.#max) {
      const oldest = this.#buckets.keys().next().value;
      if (oldest !== undefined) this.#buckets.delete(oldest);
    }
  }
}
