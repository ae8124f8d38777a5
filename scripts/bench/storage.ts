/**
 * Storage adapter benchmarks, in-process on the real modules, each adapter
 * on a fresh store: the Deno KV file in the temp dir, and a fresh database
 * of a throwaway PostgreSQL cluster on the same machine (started as the
 * tests start theirs, `tests/_postgres.ts`).
 *
 * - `store_deliveries`: durable outbox writes and deliveries, KV against
 *   PostgreSQL. Persistence alone goes through the store's group-committing
 *   `deliveries.writer()` (one unit per event: its body and its fan-out to 10
 *   webhooks, as the dispatcher writes them, 64 writers); deliveries through
 *   the real dispatcher (`bus.emit()` persists, then signed POSTs to 10
 *   local receivers, outcomes recorded), timed until the receivers got them
 *   all (`whenIdle()` only covers what the dispatcher holds in memory).
 * - `store_audit`: audit appends through the real `AuditLog` (group commit)
 *   on PostgreSQL against single-row `INSERT` commits to a plain table on the
 *   same server at the same concurrency (one row per transaction), and the
 *   same appends on KV against bare KV commits.
 *
 * Run alone: `deno run -A scripts/bench/storage.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { EgressPolicy } from "../../src/egress/mod.ts";
import postgres from "postgres";
import { type AuditLog, createAuditLog } from "../../src/audit/mod.ts";
import { EventBus } from "../../src/events/mod.ts";
import { newId } from "../../src/ids.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import { type DeliveryOp, openStore, type Store } from "../../src/store/mod.ts";
import { createDispatcher } from "../../src/webhooks/mod.ts";
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import { type BenchPostgres, startBenchPostgres, type TransactionCounts } from "./_postgres.ts";
import { tempDir } from "./_proc.ts";
import { latency, rate, ratio } from "./_stats.ts";
import { callInput } from "./audit.ts";
import { spawnReceivers } from "./webhooks.ts";

/** Options of the scenarios in this file. */
export interface StoreBenchOptions {
  /** `full`, `quick` or `smoke` (seconds: only checks that it runs). */
  mode: BenchMode;
}

/** Figures of one adapter in {@linkcode benchStoreDeliveries}; rates per second. */
export interface DeliveriesAdapterFigures {
  /** Events written to the outbox through `deliveries.writer()` (each with its fan-out). */
  outbox_events_per_s: number;
  /** The same as pending deliveries (`events × receivers`). */
  outbox_deliveries_per_s: number;
  /** Deliveries through the real dispatcher, from the first `emit()` until the receivers got all. */
  dispatcher_per_s: number;
  /** Time of `bus.emit()` (the event and its deliveries made durable), in ms. */
  emit_p50_ms: number;
  emit_p99_ms: number;
}

/** Figures of {@linkcode benchStoreDeliveries}. */
export interface StoreDeliveriesResult {
  /** Webhooks each event fans out to (one local receiver each). */
  receivers: number;
  /** Events written in the writer phase. */
  outbox_events: number;
  /** Events emitted in the dispatcher phase (`× receivers` deliveries). */
  dispatcher_events: number;
  /** Concurrent writers (writer phase) and emitters (dispatcher phase). */
  writers: number;
  /** Attempts in flight at once in the dispatcher. */
  concurrency: number;
  kv: DeliveriesAdapterFigures;
  postgres: DeliveriesAdapterFigures;
  /** `postgres.dispatcher_per_s / kv.dispatcher_per_s`. */
  dispatcher_ratio: number;
  /** `postgres.outbox_events_per_s / kv.outbox_events_per_s`. */
  outbox_ratio: number;
  postgres_version: string;
}

/** Figures of {@linkcode benchStoreAudit}; rates per second. */
export interface StoreAuditResult {
  /** Appenders (and inserting connections) in the concurrent phases. */
  concurrency: number;
  postgres: {
    /** `AuditLog.append()` from `concurrency` callers (group commit). */
    appends_concurrent_per_s: number;
    /** `AuditLog.append()` one after another. */
    appends_sequential_per_s: number;
    /** 1000 appends in flight at all times. */
    appends_burst_1000_per_s: number;
    /** Single-row `INSERT`s, one per transaction, from `concurrency` connections. */
    insert_commits_concurrent_per_s: number;
    /** The same from one connection. */
    insert_commits_sequential_per_s: number;
    /** `appends_concurrent_per_s / insert_commits_concurrent_per_s` (target ≥ 3). */
    ratio: number;
    /** `appends_concurrent_per_s / insert_commits_sequential_per_s` (the KV figure's baseline shape). */
    ratio_to_sequential_inserts: number;
    /** Entries per committed transaction, `concurrency` appenders (warm-up and open included). */
    entries_per_commit_concurrent: number;
    /** The same with 1000 appends in flight. */
    entries_per_commit_burst_1000: number;
  };
  kv: {
    appends_concurrent_per_s: number;
    appends_sequential_per_s: number;
    /** Bare `atomic().check().set().commit()`, one after another. */
    kv_commits_per_s: number;
    /** `appends_concurrent_per_s / kv_commits_per_s`. */
    ratio: number;
  };
  /** `postgres.appends_concurrent_per_s / kv.appends_concurrent_per_s`. */
  postgres_vs_kv: number;
  postgres_version: string;
}

const RECEIVERS = 10;
const WRITERS = 64;
const CONCURRENCY = 32;
const AUDIT_CONCURRENCY = 16;

function sizes(mode: BenchMode) {
  return {
    /** Deliveries per phase (events × receivers). */
    deliveries: mode === "full" ? 20_000 : mode === "quick" ? 5_000 : 500,
    /** Length of a timed phase, in ms. */
    phaseMs: mode === "full" ? 2000 : mode === "quick" ? 700 : 200,
  };
}

const RECEIVER_SCRIPT = `
const count = Number(Deno.args[0]);
let received = 0;
const servers = [];
for (let i = 0; i < count; i++) {
  servers.push(Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    if (request.method === "GET") return Response.json({ received });
    await request.arrayBuffer();
    received++;
    return new Response(null, { status: 204 });
  }));
}
console.log(JSON.stringify(servers.map((s) => s.addr.port)));
for await (const _ of Deno.stdin.readable) { /* runs until stdin closes */ }
await Promise.all(servers.map((s) => s.shutdown()));
`;

/** Local webhook receivers (204 to every POST) in a child process, counting what they receive. */
interface CountingReceivers extends AsyncDisposable {
  /** One URL per receiver. */
  urls: string[];
  /** POSTs received by all of them so far. */
  received(): Promise<number>;
}

/** Starts `count` counting receivers on loopback, port 0, in one child process. */
async function startCountingReceivers(count: number): Promise<CountingReceivers> {
  const { child, reader, ports } = await spawnReceivers(RECEIVER_SCRIPT, count);
  return {
    urls: ports.map((port) => `http://127.0.0.1:${port}/hook`),
    async received() {
      const response = await fetch(`http://127.0.0.1:${ports[0]}/count`);
      return ((await response.json()) as { received: number }).received;
    },
    async [Symbol.asyncDispose]() {
      await child.stdin.close();
      await reader.cancel();
      await child.status;
    },
  };
}

/** A fresh store of one adapter, closed and removed on dispose. */
export interface BenchStore extends AsyncDisposable {
  store: Store;
}

/**
 * Opens a fresh store: a KV file in a new temp dir, or a new database on
 * `pg` (named `name`) when given.
 */
export async function freshStore(
  pg: BenchPostgres | undefined,
  name: string,
  pool?: { max?: number },
): Promise<BenchStore> {
  const home = await tempDir(`store-${name}`);
  try {
    const url = pg ? await pg.database(name) : undefined;
    const store = await openStore({ dataDir: home.path, url, pool });
    return {
      store,
      async [Symbol.asyncDispose]() {
        await store.close();
        await home[Symbol.asyncDispose]();
      },
    };
  } catch (error) {
    await home[Symbol.asyncDispose]();
    throw error;
  }
}

function toolCalled(i: number) {
  return {
    tool_name: "http.fetch",
    plugin: "http",
    input: { url: `https://example.com/api/items/${i}`, method: "GET" },
    output: { status: 200, body: "x".repeat(300) },
    latency_ms: 12,
    session_id: "bench-session-0001",
  };
}

const encoder = new TextEncoder();

/**
 * The ops the dispatcher writes for one new event: its body and its fan-out
 * to `webhookIds`, due at `now`, claimed by nobody (left for a sender).
 */
export function eventOps(i: number, webhookIds: readonly string[], now: number): DeliveryOp[] {
  const id = newId("evt");
  const timestamp = new Date(now).toISOString();
  const body = encoder.encode(
    JSON.stringify({ id, type: "tool.called", timestamp, data: toolCalled(i) }),
  );
  return [
    { op: "put_event", event: { id, type: "tool.called", timestamp, body } },
    {
      op: "put_fanout",
      event_id: id,
      fanout: {
        event_type: "tool.called",
        created_at: timestamp,
        next_attempt_at: now,
        webhook_ids: [...webhookIds],
      },
    },
  ];
}

/** Registers one outgoing webhook per URL; returns their ids. */
async function addWebhooks(store: Store, urls: readonly string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const url of urls) {
    ids.push((await store.webhooks.addOutgoing({ url, events: "*", secret: "bench-secret" })).id);
  }
  return ids;
}

/** `events` outbox units written by `WRITERS` concurrent writers; events per second. */
async function outboxWrites(store: Store, webhookIds: string[], events: number): Promise<number> {
  const writer = store.deliveries.writer();
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: WRITERS }, async () => {
    while (next < events) await writer.write(eventOps(next++, webhookIds, Date.now()));
  }));
  await writer.flush();
  const ms = performance.now() - start;
  const pending = await store.deliveries.listPending();
  if (pending.length !== events * webhookIds.length) {
    throw new Error(`${pending.length} pending deliveries, ${events * webhookIds.length} written`);
  }
  return rate(events, ms);
}

/** Deliveries through the real dispatcher: `events` emitted by `WRITERS` emitters. */
async function dispatcherDeliveries(
  store: Store,
  receivers: CountingReceivers,
  events: number,
): Promise<{ per_s: number; emit_p50_ms: number; emit_p99_ms: number }> {
  const bus = new EventBus();
  const dispatcher = createDispatcher({
    store,
    bus,
    config: {
      dataDir: store.dataDir,
      webhooks: { retry_base_ms: 1000, timeout_ms: 10_000, poll_ms: 250 },
      events: { disabled: [] },
    },
    concurrency: CONCURRENCY,
    perWebhookConcurrency: CONCURRENCY,
    // The receivers listen on 127.0.0.1, which the egress policy refuses unless allowed.
    egress: new EgressPolicy({ allow: ["127.0.0.1/32"] }),
  });
  try {
    const urls = receivers.urls;
    await addWebhooks(store, urls);
    await dispatcher.start();
    const before = await receivers.received();
    const emits: number[] = [];
    let next = 0;
    const start = performance.now();
    await Promise.all(Array.from({ length: WRITERS }, async () => {
      while (next < events) {
        const i = next++;
        const t = performance.now();
        await bus.emit("tool.called", toolCalled(i));
        emits.push(performance.now() - t);
      }
    }));
    // whenIdle() looks at the deliveries held in memory only: those beyond
    // the dispatcher's window wait in the store, so count what arrived.
    const expected = before + events * urls.length;
    const deadline = start + 120_000;
    while (await receivers.received() < expected) {
      if (performance.now() > deadline) {
        throw new Error("Deliveries did not arrive within 120 s");
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const ms = performance.now() - start;
    await dispatcher.whenIdle();
    const dead = await store.deliveries.listDlq();
    if (dead.length) throw new Error(`${dead.length} benchmark deliveries were dead-lettered`);
    const left = await store.deliveries.listPending();
    if (left.length) throw new Error(`${left.length} deliveries still pending after whenIdle()`);
    const { p50_ms, p99_ms } = latency(emits);
    return { per_s: rate(events * urls.length, ms), emit_p50_ms: p50_ms, emit_p99_ms: p99_ms };
  } finally {
    await dispatcher.stop();
  }
}

async function deliveriesOn(
  pg: BenchPostgres | undefined,
  receivers: CountingReceivers,
  events: number,
  tag: string,
): Promise<DeliveriesAdapterFigures> {
  let outbox: number;
  {
    await using fresh = await freshStore(pg, `deliveries_outbox_${tag}`);
    const ids = await addWebhooks(fresh.store, receivers.urls);
    await outboxWrites(fresh.store, ids, Math.min(200, events)); // warm-up
    await using measured = await freshStore(pg, `deliveries_outbox_m_${tag}`);
    outbox = await outboxWrites(
      measured.store,
      await addWebhooks(measured.store, receivers.urls),
      events,
    );
  }
  await using fresh = await freshStore(pg, `deliveries_dispatch_${tag}`);
  const sent = await dispatcherDeliveries(fresh.store, receivers, events);
  return {
    outbox_events_per_s: outbox,
    outbox_deliveries_per_s: outbox * receivers.urls.length,
    dispatcher_per_s: sent.per_s,
    emit_p50_ms: sent.emit_p50_ms,
    emit_p99_ms: sent.emit_p99_ms,
  };
}

/**
 * Durable outbox writes and deliveries on KV and on PostgreSQL, same load,
 * same receivers. About 15 s in full, 10 s quick (the cluster's start
 * included); a delivery phase gives up after 120 s.
 */
export async function benchStoreDeliveries(
  { mode }: StoreBenchOptions,
): Promise<StoreDeliveriesResult> {
  const { deliveries } = sizes(mode);
  const events = Math.max(1, Math.round(deliveries / RECEIVERS));
  await using pg = await startBenchPostgres();
  await using receivers = await startCountingReceivers(RECEIVERS);
  const kv = await deliveriesOn(undefined, receivers, events, "kv");
  const pgFigures = await deliveriesOn(pg, receivers, events, "pg");
  return {
    receivers: RECEIVERS,
    outbox_events: events,
    dispatcher_events: events,
    writers: WRITERS,
    concurrency: CONCURRENCY,
    kv,
    postgres: pgFigures,
    dispatcher_ratio: ratio(pgFigures.dispatcher_per_s, kv.dispatcher_per_s),
    outbox_ratio: ratio(pgFigures.outbox_events_per_s, kv.outbox_events_per_s),
    postgres_version: pg.version,
  };
}

// ---------------------------------------------------------------------------
// Audit

/** Runs `workers` loops of `step` for `durationMs`; returns steps per second. */
async function timed(
  durationMs: number,
  workers: number,
  step: (i: number) => Promise<unknown>,
): Promise<number> {
  let count = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(Array.from({ length: workers }, async () => {
    while (performance.now() < end) await step(count++);
  }));
  return rate(count, performance.now() - start);
}

/** Appends per second, and (PostgreSQL) transactions in the store's database over the run. */
interface AppendFigures {
  per_s: number;
  /** Entries appended, warm-up included. */
  appended: number;
  /** Transactions committed and rolled back in the database (open and warm-up included). */
  transactions?: TransactionCounts;
}

async function appends(
  pg: BenchPostgres | undefined,
  name: string,
  durationMs: number,
  workers: number,
): Promise<AppendFigures> {
  let appended = 0;
  const step = (log: AuditLog) => (i: number) => {
    appended++;
    return log.append(callInput(i));
  };
  let perS: number;
  {
    await using fresh = await freshStore(pg, name);
    const log = createAuditLog({ store: fresh.store });
    try {
      await timed(Math.min(300, durationMs), workers, step(log)); // warm-up
      perS = await timed(durationMs, workers, step(log));
      const verified = await log.verify();
      if (!verified.ok) {
        throw new Error(`Benchmark chain did not verify: ${JSON.stringify(verified)}`);
      }
    } finally {
      await log.close();
    }
  }
  // The store is closed: its connections have reported their counts.
  const transactions = pg ? await pg.transactions(name) : undefined;
  return { per_s: perS, appended, ...(transactions ? { transactions } : {}) };
}

/**
 * Single-row `INSERT` commits on a plain table (an id and a body of an audit
 * entry's size), each in its own transaction, from `workers` connections.
 */
async function insertCommits(url: string, durationMs: number, workers: number): Promise<number> {
  const sql = postgres(url, { max: workers, onnotice: () => {} });
  try {
    await sql`create table bench_rows (id bigserial primary key, body bytea not null)`;
    const body = encoder.encode(JSON.stringify(callInput(0)).padEnd(600, " "));
    const step = () => sql`insert into bench_rows (body) values (${body})`;
    await timed(Math.min(300, durationMs), workers, step); // warm-up: every connection opened
    return await timed(durationMs, workers, step);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function entriesPerCommit(figures: AppendFigures): number {
  const commits = figures.transactions?.commits ?? 0;
  return commits ? Math.round((figures.appended / commits) * 10) / 10 : 0;
}

async function kvCommits(durationMs: number): Promise<number> {
  await using home = await tempDir("store-kv-commits");
  const store = await openKvStore({ dataDir: home.path });
  const kv = store.kv;
  const value = encoder.encode(JSON.stringify(callInput(0)).padEnd(600, " "));
  return await timed(durationMs, 1, async (i) => {
    await kv.atomic().check({ key: ["bench", "head"], versionstamp: null })
      .set(["bench", "entry", i], value).commit();
  }).finally(() => store.close());
}

/**
 * Audit appends on PostgreSQL against single-row INSERT commits on the same
 * server, and on KV against bare KV commits. Timed phases: about 25 s in
 * full, 13 s quick.
 */
export async function benchStoreAudit({ mode }: StoreBenchOptions): Promise<StoreAuditResult> {
  const { phaseMs } = sizes(mode);
  await using pg = await startBenchPostgres();
  const insertsConcurrent = await insertCommits(
    await pg.database("audit_inserts_concurrent"),
    phaseMs,
    AUDIT_CONCURRENCY,
  );
  const insertsSequential = await insertCommits(
    await pg.database("audit_inserts_sequential"),
    phaseMs,
    1,
  );
  const pgConcurrent = await appends(pg, "audit_concurrent", phaseMs, AUDIT_CONCURRENCY);
  const pgSequential = await appends(pg, "audit_sequential", phaseMs, 1);
  const pgBurst = await appends(pg, "audit_burst", phaseMs, 1000);
  const kvBare = await kvCommits(phaseMs);
  const kvConcurrent = (await appends(undefined, "audit_kv_concurrent", phaseMs, AUDIT_CONCURRENCY))
    .per_s;
  const kvSequential = (await appends(undefined, "audit_kv_sequential", phaseMs, 1)).per_s;
  return {
    concurrency: AUDIT_CONCURRENCY,
    postgres: {
      appends_concurrent_per_s: pgConcurrent.per_s,
      appends_sequential_per_s: pgSequential.per_s,
      appends_burst_1000_per_s: pgBurst.per_s,
      insert_commits_concurrent_per_s: insertsConcurrent,
      insert_commits_sequential_per_s: insertsSequential,
      ratio: ratio(pgConcurrent.per_s, insertsConcurrent),
      ratio_to_sequential_inserts: ratio(pgConcurrent.per_s, insertsSequential),
      entries_per_commit_concurrent: entriesPerCommit(pgConcurrent),
      entries_per_commit_burst_1000: entriesPerCommit(pgBurst),
    },
    kv: {
      appends_concurrent_per_s: kvConcurrent,
      appends_sequential_per_s: kvSequential,
      kv_commits_per_s: kvBare,
      ratio: ratio(kvConcurrent, kvBare),
    },
    postgres_vs_kv: ratio(pgConcurrent.per_s, kvConcurrent),
    postgres_version: pg.version,
  };
}

if (import.meta.main) {
  const mode = modeFromArgs(Deno.args);
  console.log(JSON.stringify(
    {
      store_deliveries: await benchStoreDeliveries({ mode }),
      store_audit: await benchStoreAudit({ mode }),
    },
    null,
    2,
  ));
}
