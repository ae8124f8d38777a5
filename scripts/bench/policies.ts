/**
 * What policies cost a call that needs no approval (issue 36): REST calls of
 * `memory_get` through real servers in the same rounds — one without rules,
 * one with 50 (40 for other tools, 10 for `memory_*` whose CEL expression is
 * evaluated on every call and is false) — and, with
 * `TOOLGATE_BENCH_BEFORE=<checkout>`, that checkout's server without rules
 * (what the per-call path cost before). Pins add nothing per call: they are
 * checked when an upstream's list is read.
 *
 * Run alone: `deno run -A scripts/bench/policies.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { startToolgateHttp, tempDir } from "./_proc.ts";
import { type Latency, type Measured, measureInRounds, roundSizes } from "./_rounds.ts";
import { round3 } from "./_stats.ts";
import { type BenchMode, modeFromArgs } from "./http_server.ts";

/** The result of {@linkcode benchPolicyCost}. */
export interface PolicyCostResult {
  rules: number;
  /** Rules whose expression each call evaluates. */
  evaluated_per_call: number;
  none: { measured: Measured; paced: Latency };
  fifty: { measured: Measured; paced: Latency };
  before?: { measured: Measured; paced: Latency };
  /** `fifty.paced.p50_ms - none.paced.p50_ms`. */
  added_p50_ms: number;
  /** `fifty.cpu_us_per_call - none.cpu_us_per_call`. */
  added_cpu_us: number | null;
  /** `none.paced.p50_ms - before.paced.p50_ms`: this checkout's per-call path against the other's. */
  before_added_p50_ms?: number;
}

/** 50 rules none of which decides `memory_get {key: "bench/…"}`. */
export function fiftyRules(): Record<string, unknown>[] {
  const rules: Record<string, unknown>[] = [];
  for (let i = 0; i < 40; i++) {
    rules.push({
      name: `other-${i}`,
      tools: [`github${i}__*`, `slack_${i}_*`],
      callers: ["key", "oauth"],
      effect: i % 2 ? "deny" : "require_approval",
      ...(i % 2 ? {} : { approvers: ["admin"] }),
    });
  }
  for (let i = 0; i < 10; i++) {
    rules.push({
      name: `notes-${i}`,
      tools: ["memory_*"],
      when: `has(args.key) && args.key.startsWith('secret-${i}/')`,
      effect: "deny",
    });
  }
  return rules;
}

/** Servers without rules and with 50, in alternating rounds. */
export async function benchPolicyCost({ mode }: { mode: BenchMode }): Promise<PolicyCostResult> {
  const { rounds, durationMs, warmupMs, pacedMs } = roundSizes(mode);
  await using noneHome = await tempDir("policies-none");
  await using fiftyHome = await tempDir("policies-fifty");
  await Deno.writeTextFile(
    `${fiftyHome.path}/config.json`,
    JSON.stringify({ policies: fiftyRules() }),
  );
  await using none = await startToolgateHttp(noneHome.path);
  await using fifty = await startToolgateHttp(fiftyHome.path);
  const beforeRoot = Deno.env.get("TOOLGATE_BENCH_BEFORE")?.replace(/\/+$/, "");
  await using beforeHome = await tempDir("policies-before");
  const before = beforeRoot
    ? await startToolgateHttp(beforeHome.path, {}, `${beforeRoot}/main.ts`)
    : undefined;
  try {
    const options = {
      rounds,
      durationMs,
      warmupMs,
      pacedMs,
      pacedPerS: 100,
      connections: 64,
      path: "/tools/memory_get",
      body: JSON.stringify({ key: "bench/missing-key" }),
    };
    const measured: Record<string, { measured: Measured; paced: Latency }> = before
      ? await measureInRounds({ none, fifty, before }, options)
      : await measureInRounds({ none, fifty }, options);
    const noneCpu = measured.none.measured.cpu_us_per_call;
    const fiftyCpu = measured.fifty.measured.cpu_us_per_call;
    const then = measured.before;
    return {
      rules: 50,
      evaluated_per_call: 10,
      none: measured.none,
      fifty: measured.fifty,
      ...(then ? { before: then } : {}),
      added_p50_ms: round3(measured.fifty.paced.p50_ms - measured.none.paced.p50_ms),
      added_cpu_us: noneCpu !== null && fiftyCpu !== null ? fiftyCpu - noneCpu : null,
      ...(then
        ? { before_added_p50_ms: round3(measured.none.paced.p50_ms - then.paced.p50_ms) }
        : {}),
    };
  } finally {
    await before?.[Symbol.asyncDispose]();
  }
}

if (import.meta.main) {
  console.log(JSON.stringify(await benchPolicyCost({ mode: modeFromArgs(Deno.args) }), null, 2));
}
