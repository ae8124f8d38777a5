/**
 * Small numeric helpers shared by the benchmark scenarios. Private to
 * `scripts/bench`.
 *
 * @module
 */

/** Events per second, rounded. */
export function rate(count: number, ms: number): number {
  return ms > 0 ? Math.round(count / (ms / 1000)) : 0;
}

/** The `p` quantile (0..1) of ascending `sorted` values, rounded to µs; 0 when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (!sorted.length) return 0;
  const value = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
  return round3(value);
}

/** Median and 99th percentile of `samples` (ms), sorting a copy. */
export function latency(samples: readonly number[]): { p50_ms: number; p99_ms: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50_ms: percentile(sorted, 0.5), p99_ms: percentile(sorted, 0.99) };
}

/** `value` rounded to three decimals. */
export function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/** `a / b` rounded to two decimals; 0 when `b` is 0. */
export function ratio(a: number, b: number): number {
  return b > 0 ? Math.round((a / b) * 100) / 100 : 0;
}
