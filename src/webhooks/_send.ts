/**
 * One HTTP POST of a webhook body, shared by the dispatcher and
 * `testWebhook`. Private to `src/webhooks`.
 *
 * @module
 */
import { DeadlineQueue } from "../deadlines.ts";
import { EgressPolicy, LOOP_HEADER } from "../egress/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { VERSION } from "../version.ts";
import { Http1Client } from "./_http1.ts";
import { traced } from "../tracing/mod.ts";

/** The fetch function used for deliveries (injectable in tests). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Outcome of one POST. */
export interface SendResult {
  /** A 2xx response arrived within the timeout. */
  ok: boolean;
  /** HTTP status, when a response arrived. */
  status?: number;
  /** Why it failed without a status (timeout, connection error). */
  error?: string;
  /** Milliseconds until the response headers (or the failure). */
  duration_ms: number;
  /** Aborted by the caller (dispatcher stopping): the outcome is unknown. */
  aborted?: boolean;
  /** The `Retry-After` header of a 429 or 503 reply, as sent. */
  retry_after?: string;
  /** The egress policy refused the receiver's address (`error` says why and what allows it). */
  egressDenied?: boolean;
}

/** Statuses whose `Retry-After` the dispatcher honours. */
const RETRY_AFTER_STATUSES = new Set([429, 503]);

function withRetryAfter(result: SendResult, retryAfter: string | null | undefined): SendResult {
  if (retryAfter == null || !RETRY_AFTER_STATUSES.has(result.status ?? 0)) return result;
  return { ...result, retry_after: retryAfter.slice(0, 64) };
}

/** The policy of deliveries made without one. */
const DEFAULT_EGRESS = new EgressPolicy();

/** Options of {@linkcode postWebhook}. */
export interface PostWebhookOptions {
  fetch: FetchLike;
  url: string;
  body: Uint8Array;
  eventType: string;
  deliveryId: string;
  /** `sha256=<hex>`, or `undefined` when the webhook has no secret. */
  signature?: string;
  /** `webhook-timestamp`: unix seconds of this attempt. @default now */
  timestamp?: number;
  /** `webhook-signature` (`v1,<base64>`, space-separated), or `undefined` when unsigned. */
  standardSignature?: string;
  timeoutMs: number;
  /** Aborts the attempt (dispatcher shutdown); the result is then `aborted`. */
  signal?: AbortSignal;
  /** Clock for the duration. */
  now?: () => number;
  /**
   * Checks the receiver's addresses (profile `public`) and, with the
   * built-in client, connects to the checked one; its loop marker is sent
   * as `X-Toolgate-Loop`. @default a policy with an empty allow-list
   */
  egress?: EgressPolicy;
  /** The attempt's span (W3C `traceparent`), sent so the receiver's trace continues it. */
  traceparent?: string;
}

const MAX_DRAINED_BYTES = 64 * 1024;

/** Keep-alive sockets shared by every delivery of this process. */
const http1 = new Http1Client();

/** Webhook URLs parsed once (there are few of them). */
const parsedUrls = new Map<string, URL | null>();

function directUrl(url: string): URL | null {
  let parsed = parsedUrls.get(url);
  if (parsed === undefined) {
    if (parsedUrls.size >= 1000) parsedUrls.clear();
    const candidate = URL.canParse(url) ? new URL(url) : null;
    parsed = candidate && (candidate.protocol === "http:" || candidate.protocol === "https:")
      ? candidate
      : null;
    parsedUrls.set(url, parsed);
  }
  return parsed;
}

/** Deno's `fetch` honours these; with any of them set, deliveries keep using it. */
const PROXIED = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]
  .some((name) => {
    try {
      return Boolean(Deno.env.get(name));
    } catch {
      return false; // No env permission: no proxy we could honour either.
    }
  });

/**
 * The delivery headers: the spec's (§4) exactly, then Standard Webhooks'
 * `webhook-id` (the delivery id), `webhook-timestamp` and, when signed,
 * `webhook-signature`.
 *
 * @param timestamp Unix seconds of this attempt. @default now
 */
export function deliveryHeaders(
  eventType: string,
  deliveryId: string,
  signature?: string,
  timestamp: number = Math.floor(Date.now() / 1000),
  standardSignature?: string,
): Record<string, string> {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (signature !== undefined) headers["X-Service-Signature"] = signature;
  headers["X-Service-Event"] = eventType;
  headers["X-Service-Delivery"] = deliveryId;
  headers["X-Service-Version"] = VERSION;
  headers["User-Agent"] = `Service-Webhooks/${VERSION}`;
  headers["webhook-id"] = deliveryId;
  headers["webhook-timestamp"] = String(timestamp);
  if (standardSignature !== undefined) headers["webhook-signature"] = standardSignature;
  return headers;
}

async function drain(body: ReadableStream<Uint8Array> | null): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  try {
    let read = 0;
    while (read <= MAX_DRAINED_BYTES) {
      const chunk = await reader.read();
      if (chunk.done) return;
      read += chunk.value.byteLength;
    }
    await reader.cancel();
  } finally {
    reader.releaseLock();
  }
}

function describe(error: unknown): string {
  if (error instanceof GatewayError) return `${error.code}: ${error.message}`;
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return `${error.message}${cause}`;
  }
  return String(error);
}

/**
 * POSTs a body once. Success is a 2xx response within `timeoutMs`; redirects
 * are not followed; the response body is always drained or cancelled.
 * With the global `fetch` and no proxy configured, `http:` and `https:` URLs
 * go through a keep-alive HTTP/1.1 client that leaves far less garbage
 * (`_http1.ts`). The egress policy checks the receiver first: the built-in
 * client connects to the checked address; an injected `fetch` or a proxy
 * gets the URL after its host's addresses were checked. A refusal is a
 * failed attempt with `egressDenied` and an `EGRESS_DENIED: …` error.
 * Never throws.
 */
export async function postWebhook(options: PostWebhookOptions): Promise<SendResult> {
  const { fetch, url, body, eventType, deliveryId, signature, timeoutMs, signal } = options;
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const egress = options.egress ?? DEFAULT_EGRESS;
  const now = options.now ?? performance.now.bind(performance);
  const controller = new AbortController();
  let timedOut = false;
  const cancelTimeout = timeoutsOf(timeoutMs).add(() => {
    timedOut = true;
    controller.abort();
  });
  const onAbort = () => controller.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  const started = now();
  const elapsed = () => Math.max(0, Math.round(now() - started));
  try {
    if (signal?.aborted) return { ok: false, aborted: true, duration_ms: 0 };
    const direct = fetch === globalThis.fetch && !PROXIED ? directUrl(url) : null;
    const headers = deliveryHeaders(
      eventType,
      deliveryId,
      signature,
      timestamp,
      options.standardSignature,
    );
    if (egress.marker) headers[LOOP_HEADER] = egress.marker;
    if (options.traceparent !== undefined) headers.traceparent = options.traceparent;
    if (direct) {
      const { status, retryAfter } = await http1.send(
        direct,
        headers,
        body,
        controller.signal,
        egress,
      );
      return withRetryAfter(
        { ok: status >= 200 && status < 300, status, duration_ms: elapsed() },
        retryAfter,
      );
    }
    // Checked here; the injected fetch (or the proxy) makes the connection.
    if (URL.canParse(url)) await egress.resolve(new URL(url), "public");
    const response = await fetch(url, {
      method: "POST",
      headers,
      body: body.buffer instanceof ArrayBuffer
        ? body as Uint8Array<ArrayBuffer>
        : new Uint8Array(body) as Uint8Array<ArrayBuffer>,
      redirect: "manual",
      signal: controller.signal,
    });
    const duration_ms = elapsed();
    try {
      await drain(response.body);
    } catch {
      // The verdict rests on the status; an unreadable reply body changes nothing.
    }
    const ok = response.status >= 200 && response.status < 300;
    return withRetryAfter(
      { ok, status: response.status, duration_ms },
      response.headers.get("retry-after"),
    );
  } catch (error) {
    const duration_ms = elapsed();
    if (timedOut) return { ok: false, error: `Timed out after ${timeoutMs} ms`, duration_ms };
    if (signal?.aborted) return { ok: false, aborted: true, duration_ms };
    if (error instanceof GatewayError && error.code === "EGRESS_DENIED") {
      return { ok: false, error: describe(error), duration_ms, egressDenied: true };
    }
    return { ok: false, error: describe(error), duration_ms };
  } finally {
    cancelTimeout();
    signal?.removeEventListener("abort", onAbort);
  }
}

/** Attempt timeouts by length: one timer per length instead of one per attempt. */
const TIMEOUTS = new Map<number, DeadlineQueue>();

function timeoutsOf(ms: number): DeadlineQueue {
  let queue = TIMEOUTS.get(ms);
  if (!queue) TIMEOUTS.set(ms, queue = new DeadlineQueue(ms));
  return queue;
}

/** Where an attempt's span belongs, beside what {@linkcode postWebhook} sends. */
export interface AttemptSpanOptions {
  /** The webhook's id. */
  webhookId: string;
  /** The attempt's number, from 1. */
  attempt: number;
  /** The stored context of the span the event happened in. @default a new trace */
  parent?: string;
  /** Whether a missing `parent` starts a new trace instead of joining the active span. */
  root: boolean;
}

/** Hosts of webhook URLs, parsed once (there are few webhooks). */
const hosts = new Map<string, string | undefined>();

/** A webhook URL's host, for spans (never the path or query: they may hold secrets). */
function hostOf(url: string): string | undefined {
  if (hosts.has(url)) return hosts.get(url);
  if (hosts.size >= 1000) hosts.clear();
  const host = URL.canParse(url) ? new URL(url).hostname : undefined;
  hosts.set(url, host);
  return host;
}

/**
 * {@linkcode postWebhook} inside the attempt's `webhook.deliver <event>`
 * client span, whose context the receiver gets in `traceparent`. No URL in
 * it: webhook URLs often hold secrets.
 */
export function postWebhookTraced(
  options: Omit<PostWebhookOptions, "traceparent">,
  span: AttemptSpanOptions,
): Promise<SendResult> {
  return traced(`webhook.deliver ${options.eventType}`, {
    kind: "client",
    parent: span.parent,
    root: span.root,
    attributes: {
      "toolgate.webhook.id": span.webhookId,
      "toolgate.event.id": options.deliveryId,
      "toolgate.event.type": options.eventType,
      "toolgate.delivery.attempt": span.attempt,
      "http.request.method": "POST",
      "server.address": hostOf(options.url),
    },
  }, async (handle) => {
    const sent = await postWebhook({ ...options, traceparent: handle.traceparent() });
    handle.set({ "http.response.status_code": sent.status });
    if (!sent.ok && !sent.aborted) {
      handle.fail(sent.status !== undefined ? String(sent.status) : "error", sent.error);
    }
    return sent;
  });
}
