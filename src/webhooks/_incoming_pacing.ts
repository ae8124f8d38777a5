/**
 * Pacing of a handler whose rate limit refuses calls: the jobs put off wait
 * for slots one call apart instead of all trying again at once. Private to
 * `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { IncomingAttempt } from "../store/mod.ts";

/** A handler whose rate limit put calls off: when its next call may go, and the spacing. */
interface Paced {
  /** The next free slot (epoch ms of `now`). */
  next: number;
  /** Time between two calls the limit lets through, in ms. */
  spacingMs: number;
}

/** The slots of handlers whose rate limit refused a call, until their next slot has passed. */
export class HandlerPacing {
  #paced = new Map<string, Paced>();
  #log: (message: string) => void;
  #now: () => number;

  /**
   * @param log Where a handler's first put-off call is said.
   * @param now Clock in ms.
   */
  constructor(log: (message: string) => void, now: () => number) {
    this.#log = log;
    this.#now = now;
  }

  /**
   * A slot for a call of `handler` after its rate limit refused one at `now`
   * (`waitMs` until a call may go): the first free one, then the next, one
   * `spacingMs` (the limit's time per call) apart, so the jobs put off wait in
   * turn instead of all trying again at once.
   */
  pace(handler: string, now: number, limit: { waitMs: number; spacingMs: number }): number {
    const spacingMs = Math.max(1, limit.spacingMs);
    const paced = this.#paced.get(handler);
    const slot = Math.max(
      now + Math.max(1, limit.waitMs),
      paced && paced.next > now ? paced.next : 0,
    );
    this.#paced.set(handler, { next: slot + spacingMs, spacingMs });
    if (!paced || paced.next <= now) {
      this.#log(
        `incoming: handler ${handler} is over its rate limit; its jobs wait ${spacingMs} ms apart`,
      );
    }
    return slot;
  }

  /** The slot of a job of `handler` while its rate limit is known to refuse calls; else none. */
  slotFor(handler: string): number | undefined {
    const paced = this.#paced.get(handler);
    const now = this.#now();
    if (!paced || paced.next - paced.spacingMs <= now) {
      if (paced && paced.next <= now) this.#paced.delete(handler);
      return undefined;
    }
    const slot = paced.next;
    paced.next = slot + paced.spacingMs;
    return slot;
  }
}

/**
 * What a `RATE_LIMITED` refusal names, in ms: the wait for the next call and
 * the time between calls once the bucket is empty; `undefined` for other errors.
 */
export function rateLimitWait(error: unknown): { waitMs: number; spacingMs: number } | undefined {
  if (!(error instanceof GatewayError) || error.code !== "RATE_LIMITED") return undefined;
  const details = error.details as
    | { retry_after_ms?: unknown; token_interval_ms?: unknown }
    | undefined;
  const ms = (value: unknown) =>
    typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined;
  const waitMs = ms(details?.retry_after_ms) ?? 1000;
  return { waitMs, spacingMs: ms(details?.token_interval_ms) ?? waitMs };
}

/** The payload log's note for a job put off, without a call, until `slot`. */
export function rateLimited(handler: string, slot: number, now: number): IncomingAttempt {
  return {
    at: new Date(now).toISOString(),
    code: "RATE_LIMITED",
    message: `Handler ${handler} is over its rate limit: the job waits ${
      Math.max(0, Math.round(slot - now))
    } ms for its turn`,
  };
}
