/**
 * The syntax of a rate limit (`10/s`, `600/m`, `1000/h`, `5000/d`): what
 * config validation, API keys and the rate limiter share. A leaf: it
 * imports nothing of toolgate but its errors, so the configuration can
 * check rates without importing the limiter (and through it the store).
 *
 * @module
 */
import { GatewayError } from "./errors/mod.ts";

/** Units of a rate (`10/s`), in ms. */
export const RATE_UNITS: Readonly<Record<string, number>> = Object.freeze({
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
});

const RATE_RE = /^\s*(\d{1,7})\s*\/\s*([a-z]+)\s*$/;

/**
 * Checks a rate limit (`10/s`, `600/m`, `1000/h`, `5000/d`).
 *
 * @returns The rate, normalized (`10/s`).
 * @throws {GatewayError} `USAGE` naming `field` and the form.
 */
export function parseRate(raw: string, field = "--rate"): string {
  const problem = rateProblem(raw);
  if (problem) {
    throw new GatewayError("USAGE", `Invalid ${field} ${JSON.stringify(raw)}: ${problem}`);
  }
  const match = RATE_RE.exec(raw)!;
  return `${Number(match[1])}/${match[2]}`;
}

/** What is wrong with a rate, or `undefined` when it is one (for config validation). */
export function rateProblem(raw: string): string | undefined {
  const match = RATE_RE.exec(raw);
  if (!match || Number(match[1]) < 1 || !(match[2] in RATE_UNITS)) {
    return "use <calls>/<s|m|h|d> with at least 1 call, e.g. 10/s or 1000/h";
  }
  return undefined;
}
