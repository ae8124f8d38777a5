/**
 * Outgoing webhook benchmark: durable, signed deliveries per second through
 * the dispatcher (event and deliveries stored in KV before `emit()` resolves,
 * HMAC per attempt, outcome recorded) to 1, 10 and 100 local receivers,
 * against a bare signed-fetch loop at the same concurrency to the same
 * receivers in the same run. The receivers run in a child process. With 10
 * receivers it also measures the garbage each delivery leaves on the main
 * thread (V8's sampling heap profiler), the cause of the GC pauses a busy
 * dispatcher adds to tool calls.
 *
 * Run alone: `deno run -A scripts/bench/webhooks.ts [--quick]` prints JSON.
 *
 * @module
 */
import { EgressPolicy } from "../../src/egress/mod.ts";
import { Session } from "node:inspector";
import { EventBus } from "../../src/events/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { createDispatcher, importSigningKey, signPayload } from "../../src/webhooks/mod.ts";

/** Options of {@linkcode benchWebhooks}. */
export interface WebhooksBenchOptions {
  /** About 3000 deliveries per phase instead of 20000. */
  quick: boolean;
}

/** Figures for one receiver count; rates are per second. */
export interface WebhooksBenchPhase {
  receivers: number;
  /** Events emitted (each fans out to every receiver). */
  events: number;
  /** Deliveries made (`events × receivers`). */
  deliveries: number;
  /** Durable signed deliveries through the dispatcher. */
  dispatcher_per_s: number;
  /** Bare `fetch` POSTs, each HMAC-signed, same concurrency and receivers. */
  bare_signed_fetch_per_s: number;
  /** `dispatcher_per_s / bare_signed_fetch_per_s`. */
  ratio: number;
  /** Median and 99th percentile time of `bus.emit()` (the emitter's cost), in ms. */
  emit_p50_ms: number;
  emit_p99_ms: number;
  /** Bytes allocated on the main thread per delivery, when measured (10 receivers). */
  dispatcher_bytes_per_delivery?: number;
  /** The same for the bare signed-fetch loop, per request. */
  bare_bytes_per_request?: number;
}

/** Figures of {@linkcode benchWebhooks}. */
export interface WebhooksBenchResult {
  quick: boolean;
  /** Attempts in flight at once, for both the dispatcher and the bare loop. */
  concurrency: number;
  phases: WebhooksBenchPhase[];
  /** Whole run, in ms. */
  total_ms: number;
}

const CONCURRENCY = 32;
const EMITTERS = 64;

const RECEIVER_SCRIPT = `
const count = Number(Deno.args[0]);
const servers = [];
for (let i = 0; i < count; i++) {
  servers.push(Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    await request.arrayBuffer();
    return new Response(null, { status: 204 });
  }));
}
console.log(JSON.stringify(servers.map((s) => s.addr.port)));
for await (const _ of Deno.stdin.readable) { /* runs until stdin closes */ }
await Promise.all(servers.map((s) => s.shutdown()));
`;

/** Local webhook receivers (204 to every POST) in a child process. */
export interface Receivers extends AsyncDisposable {
  /** One URL per receiver. */
  urls: string[];
}

/**
 * Runs `script` (which listens on `count` loopback ports and prints them as a
 * JSON array line) in a child process, and reads its ports.
 */
export async function spawnReceivers(script: string, count: number): Promise<{
  child: Deno.ChildProcess;
  reader: ReadableStreamDefaultReader<string>;
  ports: number[];
}> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", script, String(count)],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const chunk = await reader.read();
    if (chunk.done) throw new Error("Receiver process exited before listening");
    text += chunk.value;
  }
  return { child, reader, ports: JSON.parse(text.slice(0, text.indexOf("\n"))) };
}

/** Starts `count` receivers on loopback, port 0, in one child process. */
export async function startReceivers(count: number): Promise<Receivers> {
  const { child, reader, ports } = await spawnReceivers(RECEIVER_SCRIPT, count);
  return {
    urls: ports.map((port) => `http://127.0.0.1:${port}/hook`),
    async [Symbol.asyncDispose]() {
      await child.stdin.close();
      await reader.cancel();
      await child.status;
    },
  };
}

function rate(count: number, ms: number): number {
  return Math.round(count / (ms / 1000));
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return 0;
  const value = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
  return Math.round(value * 1000) / 1000;
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

interface ProfileNode {
  selfSize: number;
  children: ProfileNode[];
}

/**
 * Bytes allocated on this thread while `run` runs, garbage included: V8's
 * sampling heap profiler, whose samples stand for the bytes between them.
 */
export async function allocatedBytes(run: () => Promise<unknown>): Promise<number> {
  const session = new Session();
  session.connect();
  const post = <T>(method: string, params: Record<string, unknown> = {}) =>
    new Promise<T>((resolve, reject) =>
      session.post(method, params, (error, result) => error ? reject(error) : resolve(result as T))
    );
  try {
    await post("HeapProfiler.startSampling", {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    await run();
    const { profile } = await post<{ profile: { head: ProfileNode } }>(
      "HeapProfiler.stopSampling",
    );
    let total = 0;
    const stack = [profile.head];
    while (stack.length) {
      const node = stack.pop()!;
      total += node.selfSize;
      stack.push(...node.children);
    }
    return total;
  } finally {
    session.disconnect();
  }
}

async function throughDispatcher(
  urls: string[],
  events: number,
  measure: (run: () => Promise<unknown>) => Promise<unknown> = (run) => run(),
): Promise<{ per_s: number; emits: number[] }> {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-bench-webhooks-" });
  const store = await openStore({ dataDir });
  const bus = new EventBus();
  const dispatcher = createDispatcher({
    store,
    bus,
    config: {
      dataDir,
      webhooks: { retry_base_ms: 1000, timeout_ms: 10_000, poll_ms: 250 },
      events: { disabled: [] },
    },
    concurrency: CONCURRENCY,
    perWebhookConcurrency: CONCURRENCY,
    // The receivers listen on 127.0.0.1, which the egress policy refuses unless allowed.
    egress: new EgressPolicy({ allow: ["127.0.0.1/32"] }),
  });
  try {
    for (const url of urls) {
      await store.webhooks.addOutgoing({ url, events: "*", secret: "bench-secret" });
    }
    await dispatcher.start();
    const emits: number[] = [];
    let next = 0;
    const start = performance.now();
    await measure(async () => {
      await Promise.all(Array.from({ length: EMITTERS }, async () => {
        while (next < events) {
          const i = next++;
          const t = performance.now();
          await bus.emit("tool.called", toolCalled(i));
          emits.push(performance.now() - t);
        }
      }));
      await dispatcher.whenIdle();
    });
    const ms = performance.now() - start;
    // whenIdle() must mean every delivery was attempted: none may be left in
    // the store untried. (One whose attempt failed on a busy machine, e.g. a
    // timeout, waits for its retry, which is not due yet: that is allowed.)
    const untried = (await store.deliveries.listPending())
      .filter((pending) => pending.record.attempt_count === 0).length;
    if (untried) {
      throw new Error(`${untried} deliveries were never attempted when the dispatcher was idle`);
    }
    const dead = await store.deliveries.listDlq();
    if (dead.length) throw new Error(`${dead.length} benchmark deliveries were dead-lettered`);
    return { per_s: rate(events * urls.length, ms), emits: emits.sort((a, b) => a - b) };
  } finally {
    await dispatcher.stop();
    store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

async function bareSignedFetch(urls: string[], total: number): Promise<number> {
  const key = importSigningKey("bench-secret");
  const encoder = new TextEncoder();
  let next = 0;
  let failed = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < total) {
      const i = next++;
      const body = encoder.encode(JSON.stringify({
        id: `evt_${i}`,
        type: "tool.called",
        timestamp: new Date().toISOString(),
        data: toolCalled(i),
      }));
      const response = await fetch(urls[i % urls.length], {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "X-Service-Signature": signPayload(key, body),
        },
        body,
      });
      await response.body?.cancel();
      if (!response.ok) failed++;
    }
  }));
  if (failed) throw new Error(`${failed} bare requests failed`);
  return rate(total, performance.now() - start);
}

/**
 * Measures outgoing webhook delivery on this machine. Bounded time: about
 * 20 s in full, 4 s quick.
 */
export async function benchWebhooks({ quick }: WebhooksBenchOptions): Promise<WebhooksBenchResult> {
  const started = performance.now();
  const deliveries = quick ? 3000 : 20_000;
  const phases: WebhooksBenchPhase[] = [];
  for (const receivers of [1, 10, 100]) {
    await using pool = await startReceivers(receivers);
    const events = Math.max(1, Math.round(deliveries / receivers));
    await bareSignedFetch(pool.urls, Math.min(500, events * receivers)); // warm-up
    const bare = await bareSignedFetch(pool.urls, events * receivers);
    const durable = await throughDispatcher(pool.urls, events);
    const phase: WebhooksBenchPhase = {
      receivers,
      events,
      deliveries: events * receivers,
      dispatcher_per_s: durable.per_s,
      bare_signed_fetch_per_s: bare,
      ratio: Math.round((durable.per_s / bare) * 100) / 100,
      emit_p50_ms: percentile(durable.emits, 0.5),
      emit_p99_ms: percentile(durable.emits, 0.99),
    };
    if (receivers === 10) {
      // Separate runs: the profiler slows what it measures.
      const sample = quick ? 100 : 300;
      let dispatcherBytes = 0;
      await throughDispatcher(pool.urls, sample, async (run) => {
        dispatcherBytes = await allocatedBytes(run);
      });
      const bareBytes = await allocatedBytes(() => bareSignedFetch(pool.urls, sample * receivers));
      phase.dispatcher_bytes_per_delivery = Math.round(dispatcherBytes / (sample * receivers));
      phase.bare_bytes_per_request = Math.round(bareBytes / (sample * receivers));
    }
    phases.push(phase);
  }
  return {
    quick,
    concurrency: CONCURRENCY,
    phases,
    total_ms: Math.round(performance.now() - started),
  };
}

if (import.meta.main) {
  const result = await benchWebhooks({ quick: Deno.args.includes("--quick") });
  console.log(JSON.stringify(result, null, 2));
}
