/**
 * The MCP Streamable HTTP client of the benchmarks, and the peers they run
 * behind HTTP. Private to `scripts/bench`.
 *
 * The client is raw JSON-RPC over `fetch` in the bench process, the same for
 * every server: N clients, each calling one tool sequentially, in either
 * protocol era —
 *
 * - 2025 (`2025-06-18`): each client opens a session (`initialize`, then
 *   `notifications/initialized`) and sends `Mcp-Session-Id` with every call;
 * - 2026-07-28: no session; every call carries the `_meta` envelope
 *   (protocol version, client info, client capabilities) and the
 *   `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
 *
 * JSON and SSE replies are both parsed.
 *
 * @module
 */
import type { BenchMode } from "./http_server.ts";
import { benchFile, MAIN, type ReadyProcess, spawnReady, startToolgateHttp } from "./_proc.ts";
import { latency, rate } from "./_stats.ts";
import { MCP_PROXY_PACKAGE, npmServerArgs, SUPERGATEWAY_PACKAGE } from "../npm_servers.ts";

/** Calls per second and latency of one MCP server. */
export interface McpThroughput {
  calls_per_s: number;
  p50_ms: number;
  p99_ms: number;
  calls: number;
}

/** The 2025 revision the session clients negotiate. */
export const SESSION_PROTOCOL = "2025-06-18";

/** The stateless revision. */
export const STATELESS_PROTOCOL = "2026-07-28";

/** The protocol revision a client speaks: a 2025 session, or stateless 2026-07-28 requests. */
export type McpEra = typeof SESSION_PROTOCOL | typeof STATELESS_PROTOCOL;

/** The tool call every client repeats. */
export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** `memory_get` of a missing key: a KV read, no write of its own. */
export const MEMORY_GET: ToolCall = {
  name: "memory_get",
  arguments: { key: "bench/missing-key" },
};

const ACCEPT = "application/json, text/event-stream";
const CLIENT_INFO = { name: "bench", version: "1" };

/** Measured and warm-up time of one phase for a mode, in ms. */
export function phaseMs(mode: BenchMode): { durationMs: number; warmupMs: number } {
  return {
    durationMs: mode === "full" ? 6000 : mode === "quick" ? 2500 : 600,
    warmupMs: mode === "full" ? 1000 : mode === "quick" ? 500 : 200,
  };
}

/** Reads the JSON-RPC message with `id` from a JSON or SSE response body. */
export async function rpcReply(response: Response, id: number): Promise<Record<string, unknown>> {
  if (!response.ok) {
    throw new Error(`HTTP ${response.status}: ${(await response.text()).slice(0, 300)}`);
  }
  const type = response.headers.get("content-type") ?? "";
  const text = await response.text();
  const candidates = type.includes("text/event-stream")
    ? text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim())
    : [text];
  for (const candidate of candidates) {
    if (!candidate) continue;
    const message = JSON.parse(candidate) as Record<string, unknown>;
    if (message.id === id) return message;
  }
  throw new Error(`No reply with id ${id} in: ${text.slice(0, 300)}`);
}

/** Throws unless `message` is a successful `tools/call` result with text content. */
export function assertToolResult(message: Record<string, unknown>): void {
  const result = message.result as { content?: { text?: string }[]; isError?: boolean } | undefined;
  if (!result?.content?.[0]?.text || result.isError) {
    throw new Error(`Unexpected tools/call reply: ${JSON.stringify(message).slice(0, 300)}`);
  }
}

/** Options of {@linkcode openMcpHttpClients}. */
export interface McpHttpClientsOptions {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  endpoint: string;
  /** Clients calling at once, each sequentially. */
  clients: number;
  /** The tool call each client repeats. */
  call: ToolCall;
  /** @default SESSION_PROTOCOL */
  era?: McpEra;
}

/** Latencies of one measured phase and how long it lasted. */
export interface McpPhase {
  samples: number[];
  elapsedMs: number;
}

/**
 * Concurrent MCP clients of one endpoint, each with one call in flight;
 * made by {@linkcode openMcpHttpClients}.
 *
 * @example
 * ```ts
 * const clients = await openMcpHttpClients({ endpoint, clients: 8, call: MEMORY_GET });
 * const phase = await clients.run(6000, 1000);
 * await clients.close();
 * ```
 */
export class McpHttpClients {
  #endpoint: string;
  #call: ToolCall;
  #era: McpEra;
  /** Request headers of each client (its session id for 2025). */
  #headers: Record<string, string>[];
  #nextId = 1;

  /**
   * @param endpoint The MCP endpoint.
   * @param call The tool call each client repeats.
   * @param era The clients' protocol revision.
   * @param headers Request headers of each client, one entry per client.
   */
  constructor(endpoint: string, call: ToolCall, era: McpEra, headers: Record<string, string>[]) {
    this.#endpoint = endpoint;
    this.#call = call;
    this.#era = era;
    this.#headers = headers;
  }

  /**
   * Every client calls for `warmupMs` (not measured), then for `durationMs`
   * (each latency recorded); a call started before the end is waited for.
   */
  async run(durationMs: number, warmupMs: number): Promise<McpPhase> {
    const samples: number[] = [];
    const measureFrom = performance.now() + warmupMs;
    const end = measureFrom + durationMs;
    await Promise.all(this.#headers.map(async (headers) => {
      for (;;) {
        const sent = performance.now();
        if (sent >= end) break;
        const id = this.#nextId++;
        const response = await fetch(this.#endpoint, {
          method: "POST",
          headers,
          body: JSON.stringify(this.#request(id)),
        });
        assertToolResult(await rpcReply(response, id));
        if (sent >= measureFrom) samples.push(performance.now() - sent);
      }
    }));
    return { samples, elapsedMs: Math.max(durationMs, performance.now() - measureFrom) };
  }

  /** One call from the first client; its reply, whatever it is (for waiting until a tool is ready). */
  async callOnce(): Promise<Record<string, unknown>> {
    const id = this.#nextId++;
    const response = await fetch(this.#endpoint, {
      method: "POST",
      headers: this.#headers[0],
      body: JSON.stringify(this.#request(id)),
    });
    return await rpcReply(response, id);
  }

  /** Ends the 2025 sessions (`DELETE`). */
  async close(): Promise<void> {
    if (this.#era === STATELESS_PROTOCOL) return;
    await Promise.all(this.#headers.map(async (headers) => {
      const response = await fetch(this.#endpoint, { method: "DELETE", headers });
      await response.body?.cancel();
    }));
  }

  #request(id: number) {
    const params = this.#era === STATELESS_PROTOCOL
      ? {
        ...this.#call,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": this.#era,
          "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
          "io.modelcontextprotocol/clientCapabilities": {},
        },
      }
      : this.#call;
    return { jsonrpc: "2.0", id, method: "tools/call", params };
  }
}

/**
 * Opens the clients: a session each for 2025 (`initialize`, then
 * `notifications/initialized`); nothing to open for 2026-07-28.
 *
 * @throws {RangeError} when `clients` is not positive.
 */
export async function openMcpHttpClients(options: McpHttpClientsOptions): Promise<McpHttpClients> {
  const { endpoint, clients, call, era = SESSION_PROTOCOL } = options;
  if (!(clients > 0)) throw new RangeError(`Invalid clients: ${clients} is not positive`);
  const headers = era === STATELESS_PROTOCOL
    ? Array.from({ length: clients }, () => ({
      "content-type": "application/json",
      accept: ACCEPT,
      "mcp-protocol-version": era,
      "mcp-method": "tools/call",
      "mcp-name": call.name,
    }))
    : await Promise.all(Array.from({ length: clients }, () => openSession(endpoint, era)));
  return new McpHttpClients(endpoint, call, era, headers);
}

/** Opens a 2025 session; returns the headers of its later requests. */
async function openSession(endpoint: string, era: McpEra): Promise<Record<string, string>> {
  const response = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", accept: ACCEPT },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: era, capabilities: {}, clientInfo: CLIENT_INFO },
    }),
  });
  const sessionId = response.headers.get("mcp-session-id");
  await rpcReply(response, 0);
  if (!sessionId) throw new Error(`No Mcp-Session-Id from ${endpoint}`);
  const headers = {
    "content-type": "application/json",
    accept: ACCEPT,
    "mcp-session-id": sessionId,
    "mcp-protocol-version": era,
  };
  const initialized = await fetch(endpoint, {
    method: "POST",
    headers,
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await initialized.body?.cancel();
  return headers;
}

/** Calls/s over the phases' whole measured time, and the latencies of all their calls. */
export function throughput(phases: readonly McpPhase[]): McpThroughput {
  const samples = phases.flatMap((phase) => phase.samples);
  const elapsedMs = phases.reduce((sum, phase) => sum + phase.elapsedMs, 0);
  return {
    calls_per_s: rate(samples.length, elapsedMs),
    ...latency(samples),
    calls: samples.length,
  };
}

/**
 * Measures several sets of clients in turn, in `order` (e.g. A B B A), so
 * that drift of the shared machine falls on all alike: each set's phases add
 * up to `mode`'s phase length, and each set warms up in its first phase.
 */
export async function alternate<K extends string>(
  clients: Record<K, McpHttpClients>,
  order: readonly K[],
  mode: BenchMode,
): Promise<Record<K, McpThroughput>> {
  const { durationMs, warmupMs } = phaseMs(mode);
  const phases = new Map<K, McpPhase[]>();
  for (const key of order) {
    const done = phases.get(key) ?? [];
    const count = order.filter((k) => k === key).length;
    done.push(await clients[key].run(durationMs / count, done.length ? 0 : warmupMs));
    phases.set(key, done);
  }
  return Object.fromEntries([...phases].map(([key, p]) => [key, throughput(p)])) as Record<
    K,
    McpThroughput
  >;
}

/**
 * Resolves once a call of `clients`' tool succeeds (a tool of an upstream
 * is offered once the upstream is connected).
 *
 * @throws {Error} with the last reply after `timeoutMs`.
 */
export async function untilCallable(clients: McpHttpClients, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  while (performance.now() < deadline) {
    try {
      const reply = await clients.callOnce();
      assertToolResult(reply);
      return;
    } catch (error) {
      last = error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`The tool did not answer within ${timeoutMs} ms: ${last}`);
}

/** Opens `clients` clients, runs one phase of `mode`'s length, and closes them. */
export async function httpCalls(
  options: McpHttpClientsOptions & { mode: BenchMode },
): Promise<McpThroughput> {
  const clients = await openMcpHttpClients(options);
  const { durationMs, warmupMs } = phaseMs(options.mode);
  const phase = await clients.run(durationMs, warmupMs);
  await clients.close();
  return throughput([phase]);
}

/** Options of {@linkcode openToolgateClients}. */
export interface ToolgateClientsOptions {
  /** The tool call the clients repeat. */
  call: ToolCall;
  /** Sessions calling at once. */
  clients: number;
  /** `config.json` written to the data dir first. @default none */
  config?: unknown;
  /** The `main.ts` to run (another checkout's, to measure before a change). @default this one */
  main?: string;
}

/**
 * `toolgate mcp start --transport http` on `home`, and `clients` MCP clients
 * of it once its tool answers (an upstream's tool is offered once the
 * upstream is connected); the server is stopped if that never happens.
 */
export async function openToolgateClients(
  home: string,
  options: ToolgateClientsOptions,
): Promise<ReadyProcess & { url: string; clients: McpHttpClients }> {
  const { call, clients, config, main = MAIN } = options;
  if (config) await Deno.writeTextFile(`${home}/config.json`, JSON.stringify(config));
  const server = await startToolgateHttp(home, {}, main);
  try {
    const endpoint = `${server.url}/mcp`;
    const probe = await openMcpHttpClients({ endpoint, clients: 1, call });
    await untilCallable(probe, 60_000);
    await probe.close();
    return Object.assign(server, {
      clients: await openMcpHttpClients({ endpoint, clients, call }),
    });
  } catch (error) {
    await server.stop();
    throw error;
  }
}

// --- Peers ---------------------------------------------------------------------

/**
 * `npmServerArgs` with a preload that binds the server to 127.0.0.1
 * (`_loopback.ts`): supergateway and the reference servers listen on every
 * interface otherwise.
 */
export function loopbackNpmServerArgs(pkg: string, ...args: string[]): string[] {
  const base = npmServerArgs(pkg, ...args);
  const at = base.indexOf(pkg);
  return [...base.slice(0, at), "--preload", benchFile("_loopback.ts"), ...base.slice(at)];
}

/**
 * Starts `supergateway` (pinned; run by Deno's npm support under its own
 * lock) in stateful streamableHttp mode, wrapping `stdio` (a command and its
 * arguments; supergateway starts one per session), on 127.0.0.1.
 */
export async function startSupergateway(
  stdio: readonly string[],
): Promise<ReadyProcess & { endpoint: string }> {
  const port = freePort();
  const stdioCommand = stdio.map((a) => `'${a}'`).join(" ");
  // supergateway is a Node program; Deno's npm support runs it (faster than
  // `npx` on Node 20 here, and without a second package cache).
  const process = await spawnReady({
    args: [
      // Under its own config and lock (scripts/npm_servers/): its dependencies stay out of deno.lock.
      ...loopbackNpmServerArgs(
        SUPERGATEWAY_PACKAGE,
        "--stdio",
        stdioCommand,
        "--outputTransport",
        "streamableHttp",
        "--stateful",
        "--port",
        String(port),
        "--logLevel",
        "none",
      ),
    ],
    stopSignal: "SIGTERM",
    // supergateway logs nothing at this level: do not wait for a line, wait for the port.
    ready: () => /^/.exec(""),
  });
  return await servingMcp(process, port);
}

/**
 * Starts `mcp-proxy` (pinned; run by Deno's npm support under its own lock)
 * serving `stdio` (a command and its arguments, one process per session as
 * it runs them) over stateful Streamable HTTP at `/mcp`, on 127.0.0.1.
 */
export async function startMcpProxy(
  stdio: readonly string[],
): Promise<ReadyProcess & { endpoint: string }> {
  const port = freePort();
  const process = await spawnReady({
    args: npmServerArgs(
      MCP_PROXY_PACKAGE,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--server",
      "stream",
      "--",
      ...stdio,
    ),
    stopSignal: "SIGTERM",
    ready: () => /^/.exec(""),
  });
  return await servingMcp(process, port);
}

/** `process` once it listens on `port`, with its MCP endpoint; stopped if it never does. */
async function servingMcp(
  process: ReadyProcess,
  port: number,
): Promise<ReadyProcess & { endpoint: string }> {
  try {
    await waitForPort(port, 60_000);
  } catch (error) {
    await process.stop();
    throw error;
  }
  return Object.assign(process, { endpoint: `http://127.0.0.1:${port}/mcp` });
}

/** A port free on 127.0.0.1 a moment ago. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/**
 * Resolves once something accepts connections on 127.0.0.1:`port`.
 *
 * @throws {Error} after `timeoutMs`.
 */
export async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    try {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      conn.close();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`Nothing listened on port ${port} within ${timeoutMs} ms`);
}
