/**
 * Storage adapter scenarios against real `toolgate mcp start --transport
 * http` processes, KV against PostgreSQL (a throwaway cluster on the same
 * machine, `tests/_postgres.ts`, a fresh database per phase):
 *
 * - `store_rest`: REST `POST /tools/memory_get` (a read of a missing key,
 *   each call audited) from the raw-TCP load generator (`_load.ts`): one
 *   server on KV, one on PostgreSQL, and two servers on one PostgreSQL
 *   database with the load split over both (two load processes at once).
 * - `store_backlog`: a server whose webhook has a backlog of pending
 *   deliveries (100k in full), written straight to the store through its
 *   group-committing `deliveries.writer()` before the server starts. Its RSS
 *   (`VmRSS` of `/proc/<pid>/status`) against an idle server's (same
 *   webhook, nothing pending), and the time from spawning a (re)started
 *   server to its listening line. Three servers run on the backlog one after
 *   another, each stopped with SIGTERM, as the receiver changes: it never
 *   answers (attempts hang: the dispatcher holds its window), then it answers
 *   503 at once (each attempt fails and its retry is set 10 minutes ahead),
 *   then 204 (the backlog is delivered). Targets (issue 19 item 5): RSS
 *   within 50 MB of idle, a restart listening in under 2 s.
 *
 * Run alone: `deno run -A scripts/bench/storage_server.ts [--quick|--smoke]
 * [--only=store_rest|store_backlog] [--backlog=N] [--adapters=kv,postgres]` prints JSON.
 *
 * @module
 */
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import type { Figure } from "./_figure.ts";
import type { LoadResult } from "./_load.ts";
import { type BenchPostgres, startBenchPostgres, type TransactionCounts } from "./_postgres.ts";
import { type ReadyProcess, runLoadProcess, startToolgateHttp, tempDir } from "./_proc.ts";
import { rate, ratio, round3 } from "./_stats.ts";
import { eventOps } from "./storage.ts";
import { openStore } from "../../src/store/mod.ts";

/** Options of {@linkcode benchStoreRest}. */
export interface StoreRestBenchOptions {
  /** `full`, `quick` or `smoke`. */
  mode: BenchMode;
}

/** Throughput and latency of one load run (or two at once, summed). */
export interface RestFigures {
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  /** With several servers: each one's figures. */
  per_instance?: { requests_per_s: number; p50_ms: number; p99_ms: number }[];
}

/** Figures of {@linkcode benchStoreRest}. */
export interface StoreRestResult {
  tool: string;
  /** Connections in all (split evenly over the servers). */
  connections: number;
  kv: RestFigures;
  postgres: RestFigures;
  /** Two servers on one database, half the connections each; rates summed, worst latency. */
  postgres_two_instances: RestFigures;
  /** `postgres / kv`. */
  postgres_vs_kv: number;
  /** `postgres_two_instances / postgres`. */
  two_vs_one: number;
  /**
   * Transactions committed and rolled back in the one-server database over
   * the server's life (warm-up included). A rollback is mostly an audit
   * commit that lost the race for the chain's head to another writer.
   */
  postgres_transactions: TransactionCounts;
  /** The same for the two-server database. */
  postgres_two_instances_transactions: TransactionCounts;
  postgres_version: string;
}

/** Options of {@linkcode benchStoreBacklog}. */
export interface StoreBacklogBenchOptions {
  /** `full`, `quick` or `smoke`. */
  mode: BenchMode;
  /**
   * Pending deliveries written before the server starts.
   * @default 100000 (full), 20000 (quick), 3000 (smoke); `TOOLGATE_BENCH_BACKLOG` overrides
   */
  backlog?: number;
  /** How long RSS is sampled per phase, in ms. @default 10000 (full), 3000 (quick), 300 (smoke) */
  sampleMs?: number;
  /** Adapters to measure. @default ["kv", "postgres"] */
  adapters?: readonly ("kv" | "postgres")[];
}

/** RSS samples of a server over a phase, in MiB. */
export interface RssFigures {
  /** Largest sample. */
  max_mib: number;
  /** Last sample. */
  last_mib: number;
}

/** Figures of one adapter in {@linkcode benchStoreBacklog}. */
export interface BacklogAdapterFigures {
  /** Pending deliveries written before the start. */
  backlog: number;
  /** Rate at which they were written through `deliveries.writer()`, per second. */
  written_per_s: number;
  /** Idle server (same webhook, nothing pending): spawn → listening line, in ms. */
  idle_start_ms: number;
  /** The idle server spawned again after a SIGTERM stop. */
  idle_restart_ms: number;
  idle_rss: RssFigures;
  /** First start with the backlog pending: spawn → listening line, in ms. */
  backlog_start_ms: number;
  /** RSS while every attempt hangs (the receiver never answers; 1 minute timeout). */
  stalled_rss: RssFigures;
  /** SIGTERM → exit of the stalled server (its hanging attempts answered 503 first). */
  stalled_stop_ms: number;
  /** The server spawned again on the backlog (target < 2000). */
  backlog_restart_ms: number;
  /** RSS while every attempt fails at once (503; each retry 10 minutes ahead). */
  failing_rss: RssFigures;
  /** Attempts the receiver saw while failing them (from the spawn), per second. */
  failing_attempts_per_s: number;
  /** The server spawned a third time, on what is left (target < 2000). */
  backlog_restart2_ms: number;
  /** RSS while the receiver answers 204 and the backlog is delivered. */
  draining_rss: RssFigures;
  /** Deliveries the receiver answered 204 (from the spawn), per second. */
  draining_delivered_per_s: number;
  /** Largest RSS of the three backlog phases − `idle_rss.max_mib` (target ≤ 50). */
  rss_over_idle_mib: number;
}

/** Figures of {@linkcode benchStoreBacklog}. */
export interface StoreBacklogResult {
  sample_ms: number;
  kv?: BacklogAdapterFigures;
  postgres?: BacklogAdapterFigures;
  postgres_version?: string;
}

const REST_TOOL = "memory_get";
const ARGS = JSON.stringify({ key: "bench/missing-key" });
const CONNECTIONS = 64;

function restSizes(mode: BenchMode) {
  return {
    durationMs: mode === "full" ? 8000 : mode === "quick" ? 3000 : 800,
    warmupMs: mode === "full" ? 2000 : mode === "quick" ? 1000 : 300,
  };
}

function load(url: string, connections: number, mode: BenchMode): Promise<LoadResult> {
  return runLoadProcess({
    url,
    path: `/tools/${REST_TOOL}`,
    body: ARGS,
    connections,
    ...restSizes(mode),
  });
}

/** The load split evenly over `urls`, all at once; rates summed, the worst latencies. */
async function loadAll(urls: string[], mode: BenchMode): Promise<RestFigures> {
  const results = await Promise.all(
    urls.map((url) => load(url, Math.round(CONNECTIONS / urls.length), mode)),
  );
  return {
    requests_per_s: results.reduce((sum, r) => sum + r.requests_per_s, 0),
    p50_ms: Math.max(...results.map((r) => r.p50_ms)),
    p99_ms: Math.max(...results.map((r) => r.p99_ms)),
    ...(results.length > 1
      ? {
        per_instance: results.map(({ requests_per_s, p50_ms, p99_ms }) => ({
          requests_per_s,
          p50_ms,
          p99_ms,
        })),
      }
      : {}),
  };
}

/** The secret key every server of one store is given. */
const SHARED_SECRET_KEY = btoa(String.fromCharCode(...new Uint8Array(32).fill(5)));

/** Servers on one store (`url`, or the KV file of the first home), each with a home of its own. */
async function servers(count: number, url?: string) {
  const homes: ({ path: string } & AsyncDisposable)[] = [];
  const started: (ReadyProcess & { url: string })[] = [];
  const dispose = async () => {
    for (const server of started) await server.stop();
    for (const home of homes) await home[Symbol.asyncDispose]();
  };
  try {
    for (let i = 0; i < count; i++) {
      const home = await tempDir(`store-rest-${i}`);
      homes.push(home);
      started.push(
        await startToolgateHttp(home.path, {
          // Instances on one database share one secret key (the store refuses another).
          TOOLGATE_SECRET_KEY: SHARED_SECRET_KEY,
          ...(url ? { TOOLGATE_DATABASE_URL: url } : {}),
        }),
      );
    }
  } catch (error) {
    await dispose();
    throw error;
  }
  return { urls: started.map((s) => s.url), [Symbol.asyncDispose]: dispose };
}

/**
 * REST tool calls through real servers: KV, PostgreSQL, and two servers on
 * one PostgreSQL database. Timed phases: about 35 s in full, 17 s quick.
 */
export async function benchStoreRest({ mode }: StoreRestBenchOptions): Promise<StoreRestResult> {
  await using pg = await startBenchPostgres();
  let kv: RestFigures;
  {
    await using one = await servers(1);
    kv = await loadAll(one.urls, mode);
  }
  let postgres: RestFigures;
  {
    await using one = await servers(1, await pg.database("rest_one"));
    postgres = await loadAll(one.urls, mode);
  }
  let two: RestFigures;
  {
    await using both = await servers(2, await pg.database("rest_two"));
    two = await loadAll(both.urls, mode);
  }
  // The servers stopped: their connections have reported their counts.
  const oneTransactions = await pg.transactions("rest_one");
  const twoTransactions = await pg.transactions("rest_two");
  return {
    tool: REST_TOOL,
    connections: CONNECTIONS,
    kv,
    postgres,
    postgres_two_instances: two,
    postgres_vs_kv: ratio(postgres.requests_per_s, kv.requests_per_s),
    two_vs_one: ratio(two.requests_per_s, postgres.requests_per_s),
    postgres_transactions: oneTransactions,
    postgres_two_instances_transactions: twoTransactions,
    postgres_version: pg.version,
  };
}

// ---------------------------------------------------------------------------
// Backlog

/** How the receiver answers: never (held until the mode changes), 503 at once, or 204. */
type ReceiverMode = "stall" | "fail" | "answer";

/**
 * A webhook receiver on 127.0.0.1 whose behaviour the bench switches; held
 * requests are answered 503 when the mode changes.
 */
function receiver() {
  let mode = "stall" as ReceiverMode;
  let release: () => void = () => {};
  let released = new Promise<void>((resolve) => release = resolve);
  let requests = 0;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      requests++;
      await request.body?.cancel();
      if (mode === "stall") await released;
      return new Response(null, { status: mode === "answer" ? 204 : 503 });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    /** Requests received so far. */
    get requests() {
      return requests;
    },
    set(next: ReceiverMode) {
      mode = next;
      release();
      released = new Promise<void>((resolve) => release = resolve);
    },
    async [Symbol.asyncDispose]() {
      mode = "fail";
      release();
      await server.shutdown();
    },
  };
}

/** VmRSS of a process, in MiB. */
async function rssMib(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
  if (!Number.isFinite(kib)) throw new Error(`No VmRSS for process ${pid}`);
  return Math.round(kib / 102.4) / 10;
}

/** Samples a process's RSS every 100 ms for `ms`. */
async function sampleRss(pid: number, ms: number): Promise<RssFigures> {
  let max = 0;
  let last = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    last = await rssMib(pid);
    max = Math.max(max, last);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { max_mib: max, last_mib: last };
}

const BACKLOG_ENV = {
  // Attempts hang for a minute before failing, and a failed one is retried
  // 10 minutes later: each pending delivery is tried at most once per phase.
  TOOLGATE_WEBHOOK_TIMEOUT_MS: "60000",
  TOOLGATE_RETRY_BASE_MS: "600000",
};

/** Spawns a server and times spawn → listening line. */
async function timedStart(home: string, url: string | undefined) {
  const start = performance.now();
  const server = await startToolgateHttp(home, {
    ...BACKLOG_ENV,
    ...(url ? { TOOLGATE_DATABASE_URL: url } : {}),
  });
  return { server, ms: Math.round(performance.now() - start) };
}

/** Stops a server (SIGTERM, bounded) and times it. */
async function timedStop(server: ReadyProcess): Promise<number> {
  const start = performance.now();
  await server.stop();
  return Math.round(performance.now() - start);
}

/**
 * A data dir (and database) with one webhook to `webhookUrl` and `backlog`
 * pending deliveries to it, written in bounded batches through the store's
 * group-committing writer; returns the write rate.
 */
async function prepare(
  home: string,
  url: string | undefined,
  webhookUrl: string,
  backlog: number,
): Promise<number> {
  const store = await openStore({ dataDir: home, url });
  try {
    const hook = await store.webhooks.addOutgoing({
      url: webhookUrl,
      events: "*",
      secret: "bench-secret",
    });
    const writer = store.deliveries.writer();
    const batch = 2000;
    const start = performance.now();
    for (let done = 0; done < backlog; done += batch) {
      const now = Date.now();
      const size = Math.min(batch, backlog - done);
      await Promise.all(
        Array.from({ length: size }, (_, i) => writer.write(eventOps(done + i, [hook.id], now))),
      );
    }
    await writer.flush();
    return rate(backlog, performance.now() - start);
  } finally {
    await store.close();
  }
}

/** Runs a server on the backlog for `sampleMs` (from spawn), sampling its RSS. */
async function backlogPhase(
  home: string,
  url: string | undefined,
  hooks: ReturnType<typeof receiver>,
  sampleMs: number,
) {
  // Attempts start before the listening line (the first claimed page): counted from the spawn.
  const before = hooks.requests;
  const start = performance.now();
  const { server, ms } = await timedStart(home, url);
  let rss: RssFigures;
  let requests: number;
  let stopMs: number;
  try {
    rss = await sampleRss(server.child.pid, sampleMs);
    requests = rate(hooks.requests - before, performance.now() - start);
  } finally {
    // Held attempts are answered now, so the stop does not wait for them.
    hooks.set("fail");
    stopMs = await timedStop(server);
  }
  return { start_ms: ms, rss, requests_per_s: requests, stop_ms: stopMs };
}

async function backlogOn(
  pg: BenchPostgres | undefined,
  backlog: number,
  sampleMs: number,
): Promise<BacklogAdapterFigures> {
  const tag = pg ? "pg" : "kv";
  await using hooks = receiver();

  // Idle: the same webhook, nothing pending.
  await using idleHome = await tempDir(`backlog-idle-${tag}`);
  const idleUrl = pg ? await pg.database("backlog_idle") : undefined;
  await prepare(idleHome.path, idleUrl, hooks.url, 0);
  const idle = await backlogPhase(idleHome.path, idleUrl, hooks, sampleMs);
  const idleAgain = await timedStart(idleHome.path, idleUrl);
  await idleAgain.server.stop();

  // The backlog, then three servers on it one after another.
  await using home = await tempDir(`backlog-${tag}`);
  const url = pg ? await pg.database("backlog_pending") : undefined;
  const written = await prepare(home.path, url, hooks.url, backlog);
  hooks.set("stall");
  const stalled = await backlogPhase(home.path, url, hooks, sampleMs);
  hooks.set("fail");
  const failing = await backlogPhase(home.path, url, hooks, sampleMs);
  hooks.set("answer");
  const draining = await backlogPhase(home.path, url, hooks, sampleMs);
  return {
    backlog,
    written_per_s: written,
    idle_start_ms: idle.start_ms,
    idle_restart_ms: idleAgain.ms,
    idle_rss: idle.rss,
    backlog_start_ms: stalled.start_ms,
    stalled_rss: stalled.rss,
    stalled_stop_ms: stalled.stop_ms,
    backlog_restart_ms: failing.start_ms,
    failing_rss: failing.rss,
    failing_attempts_per_s: failing.requests_per_s,
    backlog_restart2_ms: draining.start_ms,
    draining_rss: draining.rss,
    draining_delivered_per_s: draining.requests_per_s,
    rss_over_idle_mib: round3(
      Math.max(stalled.rss.max_mib, failing.rss.max_mib, draining.rss.max_mib) -
        idle.rss.max_mib,
    ),
  };
}

function defaultBacklog(mode: BenchMode): number {
  const env = Deno.env.get("TOOLGATE_BENCH_BACKLOG");
  if (env !== undefined) {
    const value = Number(env);
    if (!Number.isInteger(value) || value < 1) {
      throw new Error(`TOOLGATE_BENCH_BACKLOG must be a positive integer, got ${env}`);
    }
    return value;
  }
  return mode === "full" ? 100_000 : mode === "quick" ? 20_000 : 3000;
}

/**
 * Memory and restart of a server with a backlog of pending deliveries, KV
 * and PostgreSQL. Bounded: each phase samples for `sampleMs`; with 100k
 * pending, about 2 minutes in all.
 */
export async function benchStoreBacklog(
  options: StoreBacklogBenchOptions,
): Promise<StoreBacklogResult> {
  const {
    mode,
    backlog = defaultBacklog(mode),
    sampleMs = mode === "full" ? 10_000 : mode === "quick" ? 3000 : 300,
    adapters = ["kv", "postgres"],
  } = options;
  if (!Number.isInteger(backlog) || backlog < 1) {
    throw new RangeError(`Invalid backlog: ${backlog} is not a positive integer`);
  }
  if (!(sampleMs >= 100)) throw new RangeError(`Invalid sampleMs: ${sampleMs} is under 100`);
  for (const adapter of adapters) {
    if (adapter !== "kv" && adapter !== "postgres") {
      throw new RangeError(`Invalid adapter ${adapter}: use kv or postgres`);
    }
  }
  const result: StoreBacklogResult = { sample_ms: sampleMs };
  if (adapters.includes("kv")) result.kv = await backlogOn(undefined, backlog, sampleMs);
  if (adapters.includes("postgres")) {
    await using pg = await startBenchPostgres();
    result.postgres = await backlogOn(pg, backlog, sampleMs);
    result.postgres_version = pg.version;
  }
  return result;
}

/** Largest RSS over idle a server with a backlog may have (issue 19 item 5), in MB. */
export const BACKLOG_RSS_LIMIT_MB = 50;

/** Longest a restarted server with a backlog may take to listen (issue 19 item 5), in ms. */
export const BACKLOG_RESTART_LIMIT_MS = 2000;

/** The table rows of {@linkcode benchStoreBacklog}, with their absolute targets. */
export function backlogFigures(r: StoreBacklogResult): Figure[] {
  const out: Figure[] = [];
  const row = (
    name: string,
    value: number,
    baselineName: string,
    baseline: number | null,
    target = "",
    met: boolean | null = null,
  ): Figure => ({
    scenario: "store_backlog",
    figure: name,
    toolgate: value,
    baseline_name: baselineName,
    baseline,
    ratio: baseline ? Math.round((value / baseline) * 100) / 100 : null,
    target,
    met,
  });
  const limitMib = Math.round((BACKLOG_RSS_LIMIT_MB / 1.048576) * 10) / 10;
  for (const adapter of ["kv", "postgres"] as const) {
    const f = r[adapter];
    if (!f) continue;
    const name = adapter === "kv" ? "KV" : "PostgreSQL";
    const pending = `${Math.round(f.backlog / 1000)}k pending`;
    const idle = f.idle_rss.max_mib;
    for (
      const [phase, rss] of [
        ["receiver never answers", f.stalled_rss],
        ["every attempt fails", f.failing_rss],
        ["delivering (204)", f.draining_rss],
      ] as const
    ) {
      out.push(row(
        `${name}: RSS MiB, ${pending}, ${phase}`,
        rss.max_mib,
        "idle server",
        idle,
        `≤ idle + ${BACKLOG_RSS_LIMIT_MB} MB`,
        rss.max_mib - idle <= limitMib,
      ));
    }
    out.push(
      row(
        `${name}: restart → listening ms, ${pending}`,
        f.backlog_restart_ms,
        "idle server restart",
        f.idle_restart_ms,
        `< ${BACKLOG_RESTART_LIMIT_MS} ms`,
        f.backlog_restart_ms < BACKLOG_RESTART_LIMIT_MS,
      ),
      row(
        `${name}: 2nd restart → listening ms`,
        f.backlog_restart2_ms,
        "idle server restart",
        f.idle_restart_ms,
        `< ${BACKLOG_RESTART_LIMIT_MS} ms`,
        f.backlog_restart2_ms < BACKLOG_RESTART_LIMIT_MS,
      ),
      row(`${name}: backlog written/s (deliveries.writer())`, f.written_per_s, "", null),
      row(`${name}: attempts/s while every attempt fails`, f.failing_attempts_per_s, "", null),
      row(`${name}: backlog delivered/s (204)`, f.draining_delivered_per_s, "", null),
    );
  }
  return out;
}

if (import.meta.main) {
  const args = Deno.args;
  const mode = modeFromArgs(args);
  const only = args.find((a) => a.startsWith("--only="))?.slice(7).split(",");
  const backlogArg = args.find((a) => a.startsWith("--backlog="))?.slice(10);
  const adaptersArg = args.find((a) => a.startsWith("--adapters="))?.slice(11).split(",");
  const out: Record<string, unknown> = {};
  if (!only || only.includes("store_rest")) out.store_rest = await benchStoreRest({ mode });
  if (!only || only.includes("store_backlog")) {
    out.store_backlog = await benchStoreBacklog({
      mode,
      backlog: backlogArg ? Number(backlogArg) : undefined,
      adapters: adaptersArg as ("kv" | "postgres")[] | undefined,
    });
  }
  console.log(JSON.stringify(out, null, 2));
}
