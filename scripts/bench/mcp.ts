/**
 * MCP scenarios, toolgate against the official SDK's bare server
 * (`_bare_mcp.ts`, the same `memory_get` tool reading the same kind of KV
 * file) in the same run:
 *
 * - stdio: sequential `tools/call` from one client — calls/s, p50, p99.
 * - Streamable HTTP: `tools/call` from concurrent sessions through toolgate's
 *   `/mcp`, the bare SDK `WebStandardStreamableHTTPServerTransport`, and
 *   `supergateway` (npm) wrapping the bare stdio server in stateful mode.
 * - Cold start of `toolgate mcp start` (stdio) to the `initialize` reply,
 *   and idle RSS after it, against the bare SDK stdio server.
 *
 * The clients are raw JSON-RPC (stdio lines; `fetch` for HTTP) in this
 * process, the same for every server.
 *
 * Run alone: `deno run -A scripts/bench/mcp.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */

import type { BenchMode } from "./http_server.ts";
import { modeFromArgs } from "./http_server.ts";
import {
  benchFile,
  MAIN,
  ROOT,
  settles,
  startPortScript,
  startToolgateHttp,
  tempDir,
} from "./_proc.ts";
import { latency, rate, ratio, round3 } from "./_stats.ts";
import {
  assertToolResult,
  httpCalls,
  type McpThroughput,
  MEMORY_GET,
  phaseMs,
  startMcpProxy,
  startSupergateway,
} from "./_mcp_http.ts";

export type { McpThroughput };

/** Options of the MCP scenarios. */
export interface McpBenchOptions {
  /** `full`, `quick` or `smoke`. */
  mode: BenchMode;
}

/** Figures of {@linkcode benchMcpStdio}. */
export interface McpStdioBenchResult {
  toolgate: McpThroughput;
  bare_sdk: McpThroughput;
  ratio: number;
  /**
   * The bare SDK server writing one record per call in its own KV commit
   * before answering: the floor of any durably audited sequential call.
   */
  bare_sdk_commit: McpThroughput;
  /** toolgate against that floor. */
  ratio_to_commit_floor: number;
}

/** Figures of {@linkcode benchMcpHttp}. */
export interface McpHttpBenchResult {
  /** Sessions calling at once, each sequentially. */
  sessions: number;
  toolgate: McpThroughput;
  bare_sdk: McpThroughput;
  /** `null` when supergateway could not be started (reason in `supergateway_error`). */
  supergateway: McpThroughput | null;
  supergateway_error?: string;
  vs_bare_sdk: number;
  /**
   * The bare SDK transport committing one KV record per call, one commit at
   * a time, before answering (a durable audit without group commit).
   */
  bare_sdk_commit: McpThroughput;
  vs_bare_sdk_commit: number;
  /**
   * The bare SDK transport answering with JSON instead of SSE
   * (`enableJsonResponse`), as toolgate does: the same reply format.
   */
  bare_sdk_json: McpThroughput;
  vs_bare_sdk_json: number;
  /** `toolgate / supergateway`; 0 when it did not run. */
  vs_supergateway: number;
  /** mcp-proxy in front of the same bare stdio server; `null` when it could not be started. */
  mcp_proxy: McpThroughput | null;
  mcp_proxy_error?: string;
  /** `toolgate / mcp-proxy`; 0 when it did not run. */
  vs_mcp_proxy: number;
}

/** Figures of {@linkcode benchStartup}. */
export interface StartupBenchResult {
  runs: number;
  /** Median time from spawn to the `initialize` reply, in ms. */
  toolgate_cold_start_ms: number;
  bare_sdk_cold_start_ms: number;
  cold_start_ratio: number;
  /** Resident set size, MiB, 1 s after `initialize` and one `tools/list`. */
  toolgate_idle_rss_mib: number;
  bare_sdk_idle_rss_mib: number;
  rss_ratio: number;
}

const PROTOCOL = "2025-06-18";
const INITIALIZE = {
  jsonrpc: "2.0",
  id: 0,
  method: "initialize",
  params: {
    protocolVersion: PROTOCOL,
    capabilities: {},
    clientInfo: { name: "bench", version: "1" },
  },
};
const INITIALIZED = { jsonrpc: "2.0", method: "notifications/initialized" };

function callRequest(id: number) {
  return { jsonrpc: "2.0", id, method: "tools/call", params: MEMORY_GET };
}

const encoder = new TextEncoder();

/** A JSON-RPC line client over a child's stdin/stdout. */
class StdioClient {
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #lines: ReadableStreamDefaultReader<string>;
  #buffer = "";

  constructor(child: Deno.ChildProcess) {
    this.#writer = child.stdin.getWriter();
    this.#lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  }

  async send(message: unknown): Promise<void> {
    await this.#writer.write(encoder.encode(JSON.stringify(message) + "\n"));
  }

  /** Reads lines until the response with `id`. */
  async response(id: number): Promise<Record<string, unknown>> {
    for (;;) {
      let newline: number;
      while ((newline = this.#buffer.indexOf("\n")) >= 0) {
        const line = this.#buffer.slice(0, newline);
        this.#buffer = this.#buffer.slice(newline + 1);
        if (!line.trim()) continue;
        const message = JSON.parse(line) as Record<string, unknown>;
        if (message.id === id) {
          if (message.error) throw new Error(`JSON-RPC error: ${JSON.stringify(message.error)}`);
          return message;
        }
      }
      const { done, value } = await this.#lines.read();
      if (done) throw new Error("The server closed stdout");
      this.#buffer += value;
    }
  }

  async request(message: { id: number; [key: string]: unknown }): Promise<Record<string, unknown>> {
    await this.send(message);
    return await this.response(message.id);
  }

  async close(): Promise<void> {
    await this.#writer.close().catch(() => {});
    await this.#lines.cancel().catch(() => {});
  }
}

interface StdioServer {
  args: string[];
  env: Record<string, string>;
}

function toolgateStdio(home: string): StdioServer {
  return {
    args: ["run", "-A", "--cached-only", MAIN, "mcp", "start"],
    env: { TOOLGATE_HOME: home, TOOLGATE_KEYCHAIN: "file" },
  };
}

function bareStdio(dir: string, commitPerCall = false): StdioServer {
  const script = benchFile("_bare_mcp.ts");
  const args = commitPerCall
    ? ["run", "-A", "--cached-only", script, "stdio", `${dir}/bare-commit.kv`, "commit"]
    : ["run", "-A", "--cached-only", script, "stdio", `${dir}/bare.kv`];
  return { args, env: {} };
}

function spawnStdio(server: StdioServer): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: server.args,
    cwd: ROOT,
    env: { NO_COLOR: "1", ...server.env },
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
}

async function stopChild(child: Deno.ChildProcess, client: StdioClient): Promise<void> {
  await client.close();
  if (!await settles(child.status, 5000)) {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
    await child.status;
  }
}

async function sequentialStdio(server: StdioServer, mode: BenchMode): Promise<McpThroughput> {
  const child = spawnStdio(server);
  const client = new StdioClient(child);
  try {
    await client.request(INITIALIZE);
    await client.send(INITIALIZED);
    const { durationMs, warmupMs } = phaseMs(mode);
    const samples: number[] = [];
    let id = 1;
    const warmEnd = performance.now() + warmupMs;
    while (performance.now() < warmEnd) assertToolResult(await client.request(callRequest(id++)));
    const start = performance.now();
    const end = start + durationMs;
    for (;;) {
      const sent = performance.now();
      if (sent >= end) break;
      assertToolResult(await client.request(callRequest(id++)));
      samples.push(performance.now() - sent);
    }
    return {
      calls_per_s: rate(samples.length, performance.now() - start),
      ...latency(samples),
      calls: samples.length,
    };
  } finally {
    await stopChild(child, client);
  }
}

/** Sequential `tools/call` over stdio: toolgate against the bare SDK server. */
export async function benchMcpStdio({ mode }: McpBenchOptions): Promise<McpStdioBenchResult> {
  await using dir = await tempDir("mcp-stdio");
  const bare_sdk = await sequentialStdio(bareStdio(dir.path), mode);
  const toolgate = await sequentialStdio(toolgateStdio(dir.path), mode);
  const bare_sdk_commit = await sequentialStdio(bareStdio(dir.path, true), mode);
  return {
    toolgate,
    bare_sdk,
    ratio: ratio(toolgate.calls_per_s, bare_sdk.calls_per_s),
    bare_sdk_commit,
    ratio_to_commit_floor: ratio(toolgate.calls_per_s, bare_sdk_commit.calls_per_s),
  };
}

// --- Streamable HTTP -----------------------------------------------------------

/** `tools/call` over Streamable HTTP from concurrent sessions. */
export async function benchMcpHttp({ mode }: McpBenchOptions): Promise<McpHttpBenchResult> {
  const sessions = 8;
  await using dir = await tempDir("mcp-http");
  const bareHttp = async (variant?: "commit" | "json") => {
    const file = `${dir.path}/bare-${variant ?? "sse"}.kv`;
    await using bare = await startPortScript([
      "run",
      "-A",
      "--cached-only",
      benchFile("_bare_mcp.ts"),
      "http",
      file,
      ...(variant ? [variant] : []),
    ]);
    return await httpCalls({
      endpoint: `${bare.url}/mcp`,
      clients: sessions,
      call: MEMORY_GET,
      mode,
    });
  };
  const bare_sdk = await bareHttp();
  const bare_sdk_json = await bareHttp("json");
  const bare_sdk_commit = await bareHttp("commit");
  let toolgate: McpThroughput;
  {
    await using home = await tempDir("mcp-http-home");
    await using server = await startToolgateHttp(home.path);
    toolgate = await httpCalls({
      endpoint: `${server.url}/mcp`,
      clients: sessions,
      call: MEMORY_GET,
      mode,
    });
  }
  let peer: McpThroughput | null = null;
  let supergateway_error: string | undefined;
  try {
    // supergateway starts one bare stdio server per session.
    await using gateway = await startSupergateway([Deno.execPath(), ...bareStdio(dir.path).args]);
    peer = await httpCalls({
      endpoint: gateway.endpoint,
      clients: sessions,
      call: MEMORY_GET,
      mode,
    });
  } catch (error) {
    supergateway_error = (error as Error).message.slice(0, 500);
  }
  let proxy: McpThroughput | null = null;
  let mcp_proxy_error: string | undefined;
  try {
    // mcp-proxy, like supergateway, starts one bare stdio server per session.
    await using gateway = await startMcpProxy([Deno.execPath(), ...bareStdio(dir.path).args]);
    proxy = await httpCalls({
      endpoint: gateway.endpoint,
      clients: sessions,
      call: MEMORY_GET,
      mode,
    });
  } catch (error) {
    mcp_proxy_error = (error as Error).message.slice(0, 500);
  }
  return {
    sessions,
    toolgate,
    bare_sdk,
    mcp_proxy: proxy,
    ...(mcp_proxy_error ? { mcp_proxy_error } : {}),
    vs_mcp_proxy: proxy ? ratio(toolgate.calls_per_s, proxy.calls_per_s) : 0,
    supergateway: peer,
    ...(supergateway_error ? { supergateway_error } : {}),
    vs_bare_sdk: ratio(toolgate.calls_per_s, bare_sdk.calls_per_s),
    bare_sdk_commit,
    vs_bare_sdk_commit: ratio(toolgate.calls_per_s, bare_sdk_commit.calls_per_s),
    bare_sdk_json,
    vs_bare_sdk_json: ratio(toolgate.calls_per_s, bare_sdk_json.calls_per_s),
    vs_supergateway: peer ? ratio(toolgate.calls_per_s, peer.calls_per_s) : 0,
  };
}

// --- Cold start and RSS ----------------------------------------------------------

async function rssMib(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const kib = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return round3(kib / 1024);
}

async function coldStart(
  server: StdioServer,
  measureRss: boolean,
): Promise<{ ms: number; rss: number }> {
  const started = performance.now();
  const child = spawnStdio(server);
  const client = new StdioClient(child);
  try {
    await client.request(INITIALIZE);
    const ms = performance.now() - started;
    let rss = 0;
    if (measureRss) {
      await client.send(INITIALIZED);
      await client.request({ jsonrpc: "2.0", id: 1, method: "tools/list" });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      rss = await rssMib(child.pid);
    }
    return { ms, rss };
  } finally {
    await stopChild(child, client);
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return round3(sorted[Math.floor(sorted.length / 2)]);
}

/** Cold start to the `initialize` reply, and idle RSS, of both stdio servers. */
export async function benchStartup({ mode }: McpBenchOptions): Promise<StartupBenchResult> {
  const runs = mode === "full" ? 9 : mode === "quick" ? 5 : 2;
  await using dir = await tempDir("startup");
  const toolgate = toolgateStdio(dir.path);
  const bare = bareStdio(dir.path);
  // First runs fill the module cache and create the data files; not counted.
  await coldStart(toolgate, false);
  await coldStart(bare, false);
  const times = { toolgate: [] as number[], bare: [] as number[] };
  for (let i = 0; i < runs; i++) {
    times.toolgate.push((await coldStart(toolgate, false)).ms);
    times.bare.push((await coldStart(bare, false)).ms);
  }
  const toolgateRss = (await coldStart(toolgate, true)).rss;
  const bareRss = (await coldStart(bare, true)).rss;
  const toolgateMs = median(times.toolgate);
  const bareMs = median(times.bare);
  return {
    runs,
    toolgate_cold_start_ms: toolgateMs,
    bare_sdk_cold_start_ms: bareMs,
    cold_start_ratio: ratio(toolgateMs, bareMs),
    toolgate_idle_rss_mib: toolgateRss,
    bare_sdk_idle_rss_mib: bareRss,
    rss_ratio: ratio(toolgateRss, bareRss),
  };
}

if (import.meta.main) {
  const mode = modeFromArgs(Deno.args);
  console.log(JSON.stringify(
    {
      stdio: await benchMcpStdio({ mode }),
      http: await benchMcpHttp({ mode }),
      startup: await benchStartup({ mode }),
    },
    null,
    2,
  ));
}
