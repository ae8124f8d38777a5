/**
 * MCP over stdio: stdout carries only JSON-RPC; logs go to stderr.
 *
 * @module
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Gateway } from "../gateway/mod.ts";
import { createMcpServer } from "./server.ts";

/** Options of {@linkcode serveStdio}. */
export interface ServeStdioOptions {
  /** Ends the session (SIGTERM/SIGINT): in-flight requests are answered first. */
  signal?: AbortSignal;
  /** Longest wait for in-flight requests when stdin closes or `signal` aborts, in ms. @default 10000 */
  drainTimeoutMs?: number;
}

/**
 * Serves the gateway on stdin/stdout until stdin closes or `signal` aborts.
 * Requests already received are answered before the session ends (bounded
 * by `drainTimeoutMs`), so a client that writes its requests and closes
 * stdin still gets every reply.
 *
 * @param gateway The gateway, or a promise of it (`initialize` is then
 * answered while it starts; tool requests wait for it).
 * @returns Resolves when the session ended.
 */
export async function serveStdio(
  gateway: Gateway | Promise<Gateway>,
  options: ServeStdioOptions = {},
): Promise<void> {
  const { signal, drainTimeoutMs = 10_000 } = options;
  const { server, detach } = createMcpServer(gateway, { source: "mcp-stdio" });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  await server.connect(transport);
  const inFlight = trackRequests(transport);
  let ending = false;
  const end = async () => {
    if (ending) return;
    ending = true;
    await inFlight.drained(drainTimeoutMs);
    await server.close();
  };
  const onEnd = () => void end();
  const stdin = (globalThis as unknown as { process: { stdin: NodeStdin } }).process.stdin;
  stdin.on("end", onEnd);
  stdin.on("close", onEnd);
  signal?.addEventListener("abort", onEnd, { once: true });
  try {
    await closed;
  } finally {
    detach();
    stdin.off("end", onEnd);
    stdin.off("close", onEnd);
    signal?.removeEventListener("abort", onEnd);
  }
}

/** Counts requests received and not yet answered on a transport. */
function trackRequests(transport: StdioServerTransport) {
  const pending = new Set<string | number>();
  let waiters: (() => void)[] = [];
  const settle = () => {
    if (pending.size) return;
    for (const waiter of waiters) waiter();
    waiters = [];
  };
  const receive = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage, extra?: unknown) => {
    if ("method" in message && "id" in message) pending.add(message.id);
    (receive as (m: JSONRPCMessage, e?: unknown) => void)?.(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage) => {
    try {
      await send(message);
    } finally {
      if (!("method" in message) && "id" in message && message.id !== undefined) {
        pending.delete(message.id);
        settle();
      }
    }
  };
  return {
    drained(timeoutMs: number): Promise<void> {
      if (!pending.size) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

interface NodeStdin {
  on(event: string, listener: () => void): void;
  off(event: string, listener: () => void): void;
}
