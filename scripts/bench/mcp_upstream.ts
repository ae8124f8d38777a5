/**
 * MCP upstream benchmark: sequential `tools/call` round trips through the
 * gateway against calling the same upstream directly, with the official SDK
 * client (1.x) on both paths, in the same run. The upstream is the reference
 * `@modelcontextprotocol/server-everything` (pinned) run with Deno; the tool
 * is its `echo`.
 *
 * - stdio: SDK client → `toolgate mcp start` (stdio) → the upstream (stdio),
 *   against SDK client → the upstream (stdio);
 * - Streamable HTTP: SDK client → `toolgate mcp start --transport http` →
 *   the upstream in its `streamableHttp` mode (a `url` upstream), against SDK
 *   client → the same upstream process. The upstream is bound to 127.0.0.1
 *   (`_loopback.ts`).
 *
 * On each transport both clients are connected at once and measured in
 * alternating phases (direct, gateway, gateway, direct), so that drift of the
 * shared machine falls on both. What the gateway adds to one call is the
 * difference of the medians (every call through it is durably audited); the
 * median of one bare KV commit on the same disk, measured in the same run,
 * is reported beside it as the floor of that difference.
 *
 * Run alone: `deno run -A scripts/bench/mcp_upstream.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { EVERYTHING_PACKAGE, npmServerArgs } from "../npm_servers.ts";
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import { freePort, loopbackNpmServerArgs } from "./_mcp_http.ts";
import { MAIN, ROOT, spawnReady, startToolgateHttp, tempDir } from "./_proc.ts";
import { latency, rate, round3 } from "./_stats.ts";
import { BareAuditLog } from "./_bare_audit.ts";

/** Options of {@linkcode benchMcpUpstream}. */
export interface McpUpstreamBenchOptions {
  /** `full` (about 50 s in all), `quick` (about 20 s) or `smoke` (about 8 s). */
  mode: BenchMode;
}

/** Calls per second and latency of one path. */
export interface RoundTrip {
  calls: number;
  calls_per_s: number;
  p50_ms: number;
  p99_ms: number;
}

/** The two paths on one transport. */
export interface UpstreamComparison {
  /** SDK client → upstream. */
  direct: RoundTrip;
  /** SDK client → toolgate → upstream: validation, circuit, durable audit, events. */
  via_gateway: RoundTrip;
  /** `via_gateway.calls_per_s / direct.calls_per_s`. */
  throughput_ratio: number;
  /** `via_gateway.p50_ms - direct.p50_ms`: what the gateway adds to one call. */
  added_p50_ms: number;
  /** `via_gateway.p99_ms - direct.p99_ms`. */
  added_p99_ms: number;
}

/** Figures of {@linkcode benchMcpUpstream}. */
export interface McpUpstreamBenchResult extends UpstreamComparison {
  /**
   * Median of one durable KV commit of one chained record (`_bare_audit.ts`),
   * one after another, on the same disk, measured between the two transports:
   * what a call durably audited before its answer cannot go below.
   */
  commit_p50_ms: number;
  /** Time from spawning toolgate to its `initialize` reply with the upstream connected, in ms. */
  gateway_start_ms: number;
  /** The same over Streamable HTTP; `null` when it could not run (reason in `http_error`). */
  http: UpstreamComparison | null;
  http_error?: string;
  /** Whole run, in ms. */
  total_ms: number;
}

/** Latencies of one measured phase and how long it lasted. */
interface Phase {
  samples: number[];
  elapsedMs: number;
}

const ECHO_ARGUMENTS = { message: "bench" };

/** This process's environment (cache, proxy and CA variables): the SDK passes only a few by itself. */
function baseEnv(): Record<string, string> {
  return { ...Deno.env.toObject(), NO_COLOR: "1" };
}

/** Calls `tool` one after another for `durationMs` after an unmeasured `warmupMs`. */
async function measure(
  client: Client,
  tool: string,
  durationMs: number,
  warmupMs: number,
): Promise<Phase> {
  const call = async () => {
    const result = await client.callTool({ name: tool, arguments: ECHO_ARGUMENTS });
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
  return { samples, elapsedMs: performance.now() - start };
}

function roundTrip(phases: readonly Phase[]): RoundTrip {
  const samples = phases.flatMap((phase) => phase.samples);
  const elapsedMs = phases.reduce((sum, phase) => sum + phase.elapsedMs, 0);
  return {
    calls: samples.length,
    calls_per_s: rate(samples.length, elapsedMs),
    ...latency(samples),
  };
}

/**
 * Measures the direct and the gateway client in alternating phases (direct,
 * gateway, gateway, direct); each warms up in its first phase.
 */
async function compare(
  direct: Client,
  gateway: Client,
  options: McpUpstreamBenchOptions,
): Promise<UpstreamComparison> {
  const { mode } = options;
  const durationMs = mode === "full" ? 10_000 : mode === "quick" ? 3000 : 1000;
  const warmupMs = mode === "full" ? 1500 : mode === "quick" ? 500 : 200;
  const paths = {
    direct: { client: direct, tool: "echo", phases: [] as Phase[] },
    via_gateway: { client: gateway, tool: "everything__echo", phases: [] as Phase[] },
  };
  for (const path of [paths.direct, paths.via_gateway, paths.via_gateway, paths.direct]) {
    const warm = path.phases.length > 0;
    path.phases.push(await measure(path.client, path.tool, durationMs / 2, warm ? 0 : warmupMs));
  }
  const directTrip = roundTrip(paths.direct.phases);
  const gatewayTrip = roundTrip(paths.via_gateway.phases);
  return {
    direct: directTrip,
    via_gateway: gatewayTrip,
    throughput_ratio: directTrip.calls_per_s > 0
      ? Math.round((gatewayTrip.calls_per_s / directTrip.calls_per_s) * 100) / 100
      : 0,
    added_p50_ms: round3(gatewayTrip.p50_ms - directTrip.p50_ms),
    added_p99_ms: round3(gatewayTrip.p99_ms - directTrip.p99_ms),
  };
}

/** Stdio: both clients, each with its own upstream process. */
async function benchStdio(
  options: McpUpstreamBenchOptions,
): Promise<UpstreamComparison & { gateway_start_ms: number }> {
  await using home = await tempDir("upstream");
  const [command, ...args] = [Deno.execPath(), ...npmServerArgs(EVERYTHING_PACKAGE, "stdio")];
  await Deno.writeTextFile(
    `${home.path}/config.json`,
    JSON.stringify({ plugins: { upstreams: { everything: { kind: "mcp", command, args } } } }),
  );
  const direct = new Client({ name: "bench-direct", version: "1.0.0" });
  const gateway = new Client({ name: "bench-gateway", version: "1.0.0" });
  try {
    await direct.connect(
      new StdioClientTransport({ command, args, env: baseEnv(), stderr: "ignore" }),
    );
    const spawned = performance.now();
    await gateway.connect(
      new StdioClientTransport({
        command: Deno.execPath(),
        args: ["run", "-A", "--cached-only", MAIN, "mcp", "start"],
        env: { ...baseEnv(), TOOLGATE_HOME: home.path, TOOLGATE_KEYCHAIN: "file" },
        cwd: ROOT,
        stderr: "ignore",
      }),
    );
    const gateway_start_ms = Math.round(performance.now() - spawned);
    return { ...await compare(direct, gateway, options), gateway_start_ms };
  } finally {
    await gateway.close();
    await direct.close();
  }
}

/** Median latency of one-record KV commits one after another in a temp dir, for `durationMs`. */
async function commitP50(durationMs: number): Promise<number> {
  await using dir = await tempDir("upstream-commit");
  using kv = await Deno.openKv(`${dir.path}/commit.kv`);
  const log = new BareAuditLog(kv);
  const samples: number[] = [];
  const end = performance.now() + durationMs;
  while (performance.now() < end) {
    const before = performance.now();
    await log.append("echo", ECHO_ARGUMENTS);
    samples.push(performance.now() - before);
  }
  // The first tenth (a new file, a cold handle) is warm-up.
  return latency(samples.slice(Math.floor(samples.length / 10))).p50_ms;
}

/** Calls `tool` until it succeeds (an upstream's tools are offered once it is connected). */
async function untilCallable(client: Client, tool: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  while (performance.now() < deadline) {
    try {
      const result = await client.callTool({ name: tool, arguments: ECHO_ARGUMENTS });
      if (!result.isError) return;
      last = JSON.stringify(result.content);
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${tool} did not answer within ${timeoutMs} ms: ${last}`);
}

/** Streamable HTTP: one upstream process (on 127.0.0.1), called directly and through toolgate. */
async function benchHttp(options: McpUpstreamBenchOptions): Promise<UpstreamComparison> {
  const port = freePort();
  await using _upstream = await spawnReady({
    args: loopbackNpmServerArgs(EVERYTHING_PACKAGE, "streamableHttp"),
    env: { PORT: String(port) },
    readyOnStderr: true,
    ready: (out) => /listening on port/.exec(out),
    stopSignal: "SIGTERM",
  });
  const upstreamUrl = `http://127.0.0.1:${port}/mcp`;
  await using home = await tempDir("upstream-http");
  await Deno.writeTextFile(
    `${home.path}/config.json`,
    JSON.stringify({ plugins: { upstreams: { everything: { kind: "mcp", url: upstreamUrl } } } }),
  );
  await using server = await startToolgateHttp(home.path);
  const direct = new Client({ name: "bench-direct", version: "1.0.0" });
  const gateway = new Client({ name: "bench-gateway", version: "1.0.0" });
  try {
    await direct.connect(new StreamableHTTPClientTransport(new URL(upstreamUrl)));
    await gateway.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
    await untilCallable(gateway, "everything__echo", 60_000);
    return await compare(direct, gateway, options);
  } finally {
    await gateway.close();
    await direct.close();
  }
}

/**
 * Runs the benchmark: stdio, then Streamable HTTP, each with its own
 * processes, which are ended before returning.
 */
export async function benchMcpUpstream(
  options: McpUpstreamBenchOptions,
): Promise<McpUpstreamBenchResult> {
  const started = performance.now();
  const stdio = await benchStdio(options);
  const commit_p50_ms = await commitP50(options.mode === "full" ? 3000 : 1000);
  let http: UpstreamComparison | null = null;
  let http_error: string | undefined;
  try {
    http = await benchHttp(options);
  } catch (error) {
    http_error = (error as Error).message.slice(0, 500);
  }
  return {
    ...stdio,
    commit_p50_ms,
    http,
    ...(http_error ? { http_error } : {}),
    total_ms: Math.round(performance.now() - started),
  };
}

if (import.meta.main) {
  const result = await benchMcpUpstream({ mode: modeFromArgs(Deno.args) });
  console.log(JSON.stringify(result, null, 2));
}
