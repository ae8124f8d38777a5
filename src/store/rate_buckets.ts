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
  /**
   * When the bucket will have refilled to its capacity (ms since the epoch),
   * by the rule of its last take. From then on it is the same as a missing
   * bucket (which starts full), so it may be dropped; never before.
   */
  fullMs: number;
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
 * @returns The bucket's next state (with when it will be full again) and the answer.
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
  const after = tokensAfter(tokens);
  return {
    state: {
      tokens: after,
      updatedMs,
      fullMs: updatedMs + (rule.capacity - after) / rule.refillPerMs,
    },
    take: tokensAnswer(tokens, rule),
  };
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

/**
 * Buckets in this process's memory. Past `maxBuckets`, a new bucket first
 * drops every bucket that has refilled to its capacity (the same as a missing
 * one, which starts full), and only those.
 *
 * The bound is soft: when no bucket has refilled, all are kept and the store
 * grows past it. Dropping one that has not refilled (idle for an hour, or the
 * oldest) would hand its caller a full bucket early, more calls than the rule
 * allows (a `1/d` bucket idle for an hour is still empty); refusing calls
 * without a bucket would refuse callers that are within their rate. Buckets
 * are one per limited caller and one per limited tool, so the store grows
 * with the callers seen within a rule's period, and shrinks back once
 * theirs have refilled. The buckets are scanned only once the earliest may
 * have refilled, so while none has, a new bucket costs no scan.
 */
export class MemoryRateLimitStore {
  #buckets = new Map<string, BucketState>();
  #max: number;
  /** No bucket is full before this (a lower bound): until then there is nothing to drop. */
  #firstFullMs = Infinity;

  /** @param maxBuckets How many buckets to keep before dropping those that refilled. */
  constructor(maxBuckets = 10_000) {
    this.#max = maxBuckets;
  }

  /** How many buckets are kept. */
  get size(): number {
    return this.#buckets.size;
  }

  /** Takes a token from the bucket `key` (see `RateLimitStore.take`). */
  take(key: string, rule: RateRule, now: number): Promise<RateTake> {
    const { state, take } = takeToken(this.#buckets.get(key), rule, now);
    if (!this.#buckets.has(key) && this.#buckets.size >= this.#max) this.#dropFull(now);
    this.#buckets.set(key, state);
    this.#firstFullMs = Math.min(this.#firstFullMs, state.fullMs);
    return Promise.resolve(take);
  }

  /** Drops the buckets full by `now` (see `RateLimitStore.sweep`); how many. */
  sweep(now: number): Promise<number> {
    return Promise.resolve(this.#dropFull(now));
  }

  /** Drops the buckets full by `now`; how many. Scans only once one may be. */
  #dropFull(now: number): number {
    if (now < this.#firstFullMs) return 0;
    let dropped = 0;
    let first = Infinity;
    for (const [key, bucket] of this.#buckets) {
      if (bucket.fullMs <= now) {
        this.#buckets.delete(key);
        dropped++;
      } else {
        first = Math.min(first, bucket.fullMs);
      }
    }
    this.#firstFullMs = first;
    return dropped;
  }
}
