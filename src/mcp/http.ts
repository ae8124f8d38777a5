/**
 * MCP over Streamable HTTP, both protocol eras at one endpoint:
 *
 * - 2025 (`initialize`, `Mcp-Session-Id`): one SDK server and
 *   `WebStandardStreamableHTTPServerTransport` per session, idle expiry and
 *   shutdown;
 * - 2026-07-28 (every request carries its version and client in `_meta`):
 *   the SDK's `createMcpHandler`, one server instance per request, with
 *   `server/discover`, the `Mcp-Method`/`Mcp-Name` header checks, cache
 *   hints and `subscriptions/listen`.
 *
 * The SDK's own classification (`isLegacyRequest`) routes each request. The
 * HTTP layer mounts {@linkcode McpHttpSessions.handle} at `/mcp`.
 *
 * @module
 */
import {
  createMcpHandler,
  isLegacyRequest,
  type McpHttpHandler,
  type Server,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import { DeadlineQueue } from "../deadlines.ts";
import type { Config } from "../config/mod.ts";
import type { Gateway } from "../gateway/mod.ts";
import { createMcpServer } from "./server.ts";

/** Options of {@linkcode McpHttpSessions}. */
export interface McpHttpSessionsOptions {
  /** Close a session after this long without requests in flight, in ms. @default 1800000 */
  idleMs?: number;
  /** Most sessions open at once; more initializations get 503. @default 1000 */
  maxSessions?: number;
  /** Largest POST body the transport reads, in bytes. @default 1048576 */
  maxBodyBytes?: number;
  /** New session ids (visible ASCII, unguessable). @default crypto.randomUUID */
  generateId?: () => string;
  /** Entry point name recorded in the audit log. @default "mcp-http" */
  source?: string;
  /**
   * How a POST's answer is sent: one JSON body, or an SSE stream that carries
   * a keep-alive comment every 15 s while the call runs (for proxies that cut
   * silent responses). @default "json"
   */
  responses?: "json" | "sse";
}

/** The options of {@linkcode McpHttpSessions} that `server.*` in the configuration sets. */
export function mcpHttpOptions(server: Config["server"]): McpHttpSessionsOptions {
  return {
    idleMs: server.session_idle_ms,
    maxBodyBytes: server.body_limit_bytes,
    responses: server.mcp_responses,
  };
}

interface Session {
  id: string | undefined;
  server: Server;
  transport: WebStandardStreamableHTTPServerTransport;
  detach: () => void;
  /** Requests whose response (body included) has not finished. */
  active: number;
  /** Cancels the idle expiry armed while no request is active. */
  cancelExpiry: (() => void) | undefined;
  closed: boolean;
}

/** JSON-RPC error codes the transport uses in HTTP error bodies. */
const CONNECTION_CLOSED = -32001;
const SERVER_ERROR = -32000;

/**
 * The MCP Streamable HTTP sessions of one HTTP server.
 *
 * @example
 * ```ts
 * const mcp = new McpHttpSessions(gateway, { idleMs: 60_000 });
 * app.all("/mcp", (c) => mcp.handle(c.req.raw));
 * // on shutdown:
 * mcp.drain();
 * await mcp.closeAll();
 * ```
 */
export class McpHttpSessions {
  #gateway: Gateway;
  #maxSessions: number;
  #maxBodyBytes: number;
  #generateId: () => string;
  #source: string;
  #jsonResponses: boolean;
  #modern: McpHttpHandler;
  #detachModern: () => void;
  #sessions = new Map<string, Session>();
  #pending = new Set<Session>();
  #draining = false;
  /** Idle expiries of all sessions, on one timer that does not keep the process alive. */
  #expiries: DeadlineQueue;

  /**
   * @param gateway The gateway whose tools the sessions offer.
   * @param options Idle expiry, limits and id generation.
   * @throws {RangeError} when a limit is not a positive number.
   */
  constructor(gateway: Gateway, options: McpHttpSessionsOptions = {}) {
    const {
      idleMs = 30 * 60 * 1000,
      maxSessions = 1000,
      maxBodyBytes = 1024 * 1024,
      generateId = () => crypto.randomUUID(),
      source = "mcp-http",
      responses = "json",
    } = options;
    for (const [name, value] of Object.entries({ idleMs, maxSessions, maxBodyBytes })) {
      if (!(value > 0)) throw new RangeError(`Invalid ${name}: ${value} is not positive`);
    }
    this.#gateway = gateway;
    this.#expiries = new DeadlineQueue(idleMs, { ref: false });
    this.#maxSessions = maxSessions;
    this.#maxBodyBytes = maxBodyBytes;
    this.#generateId = generateId;
    this.#source = source;
    this.#jsonResponses = responses === "json";
    this.#modern = createMcpHandler(
      () => createMcpServer(gateway, { source, listChanged: false }).server,
      {
        // 2025 traffic never reaches it: sessions are served above.
        legacy: "reject",
        // One JSON body, unless the call sends something before its result.
        responseMode: this.#jsonResponses ? "auto" : "sse",
        maxRequestBodySize: maxBodyBytes,
      },
    );
    // 2026 clients hear of list changes on their subscriptions/listen streams.
    const offTools = gateway.onToolsChanged(() => this.#modern.notify.toolsChanged());
    const offCatalog = gateway.catalog.onChanged((change) =>
      change === "prompts"
        ? this.#modern.notify.promptsChanged()
        : this.#modern.notify.resourcesChanged()
    );
    this.#detachModern = () => {
      offTools();
      offCatalog();
    };
  }

  /** Number of open sessions. */
  get size(): number {
    return this.#sessions.size;
  }

  /** Ids of the open sessions. */
  ids(): string[] {
    return [...this.#sessions.keys()];
  }

  /**
   * Handles one request to the MCP endpoint (POST, GET stream, DELETE).
   * A request without `Mcp-Session-Id` may only initialize a new session; an
   * unknown session id gets 404, so the client starts a new session.
   */
  async handle(request: Request): Promise<Response> {
    const id = request.headers.get("mcp-session-id");
    if (id !== null) {
      const session = this.#sessions.get(id);
      if (!session) return rpcError(404, CONNECTION_CLOSED, "Session not found");
      if (this.#draining && request.method === "GET") {
        return rpcError(503, SERVER_ERROR, "Server is shutting down");
      }
      return await this.#serve(session, await withParsedBody(request, this.#maxBodyBytes));
    }
    const parsed = await withParsedBody(request, this.#maxBodyBytes);
    const [plain, body] = parsed;
    const legacy = await isLegacyRequest(plain, body?.parsedBody, {
      maxRequestBodySize: this.#maxBodyBytes,
    });
    if (!legacy) {
      if (this.#draining) return rpcError(503, SERVER_ERROR, "Server is shutting down");
      return await this.#modern.fetch(plain, body);
    }
    if (request.method === "GET" || request.method === "DELETE") {
      return rpcError(400, SERVER_ERROR, "Bad Request: Mcp-Session-Id header is required");
    }
    if (request.method !== "POST") {
      return rpcError(405, SERVER_ERROR, "Method not allowed", { allow: "GET, POST, DELETE" });
    }
    if (this.#draining) return rpcError(503, SERVER_ERROR, "Server is shutting down");
    if (this.#sessions.size + this.#pending.size >= this.#maxSessions) {
      return rpcError(503, SERVER_ERROR, "Too many MCP sessions: try again later");
    }
    return await this.#initialize(parsed);
  }

  async #initialize(parsed: ParsedRequest): Promise<Response> {
    const session = this.#create();
    this.#pending.add(session);
    try {
      await session.server.connect(session.transport);
      return await this.#serve(session, parsed);
    } finally {
      this.#pending.delete(session);
      // Not an initialize request (or it failed): the transport holds no session.
      if (session.id === undefined) await session.server.close();
    }
  }

  #create(): Session {
    const transport: WebStandardStreamableHTTPServerTransport =
      new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: this.#generateId,
        maxRequestBodySize: this.#maxBodyBytes,
        // By default a request's answer is one JSON body rather than an SSE
        // stream: toolgate sends no progress or server-to-client request
        // within a call (list_changed goes on the GET stream), and JSON costs
        // less per call (MCP HTTP calls/s +21 % measured). The spec lets the
        // server choose; clients must accept both.
        enableJsonResponse: this.#jsonResponses,
        onsessioninitialized: (id: string) => {
          session.id = id;
          this.#sessions.set(id, session);
        },
      });
    const { server, detach } = createMcpServer(this.#gateway, {
      sessionId: () => transport.sessionId,
      source: this.#source,
    });
    const session: Session = {
      id: undefined,
      server,
      transport,
      detach,
      active: 0,
      cancelExpiry: undefined,
      closed: false,
    };
    // Set before connect(): the server chains its own close handler after it.
    transport.onclose = () => this.#forget(session);
    return session;
  }

  async #serve(session: Session, parsed: ParsedRequest): Promise<Response> {
    session.active++;
    session.cancelExpiry?.();
    session.cancelExpiry = undefined;
    let response: Response;
    try {
      response = await session.transport.handleRequest(...parsed);
    } catch (error) {
      this.#release(session);
      throw error;
    }
    return onBodyEnd(response, () => this.#release(session));
  }

  #release(session: Session): void {
    session.active--;
    if (session.active > 0 || session.closed || session.id === undefined) return;
    session.cancelExpiry = this.#expiries.add(() => void session.server.close());
  }

  #forget(session: Session): void {
    if (session.closed) return;
    session.closed = true;
    session.cancelExpiry?.();
    session.cancelExpiry = undefined;
    session.detach();
    if (session.id !== undefined) this.#sessions.delete(session.id);
  }

  /**
   * Closes one session (as `DELETE` would).
   *
   * @returns Whether the session existed.
   */
  async close(id: string): Promise<boolean> {
    const session = this.#sessions.get(id);
    if (!session) return false;
    await session.server.close();
    return true;
  }

  /**
   * Starts shutdown: no new sessions or GET streams, and the open GET
   * streams end so that in-flight requests can drain.
   */
  drain(): void {
    this.#draining = true;
    for (const session of this.#sessions.values()) {
      session.transport.closeStandaloneSSEStream();
    }
  }

  /** Closes every session and 2026 exchange (their streams end, in-flight calls are aborted). */
  async closeAll(): Promise<void> {
    this.#detachModern();
    await Promise.all([
      this.#modern.close(),
      ...[...this.#sessions.values()].map((session) => session.server.close()),
    ]);
  }
}

function rpcError(
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/**
 * Calls `done` once the response body finished, failed or was cancelled (at
 * once when there is no body).
 */
function onBodyEnd(response: Response, done: () => void): Response {
  // A JSON (or empty) body is complete already: only an SSE stream stays
  // open. (The header first: reading `response.body` creates a stream.)
  if (!isEventStream(response) || response.body === null) {
    done();
    return response;
  }
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    done();
  };
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const chunk = await reader.read();
        if (chunk.done) {
          finish();
          controller.close();
        } else {
          controller.enqueue(chunk.value);
        }
      } catch (error) {
        finish();
        controller.error(error);
      }
    },
    async cancel(reason) {
      finish();
      await reader.cancel(reason);
    },
  });
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

function isEventStream(response: Response): boolean {
  return response.headers.get("content-type")?.startsWith("text/event-stream") ?? false;
}

/**
 * The request and its parsed JSON body for the transport. A POST's body is
 * read here in one piece: the SDK transport would read it chunk by chunk
 * through a stream reader, which cost more per call than the rest of its
 * request handling. A body that is not JSON, or is over `maxBytes` (the HTTP
 * app's body limit normally refused it before), is handed back to the
 * transport in a new request, so that it answers with its own error as
 * before; other methods go through untouched.
 */
async function withParsedBody(request: Request, maxBytes: number): Promise<ParsedRequest> {
  // `request.body` is not touched: creating its stream would make text() read through it.
  if (request.method !== "POST") return [request];
  const text = await request.text();
  const overLimit = text.length > maxBytes ||
    (text.length * 3 > maxBytes && encoder.encode(text).length > maxBytes);
  if (!overLimit) {
    try {
      return [request, { parsedBody: JSON.parse(text) }];
    } catch {
      // Not JSON: the transport answers it.
    }
  }
  return [new Request(request, { body: text })];
}

const encoder = new TextEncoder();

/** A request and, for a JSON POST, its parsed body. */
type ParsedRequest = [Request, { parsedBody: unknown }?];
