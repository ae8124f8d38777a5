/**
 * One HTTP client sending signed webhook POSTs, alone in its own process so
 * that its memory is its own: `deno run -A scripts/bench/_webhook_client.ts
 * '<WebhookClientRun JSON>'` prints a {@linkcode WebhookClientFigures} JSON
 * line. Private to `scripts/bench` (the `webhook_clients` scenario).
 *
 * Every client does the same work per POST: the delivery headers of spec §4
 * (`deliveryHeaders`), an HMAC-SHA256 signature of the body, the POST
 * without following redirects, and the reply's body read or cancelled.
 *
 * @module
 */
import process from "node:process";
import { Agent, request } from "undici";
import { Http1Client } from "../../src/webhooks/_http1.ts";
import { deliveryHeaders } from "../../src/webhooks/_send.ts";
import { importSigningKey, signPayload } from "../../src/webhooks/signer.ts";
import { allocatedBytes } from "./webhooks.ts";

/** The clients compared. */
export type WebhookClientName = "http1" | "fetch_tuned" | "undici";

/** What one child process runs. */
export interface WebhookClientRun {
  client: WebhookClientName;
  /** Receiver URLs, used in turn. */
  urls: string[];
  /** POSTs measured (after as many as `warmup`). */
  posts: number;
  warmup: number;
  /** POSTs in flight at once. */
  concurrency: number;
  /** POSTs sent under the allocation profiler (a separate, shorter run). */
  profiled: number;
}

/** What one child process measured. */
export interface WebhookClientFigures {
  client: WebhookClientName;
  posts_per_s: number;
  /** CPU time of the whole process (every thread) per POST, in µs. */
  cpu_us_per_post: number;
  /** Bytes allocated on the main thread per POST, garbage included. */
  bytes_per_post: number;
  /** Peak resident memory of the process (`VmHWM`) after the measured POSTs, in MiB. */
  peak_rss_mib: number;
}

/** Idle keep-alive sockets kept per origin, and how long, for every client alike. */
const POOL = { perOrigin: 64, idleMs: 4000 };

type Send = (url: number) => Promise<number>;

function sender(run: WebhookClientRun, body: Uint8Array<ArrayBuffer>): Send {
  const key = importSigningKey("bench-secret");
  const headers = () => deliveryHeaders("tool.called", "evt_bench", signPayload(key, body));
  switch (run.client) {
    case "http1": {
      const client = new Http1Client({ maxIdlePerOrigin: POOL.perOrigin });
      const urls = run.urls.map((url) => new URL(url));
      return (i) => client.post(urls[i], headers(), body);
    }
    case "fetch_tuned": {
      // The well-kept client Deno ships: HTTP/1.1 only, a pool sized like ours.
      const client = Deno.createHttpClient({
        http1: true,
        http2: false,
        poolMaxIdlePerHost: POOL.perOrigin,
        poolIdleTimeout: POOL.idleMs,
      });
      return async (i) => {
        const response = await fetch(run.urls[i], {
          method: "POST",
          headers: headers(),
          body,
          redirect: "manual",
          client,
        });
        await response.body?.cancel();
        return response.status;
      };
    }
    case "undici": {
      const agent = new Agent({
        connections: POOL.perOrigin,
        keepAliveTimeout: POOL.idleMs,
        pipelining: 1,
      });
      const urls = run.urls.map((url) => new URL(url));
      return async (i) => {
        // undici's request() follows no redirect.
        const response = await request(urls[i], {
          method: "POST",
          headers: headers(),
          body,
          dispatcher: agent,
        });
        await response.body.dump({ limit: 64 * 1024 });
        return response.statusCode;
      };
    }
  }
}

async function loop(send: Send, urls: number, posts: number, concurrency: number): Promise<void> {
  let next = 0;
  let failed = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < posts) {
      const status = await send(next++ % urls);
      if (status < 200 || status > 299) failed++;
    }
  }));
  if (failed) throw new Error(`${failed} POSTs got no 2xx`);
}

async function peakRssMib(): Promise<number> {
  const status = await Deno.readTextFile("/proc/self/status").catch(() => "");
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 102.4) / 10;
}

/** Runs one client; see the module documentation. */
export async function runWebhookClient(run: WebhookClientRun): Promise<WebhookClientFigures> {
  const body = new TextEncoder().encode(JSON.stringify({
    id: "evt_bench",
    type: "tool.called",
    timestamp: new Date().toISOString(),
    data: { tool_name: "http.fetch", output: { status: 200, body: "x".repeat(300) } },
  }));
  const send = sender(run, body);
  const urls = run.urls.length;
  await loop(send, urls, run.warmup, run.concurrency);
  const cpu = process.cpuUsage();
  const started = performance.now();
  await loop(send, urls, run.posts, run.concurrency);
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  // Before the profiler, which holds memory of its own.
  const peak = await peakRssMib();
  const bytes = await allocatedBytes(() => loop(send, urls, run.profiled, run.concurrency));
  return {
    client: run.client,
    posts_per_s: Math.round(run.posts / (ms / 1000)),
    cpu_us_per_post: Math.round(((used.user + used.system) / run.posts) * 10) / 10,
    bytes_per_post: Math.round(bytes / run.profiled),
    peak_rss_mib: peak,
  };
}

if (import.meta.main) {
  const figures = await runWebhookClient(JSON.parse(Deno.args[0]) as WebhookClientRun);
  console.log(JSON.stringify(figures));
  // Pools keep sockets open for seconds: the figures are out, so end now.
  Deno.exit(0);
}
