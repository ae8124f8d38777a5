/**
 * Backpressure for incoming endpoints: how many accepted payloads wait for
 * their handler, per endpoint and in all, and whether one more may be
 * accepted. Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";

/** How long completions are counted to estimate the drain rate, in ms. */
const DRAIN_WINDOW_MS = 10_000;

/** Bounds of a `Retry-After` answer, in seconds. */
const RETRY_AFTER_MIN_S = 1;
const RETRY_AFTER_MAX_S = 60;

/** A place in the queue held by a payload being accepted. */
export interface Admission {
  /** The job is durable: it now counts as waiting. */
  accepted(): void;
  /** The accept failed: the place is free again. */
  abandoned(): void;
}

/** Counts of waiting jobs and the limits they are held to. */
export class PendingJobs {
  #perEndpoint: number;
  #total: number;
  #now: () => number;
  /** Jobs waiting in the store, by endpoint (as last counted, plus accepts, minus completions). */
  #stored = new Map<string, number>();
  #storedTotal = 0;
  /** Places held by accepts in flight, by endpoint. */
  #accepting = new Map<string, number>();
  #acceptingTotal = 0;
  /** Completions in the drain window, counted per second: [epoch second, count], oldest first. */
  #completed: [number, number][] = [];

  /**
   * @param perEndpoint `incoming.max_pending_per_endpoint`
   * @param total `incoming.max_pending`
   * @param now Clock in epoch ms.
   */
  constructor(perEndpoint: number, total: number, now: () => number) {
    this.#perEndpoint = perEndpoint;
    this.#total = total;
    this.#now = now;
  }

  /** Jobs waiting for one endpoint's handler (or all, without an id), accepts in flight included. */
  waiting(endpointId?: string): number {
    if (endpointId === undefined) return this.#storedTotal + this.#acceptingTotal;
    return (this.#stored.get(endpointId) ?? 0) + (this.#accepting.get(endpointId) ?? 0);
  }

  /** Replaces the stored counts with the store's (at start, and regularly when instances share it). */
  replace(counts: Record<string, number>): void {
    this.#stored = new Map(Object.entries(counts));
    this.#storedTotal = Object.values(counts).reduce((sum, n) => sum + n, 0);
  }

  /**
   * Holds a place for one payload of `endpointId`.
   *
   * @throws {GatewayError} `QUEUE_FULL` with `details.retry_after_s` when the
   * endpoint's or the total bound is reached.
   */
  admit(endpointId: string, path: string): Admission {
    const endpoint = this.waiting(endpointId);
    const total = this.waiting();
    if (endpoint >= this.#perEndpoint || total >= this.#total) {
      const [waiting, limit, key] = endpoint >= this.#perEndpoint
        ? [endpoint, this.#perEndpoint, "incoming.max_pending_per_endpoint"]
        : [total, this.#total, "incoming.max_pending"];
      const retryAfter = this.retryAfterS(limit);
      throw new GatewayError(
        "QUEUE_FULL",
        `Queue full: ${waiting} payloads of ${path} wait for their handler (limit ${limit}, ` +
          `${key}); retry after ${retryAfter} s`,
        { details: { retry_after_s: retryAfter, waiting, limit } },
      );
    }
    this.#adjust(this.#accepting, endpointId, 1);
    this.#acceptingTotal++;
    let settled = false;
    const release = () => {
      if (settled) return false;
      settled = true;
      this.#adjust(this.#accepting, endpointId, -1);
      this.#acceptingTotal--;
      return true;
    };
    return {
      accepted: () => {
        if (!release()) return;
        this.#adjust(this.#stored, endpointId, 1);
        this.#storedTotal++;
      },
      abandoned: () => void release(),
    };
  }

  /** `count` jobs of `endpointId` left the queue (done, failed, or gone). */
  completed(endpointId: string, count = 1): void {
    const before = this.#stored.get(endpointId) ?? 0;
    const taken = Math.min(before, count);
    this.#adjust(this.#stored, endpointId, -taken);
    this.#storedTotal -= taken;
    const second = Math.floor(this.#now() / 1000);
    const last = this.#completed.at(-1);
    if (last && last[0] === second) last[1] += count;
    else this.#completed.push([second, count]);
    this.#trim(this.#now());
  }

  /**
   * Seconds until a tenth of `limit` has drained at the rate handlers
   * finished jobs over the last 10 s (1 to 60).
   */
  retryAfterS(limit: number): number {
    const now = this.#now();
    this.#trim(now);
    const done = this.#completed.reduce((sum, [, count]) => sum + count, 0);
    const perS = done / (DRAIN_WINDOW_MS / 1000);
    if (perS <= 0) return RETRY_AFTER_MAX_S;
    const seconds = Math.ceil(Math.max(1, limit / 10) / perS);
    return Math.min(RETRY_AFTER_MAX_S, Math.max(RETRY_AFTER_MIN_S, seconds));
  }

  #trim(now: number): void {
    const oldest = Math.floor((now - DRAIN_WINDOW_MS) / 1000);
    let drop = 0;
    while (drop < this.#completed.length && this.#completed[drop][0] <= oldest) drop++;
    if (drop) this.#completed.splice(0, drop);
  }

  #adjust(map: Map<string, number>, id: string, delta: number): void {
    const next = (map.get(id) ?? 0) + delta;
    if (next > 0) map.set(id, next);
    else map.delete(id);
  }
}
