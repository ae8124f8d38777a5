/**
 * MCP upstream benchmark: sequential `tools/call` round trips through the
 * gateway (official SDK client → `toolgate mcp start` over stdio → the
 * upstream over stdio) against calling the same upstream directly with the
 * SDK client, in the same run. The upstream is the reference
 * `@modelcontextprotocol/server-everything` (pinned) run with Deno; the tool
 * is its `echo`.
 *
 * Run alone: `deno run -A scripts/bench/mcp_upstream.ts [--quick]` prints JSON.
 *
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { EVERYTHING_PACKAGE, npmServerArgs } from "../npm_servers.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const MAIN = `${ROOT}main.ts`;

/** Options of {@linkcode benchMcpUpstream}. */
export interface McpUpstreamBenchOptions {
  /** Shorter phases (about 10 s in all instead of about 25 s). */
  quick: boolean;
}

/** Calls per second and latency of one path. */
export interface RoundTrip {
  calls: number;
  calls_per_s: number;
  p50_ms: number;
  p99_ms: number;
}

/** Figures of {@linkcode benchMcpUpstream}. */
export interface McpUpstreamBenchResult {
  quick: boolean;
  /** SDK client → upstream. */
  direct: RoundTrip;
  /** SDK client → toolgate (stdio) → upstream (stdio): validation, circuit, audit, events. */
  via_gateway: RoundTrip;
  /** `via_gateway.calls_per_s / direct.calls_per_s`. */
  throughput_ratio: number;
  /** `via_gateway.p50_ms - direct.p50_ms`: what the gateway adds to one call. */
  added_p50_ms: number;
  /** Time from spawning toolgate to its `initialize` reply with the upstream connected, in ms. */
  gateway_start_ms: number;
  /** Whole run, in ms. */
  total_ms: number;
}

function upstreamArgs(): string[] {
  return npmServerArgs(EVERYTHING_PACKAGE, "stdio");
}

/** This process's environment (cache, proxy and CA variables): the SDK passes only a few by itself. */
function baseEnv(): Record<string, string> {
  return { ...Deno.env.toObject(), NO_COLOR: "1" };
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

function summarize(samples: number[], elapsedMs: number): RoundTrip {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) =>
    round3(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0);
  return {
    calls: samples.length,
    calls_per_s: elapsedMs > 0 ? Math.round(samples.length / (elapsedMs / 1000)) : 0,
    p50_ms: at(0.5),
    p99_ms: at(0.99),
  };
}

/** Calls `tool` one after another for `durationMs` after a warm-up. */
async function measure(
  client: Client,
  tool: string,
  durationMs: number,
  warmupMs: number,
): Promise<RoundTrip> {
  const call = async () => {
    const result = await client.callTool({ name: tool, arguments: { message: "bench" } });
    if (result.isError) throw new Error(`${tool} failed: ${JSON.stringify(result.content)}`);
  };
  const warmupEnd = performance.now() + warmupMs;
  while (performance.now() < warmupEnd) await call();
  const samples: number[] = [];
  const start = performance.now();
  const end = start + durationMs;
  while (performance.now() < end) {
    const before = performance.now();
    await call();
    samples.push(performance.now() - before);
  }
  return summarize(samples, performance.now() - start);
}

/**
 * Runs the benchmark: the direct path, then the gateway path, each with its
 * own processes, which are ended before returning.
 */
export async function benchMcpUpstream(
  options: McpUpstreamBenchOptions,
): Promise<McpUpstreamBenchResult> {
  const started = performance.now();
  const durationMs = options.quick ? 3000 : 10_000;
  const warmupMs = options.quick ? 500 : 1500;

  const direct = new Client({ name: "bench-direct", version: "1.0.0" });
  let directResult: RoundTrip;
  try {
    await direct.connect(
      new StdioClientTransport({
        command: Deno.execPath(),
        args: upstreamArgs(),
        env: baseEnv(),
        stderr: "ignore",
      }),
    );
    directResult = await measure(direct, "echo", durationMs, warmupMs);
  } finally {
    await direct.close();
  }

  const home = await Deno.makeTempDir({ prefix: "toolgate-bench-upstream-" });
  try {
    await Deno.writeTextFile(
      `${home}/config.json`,
      JSON.stringify({
        plugins: {
          upstreams: {
            everything: {
              kind: "mcp",
              command: Deno.execPath(),
              args: upstreamArgs(),
              env: Deno.env.get("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {},
            },
          },
        },
      }),
    );
    const gateway = new Client({ name: "bench-gateway", version: "1.0.0" });
    let gatewayResult: RoundTrip;
    let startMs: number;
    try {
      const spawned = performance.now();
      await gateway.connect(
        new StdioClientTransport({
          command: Deno.execPath(),
          args: ["run", "-A", "--cached-only", MAIN, "mcp", "start"],
          env: { ...baseEnv(), TOOLGATE_HOME: home, TOOLGATE_KEYCHAIN: "file" },
          cwd: ROOT,
          stderr: "ignore",
        }),
      );
      startMs = Math.round(performance.now() - spawned);
      gatewayResult = await measure(gateway, "everything__echo", durationMs, warmupMs);
    } finally {
      await gateway.close();
    }
    return {
      quick: options.quick,
      direct: directResult,
      via_gateway: gatewayResult,
      throughput_ratio: directResult.calls_per_s > 0
        ? Math.round((gatewayResult.calls_per_s / directResult.calls_per_s) * 100) / 100
        : 0,
      added_p50_ms: round3(gatewayResult.p50_ms - directResult.p50_ms),
      gateway_start_ms: startMs,
      total_ms: Math.round(performance.now() - started),
    };
  } finally {
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  const result = await benchMcpUpstream({ quick: Deno.args.includes("--quick") });
  console.log(JSON.stringify(result, null, 2));
}
