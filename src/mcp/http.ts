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
import { type Caller, type Gateway, LOCAL_CALLER } from "../gateway/mod.ts";
import { InputRelay } from "./input_relay.ts";
import { createMcpServer } from "./server.ts";
import { isEventStream, jsonWhenAlone, onBodyEnd, rpcError } from "./_http_answers.ts";
import {
  callerKey,
  carriesEnvelope,
  isSingleRequest,
  listenedResources,
  type ParsedRequest,
  withCaller,
  withParsedBody,
} from "./_http_requests.ts";

/** Options of {@linkcode McpHttpSessions}. */
export interface McpHttpSessionsOptions {
  /** Close a session after this long without requests in flight, in ms. @default 1800000 */
  idleMs?: number;
  /** Most sessions open at once, those of the virtual servers included; more initializations get 503. @default 1000 */
  maxSessions?: number;
  /** Largest POST body the transport reads, in bytes. @default 1048576 */
  maxBodyBytes?: number;
  /** New session ids (visible ASCII, unguessable). @default crypto.randomUUID */
  generateId?: () => string;
  /** Entry point name recorded in the audit log. @default "mcp-http" */
  source?: string;
  /**
   * How a POST's answer is sent: one JSON body unless the call sends
   * something before its result (progress, log messages, requests for the
   * caller's input: then an SSE stream), or always an SSE stream that carries
   * a keep-alive comment every 15 s while the call runs (for proxies that cut
   * silent responses). @default "json"
   */
  responses?: "json" | "sse";
  /**
   * The virtual server these sessions serve (`/mcp/<name>`); see
   * {@linkcode McpHttpSessions.forServer}. @default none: every tool
   */
  server?: string;
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
  /** Who opened it: later requests must come from the same caller. */
  owner: string;
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
  /** Resources watched for the 2026 listen streams, by URI. */
  #watches = new Map<string, { streams: number; stopping: Promise<() => void> }>();
  /** Calls waiting for their callers' input between requests (2026 rounds may come on any request). */
  #relay = new InputRelay();
  #pending = new Set<Session>();
  #draining = false;
  /** Idle expiries of all sessions, on one timer that does not keep the process alive. */
  #expiries: DeadlineQueue;
  #options: McpHttpSessionsOptions;
  #server: string | undefined;
  /** The sessions of each virtual server (`/mcp/<name>`), made on first use. */
  #virtual = new Map<string, McpHttpSessions>();
  /** Whose `maxSessions` this one counts against: the `/mcp` sessions, for a virtual server's. */
  #root: McpHttpSessions = this;

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
      server,
    } = options;
    for (const [name, value] of Object.entries({ idleMs, maxSessions, maxBodyBytes })) {
      if (!(value > 0)) throw new RangeError(`Invalid ${name}: ${value} is not positive`);
    }
    this.#gateway = gateway;
    this.#options = options;
    this.#server = server;
    this.#expiries = new DeadlineQueue(idleMs, { ref: false });
    this.#maxSessions = maxSessions;
    this.#maxBodyBytes = maxBodyBytes;
    this.#generateId = generateId;
    this.#source = source;
    this.#jsonResponses = responses === "json";
    this.#modern = createMcpHandler(
      () =>
        createMcpServer(gateway, { source, listChanged: false, relay: this.#relay, server })
          .server,
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
    // A virtual server whose definition changed: its tools, prompts and resources may have.
    const offServer = server === undefined ? () => {} : gateway.servers.onChanged((names) => {
      if (!names.includes(server)) return;
      this.#modern.notify.toolsChanged();
      this.#modern.notify.promptsChanged();
      this.#modern.notify.resourcesChanged();
    });
    this.#detachModern = () => {
      offTools();
      offCatalog();
      offServer();
    };
  }

  /**
   * The sessions of the virtual server `name` (`/mcp/<name>`), with the same
   * options; made on first use, drained and closed with these. The caller
   * checks that the server exists.
   */
  forServer(name: string): McpHttpSessions {
    let sessions = this.#virtual.get(name);
    if (!sessions) {
      sessions = new McpHttpSessions(this.#gateway, { ...this.#options, server: name });
      // One bound for all: a virtual server's sessions count against the endpoint's maxSessions.
      sessions.#root = this;
      if (this.#draining) sessions.drain();
      this.#virtual.set(name, sessions);
    }
    return sessions;
  }

  /**
   * Watches a resource for the 2026 listen streams: one watch per URI
   * however many streams name it (the SDK sends each update to those that
   * do). A resource that cannot be watched is not; the stream stays open.
   */
  async #watch(uri: string): Promise<() => void> {
    let watch = this.#watches.get(uri);
    if (!watch) {
      const stopping = this.#gateway.catalog.subscribe(
        uri,
        () => this.#modern.notify.resourceUpdated(uri),
      ).catch(() => () => {});
      watch = { streams: 0, stopping };
      this.#watches.set(uri, watch);
    }
    const current = watch;
    current.streams++;
    await current.stopping;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--current.streams > 0 || this.#watches.get(uri) !== current) return;
      this.#watches.delete(uri);
      void current.stopping.then((stop) => stop());
    };
  }

  /** Sessions open or being opened, those of the virtual servers too. */
  #opening(): number {
    let count = this.#sessions.size + this.#pending.size;
    for (const sessions of this.#virtual.values()) count += sessions.#opening();
    return count;
  }

  /** Number of open sessions (those of the virtual servers too). */
  get size(): number {
    let size = this.#sessions.size;
    for (const sessions of this.#virtual.values()) size += sessions.size;
    return size;
  }

  /** Ids of the open sessions. */
  ids(): string[] {
    return [...this.#sessions.keys()];
  }

  /**
   * Handles one request to the MCP endpoint (POST, GET stream, DELETE).
   * A request without `Mcp-Session-Id` may only initialize a new session; an
   * unknown session id gets 404, so the client starts a new session.
   *
   * @param caller Who is calling (authentication's answer): its tool
   * patterns filter tools/list and refuse calls outside them. A session
   * belongs to the caller that opened it; another caller gets 403.
   * @default the local caller (every tool)
   */
  async handle(request: Request, caller?: Caller): Promise<Response> {
    const id = request.headers.get("mcp-session-id");
    const owner = callerKey(caller);
    if (id !== null) {
      const session = this.#sessions.get(id);
      if (!session) return rpcError(404, CONNECTION_CLOSED, "Session not found");
      if (session.owner !== owner) {
        return rpcError(403, SERVER_ERROR, "Forbidden: the session belongs to another caller");
      }
      if (this.#draining && request.method === "GET") {
        return rpcError(503, SERVER_ERROR, "Server is shutting down");
      }
      const read = await withParsedBody(request, this.#maxBodyBytes);
      if (read instanceof Response) return read;
      return await this.#serve(session, withCaller(read, caller));
    }
    const read = await withParsedBody(request, this.#maxBodyBytes);
    if (read instanceof Response) return read;
    const parsed = withCaller(read, caller);
    const [plain, body] = parsed;
    // A request carrying the 2026-07-28 envelope (not an initialize) is modern on its face:
    // the handler classifies it again, and answers what is wrong with it.
    const legacy = !carriesEnvelope(body?.parsedBody) &&
      await isLegacyRequest(plain, body?.parsedBody, { maxRequestBodySize: this.#maxBodyBytes });
    if (!legacy) {
      if (this.#draining) return rpcError(503, SERVER_ERROR, "Server is shutting down");
      const response = await this.#modern.fetch(plain, body);
      // A subscriptions/listen stream that names resources watches them while it
      // is open: those the caller (and this virtual server) may see, like
      // 2025's resources/subscribe.
      const visibleCaller = this.#server === undefined || caller?.server === this.#server
        ? caller
        : { ...(caller ?? LOCAL_CALLER), server: this.#server };
      const uris = listenedResources(body?.parsedBody).filter((uri) => {
        const plugin = this.#gateway.catalog.resourcePlugin(uri);
        return plugin === undefined || this.#gateway.showsPlugin(visibleCaller, plugin);
      });
      if (!uris.length || !isEventStream(response)) return response;
      const stops = await Promise.all(uris.map((uri) => this.#watch(uri)));
      return onBodyEnd(response, () => stops.forEach((stop) => stop()));
    }
    if (request.method === "GET" || request.method === "DELETE") {
      return rpcError(400, SERVER_ERROR, "Bad Request: Mcp-Session-Id header is required");
    }
    if (request.method !== "POST") {
      return rpcError(405, SERVER_ERROR, "Method not allowed", { allow: "GET, POST, DELETE" });
    }
    if (this.#draining) return rpcError(503, SERVER_ERROR, "Server is shutting down");
    if (this.#root.#opening() >= this.#root.#maxSessions) {
      return rpcError(503, SERVER_ERROR, "Too many MCP sessions: try again later");
    }
    return await this.#initialize(parsed, owner);
  }

  async #initialize(parsed: ParsedRequest, owner: string): Promise<Response> {
    const session = this.#create(owner);
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

  #create(owner: string): Session {
    const transport: WebStandardStreamableHTTPServerTransport =
      new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: this.#generateId,
        maxRequestBodySize: this.#maxBodyBytes,
        // Answers are SSE streams here; with `responses: "json"` (the default)
        // #serve turns one that starts with its result into one JSON body.
        onsessioninitialized: (id: string) => {
          session.id = id;
          this.#sessions.set(id, session);
        },
      });
    const { server, detach } = createMcpServer(this.#gateway, {
      sessionId: () => transport.sessionId,
      source: this.#source,
      relay: this.#relay,
      server: this.#server,
    });
    const session: Session = {
      id: undefined,
      owner,
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
      if (this.#jsonResponses && isSingleRequest(parsed[1]?.parsedBody)) {
        response = await jsonWhenAlone(response);
      }
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
    // A call waiting for its caller's answer would hold shutdown up: it is cancelled.
    this.#relay.close();
    for (const session of this.#sessions.values()) {
      session.transport.closeStandaloneSSEStream();
    }
    for (const sessions of this.#virtual.values()) sessions.drain();
  }

  /** Closes every session and 2026 exchange (their streams end, in-flight calls are aborted). */
  async closeAll(): Promise<void> {
    this.#detachModern();
    this.#relay.close();
    await Promise.all([
      this.#modern.close(),
      ...[...this.#sessions.values()].map((session) => session.server.close()),
      ...[...this.#virtual.values()].map((sessions) => sessions.closeAll()),
    ]);
  }
}
