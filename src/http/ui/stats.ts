/**
 * Calls per minute and their latency over the last hour, for the console's
 * overview: a ring of 60 one-minute buckets fed by `tool.called` and
 * `tool.failed` on the gateway's bus (this process's calls only).
 *
 * @module
 */
import type { EventBus } from "../../events/mod.ts";

const MINUTE_MS = 60_000;

/** Number of one-minute buckets kept (one hour). */
export const STATS_MINUTES = 60;

/** One minute of calls. */
export interface MinuteStats {
  /** Start of the minute, epoch ms. */
  start: number;
  /** Calls that succeeded. */
  ok: number;
  /** Calls that failed. */
  failed: number;
  /** Mean latency of the successful calls, ms (0 when none). */
  mean_ms: number;
  /** Highest latency of the successful calls, ms. */
  max_ms: number;
}

interface Bucket {
  minute: number;
  ok: number;
  failed: number;
  latencySum: number;
  latencyMax: number;
}

/** The last hour of tool calls, per minute. */
export class CallStats {
  readonly #buckets: Bucket[] = [];
  readonly #now: () => number;

  /** @param now Clock in epoch ms. @default Date.now */
  constructor(now: () => number = Date.now) {
    this.#now = now;
    for (let i = 0; i < STATS_MINUTES; i++) {
      this.#buckets.push({ minute: -1, ok: 0, failed: 0, latencySum: 0, latencyMax: 0 });
    }
  }

  /**
   * Counts the bus's `tool.called` and `tool.failed` events.
   *
   * @returns A function that stops counting.
   */
  follow(bus: EventBus): () => void {
    return bus.subscribe((event) => {
      if (event.type === "tool.called") {
        const latency = (event.data as { latency_ms?: number }).latency_ms ?? 0;
        this.record(true, latency);
      } else if (event.type === "tool.failed") {
        this.record(false, 0);
      }
    });
  }

  #bucket(minute: number): Bucket {
    const bucket = this.#buckets[minute % STATS_MINUTES];
    if (bucket.minute !== minute) {
      bucket.minute = minute;
      bucket.ok =
        bucket.failed =
        bucket.latencySum =
        bucket.latencyMax =
          0;
    }
    return bucket;
  }

  /** Counts one call. */
  record(ok: boolean, latencyMs: number): void {
    const bucket = this.#bucket(Math.floor(this.#now() / MINUTE_MS));
    if (ok) {
      bucket.ok++;
      bucket.latencySum += latencyMs;
      bucket.latencyMax = Math.max(bucket.latencyMax, latencyMs);
    } else {
      bucket.failed++;
    }
  }

  /** The last hour, oldest minute first, the current minute last. */
  lastHour(): MinuteStats[] {
    const current = Math.floor(this.#now() / MINUTE_MS);
    const out: MinuteStats[] = [];
    for (let minute = current - STATS_MINUTES + 1; minute <= current; minute++) {
      const bucket = this.#buckets[minute % STATS_MINUTES];
      const live = bucket.minute === minute;
      out.push({
        start: minute * MINUTE_MS,
        ok: live ? bucket.ok : 0,
        failed: live ? bucket.failed : 0,
        mean_ms: live && bucket.ok ? Math.round(bucket.latencySum / bucket.ok) : 0,
        max_ms: live ? bucket.latencyMax : 0,
      });
    }
    return out;
  }
}
