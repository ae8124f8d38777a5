/**
 * A `fetch` that goes through the egress policy and connects to the address
 * it checked: the host is resolved once, every address is checked, and the
 * request is sent (through `node:http`/`node:https` with a lookup that
 * answers only the checked address) to the first. `Host`, SNI and the
 * certificate name stay the URL's host. Redirects are never followed: the
 * caller checks each hop by calling it again.
 *
 * With an HTTP(S) proxy configured from the environment the proxy makes the
 * connection: the target's resolved addresses are checked the same way
 * before the request is handed to the global `fetch` (which honours
 * `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY`), but what the
 * proxy then connects to is up to the proxy.
 *
 * @module
 */
import type { IncomingMessage, RequestOptions } from "node:http";
import type { EgressPolicy, EgressProfile } from "./policy.ts";
import { LOOP_HEADER } from "./policy.ts";

/** A `fetch` restricted by the egress policy. */
export type EgressFetch = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** Options of {@linkcode egressFetch}. */
export interface EgressFetchOptions {
  /** The policy. */
  policy: EgressPolicy;
  /** The profile requests are checked against. */
  profile: EgressProfile;
  /** Send the policy's loop marker (`X-Toolgate-Loop`). @default true */
  marker?: boolean;
  /**
   * CA certificates (PEM) trusted for `https:` beside the built-in roots and
   * the policy's (`DENO_CERT`). @default none
   */
  caCerts?: string[];
}

const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** The codings asked for by default, and decoded, as `fetch` does. */
const ACCEPT_ENCODING = "gzip, deflate, br";

/**
 * A `fetch` whose connections pass the egress policy and go to the checked
 * address (see the module documentation).
 *
 * @throws (from the returned function) {GatewayError} `EGRESS_DENIED`; a
 *   {@linkcode LookupError} when the host does not resolve; the signal's reason when aborted
 * @example
 * ```ts
 * const fetch = egressFetch({ policy, profile: "public" });
 * const response = await fetch("https://example.com/", { redirect: "manual" });
 * ```
 */
export function egressFetch(options: EgressFetchOptions): EgressFetch {
  const { policy, profile, marker = true, caCerts } = options;
  return async function fetchChecked(input, init = {}) {
    const url = new URL(input);
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`Unsupported URL scheme ${url.protocol} (only http and https)`);
    }
    init.signal?.throwIfAborted();
    const headers = new Headers(init.headers);
    if (marker && policy.marker) headers.set(LOOP_HEADER, policy.marker);
    // What fetch would add.
    if (!headers.has("accept")) headers.set("accept", "*/*");
    if (!headers.has("accept-encoding")) headers.set("accept-encoding", ACCEPT_ENCODING);
    if (typeof init.body === "string" && !headers.has("content-type")) {
      headers.set("content-type", "text/plain;charset=UTF-8");
    }
    const target = await policy.resolve(url, profile);
    init.signal?.throwIfAborted();
    if (policy.proxied) {
      return await fetch(url, { ...init, headers, redirect: "manual" });
    }
    const body = init.body === undefined || init.body === null
      ? undefined
      : new Uint8Array(await new Response(init.body).arrayBuffer());
    const node = await nodeModules();
    return await send(node, url, target, headers, body, init, trusted(node, policy, caCerts));
  };
}

/**
 * The CAs to trust for `https:` when extra ones are given or the system
 * store is asked for: `node:https` replaces its built-in roots by `ca`, so
 * the stores `DENO_TLS_CA_STORE` names are passed along with them; without
 * either, the built-in roots alone (no `ca`).
 */
function trusted(
  node: NodeModules,
  policy: EgressPolicy,
  caCerts: string[] | undefined,
): string[] | undefined {
  const extra = [...policy.caCerts, ...(caCerts ?? [])];
  const system = policy.caStores.includes("system");
  if (!extra.length && !system) return undefined;
  return [
    ...(policy.caStores.includes("mozilla") ? node.rootCertificates : []),
    // The operating system's store, as Deno reads it (`SSL_CERT_FILE` replaces it).
    ...(system ? node.systemCertificates() : []),
    ...extra,
  ];
}

/** `node:http` and friends, loaded on the first request (not on the stdio start-up path). */
let modules: Promise<NodeModules> | undefined;

interface NodeModules {
  httpRequest: typeof import("node:http").request;
  httpsRequest: typeof import("node:https").request;
  Readable: typeof import("node:stream").Readable;
  Transform: typeof import("node:stream").Transform;
  Buffer: typeof import("node:buffer").Buffer;
  zlib: typeof import("node:zlib");
  /** `node:tls`'s built-in root certificates. */
  rootCertificates: readonly string[];
  /** The operating system's root certificates, read once. */
  systemCertificates: () => readonly string[];
}

function nodeModules(): Promise<NodeModules> {
  return modules ??= Promise.all([
    import("node:http"),
    import("node:https"),
    import("node:stream"),
    import("node:buffer"),
    import("node:tls"),
    import("node:zlib"),
  ]).then(([http, https, stream, buffer, tls, zlib]) => ({
    httpRequest: http.request,
    httpsRequest: https.request,
    Readable: stream.Readable,
    Transform: stream.Transform,
    Buffer: buffer.Buffer,
    zlib,
    rootCertificates: tls.rootCertificates,
    systemCertificates: once(() => tls.getCACertificates("system")),
  }));
}

function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

function send(
  node: NodeModules,
  url: URL,
  { address, family }: { address: string; family: 4 | 6 },
  headers: Headers,
  body: Uint8Array | undefined,
  init: RequestInit,
  caCerts: string[] | undefined,
): Promise<Response> {
  const method = (init.method ?? "GET").toUpperCase();
  const signal = init.signal ?? undefined;
  const outgoing: Record<string, string> = {};
  for (const [name, value] of headers) outgoing[name] = value;
  if (body) outgoing["content-length"] = String(body.byteLength);
  const options: RequestOptions & { ca?: string[]; servername?: string } = {
    method,
    headers: outgoing,
    agent: false,
    // Only the checked address: nothing can answer differently between the check and the connect.
    lookup: ((
      _hostname: string,
      lookupOptions: { all?: boolean } | undefined,
      callback: (...args: unknown[]) => void,
    ) => {
      if (lookupOptions?.all) callback(null, [{ address, family }]);
      else callback(null, address, family);
    }) as unknown as RequestOptions["lookup"],
  };
  if (url.protocol === "https:" && caCerts) options.ca = caCerts;
  const make = url.protocol === "https:" ? node.httpsRequest : node.httpRequest;
  return new Promise<Response>((resolve, reject) => {
    let settled = false;
    const request = make(url, options, (message: IncomingMessage) => {
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      resolve(toResponse(node, message, method, signal));
    });
    const onAbort = () => {
      request.destroy();
      if (!settled) {
        settled = true;
        reject(signal!.reason);
      }
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    request.on("error", (error: Error) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      reject(signal?.aborted ? signal.reason : error);
    });
    if (body) request.end(node.Buffer.from(body.buffer, body.byteOffset, body.byteLength));
    else request.end();
  });
}

/**
 * The stream that decodes a body sent with `coding` (gzip, deflate, br, as
 * `fetch` decodes them), or `undefined` for an identity or unknown coding
 * (passed as it came).
 */
function decoder(node: NodeModules, coding: string | null) {
  // Flushing leniently, as browsers and undici do: a body cut short still yields what it held.
  const lenient = { flush: node.zlib.constants.Z_SYNC_FLUSH };
  switch (coding?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return node.zlib.createGunzip(lenient);
    case "deflate":
      return inflateEither(node, lenient);
    case "br":
      return node.zlib.createBrotliDecompress();
    default:
      return undefined;
  }
}

/**
 * Inflates `deflate` bodies of either kind servers send: zlib-wrapped (RFC
 * 1950, what the name means) or raw (RFC 1951), told apart by the first
 * byte, as browsers and undici do.
 */
function inflateEither(node: NodeModules, options: { flush: number }) {
  let inner: import("node:stream").Transform | undefined;
  return new node.Transform({
    transform(chunk: Uint8Array, _encoding, callback) {
      if (!inner) {
        // A zlib header's first byte has compression method 8 in its low four bits.
        inner = (chunk[0] & 0x0f) === 0x08
          ? node.zlib.createInflate(options)
          : node.zlib.createInflateRaw(options);
        inner.on("data", (data: Uint8Array) => this.push(data));
        inner.on("error", (error: Error) => this.destroy(error));
      }
      inner.write(chunk, () => callback());
    },
    flush(callback) {
      if (!inner) return callback();
      inner.once("end", () => callback());
      inner.end();
    },
  });
}

function toResponse(
  node: NodeModules,
  message: IncomingMessage,
  method: string,
  signal?: AbortSignal,
): Response {
  const status = message.statusCode ?? 502;
  const headers = new Headers();
  const raw = message.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    try {
      headers.append(raw[i], raw[i + 1]);
    } catch {
      // A header fetch would refuse too: left out.
    }
  }
  const onAbort = () => message.destroy(signal!.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  message.on("close", () => signal?.removeEventListener("abort", onAbort));
  let body: ReadableStream<Uint8Array> | null = null;
  if (NULL_BODY.has(status) || method === "HEAD") {
    message.resume();
  } else {
    const decoded = decoder(node, headers.get("content-encoding"));
    if (decoded) {
      // A body that does not decode errors the stream, as fetch's does; the headers stay as sent.
      message.on("error", (error: Error) => decoded.destroy(error));
      message.pipe(decoded);
    }
    body = node.Readable.toWeb(decoded ?? message) as unknown as ReadableStream<Uint8Array>;
  }
  let statusText = message.statusMessage ?? "";
  if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(statusText)) statusText = "";
  return new Response(body, { status, statusText, headers });
}
