/**
 * Scenarios against the real `toolgate mcp start --transport http` process,
 * with the load from a separate process (`_load.ts`, raw-TCP HTTP/1.1):
 *
 * - REST `POST /tools/memory_get` (audit on, no webhooks) against a bare Hono
 *   `POST` route that parses the same JSON (`_bare_hono.ts`), same load.
 * - The incoming webhook 202 path: `POST /hooks/bench` (recorded in the audit
 *   log, then queued for its handler), against the same bare Hono route.
 * - Latency a tool call gains when 10 webhooks subscribe to every event:
 *   REST calls at a light, steady rate with 0 and with 10 registered
 *   webhooks (signed, receivers in a child process).
 *
 * Run alone: `deno run -A scripts/bench/http_server.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { addIncomingWebhook, addOutgoingWebhook, openStore } from "../../src/store/mod.ts";
import type { LoadOptions, LoadResult } from "./_load.ts";
import { benchFile, runJson, startPortScript, startToolgateHttp, tempDir } from "./_proc.ts";
import { ratio, round3 } from "./_stats.ts";
import { startReceivers } from "./webhooks.ts";

/** Size of a run. */
export type BenchMode = "full" | "quick" | "smoke";

/** Options of the scenarios in this file. */
export interface HttpServerBenchOptions {
  /** `full` (minutes in all), `quick` (CI-sized) or `smoke` (seconds: only checks it runs). */
  mode: BenchMode;
}

/** Throughput and latency of one load run. */
export interface Throughput {
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
}

/** Figures of {@linkcode benchRest}. */
export interface RestBenchResult {
  /** The tool called. */
  tool: string;
  connections: number;
  toolgate: Throughput;
  bare_hono: Throughput;
  /** `toolgate.requests_per_s / bare_hono.requests_per_s`. */
  ratio: number;
}

/** Figures of {@linkcode benchIncoming}. */
export interface IncomingBenchResult {
  connections: number;
  /** 202 answers per second, and their latency. */
  toolgate: Throughput;
  /** The bare Hono route under the same load, for scale. */
  bare_hono: Throughput;
  ratio: number;
}

/** Figures of {@linkcode benchWebhookLatency}. */
export interface WebhookLatencyBenchResult {
  /** Calls per second sent (one connection, paced). */
  calls_per_s: number;
  /** Calls measured per variant. */
  calls: number;
  no_webhooks: { p50_ms: number; p99_ms: number };
  ten_webhooks: { p50_ms: number; p99_ms: number };
  /** `ten_webhooks - no_webhooks`. */
  added_p50_ms: number;
  added_p99_ms: number;
}

/** The tool the REST scenario calls: a KV read of a missing key (no network, no write). */
export const REST_TOOL = "memory_get";
const ARGS = JSON.stringify({ key: "bench/missing-key" });

function sizes(mode: BenchMode) {
  return {
    durationMs: mode === "full" ? 8000 : mode === "quick" ? 3000 : 800,
    warmupMs: mode === "full" ? 2000 : mode === "quick" ? 1000 : 300,
  };
}

async function load(options: LoadOptions): Promise<Throughput> {
  const result = await runJson<LoadResult>([
    "run",
    "-A",
    benchFile("_load.ts"),
    JSON.stringify(options),
  ]);
  if (result.non_2xx) {
    throw new Error(
      `${result.non_2xx} non-2xx answers from ${options.url}${options.path} (first: ${result.first_bad_status})`,
    );
  }
  if (!result.requests) throw new Error(`No answer from ${options.url}${options.path}`);
  return { requests_per_s: result.requests_per_s, p50_ms: result.p50_ms, p99_ms: result.p99_ms };
}

async function bareHono(connections: number, mode: BenchMode): Promise<Throughput> {
  await using bare = await startPortScript(["run", "-A", benchFile("_bare_hono.ts")]);
  return await load({
    url: bare.url,
    path: `/tools/${REST_TOOL}`,
    body: ARGS,
    connections,
    ...sizes(mode),
  });
}

/** REST tool calls through the real server against a bare Hono route. */
export async function benchRest({ mode }: HttpServerBenchOptions): Promise<RestBenchResult> {
  const connections = 64;
  const bare_hono = await bareHono(connections, mode);
  await using home = await tempDir("rest");
  await using server = await startToolgateHttp(home.path);
  const toolgate = await load({
    url: server.url,
    path: `/tools/${REST_TOOL}`,
    body: ARGS,
    connections,
    ...sizes(mode),
  });
  return {
    tool: REST_TOOL,
    connections,
    toolgate,
    bare_hono,
    ratio: ratio(toolgate.requests_per_s, bare_hono.requests_per_s),
  };
}

/** Incoming webhook POSTs answered 202 by the real server. */
export async function benchIncoming(
  { mode }: HttpServerBenchOptions,
): Promise<IncomingBenchResult> {
  const connections = 64;
  const bare_hono = await bareHono(connections, mode);
  await using home = await tempDir("incoming");
  const store = await openStore({ dataDir: home.path });
  try {
    await addIncomingWebhook(store, { name: "bench", path: "/hooks/bench", handler: REST_TOOL });
  } finally {
    store.close();
  }
  await using server = await startToolgateHttp(home.path);
  const toolgate = await load({
    url: server.url,
    path: "/hooks/bench",
    body: ARGS,
    connections,
    ...sizes(mode),
  });
  return {
    connections,
    toolgate,
    bare_hono,
    ratio: ratio(toolgate.requests_per_s, bare_hono.requests_per_s),
  };
}

async function pacedCalls(webhooks: string[], mode: BenchMode, callsPerS: number) {
  await using home = await tempDir("latency");
  if (webhooks.length) {
    const store = await openStore({ dataDir: home.path });
    try {
      for (const url of webhooks) {
        await addOutgoingWebhook(store, { url, events: "*", secret: "bench-secret" });
      }
    } finally {
      store.close();
    }
  }
  await using server = await startToolgateHttp(home.path);
  const { durationMs, warmupMs } = sizes(mode);
  const result = await runJson<LoadResult>([
    "run",
    "-A",
    benchFile("_load.ts"),
    JSON.stringify(
      {
        url: server.url,
        path: `/tools/${REST_TOOL}`,
        body: ARGS,
        connections: 1,
        durationMs: durationMs * 2,
        warmupMs,
        intervalMs: 1000 / callsPerS,
      } satisfies LoadOptions,
    ),
  ]);
  if (result.non_2xx || !result.requests) throw new Error("Paced calls failed");
  return result;
}

/** Tool-call latency with 10 webhooks subscribed to every event, against none. */
export async function benchWebhookLatency(
  { mode }: HttpServerBenchOptions,
): Promise<WebhookLatencyBenchResult> {
  const callsPerS = 50;
  await using receivers = await startReceivers(10);
  const none = await pacedCalls([], mode, callsPerS);
  const ten = await pacedCalls(receivers.urls, mode, callsPerS);
  return {
    calls_per_s: callsPerS,
    calls: Math.min(none.requests, ten.requests),
    no_webhooks: { p50_ms: none.p50_ms, p99_ms: none.p99_ms },
    ten_webhooks: { p50_ms: ten.p50_ms, p99_ms: ten.p99_ms },
    added_p50_ms: round3(ten.p50_ms - none.p50_ms),
    added_p99_ms: round3(ten.p99_ms - none.p99_ms),
  };
}

/** Reads `--quick` / `--smoke` from argv. */
export function modeFromArgs(args: readonly string[]): BenchMode {
  return args.includes("--smoke") ? "smoke" : args.includes("--quick") ? "quick" : "full";
}

if (import.meta.main) {
  const mode = modeFromArgs(Deno.args);
  console.log(JSON.stringify(
    {
      rest: await benchRest({ mode }),
      incoming: await benchIncoming({ mode }),
      webhook_latency: await benchWebhookLatency({ mode }),
    },
    null,
    2,
  ));
}
