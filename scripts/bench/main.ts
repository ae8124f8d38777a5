/**
 * `deno task bench`: runs every benchmark scenario against its baseline in
 * the same run on the same machine, prints each figure next to its baseline
 * as a ratio with the target, and writes everything to `bench/results.json`.
 *
 * ```sh
 * deno task bench            # full run, a few minutes (bounded: < 10 min)
 * deno task bench --quick    # shorter phases (< 2 min)
 * deno task bench --smoke    # seconds per scenario: only checks that each runs
 * deno task bench --only=rest,mcp_stdio --out=/tmp/r.json
 * ```
 *
 * Exit code 1 when a scenario failed to run; speed is never asserted.
 * `BENCHMARKS.md` describes the scenarios and the latest results.
 *
 * @module
 */
import { benchAudit } from "./audit.ts";
import {
  benchIncoming,
  type BenchMode,
  benchRest,
  benchWebhookLatency,
  REST_TOOL,
} from "./http_server.ts";
import { benchMcpHttp, benchMcpStdio, benchStartup } from "./mcp.ts";
import { ROOT } from "./_proc.ts";
import { benchWebhooks } from "./webhooks.ts";
import { VERSION } from "../../src/version.ts";

/** One figure: toolgate's value, its baseline, the ratio and the target. */
export interface Figure {
  scenario: string;
  /** What is measured, e.g. `req/s`. */
  figure: string;
  toolgate: number;
  /** Name of the baseline, e.g. `bare Hono`. */
  baseline_name: string;
  baseline: number | null;
  /** `toolgate / baseline` (or the difference for `added` figures). */
  ratio: number | null;
  /** Target, as text, e.g. `≥ 0.5×`; empty when none. */
  target: string;
  /** Whether the target is met; `null` without a target. */
  met: boolean | null;
}

/** A scenario: a name and how to run it. */
interface Scenario {
  name: string;
  run(mode: BenchMode): Promise<unknown>;
  figures(result: never): Figure[];
}

/** What `bench/results.json` holds. */
export interface BenchResults {
  version: string;
  started_at: string;
  mode: BenchMode;
  machine: Record<string, string | number>;
  duration_s: number;
  scenarios: Record<string, { result?: unknown; error?: string; duration_s: number }>;
  figures: Figure[];
}

function figure(
  scenario: string,
  name: string,
  toolgate: number,
  baselineName: string,
  baseline: number | null,
  target?: { min?: number; max?: number },
): Figure {
  const ratio = baseline ? Math.round((toolgate / baseline) * 100) / 100 : null;
  let text = "";
  let met: boolean | null = null;
  if (target?.min !== undefined) {
    text = `≥ ${target.min}×`;
    met = ratio !== null && ratio >= target.min;
  } else if (target?.max !== undefined) {
    text = `≤ ${target.max}×`;
    met = ratio !== null && ratio <= target.max;
  }
  return {
    scenario,
    figure: name,
    toolgate,
    baseline_name: baselineName,
    baseline,
    ratio,
    target: text,
    met,
  };
}

/** An absolute target on a difference (ms), e.g. added latency < 0.2 ms. */
function added(scenario: string, name: string, value: number, limitMs: number): Figure {
  return {
    scenario,
    figure: name,
    toolgate: value,
    baseline_name: "0 webhooks",
    baseline: null,
    ratio: null,
    target: `< ${limitMs} ms`,
    met: value < limitMs,
  };
}

const SCENARIOS: Scenario[] = [
  {
    name: "rest",
    run: (mode) => benchRest({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchRest>>) => [
      figure(
        "rest",
        `POST /tools/${REST_TOOL} req/s`,
        r.toolgate.requests_per_s,
        "bare Hono",
        r.bare_hono.requests_per_s,
        { min: 0.5 },
      ),
      figure(
        "rest",
        `POST /tools/${REST_TOOL} req/s`,
        r.toolgate.requests_per_s,
        "bare Hono + KV read",
        r.bare_hono_read.requests_per_s,
      ),
      figure(
        "rest",
        `POST /tools/${REST_TOOL} req/s`,
        r.toolgate.requests_per_s,
        "bare Hono + KV read + 1 commit/req",
        r.bare_hono_commit.requests_per_s,
      ),
      figure("rest", "p50 ms", r.toolgate.p50_ms, "bare Hono", r.bare_hono.p50_ms),
      figure("rest", "p99 ms", r.toolgate.p99_ms, "bare Hono", r.bare_hono.p99_ms),
    ],
  },
  {
    name: "mcp_stdio",
    run: (mode) => benchMcpStdio({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchMcpStdio>>) => [
      figure(
        "mcp_stdio",
        "sequential calls/s",
        r.toolgate.calls_per_s,
        "bare SDK",
        r.bare_sdk.calls_per_s,
        { min: 0.6 },
      ),
      figure(
        "mcp_stdio",
        "sequential calls/s",
        r.toolgate.calls_per_s,
        "bare SDK + 1 KV commit/call",
        r.bare_sdk_commit.calls_per_s,
      ),
      figure("mcp_stdio", "p50 ms", r.toolgate.p50_ms, "bare SDK", r.bare_sdk.p50_ms),
      figure("mcp_stdio", "p99 ms", r.toolgate.p99_ms, "bare SDK", r.bare_sdk.p99_ms),
    ],
  },
  {
    name: "mcp_http",
    run: (mode) => benchMcpHttp({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchMcpHttp>>) => [
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "bare SDK transport",
        r.bare_sdk.calls_per_s,
        { min: 0.8 },
      ),
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "bare SDK transport + 1 commit/call",
        r.bare_sdk_commit.calls_per_s,
      ),
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "bare SDK transport, JSON replies",
        r.bare_sdk_json.calls_per_s,
      ),
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "supergateway",
        r.supergateway?.calls_per_s ?? null,
        { min: 2 },
      ),
      figure("mcp_http", "p50 ms", r.toolgate.p50_ms, "bare SDK transport", r.bare_sdk.p50_ms),
      figure("mcp_http", "p99 ms", r.toolgate.p99_ms, "bare SDK transport", r.bare_sdk.p99_ms),
    ],
  },
  {
    name: "webhooks",
    run: (mode) => benchWebhooks({ quick: mode !== "full" }),
    figures: (r: Awaited<ReturnType<typeof benchWebhooks>>) =>
      r.phases.flatMap((p) => [
        figure(
          "webhooks",
          `signed deliveries/s, ${p.receivers} receiver(s)`,
          p.dispatcher_per_s,
          "bare signed fetch",
          p.bare_signed_fetch_per_s,
          { min: 0.3 },
        ),
        ...(p.dispatcher_bytes_per_delivery && p.bare_bytes_per_request
          ? [figure(
            "webhooks",
            `KB allocated per delivery, ${p.receivers} receivers`,
            Math.round(p.dispatcher_bytes_per_delivery / 102.4) / 10,
            "bare signed fetch",
            Math.round(p.bare_bytes_per_request / 102.4) / 10,
          )]
          : []),
      ]),
  },
  {
    name: "audit",
    run: (mode) => benchAudit({ quick: mode !== "full" }),
    figures: (r: Awaited<ReturnType<typeof benchAudit>>) => [
      figure(
        "audit",
        "appends/s, 16 concurrent",
        r.append_concurrent_16_per_s,
        "bare KV commits/s",
        r.kv_commits_per_s,
        { min: 3 },
      ),
      figure(
        "audit",
        "appends/s, sequential",
        r.append_sequential_per_s,
        "bare KV commits/s",
        r.kv_commits_per_s,
      ),
      figure(
        "audit",
        "appends/s, 1000 in flight",
        r.append_burst_1000_per_s,
        "bare KV commits/s",
        r.kv_commits_per_s,
      ),
      figure("audit", `verify entries/s (${r.verify_entries})`, r.verify_entries_per_s, "", null),
    ],
  },
  {
    name: "webhook_latency",
    run: (mode) => benchWebhookLatency({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchWebhookLatency>>) => [
      added("webhook_latency", "added p50 ms, 10 webhooks", r.added_p50_ms, 0.2),
      added("webhook_latency", "added p99 ms, 10 webhooks", r.added_p99_ms, 1),
    ],
  },
  {
    name: "incoming",
    run: (mode) => benchIncoming({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchIncoming>>) => [
      figure(
        "incoming",
        "202 accepted/s",
        r.toolgate.requests_per_s,
        "bare Hono",
        r.bare_hono.requests_per_s,
      ),
      figure("incoming", "p99 ms", r.toolgate.p99_ms, "bare Hono", r.bare_hono.p99_ms),
      figure(
        "incoming",
        `handler calls/s draining ${r.backlog_at_end} jobs`,
        r.handled_per_s,
        "",
        null,
      ),
    ],
  },
  {
    name: "startup",
    run: (mode) => benchStartup({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchStartup>>) => [
      figure(
        "startup",
        "stdio cold start ms",
        r.toolgate_cold_start_ms,
        "bare SDK",
        r.bare_sdk_cold_start_ms,
        { max: 1.3 },
      ),
      figure(
        "startup",
        "idle RSS MiB",
        r.toolgate_idle_rss_mib,
        "bare SDK",
        r.bare_sdk_idle_rss_mib,
        { max: 1.5 },
      ),
    ],
  },
];

/** The optional MCP upstream scenario, when `mcp_upstream.ts` exists. */
async function upstreamScenario(): Promise<Scenario | null> {
  const url = new URL("./mcp_upstream.ts", import.meta.url);
  try {
    await Deno.stat(url);
  } catch {
    return null;
  }
  const module = await import(url.href) as {
    benchMcpUpstream?: (options: { quick: boolean }) => Promise<unknown>;
  };
  const run = module.benchMcpUpstream;
  if (!run) return null;
  return {
    name: "mcp_upstream",
    run: (mode) => run({ quick: mode !== "full" }),
    figures: (result: unknown) => upstreamFigures(result),
  };
}

interface UpstreamResult {
  direct?: { calls_per_s: number; p50_ms: number };
  via_gateway?: { calls_per_s: number; p50_ms: number };
}

/** Figures of the MCP upstream scenario: through toolgate against the upstream directly. */
function upstreamFigures(result: unknown): Figure[] {
  const { direct, via_gateway } = result as UpstreamResult;
  if (!direct || !via_gateway) return numericFigures("mcp_upstream", result);
  return [
    figure(
      "mcp_upstream",
      "calls/s via toolgate",
      via_gateway.calls_per_s,
      "upstream direct",
      direct.calls_per_s,
    ),
    figure("mcp_upstream", "p50 ms", via_gateway.p50_ms, "upstream direct", direct.p50_ms),
  ];
}

/** Figures for a result of unknown shape: each numeric field, no baseline. */
function numericFigures(scenario: string, result: unknown, prefix = ""): Figure[] {
  if (result === null || typeof result !== "object") return [];
  const out: Figure[] = [];
  for (const [key, value] of Object.entries(result)) {
    if (typeof value === "number" && key !== "total_ms") {
      out.push(figure(scenario, prefix + key, value, "", null));
    } else if (value && typeof value === "object") {
      out.push(...numericFigures(scenario, value, `${prefix}${key}.`));
    }
  }
  return out;
}

async function machine(): Promise<Record<string, string | number>> {
  const cpu = await Deno.readTextFile("/proc/cpuinfo").then(
    (text) => /model name\s*:\s*(.+)/.exec(text)?.[1] ?? "unknown",
    () => "unknown",
  );
  const memory = Deno.systemMemoryInfo();
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  const fs = await new Deno.Command("df", { args: ["-T", tmp], stdout: "piped", stderr: "null" })
    .output()
    .then(
      (o) => new TextDecoder().decode(o.stdout).split("\n")[1]?.split(/\s+/)[1] ?? "unknown",
      () => "unknown",
    );
  return {
    cpu,
    cores: navigator.hardwareConcurrency,
    memory_gib: Math.round(memory.total / 2 ** 30),
    os: `${Deno.build.os} ${Deno.osRelease()}`,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    temp_dir: tmp,
    temp_dir_fs: fs,
  };
}

function cell(value: number | null): string {
  return value === null ? "" : String(value);
}

/** Renders figures as an aligned text table. */
export function renderTable(figures: readonly Figure[]): string {
  const headers = ["scenario", "figure", "toolgate", "baseline", "", "ratio", "target", "met"];
  const rows = figures.map((f) => [
    f.scenario,
    f.figure,
    cell(f.toolgate),
    f.baseline_name,
    cell(f.baseline),
    f.ratio === null ? "" : `${f.ratio}×`,
    f.target,
    f.met === null ? "" : f.met ? "yes" : "NO",
  ]);
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/** Options of {@linkcode runBenchmarks}. */
export interface RunBenchmarksOptions {
  mode: BenchMode;
  /** Scenario names to run. @default all */
  only?: readonly string[];
  /** Progress sink. @default stderr */
  log?: (line: string) => void;
}

/**
 * Runs the scenarios one after another (never two at once: they share the
 * machine's cores).
 */
export async function runBenchmarks(options: RunBenchmarksOptions): Promise<BenchResults> {
  const { mode, only, log = (line: string) => console.error(line) } = options;
  const started = performance.now();
  const scenarios = [...SCENARIOS];
  const upstream = await upstreamScenario();
  if (upstream) scenarios.push(upstream);
  const unknown = only?.filter((name) => !scenarios.some((s) => s.name === name)) ?? [];
  if (unknown.length) {
    throw new Error(
      `Unknown scenario ${unknown.join(", ")}: use ${scenarios.map((s) => s.name).join(", ")}`,
    );
  }
  const results: BenchResults = {
    version: VERSION,
    started_at: new Date().toISOString(),
    mode,
    machine: await machine(),
    duration_s: 0,
    scenarios: {},
    figures: [],
  };
  for (const scenario of scenarios) {
    if (only && !only.includes(scenario.name)) continue;
    log(`bench: ${scenario.name} (${mode}) …`);
    const t = performance.now();
    try {
      const result = await scenario.run(mode);
      const duration_s = Math.round((performance.now() - t) / 100) / 10;
      results.scenarios[scenario.name] = { result, duration_s };
      results.figures.push(...scenario.figures(result as never));
      log(`bench: ${scenario.name} done in ${duration_s} s`);
    } catch (error) {
      const duration_s = Math.round((performance.now() - t) / 100) / 10;
      const message = error instanceof Error ? error.stack ?? error.message : String(error);
      results.scenarios[scenario.name] = { error: message, duration_s };
      log(`bench: ${scenario.name} FAILED: ${message}`);
    }
  }
  if (!upstream && !only) {
    log("bench: mcp_upstream skipped (scripts/bench/mcp_upstream.ts not present)");
  }
  results.duration_s = Math.round((performance.now() - started) / 100) / 10;
  return results;
}

if (import.meta.main) {
  const args = Deno.args;
  const mode: BenchMode = args.includes("--smoke")
    ? "smoke"
    : args.includes("--quick")
    ? "quick"
    : "full";
  const only = args.find((a) => a.startsWith("--only="))?.slice(7).split(",").filter(Boolean);
  const out = args.find((a) => a.startsWith("--out="))?.slice(6) ?? `${ROOT}bench/results.json`;
  const results = await runBenchmarks({ mode, only });
  await Deno.mkdir(out.slice(0, out.lastIndexOf("/")) || ".", { recursive: true });
  await Deno.writeTextFile(out, JSON.stringify(results, null, 2) + "\n");
  console.log(renderTable(results.figures));
  const failed = Object.entries(results.scenarios).filter(([, s]) => s.error).map(([name]) => name);
  console.log(`\n${results.mode} run in ${results.duration_s} s; results in ${out}`);
  if (failed.length) {
    console.log(`failed: ${failed.join(", ")}`);
    Deno.exit(1);
  }
}
