/**
 * MCP over stdio, both protocol eras (the SDK's `serveStdio` decides from the
 * client's opening: `initialize` for 2025, a request carrying the 2026-07-28
 * `_meta` envelope or a `server/discover` probe for 2026). stdout carries
 * only JSON-RPC; logs go to stderr.
 *
 * @module
 */
import type {
  JSONRPCMessage,
  MessageExtraInfo,
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/server";
import {
  serveStdio as serveSdkStdio,
  StdioServerTransport,
} from "@modelcontextprotocol/server/stdio";
import process from "node:process";
import { PassThrough } from "node:stream";
import { LOCAL_CALLER } from "../gateway/caller.ts";
import type { Gateway } from "../gateway/mod.ts";
import { InputRelay } from "./input_relay.ts";
import { createMcpServer } from "./server.ts";

/** Options of {@linkcode serveStdio}. */
export interface ServeStdioOptions {
  /** Ends the session (SIGTERM/SIGINT): in-flight requests are answered first. */
  signal?: AbortSignal;
  /** Longest wait for in-flight requests when stdin closes or `signal` aborts, in ms. @default 10000 */
  drainTimeoutMs?: number;
  /**
   * Serve only this virtual server (`mcp start --server <name>`): its tools,
   * prompts and resources, and list_changed when its definition changes.
   * @default none: every tool
   */
  server?: string;
}

/**
 * Serves the gateway on stdin/stdout until stdin closes or `signal` aborts.
 * Requests already received are answered before the session ends (bounded
 * by `drainTimeoutMs`), so a client that writes its requests and closes
 * stdin still gets every reply.
 *
 * @param gateway The gateway, or a promise of it (`initialize` and
 * `server/discover` are then answered while it starts; tool requests wait
 * for it).
 * @returns Resolves when the session ended.
 */
export async function serveStdio(
  gateway: Gateway | Promise<Gateway>,
  options: ServeStdioOptions = {},
): Promise<void> {
  const { signal, drainTimeoutMs = 10_000, server } = options;
  const caller = server === undefined ? LOCAL_CALLER : { ...LOCAL_CALLER, server };
  const detaches: (() => void)[] = [];
  const { stdin, stdout } = process;
  // The SDK's transport closes at the end of its input; it reads a copy of
  // stdin that ends only once the requests already received are answered.
  const input = new PassThrough();
  stdin.pipe(input, { end: false });
  const transport = new CountingTransport(new StdioServerTransport(input, stdout));
  // Calls waiting for the client's input between its requests.
  const relay = new InputRelay();
  let watch: ((uri: string) => Promise<void>) | undefined;
  // The server is made on the first message, which may be the listen request itself.
  const made = Promise.withResolvers<void>();
  const handle = serveSdkStdio(() => {
    // Called once per connection (twice when a server/discover probe falls back to initialize).
    const created = createMcpServer(gateway, { source: "mcp-stdio", relay, caller, server });
    detaches.push(created.detach);
    watch = created.watch;
    made.resolve();
    return created.server;
  }, { transport });
  // A 2026 client's listen stream that names resources: they are watched for the connection.
  transport.onListen = (params) => {
    const uris = params?.notifications?.resourceSubscriptions;
    if (!Array.isArray(uris)) return;
    void made.promise.then(() => {
      for (const uri of uris) {
        if (typeof uri === "string") void watch?.(uri).catch(() => {});
      }
    });
  };
  let ending = false;
  const end = async () => {
    if (ending) return;
    ending = true;
    await transport.drained(drainTimeoutMs);
    stdin.unpipe(input);
    input.end();
    await handle.close();
  };
  const onEnd = () => void end();
  stdin.on("end", onEnd);
  stdin.on("close", onEnd);
  signal?.addEventListener("abort", onEnd, { once: true });
  try {
    await transport.closed;
  } finally {
    relay.close();
    for (const detach of detaches) detach();
    stdin.off("end", onEnd);
    stdin.off("close", onEnd);
    signal?.removeEventListener("abort", onEnd);
  }
}

/** The params of a 2026 `subscriptions/listen` request (the part toolgate reads). */
interface ListenParams {
  notifications?: { resourceSubscriptions?: unknown };
}

/**
 * A transport that counts the requests it received and has not answered
 * yet, so that the session can end once they are.
 */
class CountingTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  /** Told of each 2026 `subscriptions/listen` request, with its params. */
  onListen?: (params: ListenParams | undefined) => void;
  #inner: Transport;
  #pending = new Set<string | number>();
  #waiters: (() => void)[] = [];
  #closed = Promise.withResolvers<void>();

  constructor(inner: Transport) {
    this.#inner = inner;
    inner.onmessage = (message, extra) => {
      if ("method" in message && message.method === "subscriptions/listen") {
        // Open until the client ends it: not a request the session waits for at its end.
        this.onListen?.(message.params as ListenParams | undefined);
      } else if ("method" in message && "id" in message) {
        this.#pending.add(message.id);
      }
      this.onmessage?.(message, extra);
    };
    inner.onerror = (error) => this.onerror?.(error);
    inner.onclose = () => {
      this.#closed.resolve();
      this.onclose?.();
    };
  }

  /** Resolves once the connection closed. */
  get closed(): Promise<void> {
    return this.#closed.promise;
  }

  start(): Promise<void> {
    return this.#inner.start();
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    try {
      await this.#inner.send(message, options);
    } finally {
      if (!("method" in message) && "id" in message && message.id !== undefined) {
        this.#pending.delete(message.id);
        this.#settle();
      }
    }
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  /** Resolves when every received request was answered, or after `timeoutMs`. */
  drained(timeoutMs: number): Promise<void> {
    if (!this.#pending.size) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.#waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  #settle(): void {
    if (this.#pending.size) return;
    for (const waiter of this.#waiters) waiter();
    this.#waiters = [];
  }
}
