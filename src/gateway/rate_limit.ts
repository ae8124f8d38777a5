/**
 * Rate limits: token buckets per caller (an API key's `--rate`, else
 * `limits.per_caller` for keys and OAuth clients) and per tool
 * (`tools.overrides.<tool>.rate`), taken from the store's
 * {@linkcode RateLimitStore} so instances sharing a database share them.
 *
 * This module holds the rate syntax, the bucket math (one function, used by
 * the in-memory buckets and mirrored by the PostgreSQL statement) and the
 * check the call pipeline runs.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { parseRate, RATE_UNITS } from "../rate_syntax.ts";

export { parseRate, RATE_UNITS, rateProblem } from "../rate_syntax.ts";
import type { Caller } from "./caller.ts";
import { describeCaller } from "./caller.ts";
import type { RateLimitStore, RateRule, RateTake } from "../store/mod.ts";

/**
 * The bucket of a rate: `n/<unit>` refills `n` tokens per unit and holds
 * `burst` tokens, by default `n` (one unit's worth).
 *
 * @throws {GatewayError} `USAGE` for a malformed rate or burst.
 */
export function rateRule(rate: string, burst?: number): RateRule {
  const normalized = parseRate(rate, "rate");
  const [count, unit] = normalized.split("/");
  const n = Number(count);
  if (burst !== undefined && !(Number.isInteger(burst) && burst >= 1)) {
    throw new GatewayError("USAGE", `Invalid burst ${burst}: expected a whole number, at least 1`);
  }
  return { capacity: burst ?? n, refillPerMs: n / RATE_UNITS[unit], rate: normalized };
}

/** A rate as config holds it: `"10/s"`, or `{rate, burst}`. */
export type RateSetting = string | { rate: string; burst?: number };

/** The rule of a config setting. */
export function settingRule(setting: RateSetting): RateRule {
  return typeof setting === "string" ? rateRule(setting) : rateRule(setting.rate, setting.burst);
}

/** What the pipeline's check needs of the configuration. */
export interface RateLimitSettings {
  /** The default rate of API keys and OAuth clients without their own. */
  perCaller?: RateSetting;
  /** Rates of tools, by tool name. */
  tools: Readonly<Record<string, RateSetting | undefined>>;
}

/**
 * The bucket of a caller: API keys by id, OAuth clients by client, with the
 * key's own `rate`, else the default. The administrator and local callers
 * have none.
 */
export function callerBucket(
  caller: Caller | undefined,
  perCaller: RateRule | undefined,
): { key: string; rule: RateRule } | undefined {
  if (!caller || (caller.kind !== "key" && caller.kind !== "oauth")) return undefined;
  const rule = caller.rate ? rateRule(caller.rate) : perCaller;
  if (!rule) return undefined;
  const id = caller.kind === "key" ? caller.id ?? caller.name : caller.name ?? caller.id;
  return { key: `caller:${caller.kind}:${id ?? "?"}`, rule };
}

/** Checks calls against the buckets of their caller and tool. */
export class RateLimiter {
  #store: RateLimitStore;
  #clock: () => number;
  #perCaller: RateRule | undefined;
  #tools = new Map<string, RateRule>();
  #callerRules = new Map<string, RateRule>();

  /**
   * @param store Where buckets live.
   * @param settings The configured limits (checked when config is loaded).
   * @param clock Wall-clock time in ms (shared by instances).
   */
  constructor(store: RateLimitStore, settings: RateLimitSettings, clock: () => number) {
    this.#store = store;
    this.#clock = clock;
    this.#perCaller = settings.perCaller === undefined
      ? undefined
      : settingRule(settings.perCaller);
    for (const [tool, setting] of Object.entries(settings.tools)) {
      if (setting !== undefined) this.#tools.set(tool, settingRule(setting));
    }
  }

  /** Whether any call could be limited (no store round trip otherwise). */
  get active(): boolean {
    return this.#perCaller !== undefined || this.#tools.size > 0;
  }

  /**
   * Takes a token from the caller's bucket, then from the tool's.
   *
   * @throws {GatewayError} `RATE_LIMITED` with `details.retry_after_ms`.
   */
  async check(tool: string, caller: Caller | undefined): Promise<void> {
    const now = this.#clock();
    const own = this.#callerBucket(caller);
    if (own) {
      const take = await this.#store.take(own.key, own.rule, now);
      if (!take.ok) throw limited(tool, `${describeCaller(caller!)} is`, own.rule, take, "caller");
    }
    const rule = this.#tools.get(tool);
    if (rule) {
      const take = await this.#store.take(`tool:${tool}`, rule, now);
      if (!take.ok) throw limited(tool, `tool ${tool} is`, rule, take, "tool");
    }
  }

  #callerBucket(caller: Caller | undefined): { key: string; rule: RateRule } | undefined {
    if (!caller?.rate) return callerBucket(caller, this.#perCaller);
    let rule = this.#callerRules.get(caller.rate);
    if (!rule) {
      rule = rateRule(caller.rate);
      if (this.#callerRules.size > 100) this.#callerRules.clear();
      this.#callerRules.set(caller.rate, rule);
    }
    return callerBucket({ ...caller, rate: undefined }, rule);
  }
}

function limited(
  tool: string,
  who: string,
  rule: RateRule,
  take: RateTake,
  limit: "caller" | "tool",
): GatewayError {
  const seconds = Math.max(1, Math.ceil(take.retryAfterMs / 1000));
  return new GatewayError(
    "RATE_LIMITED",
    `Too many calls: ${who} limited to ${rule.rate}` +
      (rule.capacity !== rateCount(rule.rate) ? ` (burst ${rule.capacity})` : "") +
      `; retry ${tool} in ${seconds} s (${take.retryAfterMs} ms)`,
    {
      details: {
        tool,
        limit,
        rate: rule.rate,
        retry_after_ms: take.retryAfterMs,
        // How often the bucket lets a call through once empty: to space out calls that wait.
        token_interval_ms: Math.ceil(1 / rule.refillPerMs),
      },
    },
  );
}

function rateCount(rate: string): number {
  return Number(rate.split("/")[0]);
}
