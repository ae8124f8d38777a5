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
 *   webhooks (signed, receivers in a child process). With
 *   `TOOLGATE_BENCH_BEFORE=<another checkout>`, a third server runs that
 *   checkout's code with the same 10 webhooks in the same rounds: before and
 *   after a change, in one run.
 *
 * Run alone: `deno run -A scripts/bench/http_server.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { openStore, type Store } from "../../src/store/mod.ts";
import type { LoadOptions, LoadResult } from "./_load.ts";
import {
  benchFile,
  runJson,
  runLoadProcess,
  startPortScript,
  startToolgateHttp,
  tempDir,
} from "./_proc.ts";
import { latency, rate, ratio, round3 } from "./_stats.ts";
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
  /** The bare route reading the key from KV, as `memory_get` does (no audit). */
  bare_hono_read: Throughput;
  /**
   * The bare route reading the key from KV and committing one record per
   * request before answering (a durable audit without group commit).
   */
  bare_hono_commit: Throughput;
  /** `toolgate.requests_per_s / bare_hono_commit.requests_per_s`. */
  ratio_to_commit_per_request: number;
}

/** Figures of {@linkcode benchIncoming}. */
export interface IncomingBenchResult {
  connections: number;
  /** 202 answers per second, and their latency. */
  toolgate: Throughput;
  /** The bare Hono route under the same load, for scale. */
  bare_hono: Throughput;
  ratio: number;
  /** Accepted jobs whose handler had not yet run when the load stopped. */
  backlog_at_end: number;
  /** Time from the end of the load until every job was handled, in s. */
  drain_s: number;
  /** `backlog_at_end / drain_s`: handler calls per second while draining (0 without backlog). */
  handled_per_s: number;
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
  /** The target for `added_p99_ms`: a quarter of `no_webhooks.p99_ms`. */
  p99_budget_ms: number;
  /** The same 10 webhooks on another checkout's code (`TOOLGATE_BENCH_BEFORE`), when set. */
  before?: {
    root: string;
    p50_ms: number;
    p99_ms: number;
    added_p50_ms: number;
    added_p99_ms: number;
  };
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
  const result = await runLoadProcess(options);
  return { requests_per_s: result.requests_per_s, p50_ms: result.p50_ms, p99_ms: result.p99_ms };
}

/**
 * The bare Hono route; with `kv`, it also reads the key from that KV file
 * (`read`), and commits one record per request, no group commit (`commit`).
 */
async function bareHono(
  connections: number,
  mode: BenchMode,
  kv?: { file: string; work: "read" | "commit" },
): Promise<Throughput> {
  const args = ["run", "-A", "--cached-only", benchFile("_bare_hono.ts")];
  await using bare = await startPortScript(kv ? [...args, kv.work, kv.file] : args);
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
  const bare_hono_read = await bareHono(connections, mode, {
    file: `${home.path}/bare-read.kv`,
    work: "read",
  });
  const bare_hono_commit = await bareHono(connections, mode, {
    file: `${home.path}/bare-commit.kv`,
    work: "commit",
  });
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
    bare_hono_read,
    bare_hono_commit,
    ratio_to_commit_per_request: ratio(
      toolgate.requests_per_s,
      bare_hono_commit.requests_per_s,
    ),
  };
}

/**
 * Waits (at most a minute) until the server handled every queued incoming
 * job, reading the queue from the same KV file.
 */
async function drainJobs(dataDir: string): Promise<{ backlog: number; drainMs: number }> {
  const store = await openStore({ dataDir });
  try {
    const start = performance.now();
    const deadline = start + 60_000;
    const backlog = (await pendingJobs(store, undefined, deadline)).length;
    // One job listed is enough to know the queue is not empty yet.
    while ((await pendingJobs(store, 1, deadline)).length) {
      if (performance.now() > deadline) throw new Error("Incoming jobs did not drain in 60 s");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return { backlog, drainMs: performance.now() - start };
  } finally {
    store.close();
  }
}

/**
 * The queued jobs, read from another process than the server's: while the
 * server drains the queue at full speed on a busy machine, the store's own
 * lock retry (about 2 s) can run out, so "database is locked" is polled
 * again here until `deadline`.
 */
async function pendingJobs(store: Store, limit: number | undefined, deadline: number) {
  for (;;) {
    try {
      return await store.incoming.list({ limit });
    } catch (error) {
      const locked = error instanceof Error && /database is (locked|busy)/i.test(error.message);
      if (!locked || performance.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * A data dir with the incoming endpoint `/hooks/bench` (handler `memory_get`)
 * whose queue holds at most `bound` waiting payloads (the total bound too).
 */
async function incomingHome(name: string, bound: number) {
  const home = await tempDir(name);
  const store = await openStore({ dataDir: home.path });
  try {
    await store.webhooks.addIncoming({ name: "bench", path: "/hooks/bench", handler: REST_TOOL });
  } finally {
    store.close();
  }
  await Deno.writeTextFile(
    `${home.path}/config.json`,
    JSON.stringify({
      incoming: { max_pending_per_endpoint: bound, max_pending: Math.max(bound, 100_000) },
    }),
  );
  return home;
}

/** Incoming webhook POSTs answered 202 by the real server. */
export async function benchIncoming(
  { mode }: HttpServerBenchOptions,
): Promise<IncomingBenchResult> {
  const connections = 64;
  const bare_hono = await bareHono(connections, mode);
  // Accepting is measured here, so the queue's bound must not refuse anything
  // (incoming_backpressure measures the bound).
  await using home = await incomingHome("incoming", 10_000_000);
  await using server = await startToolgateHttp(home.path);
  const toolgate = await load({
    url: server.url,
    path: "/hooks/bench",
    body: ARGS,
    connections,
    ...sizes(mode),
  });
  const { backlog, drainMs } = await drainJobs(home.path);
  return {
    connections,
    toolgate,
    bare_hono,
    ratio: ratio(toolgate.requests_per_s, bare_hono.requests_per_s),
    backlog_at_end: backlog,
    drain_s: round3(drainMs / 1000),
    handled_per_s: backlog ? rate(backlog, drainMs) : 0,
  };
}

/** Outcome of {@linkcode benchIncomingBackpressure}. */
export interface IncomingBackpressureResult {
  connections: number;
  /** `incoming.max_pending_per_endpoint` of the server. */
  bound: number;
  /** Payloads accepted per second once the queue had filled (audit entries in the measured phase). */
  accepted_per_s: number;
  /** 503 QUEUE_FULL answers per second in the same phase. */
  refused_per_s: number;
  /** Accepted jobs waiting when the load stopped: never above `bound`. */
  backlog_at_end: number;
  /** Handler calls per second in the same phase (audit entries). */
  handled_per_s: number;
  /** `accepted_per_s / handled_per_s`: about 1 when acceptance settled to the drain rate. */
  ratio: number;
}

/**
 * Sustained load on an incoming endpoint whose queue is bounded: after a
 * warm-up that fills the queue, the accepted rate should settle to what the
 * handlers drain, with the rest answered 503 (senders retry), and the queue
 * should never pass its bound.
 */
export async function benchIncomingBackpressure(
  { mode }: HttpServerBenchOptions,
): Promise<IncomingBackpressureResult> {
  const connections = 64;
  const bound = mode === "full" ? 5000 : mode === "quick" ? 2000 : 300;
  await using home = await incomingHome("backpressure", bound);
  await using server = await startToolgateHttp(home.path);
  const { durationMs, warmupMs } = sizes(mode);
  const fill = Math.max(warmupMs, mode === "smoke" ? 500 : 2000);
  const started = Date.now();
  const result = await runJson<LoadResult>([
    "run",
    "-A",
    "--cached-only",
    benchFile("_load.ts"),
    JSON.stringify(
      {
        url: server.url,
        path: "/hooks/bench",
        body: ARGS,
        connections,
        durationMs,
        // Long enough for the queue to fill before measuring.
        warmupMs: fill,
      } satisfies LoadOptions,
    ),
  ]);
  // The measured phase, as the audit log dates it: payloads accepted
  // (webhook.incoming) and handler calls made (tool.call) in the same window.
  const from = started + fill + 200;
  const to = started + fill + durationMs - 200;
  const accepted = await countAudit(server.url, "webhook.incoming", from, to);
  const handled = await countAudit(server.url, "tool.call", from, to);
  const { backlog } = await drainJobs(home.path);
  if (backlog > bound) throw new Error(`The queue held ${backlog} jobs, over its bound ${bound}`);
  return {
    connections,
    bound,
    accepted_per_s: rate(accepted, to - from),
    refused_per_s: rate(result.non_2xx, durationMs),
    backlog_at_end: backlog,
    handled_per_s: rate(handled, to - from),
    ratio: handled ? ratio(accepted, handled) : 0,
  };
}

/** Audit entries of `kind` written between `from` and `to` (epoch ms), read from GET /audit. */
async function countAudit(url: string, kind: string, from: number, to: number): Promise<number> {
  let count = 0;
  let after = 0;
  const since = new Date(from).toISOString();
  for (;;) {
    const response = await fetch(
      `${url}/audit?kind=${kind}&since=${since}&limit=1000&after=${after}`,
    );
    if (!response.ok) throw new Error(`GET /audit answered ${response.status}`);
    const page: { entries: { timestamp: string }[]; next: number | null } = await response.json();
    for (const entry of page.entries) {
      const at = Date.parse(entry.timestamp);
      if (at >= from && at < to) count++;
    }
    if (page.next === null || page.entries.length === 0) return count;
    if (Date.parse(page.entries.at(-1)!.timestamp) >= to) return count;
    after = page.next;
  }
}

/** A toolgate server with `webhooks` subscribed to every event (`main`: another checkout's). */
async function latencyServer(webhooks: string[], main?: string) {
  const home = await tempDir("latency");
  if (webhooks.length) {
    const store = await openStore({ dataDir: home.path });
    try {
      for (const url of webhooks) {
        await store.webhooks.addOutgoing({ url, events: "*", secret: "bench-secret" });
      }
    } finally {
      store.close();
    }
  }
  const server = await startToolgateHttp(home.path, {}, main);
  return {
    url: server.url,
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]();
      await home[Symbol.asyncDispose]();
    },
  };
}

/** Paced calls on one connection; every latency. */
async function pacedCalls(
  url: string,
  durationMs: number,
  warmupMs: number,
  callsPerS: number,
): Promise<number[]> {
  const result = await runJson<LoadResult>([
    "run",
    "-A",
    "--cached-only",
    benchFile("_load.ts"),
    JSON.stringify(
      {
        url,
        path: `/tools/${REST_TOOL}`,
        body: ARGS,
        connections: 1,
        durationMs,
        warmupMs,
        intervalMs: 1000 / callsPerS,
        samples: true,
      } satisfies LoadOptions,
    ),
  ]);
  if (result.non_2xx || !result.requests || !result.samples_ms) {
    throw new Error("Paced calls failed");
  }
  return result.samples_ms;
}

/**
 * Tool-call latency with 10 webhooks subscribed to every event, against
 * none. Both servers run side by side and are measured in alternating
 * rounds (A B B A …), their latencies pooled per server, so that drift of
 * the shared machine during the run falls on both alike. With
 * `TOOLGATE_BENCH_BEFORE` set to another checkout, its code runs a third
 * server with the same webhooks in the same rounds.
 */
export async function benchWebhookLatency(
  { mode }: HttpServerBenchOptions,
): Promise<WebhookLatencyBenchResult> {
  const callsPerS = 50;
  const rounds = mode === "full" ? 36 : mode === "quick" ? 6 : 2;
  const roundMs = mode === "full" ? 1000 : mode === "quick" ? 500 : 200;
  const beforeRoot = Deno.env.get("TOOLGATE_BENCH_BEFORE")?.replace(/\/+$/, "");
  await using receivers = await startReceivers(10);
  await using none = await latencyServer([]);
  await using ten = await latencyServer(receivers.urls);
  await using before = beforeRoot
    ? await latencyServer(receivers.urls, `${beforeRoot}/main.ts`)
    : undefined;
  const servers = { none, ten, ...(before ? { before } : {}) };
  const names = Object.keys(servers) as (keyof typeof servers)[];
  const pooled = Object.fromEntries(names.map((n) => [n, [] as number[]]));
  const warm = sizes(mode).warmupMs;
  for (const name of names) await pacedCalls(servers[name]!.url, 200, warm, callsPerS);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) {
      pooled[name].push(...await pacedCalls(servers[name]!.url, roundMs, 100, callsPerS));
    }
  }
  const noWebhooks = latency(pooled.none);
  const tenWebhooks = latency(pooled.ten);
  const beforeFigures = beforeRoot && latency(pooled.before);
  return {
    calls_per_s: callsPerS,
    calls: Math.min(...names.map((n) => pooled[n].length)),
    no_webhooks: noWebhooks,
    ten_webhooks: tenWebhooks,
    added_p50_ms: round3(tenWebhooks.p50_ms - noWebhooks.p50_ms),
    added_p99_ms: round3(tenWebhooks.p99_ms - noWebhooks.p99_ms),
    p99_budget_ms: round3(noWebhooks.p99_ms / 4),
    ...(beforeFigures
      ? {
        before: {
          root: beforeRoot,
          ...beforeFigures,
          added_p50_ms: round3(beforeFigures.p50_ms - noWebhooks.p50_ms),
          added_p99_ms: round3(beforeFigures.p99_ms - noWebhooks.p99_ms),
        },
      }
      : {}),
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
