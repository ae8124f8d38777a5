/**
 * An endpoint's own rate limit (`rate_limit_per_s`): a token bucket per
 * endpoint, refusing payloads past it with `429`. Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { IncomingWebhook } from "../store/mod.ts";

interface Bucket {
  tokens: number;
  updatedAt: number;
}

/** The token buckets of the endpoints that have a rate limit. */
export class EndpointRateLimit {
  #buckets = new Map<string, Bucket>();
  #now: () => number;

  /** @param now Clock in ms. */
  constructor(now: () => number) {
    this.#now = now;
  }

  /**
   * Takes a token for one payload to `endpoint` (nothing without a limit).
   *
   * @throws {GatewayError} `RATE_LIMITED` with the seconds to wait.
   */
  take(endpoint: IncomingWebhook): void {
    const rate = endpoint.rate_limit_per_s;
    if (!rate) return;
    const now = this.#now();
    const capacity = Math.max(1, rate);
    const bucket = this.#buckets.get(endpoint.id) ?? { tokens: capacity, updatedAt: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.updatedAt) / 1000) * rate);
    bucket.updatedAt = now;
    this.#buckets.set(endpoint.id, bucket);
    if (bucket.tokens < 1) {
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / rate));
      throw new GatewayError(
        "RATE_LIMITED",
        `Too many requests to ${endpoint.path}: the limit is ${rate}/s; retry after ${retryAfter} s`,
        { details: { retry_after_s: retryAfter } },
      );
    }
    bucket.tokens -= 1;
  }
}
