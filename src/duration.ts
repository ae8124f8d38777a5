/**
 * Durations as people type them (`24h`, `5m`, `1500ms`): rotation overlaps
 * retry schedules, audit checkpoint intervals and retention.
 *
 * @module
 */
import { GatewayError } from "./errors/mod.ts";

/** Milliseconds per unit. */
const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/**
 * Parses a duration such as `24h`, `30m`, `90s`, `2d`, `1500ms` or `0`.
 *
 * @param field How the caller names the field in messages (`--overlap`).
 * @returns Milliseconds.
 * @throws {GatewayError} `USAGE` when it is not one.
 */
export function parseDuration(raw: string, field = "duration"): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!match || (match[2] === undefined && Number(match[1]) !== 0)) {
    throw new GatewayError(
      "USAGE",
      `Invalid ${field} "${raw}": expected a number and a unit (ms, s, m, h, d), e.g. 24h, or 0`,
    );
  }
  return Math.round(Number(match[1]) * UNIT_MS[match[2] ?? "ms"]);
}

/** A duration in the largest unit that divides it: `90000` → `90s`, `7200000` → `2h`. */
export function formatDuration(ms: number): string {
  for (const unit of ["d", "h", "m", "s"]) {
    if (ms >= UNIT_MS[unit] && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
