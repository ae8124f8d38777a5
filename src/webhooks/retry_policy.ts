/**
 * When a failed delivery is tried again: the spec's default schedule (1, 2,
 * 4, 8, 16 × `retry_base_ms`), a webhook's own schedule
 * (`--retry-schedule 5s,5m,30m,2h,5h,10h,10h`), and a receiver's
 * `Retry-After` on 429 and 503.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { formatDuration, parseDuration } from "../duration.ts";

/** Retries of the default schedule; the attempt after the last retry goes to the DLQ. */
export const MAX_RETRIES = 5;

/** Largest jitter added to a retry delay, as a fraction of it. */
export const RETRY_JITTER = 0.1;

/** Most retries a webhook's own schedule may have. */
export const MAX_SCHEDULE_RETRIES = 30;

/** Longest single delay of a webhook's own schedule: 7 days. */
export const MAX_SCHEDULE_DELAY_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * The delay before retry `retry` (1..5) of the default schedule:
 * `2^(retry-1) × baseMs`, plus up to 10 % jitter.
 *
 * @param random A number in [0, 1) choosing the jitter.
 */
export function retryDelayMs(retry: number, baseMs: number, random: number): number {
  const delay = baseMs * 2 ** (retry - 1);
  return Math.round(delay * (1 + RETRY_JITTER * random));
}

/** What {@linkcode nextRetryDelayMs} needs to know of a failed attempt. */
export interface RetryInput {
  /** The 1-based number of the attempt that just failed. */
  attempt: number;
  /** The webhook's own delays in ms (retry n waits `schedule[n-1]`); absent: the default. */
  schedule?: readonly number[];
  /** `webhooks.retry_base_ms`, the unit of the default schedule. */
  baseMs: number;
  /** A number in [0, 1) choosing the jitter. */
  random: number;
  /** The receiver's `Retry-After` in ms, when it answered 429 or 503 with one. */
  retryAfterMs?: number;
  /** Upper bound on `retryAfterMs` (`webhooks.retry_after_max_ms`). */
  retryAfterMaxMs: number;
}

/**
 * The wait before the next attempt after attempt `attempt` failed, or
 * `null` when the schedule is spent and the delivery goes to the DLQ.
 * A receiver's `Retry-After` (capped at `retryAfterMaxMs`) lengthens the
 * wait, never shortens it, and never adds attempts.
 *
 * @example
 * ```ts
 * nextRetryDelayMs({ attempt: 1, baseMs: 1000, random: 0, retryAfterMaxMs: 3_600_000 }); // 1000
 * nextRetryDelayMs({ attempt: 6, baseMs: 1000, random: 0, retryAfterMaxMs: 3_600_000 }); // null
 * ```
 */
export function nextRetryDelayMs(input: RetryInput): number | null {
  const { attempt, schedule, baseMs, random, retryAfterMs, retryAfterMaxMs } = input;
  const retries = schedule ? schedule.length : MAX_RETRIES;
  if (attempt > retries) return null;
  const delay = schedule
    ? Math.round(schedule[attempt - 1] * (1 + RETRY_JITTER * random))
    : retryDelayMs(attempt, baseMs, random);
  if (retryAfterMs === undefined) return delay;
  return Math.max(delay, Math.min(retryAfterMs, retryAfterMaxMs));
}

/** How many attempts a delivery gets in all (the first and every retry). */
export function totalAttempts(schedule?: readonly number[]): number {
  return (schedule ? schedule.length : MAX_RETRIES) + 1;
}

/**
 * Reads a `Retry-After` value: delay-seconds or an HTTP date.
 *
 * @param now Epoch milliseconds, for a date.
 * @returns Milliseconds from `now` (0 for a date in the past), or `undefined` when unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (typeof value !== "string") return undefined;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * Parses a webhook's retry schedule, `5s,5m,30m,2h,5h,10h,10h`: the waits
 * before each retry, in order; their number is the number of retries.
 *
 * @param flag The option it came from, named in errors. @default "--retry-schedule"
 * @throws {GatewayError} `USAGE` naming the bad entry, the limits and an example.
 */
export function parseRetrySchedule(text: string, flag = "--retry-schedule"): number[] {
  const parts = text.split(",").map((part) => part.trim());
  if (parts.length === 0 || parts.some((part) => part === "")) {
    throw new GatewayError(
      "USAGE",
      `Invalid ${flag} "${text}": expected comma-separated delays, e.g. 5s,5m,30m,2h,5h,10h,10h`,
    );
  }
  if (parts.length > MAX_SCHEDULE_RETRIES) {
    throw new GatewayError(
      "USAGE",
      `Invalid ${flag}: ${parts.length} delays, at most ${MAX_SCHEDULE_RETRIES} retries are allowed`,
    );
  }
  return parts.map((part) => {
    const ms = parseDuration(part, flag);
    if (ms < 1 || ms > MAX_SCHEDULE_DELAY_MS) {
      throw new GatewayError(
        "USAGE",
        `Invalid ${flag} delay "${part}": each delay must be between 1ms and 7d`,
      );
    }
    return ms;
  });
}

/** A schedule as people write it: `5s,5m,30m,2h`. */
export function formatRetrySchedule(schedule: readonly number[]): string {
  return schedule.map(formatDuration).join(",");
}
