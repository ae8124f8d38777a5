/**
 * The `http` plugin: `http_request` makes an HTTP(S) request and returns the
 * status, headers and (size-limited) body.
 *
 * Decisions:
 * - A non-2xx upstream status is a successful call: the status is in the result.
 * - Redirects are followed (up to 10) unless `follow_redirects` is false; every
 *   hop must be http(s) and pass the allow-list; `Authorization` and `Cookie`
 *   are dropped when a redirect leaves the origin.
 * - `plugins.http.allowed_hosts` (empty = any host) entries are a host name
 *   (`api.github.com`), a host and port (`localhost:8080`) or a wildcard for
 *   subdomains (`*.example.com`). A host outside it is rejected with
 *   `TOOL_INPUT_INVALID` before any request is made (the caller's input is at
 *   fault, so it never counts towards the circuit breaker).
 * - Then the egress policy (`src/egress`, profile `public`): the host is
 *   resolved, every address checked (loopback, private, link-local, metadata,
 *   CGNAT, … and toolgate's own listening address are refused unless
 *   `egress.allow` allows them), and the request goes to the checked address;
 *   every redirect hop is checked the same way. A refusal is `EGRESS_DENIED`
 *   (never counted by the circuit breaker). `allowed_hosts` only narrows:
 *   a host it lists still needs `egress.allow` to reach a private address.
 * - Requests carry `X-Toolgate-Loop: <deployment id>`, which toolgate's own
 *   incoming webhook endpoints refuse.
 * - Unreachable upstream, DNS failure, TLS failure, too many redirects or the
 *   request's own `timeout_ms` → `PLUGIN_REQUEST_FAILED` naming the host.
 * - The body is read only up to `plugins.http.max_body_bytes`; past it the
 *   rest is discarded and `truncated` is true. Text bodies are UTF-8, others
 *   base64 (`body_encoding`); JSON bodies are also parsed into `json`.
 * - The circuit breaker is kept per destination ({@linkcode destinationOf}
 *   the `url`: scheme, lower-case host, port), so a dead host opens the
 *   circuit for calls to it only. A call counts towards the destination of
 *   its `url`, wherever redirects take it.
 *
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../../errors/mod.ts";
import type { PluginDefinition, ToolContext, ToolOutput } from "../../gateway/mod.ts";
import { VERSION } from "../../version.ts";
import { describeFetchError } from "../_fetch_error.ts";
import {
  defaultEgressPolicy,
  type EgressFetch,
  egressFetch,
  type EgressPolicy,
  LookupError,
} from "../../egress/mod.ts";

/** Most redirects followed for one request. */
export const MAX_REDIRECTS = 10;

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] as const;

const HttpRequestInput = z.strictObject({
  method: z.enum(METHODS).optional().describe("HTTP method (default GET)"),
  url: z.string()
    .refine((raw) => URL.canParse(raw), { message: "Invalid URL: expected http://… or https://…" })
    .refine((raw) => !URL.canParse(raw) || /^https?:$/.test(new URL(raw).protocol), {
      message: "Invalid URL: only http and https are supported",
    })
    .describe("Absolute http:// or https:// URL"),
  headers: z.record(z.string(), z.string()).optional().describe("Request headers"),
  json: z.unknown().optional().describe(
    "JSON request body (sets Content-Type: application/json unless given)",
  ),
  body: z.string().optional().describe("Text request body"),
  timeout_ms: z.number().int().min(1).max(600_000).optional().describe(
    "Give up after this many ms (also bounded by the tool timeout, tools.timeout_ms)",
  ),
  follow_redirects: z.boolean().optional().describe("Follow 3xx redirects (default true)"),
}).superRefine((input, context) => {
  if (input.json !== undefined && input.body !== undefined) {
    context.addIssue({
      code: "custom",
      path: ["body"],
      message: "Give either json or body, not both",
    });
  }
  const method = input.method ?? "GET";
  if ((method === "GET" || method === "HEAD") && (input.json !== undefined || input.body)) {
    context.addIssue({
      code: "custom",
      path: [input.json !== undefined ? "json" : "body"],
      message: `A ${method} request cannot have a body`,
    });
  }
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\r\n\0]/.test(value)) {
      context.addIssue({
        code: "custom",
        path: ["headers", name],
        message: "Invalid header: not a valid header name or value",
      });
    }
  }
});

type HttpRequest = z.infer<typeof HttpRequestInput>;

/** Checks `host` (URL host, with port if any) against an allow-list. */
export function isHostAllowed(url: URL, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return true;
  const hostname = url.hostname.toLowerCase();
  const host = url.host.toLowerCase();
  return allowed.some((raw) => {
    const entry = raw.trim().toLowerCase();
    if (entry.startsWith("*.")) return hostname.endsWith(entry.slice(1));
    return entry === hostname || entry === host;
  });
}

/**
 * The destination of a URL, as `http_request`'s circuit breakers are keyed:
 * scheme, lower-case host (without a trailing dot) and port, the default
 * port filled in (`https://api.example.com:443`); no user, path, query or
 * fragment.
 *
 * @example
 * ```ts
 * destinationOf(new URL("HTTPS://User:pw@API.Example.com/v1?q=1")); // "https://api.example.com:443"
 * ```
 */
export function destinationOf(url: URL): string {
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  // `example.com.` is `example.com` (the URL parser already lower-cased it).
  const host = url.hostname.endsWith(".") ? url.hostname.slice(0, -1) : url.hostname;
  return `${url.protocol}//${host}:${port}`;
}

const TEXT_TYPE = /^text\/|[/+](json|xml|javascript|ecmascript|x-www-form-urlencoded|csv|yaml)\b/i;
const JSON_TYPE = /[/+]json\b/i;

function requestFailed(url: URL, reason: string, cause?: unknown): GatewayError {
  return new GatewayError(
    "PLUGIN_REQUEST_FAILED",
    `Request to ${url.host} failed: ${reason}`,
    { details: { host: url.host }, cause },
  );
}

function checkHost(url: URL, allowed: readonly string[], what: string): void {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new GatewayError(
      "PLUGIN_REQUEST_FAILED",
      `Request to ${url.host} failed: ${what} uses ${
        url.protocol.slice(0, -1)
      }; only http and https are supported`,
      { details: { host: url.host } },
    );
  }
  if (!isHostAllowed(url, allowed)) {
    throw new GatewayError(
      "TOOL_INPUT_INVALID",
      `Invalid url for http_request: ${what} host ${url.host} is not in plugins.http.allowed_hosts (${
        allowed.join(", ")
      })`,
      { details: { tool: "http_request", host: url.host, allowed_hosts: allowed } },
    );
  }
}

async function readLimited(
  response: Response,
  limit: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  if (!response.body) return { bytes: new Uint8Array(0), truncated: false };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      if (size + value.length > limit) {
        chunks.push(value.subarray(0, limit - size));
        size = limit;
        truncated = true;
        break;
      }
      chunks.push(value);
      size += value.length;
    }
  } finally {
    if (truncated) await reader.cancel();
    reader.releaseLock();
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return { bytes, truncated };
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function redirectedMethod(status: number, method: string): string {
  if (status === 303 && method !== "HEAD") return "GET";
  if ((status === 301 || status === 302) && method === "POST") return "GET";
  return method;
}

/** Options of {@linkcode httpPlugin}. */
export interface HttpPluginOptions {
  /** The process's egress policy. @default one built from the call's config */
  egress?: EgressPolicy;
}

async function httpRequest(
  input: HttpRequest,
  context: ToolContext,
  send: EgressFetch,
): Promise<ToolOutput> {
  const { allowed_hosts: allowed, max_body_bytes: maxBody } = context.config.plugins.http;
  let url = new URL(input.url);
  checkHost(url, allowed, "the url");
  let method: string = input.method ?? "GET";
  const headers = new Headers(input.headers);
  if (!headers.has("user-agent")) headers.set("user-agent", `toolgate/${VERSION}`);
  let body: string | undefined = input.body;
  if (input.json !== undefined) {
    body = JSON.stringify(input.json);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
  }
  const signals = [context.signal];
  if (input.timeout_ms !== undefined) signals.push(AbortSignal.timeout(input.timeout_ms));
  const signal = AbortSignal.any(signals);
  const follow = input.follow_redirects ?? true;

  let redirects = 0;
  let response: Response;
  while (true) {
    try {
      response = await send(url, { method, headers, body, redirect: "manual", signal });
    } catch (error) {
      throw abortOrFailure(error, url, input, context, redirects);
    }
    const location = response.headers.get("location");
    if (!follow || response.status < 300 || response.status > 399 || location === null) break;
    await response.body?.cancel();
    if (redirects === MAX_REDIRECTS) {
      throw requestFailed(url, `more than ${MAX_REDIRECTS} redirects`);
    }
    redirects++;
    const next = new URL(location, url);
    checkHost(next, allowed, `a redirect (${response.status})`);
    if (next.origin !== url.origin) {
      headers.delete("authorization");
      headers.delete("cookie");
    }
    const nextMethod = redirectedMethod(response.status, method);
    if (nextMethod !== method) {
      body = undefined;
      headers.delete("content-type");
      headers.delete("content-length");
    }
    method = nextMethod;
    url = next;
  }

  let read: { bytes: Uint8Array; truncated: boolean };
  try {
    read = await readLimited(response, maxBody);
  } catch (error) {
    throw abortOrFailure(error, url, input, context);
  }
  const contentType = response.headers.get("content-type") ?? "";
  const isText = contentType === "" || TEXT_TYPE.test(contentType);
  const output: ToolOutput = {
    status: response.status,
    status_text: response.statusText,
    url: url.href,
    redirects,
    headers: collectHeaders(response.headers),
    body: isText
      ? new TextDecoder().decode(read.bytes, { stream: read.truncated })
      : toBase64(read.bytes),
    body_encoding: isText ? "utf-8" : "base64",
    truncated: read.truncated,
    size_bytes: read.bytes.length,
  };
  if (!read.truncated && JSON_TYPE.test(contentType) && read.bytes.length > 0) {
    try {
      output.json = JSON.parse(output.body as string);
    } catch {
      // Not valid JSON despite its Content-Type: the text body is still returned.
    }
  }
  return output;
}

function collectHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of headers) {
    out[name] = name in out ? `${out[name]}, ${value}` : value;
  }
  return out;
}

function abortOrFailure(
  error: unknown,
  url: URL,
  input: HttpRequest,
  context: ToolContext,
  redirects = 0,
): unknown {
  if (context.signal.aborted) return context.signal.reason ?? error;
  if (error instanceof DOMException && (error.name === "TimeoutError")) {
    return requestFailed(url, `no response within timeout_ms ${input.timeout_ms} ms`, error);
  }
  if (error instanceof GatewayError && error.code === "EGRESS_DENIED" && redirects > 0) {
    return new GatewayError(
      "EGRESS_DENIED",
      `Redirect ${redirects} (to ${url.host}) refused: ${error.message}`,
      { details: { ...error.details as Record<string, unknown>, redirect: redirects } },
    );
  }
  if (error instanceof GatewayError) return error;
  if (error instanceof LookupError) return requestFailed(url, "DNS lookup failed", error);
  return requestFailed(url, describeFetchError(error, url), error);
}

/**
 * The `http` plugin definition (zero-config).
 *
 * @example
 * ```ts
 * await gateway.call("http_request", { url: "https://example.com" });
 * // { status: 200, headers: {…}, body: "<!doctype html>…", truncated: false, … }
 * ```
 */
export function httpPlugin(options: HttpPluginOptions = {}): PluginDefinition {
  const sends = new WeakMap<EgressPolicy, EgressFetch>();
  const sender = (context: ToolContext): EgressFetch => {
    const policy = options.egress ?? defaultEgressPolicy(context.config);
    let send = sends.get(policy);
    if (!send) sends.set(policy, send = egressFetch({ policy, profile: "public" }));
    return send;
  };
  return {
    name: "http",
    version: VERSION,
    description: "Make HTTP(S) requests (optionally limited to plugins.http.allowed_hosts)",
    zeroConfig: true,
    tools: [{
      name: "http_request",
      description:
        "Make an HTTP(S) request. Returns {status, headers, body, truncated, json?}; a non-2xx status is returned, not an error. Bodies past the size limit are truncated.",
      input: HttpRequestInput,
      // It may POST or DELETE anywhere it is let: destructive (the MCP default), open world.
      mcpListing: { annotations: { destructiveHint: true, openWorldHint: true } },
      // Validated: `url` is an absolute http(s) URL.
      breakerKey: (args) => destinationOf(new URL(args.url as string)),
      execute: (args, context) =>
        httpRequest(HttpRequestInput.parse(args), context, sender(context)),
    }],
  };
}
