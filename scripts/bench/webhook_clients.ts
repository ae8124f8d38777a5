/**
 * The HTTP client that sends webhook deliveries (issue 20 item 9): toolgate's
 * own keep-alive HTTP/1.1 client (`src/webhooks/_http1.ts`) against the
 * well-kept clients it must beat to stay: Deno's `fetch` with a tuned
 * `Deno.createHttpClient` (HTTP/1.1 only, 64 idle sockets per host, 4 s idle
 * timeout) and npm `undici` (`request()` on an `Agent` with the same pool).
 * Each client runs in a process of its own (`_webhook_client.ts`), so the
 * memory figures are its own, sending the same signed POSTs to the same 10
 * local receivers (a child process answering 204) with 32 in flight; the
 * clients take turns (A B C, then C B A), and each figure is the median of
 * its turns. Measured: POSTs per second, CPU per POST (whole process),
 * main-thread bytes allocated per POST (garbage included), peak RSS.
 *
 * Run alone: `deno run -A scripts/bench/webhook_clients.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import type { BenchMode } from "./http_server.ts";
import { modeFromArgs } from "./http_server.ts";
import type {
  WebhookClientFigures,
  WebhookClientName,
  WebhookClientRun,
} from "./_webhook_client.ts";
import { benchFile, runJson } from "./_proc.ts";
import { ratio } from "./_stats.ts";
import { startReceivers } from "./webhooks.ts";

/** Options of {@linkcode benchWebhookClients}. */
export interface WebhookClientsBenchOptions {
  mode: BenchMode;
}

/** Figures of {@linkcode benchWebhookClients}. */
export interface WebhookClientsBenchResult {
  receivers: number;
  concurrency: number;
  /** POSTs measured per turn. */
  posts: number;
  /** Turns per client. */
  turns: number;
  /** Median figures per client. */
  clients: Record<WebhookClientName, WebhookClientFigures>;
  /** `http1` against `fetch_tuned`: POSTs/s (higher is better), the rest (lower is better). */
  http1_vs_fetch: Ratios;
  /** `http1` against `undici`. */
  http1_vs_undici: Ratios;
}

/** Ratios of one client's figures to another's. */
export interface Ratios {
  posts_per_s: number;
  cpu_us_per_post: number;
  bytes_per_post: number;
  peak_rss_mib: number;
}

const CLIENTS: WebhookClientName[] = ["http1", "fetch_tuned", "undici"];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function ratios(a: WebhookClientFigures, b: WebhookClientFigures): Ratios {
  return {
    posts_per_s: ratio(a.posts_per_s, b.posts_per_s),
    cpu_us_per_post: ratio(a.cpu_us_per_post, b.cpu_us_per_post),
    bytes_per_post: ratio(a.bytes_per_post, b.bytes_per_post),
    peak_rss_mib: ratio(a.peak_rss_mib, b.peak_rss_mib),
  };
}

/** Compares the delivery clients; bounded: about 40 s in full, 12 s quick. */
export async function benchWebhookClients(
  { mode }: WebhookClientsBenchOptions,
): Promise<WebhookClientsBenchResult> {
  const receivers = 10;
  const concurrency = 32;
  const posts = mode === "full" ? 20_000 : mode === "quick" ? 6000 : 300;
  const turns = mode === "full" ? 4 : 2;
  await using pool = await startReceivers(receivers);
  const runs = new Map<WebhookClientName, WebhookClientFigures[]>(CLIENTS.map((c) => [c, []]));
  for (let turn = 0; turn < turns; turn++) {
    for (const client of turn % 2 ? [...CLIENTS].reverse() : CLIENTS) {
      const run: WebhookClientRun = {
        client,
        urls: pool.urls,
        posts,
        warmup: Math.min(2000, posts),
        concurrency,
        profiled: mode === "smoke" ? 100 : 2000,
      };
      const figures = await runJson<WebhookClientFigures>([
        "run",
        "-A",
        "--cached-only",
        benchFile("_webhook_client.ts"),
        JSON.stringify(run),
      ]);
      runs.get(client)!.push(figures);
    }
  }
  const clients = Object.fromEntries(CLIENTS.map((client) => {
    const all = runs.get(client)!;
    const pick = (key: keyof Omit<WebhookClientFigures, "client">) =>
      median(all.map((f) => f[key]));
    return [client, {
      client,
      posts_per_s: pick("posts_per_s"),
      cpu_us_per_post: pick("cpu_us_per_post"),
      bytes_per_post: pick("bytes_per_post"),
      peak_rss_mib: pick("peak_rss_mib"),
    }];
  })) as Record<WebhookClientName, WebhookClientFigures>;
  return {
    receivers,
    concurrency,
    posts,
    turns,
    clients,
    http1_vs_fetch: ratios(clients.http1, clients.fetch_tuned),
    http1_vs_undici: ratios(clients.http1, clients.undici),
  };
}

if (import.meta.main) {
  console.log(
    JSON.stringify(await benchWebhookClients({ mode: modeFromArgs(Deno.args) }), null, 2),
  );
}
