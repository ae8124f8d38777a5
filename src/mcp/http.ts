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
  type AuthInfo,
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
import { CALLER_AUTH_KEY, createMcpServer } from "./server.ts";

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

/** Whether a POST body is one request, other than `initialize`, with a 2026-07-28 `_meta` envelope. */
function carriesEnvelope(body: unknown): boolean {
  const request = body as
    | { method?: unknown; params?: { _meta?: Record<string, unknown> } }
    | undefined;
  return typeof request === "object" && request !== null && !Array.isArray(request) &&
    request.method !== "initialize" &&
    typeof request.params?._meta?.["io.modelcontextprotocol/protocolVersion"] === "string";
}

/** The resources a 2026 `subscriptions/listen` request asks to hear about. */
function listenedResources(body: unknown): string[] {
  const request = body as
    | { method?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } }
    | undefined;
  if (request?.method !== "subscriptions/listen") return [];
  const uris = request.params?.notifications?.resourceSubscriptions;
  return Array.isArray(uris) ? uris.filter((uri): uri is string => typeof uri === "string") : [];
}

/** Whether a POST body is one JSON-RPC request (not a batch, not a notification or response). */
function isSingleRequest(body: unknown): boolean {
  return typeof body === "object" && body !== null && !Array.isArray(body) && "method" in body &&
    "id" in body;
}

/**
 * A request's SSE answer as one JSON body when its first event is the
 * result (nothing was sent before it, so nothing follows: one request per
 * POST); otherwise the stream as it is, from its first byte. So a call that
 * reports progress, log messages or asks its caller for input gets a stream,
 * and every other request costs the client no SSE parsing. Comments
 * (keep-alives) before the first event are not events.
 */
async function jsonWhenAlone(response: Response): Promise<Response> {
  if (!isEventStream(response) || response.body === null) return response;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const chunks: Uint8Array[] = [];
  let text = "";
  for (;;) {
    const chunk = await reader.read();
    if (chunk.done) break;
    chunks.push(chunk.value);
    text += decoder.decode(chunk.value, { stream: true });
    const data = firstEventData(text);
    if (data === undefined) continue;
    if (data !== null && isAnswer(data)) {
      void reader.cancel().catch(() => {});
      const headers = new Headers(response.headers);
      headers.set("content-type", "application/json");
      for (const name of ["cache-control", "connection", "x-accel-buffering"]) headers.delete(name);
      return new Response(data, { status: response.status, headers });
    }
    break;
  }
  let replayed = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!replayed) {
        replayed = true;
        for (const chunk of chunks) controller.enqueue(chunk);
        return;
      }
      try {
        const chunk = await reader.read();
        if (chunk.done) controller.close();
        else controller.enqueue(chunk.value);
      } catch (error) {
        controller.error(error);
      }
    },
    async cancel(reason) {
      await reader.cancel(reason);
    },
  });
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/**
 * The data of the first complete SSE event in `text`: `undefined` while none
 * is complete, `null` for one without data.
 */
function firstEventData(text: string): string | null | undefined {
  // The SDK writes each message as one `event: message` with one data line, in one chunk.
  const end = text.indexOf("\n\n");
  if (text.startsWith(SDK_EVENT_PREFIX) && end === text.length - 2) {
    const data = text.slice(SDK_EVENT_PREFIX.length, end);
    if (!data.includes("\n")) return data;
  }
  let rest = text;
  for (;;) {
    const end = rest.search(/\r?\n\r?\n/);
    if (end < 0) return undefined;
    const lines = rest.slice(0, end).split(/\r?\n/);
    rest = rest.slice(end).replace(/^\r?\n\r?\n/, "");
    if (lines.every((line) => line.startsWith(":"))) continue;
    const data = lines.filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""));
    return data.length ? data.join("\n") : null;
  }
}

/** How the SDK starts an SSE event without an id. */
const SDK_EVENT_PREFIX = "event: message\ndata: ";

/** Whether an SSE event's data is a JSON-RPC response (a result or an error). */
function isAnswer(data: string): boolean {
  // The SDK writes a result with `result` first; a request or notification never starts so.
  if (data.startsWith('{"result":')) return true;
  try {
    const message = JSON.parse(data);
    return typeof message === "object" && message !== null && "id" in message &&
      ("result" in message || "error" in message);
  } catch {
    return false;
  }
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
async function withParsedBody(
  request: Request,
  maxBytes: number,
): Promise<ParsedRequest | Response> {
  // `request.body` is not touched: creating its stream would make text() read through it.
  if (request.method !== "POST") return [request];
  const bytes = new Uint8Array(await request.arrayBuffer());
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    // Never decoded with U+FFFD in place of the bad bytes and passed on.
    return Response.json({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: "Parse error: the body is not UTF-8 (INVALID_JSON)" },
    }, { status: 400 });
  }
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
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A request and, for a JSON POST, its parsed body; the caller rides along as `authInfo`. */
type ParsedRequest = [Request, { parsedBody?: unknown; authInfo?: AuthInfo }?];

/**
 * Hands the caller to the SDK as the request's `authInfo` (its `extra`
 * carries the {@linkcode Caller}); handlers read it back with
 * `callerOf` in `server.ts`. The token is never passed on.
 */
function withCaller(parsed: ParsedRequest, caller: Caller | undefined): ParsedRequest {
  if (!caller) return parsed;
  const authInfo: AuthInfo = {
    token: "",
    clientId: caller.id ?? caller.kind,
    scopes: [],
    extra: { [CALLER_AUTH_KEY]: caller },
  };
  return [parsed[0], { ...parsed[1], authInfo }];
}

/** Who a session belongs to, as a string. */
function callerKey(caller: Caller | undefined): string {
  if (!caller || caller.kind === "local" || caller.kind === "admin") return "admin";
  return `${caller.kind}:${caller.id ?? caller.name ?? ""}`;
}
