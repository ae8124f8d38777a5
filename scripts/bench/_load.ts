/**
 * HTTP/1.1 load generator, run as its own process so the server under test
 * keeps its event loop: `connections` keep-alive TCP connections, each
 * sending one request and reading its whole response before the next (no
 * pipelining), for `durationMs` after `warmupMs`. Written on raw TCP because
 * `fetch` would cost the client more CPU than the servers under test spend
 * (both share the machine's cores).
 *
 * `deno run -A scripts/bench/_load.ts '<LoadOptions JSON>'` prints a
 * {@linkcode LoadResult} as JSON.
 *
 * @module
 */
import { latency, rate } from "./_stats.ts";

/** What to send and for how long. */
export interface LoadOptions {
  /** Base URL, `http://127.0.0.1:<port>`. */
  url: string;
  /** Request path. */
  path: string;
  /** JSON body sent as POST. */
  body: string;
  /** Extra request headers. @default {} */
  headers?: Record<string, string>;
  /** Connections, each with one request in flight. */
  connections: number;
  /** Measured time, in ms. */
  durationMs: number;
  /** Unmeasured time first, in ms. */
  warmupMs: number;
  /**
   * Pace each connection to one request per this many ms (a light, steady
   * load for latency), instead of sending the next request at once. @default 0
   */
  intervalMs?: number;
  /** Return every measured latency in `samples_ms`. @default false */
  samples?: boolean;
}

/** Outcome of one load run. */
export interface LoadResult {
  requests: number;
  /** Responses that were not 2xx (counted, not in the rate). */
  non_2xx: number;
  /** Status of the first non-2xx response, 0 when none. */
  first_bad_status: number;
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  /** Every measured latency (2xx only), in ms, when asked with `samples`. */
  samples_ms?: number[];
}

const encoder = new TextEncoder();

function indexOfHeaderEnd(buf: Uint8Array, length: number): number {
  for (let i = 3; i < length; i++) {
    if (buf[i] === 10 && buf[i - 1] === 13 && buf[i - 2] === 10 && buf[i - 3] === 13) {
      return i + 1;
    }
  }
  return -1;
}

const decoder = new TextDecoder();

/** Reads one response; returns its status. Supports Content-Length and chunked bodies. */
async function readResponse(
  conn: Deno.Conn,
  state: { buf: Uint8Array; length: number },
): Promise<number> {
  let headerEnd = -1;
  while ((headerEnd = indexOfHeaderEnd(state.buf, state.length)) < 0) await fill(conn, state);
  const head = decoder.decode(state.buf.subarray(0, headerEnd)).toLowerCase();
  const status = Number(head.slice(9, 12));
  const lengthMatch = /\r\ncontent-length: *(\d+)/.exec(head);
  if (lengthMatch) {
    const total = headerEnd + Number(lengthMatch[1]);
    while (state.length < total) await fill(conn, state);
    consume(state, total);
    return status;
  }
  if (head.includes("transfer-encoding: chunked")) {
    consume(state, headerEnd);
    for (;;) {
      let lineEnd = -1;
      while ((lineEnd = indexOfCrlf(state.buf, state.length)) < 0) await fill(conn, state);
      const size = parseInt(decoder.decode(state.buf.subarray(0, lineEnd)), 16);
      const total = lineEnd + 2 + size + 2;
      while (state.length < total) await fill(conn, state);
      consume(state, total);
      if (size === 0) return status;
    }
  }
  consume(state, headerEnd);
  return status;
}

function indexOfCrlf(buf: Uint8Array, length: number): number {
  for (let i = 1; i < length; i++) if (buf[i] === 10 && buf[i - 1] === 13) return i - 1;
  return -1;
}

async function fill(conn: Deno.Conn, state: { buf: Uint8Array; length: number }): Promise<void> {
  if (state.length === state.buf.length) {
    const bigger = new Uint8Array(state.buf.length * 2);
    bigger.set(state.buf);
    state.buf = bigger;
  }
  const n = await conn.read(state.buf.subarray(state.length));
  if (n === null) throw new Error("Connection closed by the server");
  state.length += n;
}

function consume(state: { buf: Uint8Array; length: number }, count: number): void {
  state.buf.copyWithin(0, count, state.length);
  state.length -= count;
}

/** Runs the load and measures it. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const { url, path, body, headers = {}, connections, durationMs, warmupMs, intervalMs = 0 } =
    options;
  const target = new URL(url);
  const bodyBytes = encoder.encode(body);
  const head = [
    `POST ${path} HTTP/1.1`,
    `Host: ${target.host}`,
    "Content-Type: application/json",
    `Content-Length: ${bodyBytes.length}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    "",
    "",
  ].join("\r\n");
  const request = new Uint8Array([...encoder.encode(head), ...bodyBytes]);
  const begin = performance.now();
  const measureFrom = begin + warmupMs;
  const end = measureFrom + durationMs;
  const samples: number[] = [];
  let requests = 0;
  let non2xx = 0;
  let firstBad = 0;
  await Promise.all(Array.from({ length: connections }, async () => {
    const conn = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
    conn.setNoDelay(true);
    const state = { buf: new Uint8Array(16384), length: 0 };
    try {
      for (let next = performance.now();;) {
        if (intervalMs > 0) {
          next += intervalMs;
          const wait = next - performance.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        }
        const sent = performance.now();
        if (sent >= end) break;
        let written = 0;
        while (written < request.length) written += await conn.write(request.subarray(written));
        const status = await readResponse(conn, state);
        const done = performance.now();
        if (sent < measureFrom) continue;
        if (status < 200 || status > 299) {
          non2xx++;
          firstBad ||= status;
          continue;
        }
        requests++;
        samples.push(done - sent);
      }
    } finally {
      conn.close();
    }
  }));
  return {
    requests,
    non_2xx: non2xx,
    first_bad_status: firstBad,
    requests_per_s: rate(requests, Math.min(durationMs, performance.now() - measureFrom)),
    ...latency(samples),
    ...(options.samples ? { samples_ms: samples } : {}),
  };
}

if (import.meta.main) {
  const result = await runLoad(JSON.parse(Deno.args[0]) as LoadOptions);
  console.log(JSON.stringify(result));
}
