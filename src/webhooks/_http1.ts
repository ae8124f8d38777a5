/**
 * A small HTTP/1.1 client for webhook POSTs: keep-alive sockets per origin
 * and one write per request. `fetch` builds a Request, Headers, streams and a
 * Response for every POST, about 15 KB of garbage on the main thread; at a
 * thousand deliveries a second that garbage is what makes the collector pause
 * tool calls. This client allocates a fraction of it. Private to
 * `src/webhooks`: `postWebhook` uses it for `http:` and `https:` URLs when no
 * proxy is configured, `fetch` otherwise.
 *
 * With an egress policy (`post(…, egress)`) a new socket goes to the address
 * the policy checked (`Deno.connect` to that address, then `Deno.startTls`
 * naming the URL's host for `https:`), so nothing can change between the
 * check and the connection; a kept-alive socket was checked when it opened.
 *
 * Replies are read to their end when framed by `Content-Length` or chunked
 * encoding and at most 64 KiB long, so the socket can carry the next request;
 * anything else (a longer body, a body ended by closing the connection, both
 * framings at once) is left unread and the socket closed. Redirects are not
 * followed: a 3xx is just a status.
 *
 * A receiver cannot make it read or hold more than that: the head (status
 * line and headers) is limited to 64 KiB and 8 interim replies, a chunk size
 * line to 1 KiB, trailers to 64 KiB, and the read buffer never grows past
 * twice the head limit. Once the head arrived its status is the answer: a
 * malformed, cut or endless body only costs the socket. Time is bounded by
 * the caller's signal (the attempt timeout), which closes the socket.
 *
 * @module
 */

import type { EgressPolicy } from "../egress/mod.ts";

/** Longest status line plus headers accepted. */
const MAX_HEAD_BYTES = 64 * 1024;

/** Longest reply body read to keep the socket (longer ones close it). */
const MAX_DRAINED_BYTES = 64 * 1024;

/** Longest chunk size line (size and extensions) accepted. */
const MAX_CHUNK_LINE_BYTES = 1024;

/** Most interim (1xx) replies skipped before the real one. */
const MAX_INTERIM_REPLIES = 8;

/** Idle sockets older than this are closed instead of reused (servers often drop them at 5 s). */
const IDLE_MS = 4000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Pool keys per egress policy: a socket checked under one policy is not reused under another. */
const POLICY_KEYS = new WeakMap<EgressPolicy, number>();
let policyKeys = 0;

function policyKey(egress: EgressPolicy | undefined): string {
  if (!egress) return "";
  let key = POLICY_KEYS.get(egress);
  if (key === undefined) POLICY_KEYS.set(egress, key = ++policyKeys);
  return ` ${key}`;
}

interface Socket {
  conn: Deno.Conn;
  /** Read buffer, reused by every request on this socket. */
  buffer: Uint8Array;
  /** Write buffer, reused likewise (a request is written whole before its reply is read). */
  out?: Uint8Array;
  idleSince: number;
}

/** Largest write buffer a socket keeps; a larger request gets one of its own. */
const MAX_KEPT_WRITE_BUFFER = 64 * 1024;

/** Reads lines and bytes from a socket through its buffer. */
class Reader {
  #socket: Socket;
  #pos = 0;
  #end = 0;
  /** Bytes read from the socket for this reply. */
  received = 0;

  constructor(socket: Socket) {
    this.#socket = socket;
  }

  /** Bytes read from the socket but not consumed. */
  get buffered(): number {
    return this.#end - this.#pos;
  }

  async #fill(): Promise<void> {
    let buffer = this.#socket.buffer;
    if (this.#pos === this.#end) {
      this.#pos = this.#end = 0;
    } else if (this.#end === buffer.length) {
      if (this.#pos > 0) {
        buffer.copyWithin(0, this.#pos, this.#end);
      } else {
        const grown = new Uint8Array(buffer.length * 2);
        grown.set(buffer);
        buffer = this.#socket.buffer = grown;
      }
      this.#end -= this.#pos;
      this.#pos = 0;
    }
    const read = await this.#socket.conn.read(buffer.subarray(this.#end));
    if (read === null) {
      if (this.received === 0) throw new Error("Connection closed before the reply");
      throw new Error("Connection closed in the middle of the reply");
    }
    this.#end += read;
    this.received += read;
  }

  /**
   * Where the next CRLF (`blank` false) or CRLF CRLF (`blank` true) begins,
   * reading until it came; the text before it starts at `#pos` and is not
   * consumed. `tooLarge` is the error once more than `max` bytes came
   * without it.
   */
  async #find(blank: boolean, max: number, tooLarge: string): Promise<number> {
    const size = blank ? 4 : 2;
    // Bytes after #pos already searched; relative, as #fill may move the data.
    let scanned = 0;
    for (;;) {
      const buffer = this.#socket.buffer;
      for (let i = this.#pos + scanned; i + size <= this.#end; i++) {
        if (
          buffer[i] === 13 && buffer[i + 1] === 10 &&
          (!blank || (buffer[i + 2] === 13 && buffer[i + 3] === 10))
        ) {
          if (i - this.#pos > max) throw new Error(tooLarge);
          return i;
        }
      }
      if (this.#end - this.#pos > max) throw new Error(tooLarge);
      scanned = Math.max(0, this.#end - this.#pos - (size - 1));
      await this.#fill();
    }
  }

  /** The next line, without its CRLF. */
  async line(max: number, tooLarge: string): Promise<string> {
    const end = await this.#find(false, max, tooLarge);
    const line = text(this.#socket.buffer, this.#pos, end);
    this.#pos = end + 2;
    return line;
  }

  /** The read buffer; a {@linkcode head} lies in it until the next read. */
  get bytes(): Uint8Array {
    return this.#socket.buffer;
  }

  /**
   * The next header block (status line and headers), without its final
   * empty line, consumed: it lies in {@linkcode bytes} from the returned
   * start to end until the next read. Not decoded, so a reply's headers
   * cost no strings but those the caller takes out.
   */
  async head(max: number): Promise<{ start: number; end: number }> {
    const end = await this.#find(true, max, "Reply headers are too large");
    const start = this.#pos;
    this.#pos = end + 4;
    return { start, end };
  }

  /** Consumes the next two bytes; whether they were CRLF. */
  async crlf(): Promise<boolean> {
    while (this.#end - this.#pos < 2) await this.#fill();
    const buffer = this.#socket.buffer;
    const ok = buffer[this.#pos] === 13 && buffer[this.#pos + 1] === 10;
    this.#pos += 2;
    return ok;
  }

  /** Reads and drops `count` bytes. */
  async skip(count: number): Promise<void> {
    while (count > 0) {
      if (this.#pos === this.#end) await this.#fill();
      const taken = Math.min(count, this.#end - this.#pos);
      this.#pos += taken;
      count -= taken;
    }
  }
}

/** What a reply tells the sender. */
export interface Http1Reply {
  status: number;
  /** The `Retry-After` header, when present. */
  retryAfter?: string;
}

/** A reply's status and how its body is framed. */
interface Head {
  status: number;
  /** The reply's `Retry-After` header, when it had one. */
  retryAfter?: string;
  /** The server lets the socket carry another request. */
  keepAlive: boolean;
  /** How the body ends: no body, a length, chunks, or (unusable) the server closing. */
  body: { kind: "none" } | { kind: "length"; length: number } | { kind: "chunked" } | {
    kind: "unframed";
  };
}

/** Whether `bytes[from, to)` is `name` (lowercase letters and `-`), in any case. */
function nameIs(bytes: Uint8Array, from: number, to: number, name: string): boolean {
  if (to - from !== name.length) return false;
  // `| 0x20` lowercases a letter; no other byte of a header line maps onto a letter or `-`.
  for (let i = 0; i < name.length; i++) {
    if ((bytes[from + i] | 0x20) !== name.charCodeAt(i)) return false;
  }
  return true;
}

/** Whether a byte is a space or a tab (what `trim()` took off a header name). */
function blank(byte: number): boolean {
  return byte === 32 || byte === 9;
}

/** Where the line starting at `from` ends: its CRLF, or `end`. */
function crlfFrom(bytes: Uint8Array, from: number, end: number): number {
  let at = from;
  while (at < end && !(bytes[at] === 13 && bytes[at + 1] === 10)) at++;
  return at;
}

/** `bytes[from, to)` decoded (UTF-8). */
function text(bytes: Uint8Array, from: number, to: number): string {
  return decoder.decode(bytes.subarray(from, to));
}

/** Whether `bytes[at, at + 12)` begins a status line: `HTTP/1.0 ` or `HTTP/1.1 ` and three digits. */
function statusLine(bytes: Uint8Array, at: number, end: number): boolean {
  if (end - at < 12) return false;
  for (let i = 0; i < 7; i++) if (bytes[at + i] !== "HTTP/1.".charCodeAt(i)) return false;
  if ((bytes[at + 7] !== 48 && bytes[at + 7] !== 49) || bytes[at + 8] !== 32) return false;
  for (let i = 9; i < 12; i++) if (bytes[at + i] < 48 || bytes[at + i] > 57) return false;
  return end - at === 12 || bytes[at + 12] === 32;
}

/**
 * Reads a reply's status line and headers, skipping interim (1xx) replies.
 * Parsed where they were read: only the values of the four headers that
 * matter here become strings.
 */
async function readHead(reader: Reader): Promise<Head> {
  for (let interim = 0;; interim++) {
    const { start, end } = await reader.head(MAX_HEAD_BYTES);
    const bytes = reader.bytes;
    const lineEnd = crlfFrom(bytes, start, end);
    if (!statusLine(bytes, start, lineEnd)) {
      throw new Error(`Malformed reply status line: ${text(bytes, start, lineEnd).slice(0, 80)}`);
    }
    const http11 = bytes[start + 7] === 49;
    const status = (bytes[start + 9] - 48) * 100 + (bytes[start + 10] - 48) * 10 +
      bytes[start + 11] - 48;
    // Interim replies (100 Continue, 103 Early Hints) precede the real one.
    if (status >= 100 && status < 200 && status !== 101) {
      if (interim >= MAX_INTERIM_REPLIES) {
        throw new Error(`Reply has more than ${MAX_INTERIM_REPLIES} interim (1xx) responses`);
      }
      continue;
    }
    // Only the headers that frame the body matter here.
    let connection = "";
    let transferEncoding: string | undefined;
    let contentLength: string | undefined;
    let framingClear = true;
    let retryAfter: string | undefined;
    for (let from = lineEnd + 2; from < end;) {
      const to = crlfFrom(bytes, from, end);
      let colon = from;
      while (colon < to && bytes[colon] !== 58) colon++;
      if (colon > from && colon < to) {
        let nameFrom = from;
        let nameTo = colon;
        while (nameFrom < nameTo && blank(bytes[nameFrom])) nameFrom++;
        while (nameTo > nameFrom && blank(bytes[nameTo - 1])) nameTo--;
        if (nameIs(bytes, nameFrom, nameTo, "connection")) {
          connection += `${text(bytes, colon + 1, to).toLowerCase()},`;
        } else if (nameIs(bytes, nameFrom, nameTo, "transfer-encoding")) {
          transferEncoding = `${transferEncoding ?? ""}${
            text(bytes, colon + 1, to).trim().toLowerCase()
          }`;
        } else if (nameIs(bytes, nameFrom, nameTo, "content-length")) {
          const value = text(bytes, colon + 1, to).trim();
          if (contentLength !== undefined && contentLength !== value) framingClear = false;
          contentLength = value;
        } else if (nameIs(bytes, nameFrom, nameTo, "retry-after")) {
          retryAfter = text(bytes, colon + 1, to).trim();
        }
      }
      from = to + 2;
    }
    // Both framings at once is how responses get smuggled: trust neither.
    if (transferEncoding !== undefined && contentLength !== undefined) framingClear = false;
    const keepAlive = http11 ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
    if (status === 101 || !framingClear) {
      return { status, retryAfter, keepAlive: false, body: UNFRAMED };
    }
    if (status === 204 || status === 304) {
      return { status, retryAfter, keepAlive, body: NONE };
    }
    if (transferEncoding !== undefined) {
      return /(^|,)\s*chunked\s*$/.test(transferEncoding)
        ? { status, retryAfter, keepAlive, body: CHUNKED }
        : { status, retryAfter, keepAlive: false, body: UNFRAMED };
    }
    // Without a length the body ends when the server closes: not worth waiting for.
    if (contentLength === undefined || !/^\d+$/.test(contentLength)) {
      return { status, retryAfter, keepAlive: false, body: UNFRAMED };
    }
    return {
      status,
      retryAfter,
      keepAlive,
      body: { kind: "length", length: Number(contentLength) },
    };
  }
}

const NONE = { kind: "none" } as const;
const CHUNKED = { kind: "chunked" } as const;
const UNFRAMED = { kind: "unframed" } as const;

/**
 * Reads the body of a reply to its end when it is short and well framed.
 *
 * @returns Whether the socket may carry another request.
 * @throws On malformed chunked encoding or a connection closed mid-body.
 */
async function drainBody(reader: Reader, head: Head): Promise<boolean> {
  const { body } = head;
  if (!head.keepAlive || body.kind === "unframed") return false;
  if (body.kind === "length") {
    if (body.length > MAX_DRAINED_BYTES) return false;
    await reader.skip(body.length);
  } else if (body.kind === "chunked") {
    if (!await drainChunked(reader)) return false;
  }
  return reader.buffered === 0;
}

/** Reads a chunked body to its end; false when it is too long to be worth reading. */
async function drainChunked(reader: Reader): Promise<boolean> {
  let total = 0;
  for (;;) {
    const sizeLine = await reader.line(MAX_CHUNK_LINE_BYTES, "Chunk size line is too long");
    const sizeText = sizeLine.split(";")[0].trim();
    if (!/^[0-9a-fA-F]{1,16}$/.test(sizeText)) {
      throw new Error(`Malformed chunk size: ${sizeLine.slice(0, 40)}`);
    }
    const size = parseInt(sizeText, 16);
    if (size === 0) break;
    total += size;
    if (total > MAX_DRAINED_BYTES) return false;
    await reader.skip(size);
    if (!await reader.crlf()) throw new Error("Malformed chunk: no CRLF after its data");
  }
  // Trailers, bounded like the head.
  let trailerBytes = 0;
  for (;;) {
    const line = await reader.line(MAX_HEAD_BYTES - trailerBytes, "Reply trailers are too large");
    if (line === "") break;
    trailerBytes += line.length + 2;
  }
  return true;
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let offset = 0; offset < bytes.length;) {
    offset += await conn.write(bytes.subarray(offset));
  }
}

function closeQuietly(socket: Socket): void {
  try {
    socket.conn.close();
  } catch {
    // Already closed.
  }
}

/** Options of {@linkcode Http1Client}. */
export interface Http1ClientOptions {
  /** Extra trusted CA certificates (PEM) for `https:`, e.g. a test's self-signed one. */
  caCerts?: string[];
  /** Idle sockets kept per origin. @default 64 */
  maxIdlePerOrigin?: number;
}

/** A keep-alive HTTP/1.1 client for POSTs; see the module documentation. */
export class Http1Client implements Disposable {
  #idle = new Map<string, Socket[]>();
  #caCerts?: string[];
  #maxIdle: number;
  /** Sockets opened so far (for tests). */
  connections = 0;
  /** Reply bytes read so far, over every socket (for tests). */
  received = 0;

  constructor(options: Http1ClientOptions = {}) {
    this.#caCerts = options.caCerts;
    this.#maxIdle = options.maxIdlePerOrigin ?? 64;
  }

  /**
   * POSTs `body` with `headers` (plus `Host` and `Content-Length`).
   *
   * @param egress checks a new socket's address (profile `public`) and pins it
   * @returns The reply's status.
   * @throws The connection or protocol error; `EGRESS_DENIED`; the signal's reason when aborted.
   */
  async post(
    url: URL,
    headers: Record<string, string>,
    body: Uint8Array,
    signal?: AbortSignal,
    egress?: EgressPolicy,
  ): Promise<number> {
    return (await this.send(url, headers, body, signal, egress)).status;
  }

  /**
   * POSTs like {@linkcode Http1Client.post}, and tells the reply's
   * `Retry-After` too.
   *
   * @param egress checks a new socket's address (profile `public`) and pins it
   * @throws The connection or protocol error; `EGRESS_DENIED`; the signal's reason when aborted.
   */
  async send(
    url: URL,
    headers: Record<string, string>,
    body: Uint8Array,
    signal?: AbortSignal,
    egress?: EgressPolicy,
  ): Promise<Http1Reply> {
    const origin = `${url.protocol}//${url.host}${policyKey(egress)}`;
    for (let attempt = 0;; attempt++) {
      signal?.throwIfAborted();
      const pooled = attempt === 0 ? this.#take(origin) : undefined;
      const socket = pooled ?? await this.#connect(url, signal, egress);
      const onAbort = () => closeQuietly(socket);
      signal?.addEventListener("abort", onAbort, { once: true });
      const reader = new Reader(socket);
      try {
        await writeAll(socket.conn, encodeRequest(url, headers, body, socket));
        const head = await readHead(reader);
        // The status is the answer: a body that is malformed, cut short or
        // still arriving when the signal aborts only costs the socket.
        let reusable = false;
        try {
          reusable = await drainBody(reader, head);
        } catch {
          reusable = false;
        }
        this.received += reader.received;
        if (reusable && !signal?.aborted) this.#release(origin, socket);
        else closeQuietly(socket);
        return head.retryAfter === undefined
          ? { status: head.status }
          : { status: head.status, retryAfter: head.retryAfter };
      } catch (error) {
        this.received += reader.received;
        closeQuietly(socket);
        signal?.throwIfAborted();
        // A kept-alive socket the server had already closed: send once more on a new one.
        if (pooled && reader.received === 0) continue;
        throw error;
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
    }
  }

  /** Closes the idle sockets (also on `using` scope exit). */
  [Symbol.dispose](): void {
    this.close();
  }

  /** Closes the idle sockets. */
  close(): void {
    for (const sockets of this.#idle.values()) sockets.forEach(closeQuietly);
    this.#idle.clear();
  }

  #take(origin: string): Socket | undefined {
    const sockets = this.#idle.get(origin);
    const freshSince = performance.now() - IDLE_MS;
    while (sockets?.length) {
      const socket = sockets.pop()!;
      if (socket.idleSince >= freshSince) return socket;
      closeQuietly(socket);
    }
    return undefined;
  }

  #release(origin: string, socket: Socket): void {
    socket.idleSince = performance.now();
    const sockets = this.#idle.get(origin);
    if (!sockets) this.#idle.set(origin, [socket]);
    else if (sockets.length < this.#maxIdle) sockets.push(socket);
    else closeQuietly(socket);
  }

  async #connect(url: URL, signal?: AbortSignal, egress?: EgressPolicy): Promise<Socket> {
    const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
    const tls = url.protocol === "https:";
    const port = Number(url.port || (tls ? 443 : 80));
    const connecting = egress
      ? this.#connectChecked(url, hostname, port, tls, egress)
      : tls
      ? Deno.connectTls({ hostname, port, caCerts: this.#caCerts, alpnProtocols: ["http/1.1"] })
      : Deno.connect({ hostname, port });
    let conn: Deno.Conn;
    if (signal) {
      let onAbort = () => {};
      const aborted = new Promise<never>((_, reject) => {
        onAbort = () => reject(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
      });
      try {
        conn = await Promise.race([connecting, aborted]);
      } catch (error) {
        connecting.then((late) => late.close(), () => {});
        throw error;
      } finally {
        signal.removeEventListener("abort", onAbort);
      }
    } else {
      conn = await connecting;
    }
    this.connections++;
    return { conn, buffer: new Uint8Array(4096), idleSince: 0 };
  }

  /** Resolves and checks the host, connects to the checked address, then speaks TLS naming the host. */
  async #connectChecked(
    url: URL,
    hostname: string,
    port: number,
    tls: boolean,
    egress: EgressPolicy,
  ): Promise<Deno.Conn> {
    const target = await egress.resolve(url, "public");
    const tcp = await Deno.connect({ hostname: target.address, port });
    if (!tls) return tcp;
    try {
      return await Deno.startTls(tcp, {
        hostname,
        caCerts: this.#caCerts,
        alpnProtocols: ["http/1.1"],
      });
    } catch (error) {
      try {
        tcp.close();
      } catch {
        // startTls took it over and closed it already.
      }
      throw error;
    }
  }
}

/**
 * Writes `text` into `out` at `at` as UTF-8; returns the offset after it.
 * ASCII (all a request head normally holds) is copied a unit at a time, so
 * no flattened copy of the text is made; anything else goes through
 * `encodeInto`. `out` has room for 3 bytes per UTF-16 unit.
 */
function put(out: Uint8Array, at: number, text: string): number {
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) return at + encoder.encodeInto(text.slice(i), out.subarray(at)).written;
    out[at++] = unit;
  }
  return at;
}

/** Writes CRLF at `at`; returns the offset after it. */
function crlf(out: Uint8Array, at: number): number {
  out[at] = 13;
  out[at + 1] = 10;
  return at + 2;
}

/**
 * The request's bytes, in the socket's write buffer: no new buffer per
 * request (deliveries send many, and each `ArrayBuffer` costs the next
 * scavenge a sweep), and no head string built first (each `+=` leaves an
 * intermediate string behind).
 */
function encodeRequest(
  url: URL,
  headers: Record<string, string>,
  body: Uint8Array,
  socket: Socket,
): Uint8Array {
  const { pathname, search, host } = url;
  const length = String(body.byteLength);
  // "POST  HTTP/1.1", "Host: ", "Content-Length: ", three CRLFs and the final one.
  let units = 14 + pathname.length + search.length + 6 + host.length + 16 + length.length + 8;
  for (const name in headers) units += name.length + headers[name].length + 4;
  // At most 3 bytes of UTF-8 per UTF-16 unit.
  const most = units * 3 + body.byteLength;
  let out = socket.out;
  if (!out || out.length < most) {
    out = new Uint8Array(Math.max(most, 4096));
    if (out.length <= MAX_KEPT_WRITE_BUFFER) socket.out = out;
  }
  let at = put(out, 0, "POST ");
  at = put(out, at, pathname);
  at = put(out, at, search);
  at = crlf(out, put(out, at, " HTTP/1.1"));
  at = crlf(out, put(out, put(out, at, "Host: "), host));
  at = crlf(out, put(out, put(out, at, "Content-Length: "), length));
  for (const name in headers) {
    at = put(out, at, name);
    out[at++] = 58; // ":"
    out[at++] = 32;
    at = crlf(out, put(out, at, headers[name]));
  }
  at = crlf(out, at);
  out.set(body, at);
  return out.subarray(0, at + body.byteLength);
}
