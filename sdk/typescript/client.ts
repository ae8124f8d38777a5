/**
 * {@linkcode ToolgateClient}: calls toolgate's tools over MCP (stdio or
 * Streamable HTTP, with the official MCP SDK v2 client, which negotiates
 * revision 2026-07-28 and falls back to the 2025 handshake) and, on HTTP,
 * receives its events from `GET /events`.
 *
 * @module
 */
import {
  Client,
  type ClientOptions,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import denoJson from "../../deno.json" with { type: "json" };
import { errorFromHttp, errorFromResult, ToolgateError } from "./errors.ts";
import { ReconnectingEventStream, type SseMessage } from "./sse.ts";
import {
  type EventHandler,
  type EventName,
  SERVER_EVENT_TYPES,
  type ServerEventType,
  type Tool,
  type ToolCompleteData,
  type ToolgateEvent,
  type ToolResult,
} from "./types.ts";

/** The SDK's version (the toolgate version it ships with). */
export const SDK_VERSION: string = denoJson.version;

/** Start the server as a child process and speak MCP on its stdin/stdout. */
export interface StdioConnectionOptions {
  /** The program, e.g. `toolgate` or `deno`. */
  command: string;
  /** Its arguments, e.g. `["mcp", "start"]`. @default [] */
  args?: string[];
  /**
   * Environment of the child: this process's environment with these
   * variables set over it (so `TOOLGATE_HOME`, `TOOLGATE_SECRET_*` pass on).
   */
  env?: Record<string, string>;
  /** Working directory of the child. @default the current one */
  cwd?: string;
  /** Where the server's log lines (stderr) go. @default "inherit" */
  stderr?: "inherit" | "ignore";
}

/** Connect to a running server's HTTP transport. */
export interface HttpConnectionOptions {
  /** The server's address, e.g. `http://127.0.0.1:7821`; MCP is at `<baseUrl>/mcp`. */
  baseUrl: string | URL;
  /** `TOOLGATE_API_TOKEN`, sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** The `fetch` to use. @default globalThis.fetch */
  fetch?: typeof fetch;
}

/**
 * Which MCP protocol revisions a client may speak:
 *
 * - `"auto"`: asks the server (`server/discover`) and speaks 2026-07-28 when
 *   it can, else falls back to the 2025 `initialize` handshake (an older server);
 * - `"2025"`: the 2025 handshake only (over HTTP, with an `Mcp-Session-Id` session);
 * - `"2026-07-28"`: that revision only; connecting to a server without it fails.
 */
export type ProtocolChoice = "auto" | "2025" | "2026-07-28";

const PROTOCOL_CHOICES: readonly ProtocolChoice[] = ["auto", "2025", "2026-07-28"];

/** Options every client takes. */
export interface CommonClientOptions {
  /** Client name sent to the server (MCP `clientInfo`). @default "toolgate-sdk" */
  name?: string;
  /** Protocol revisions the client may speak. @default "auto" */
  protocol?: ProtocolChoice;
  /** Longest wait for one request's answer, in ms. @default 60000 */
  timeoutMs?: number;
  /** First wait before the event stream reconnects, in ms. @default 1000 */
  reconnectDelayMs?: number;
  /** Longest wait between event stream reconnections, in ms. @default 30000 */
  maxReconnectDelayMs?: number;
  /**
   * Receives errors that no call can throw: an event handler that threw, an
   * event stream that failed or was dropped (it reconnects by itself).
   * @default writes the message to `console.error`
   */
  onError?: (error: Error) => void;
}

/** Options of {@linkcode ToolgateClient}: stdio (`command`) or HTTP (`baseUrl`). */
export type ToolgateClientOptions =
  & (StdioConnectionOptions | HttpConnectionOptions)
  & CommonClientOptions;

/** Options of one call. */
export interface CallOptions {
  /** Longest wait for the answer, in ms. @default the client's `timeoutMs` */
  timeoutMs?: number;
  /** Cancels the call. */
  signal?: AbortSignal;
}

/** A `tools/list` page as the server sends it. */
interface ListToolsPage {
  tools: { name: string; description?: string; inputSchema: Record<string, unknown> }[];
  nextCursor?: string;
}

type AnyHandler = (event: ToolgateEvent) => void | Promise<void>;

const EVENT_NAMES: ReadonlySet<string> = new Set<string>([
  ...SERVER_EVENT_TYPES,
  "tool.complete",
  "*",
]);

function joinUrl(base: string | URL, path: string): string {
  return `${String(base).replace(/\/+$/, "")}/${path}`;
}

/** This process's environment (Node's `process.env`, also in Deno), strings only. */
function inheritedEnv(): Record<string, string> {
  const source = (globalThis as { process?: { env?: Record<string, string | undefined> } })
    .process?.env ?? {};
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (typeof value === "string") env[name] = value;
  }
  return env;
}

function isHttp(
  options: ToolgateClientOptions,
): options is HttpConnectionOptions & CommonClientOptions {
  return "baseUrl" in options && options.baseUrl !== undefined;
}

/** The official client's negotiation mode for a {@linkcode ProtocolChoice}. */
function versionNegotiation(protocol: ProtocolChoice): ClientOptions["versionNegotiation"] {
  switch (protocol) {
    case "auto":
      return { mode: "auto" };
    case "2025":
      return { mode: "legacy" };
    case "2026-07-28":
      return { mode: { pin: "2026-07-28" } };
  }
}

/**
 * The SDK's stdio transport, as a subclass so that the official client
 * probes with `server/discover` on this very process instead of starting a
 * second, throw-away server for the probe (toolgate answers the probe and
 * still accepts `initialize` after it; starting it twice would run its
 * start-up, plugins and upstreams twice).
 */
class ProbeInPlaceStdioTransport extends StdioClientTransport {}

/** Whether the official client gave up because the process ended during the probe. */
function isClosedDuringProbe(error: unknown): boolean {
  return error instanceof SdkError && error.code === SdkErrorCode.EraNegotiationFailed &&
    /connection closed during the server\/discover probe/.test(error.message);
}

/** Errors of Node and Deno network and process APIs that mean "could not connect". */
const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ENOENT", "EPIPE", "EACCES"]);

/** Turns what the MCP SDK or `fetch` threw into a {@linkcode ToolgateError}. */
function toToolgateError(error: unknown): ToolgateError {
  if (error instanceof ToolgateError) return error;
  if (error instanceof ProtocolError) {
    const message = error.message.replace(/^(MCP error -?\d+: )+/, "");
    const unknownTool = /^Unknown tool: (.*)$/.exec(message);
    if (error.code === ProtocolErrorCode.InvalidParams && unknownTool) {
      return new ToolgateError("TOOL_NOT_FOUND", `Unknown tool ${JSON.stringify(unknownTool[1])}`, {
        details: { tool: unknownTool[1] },
        cause: error,
      });
    }
    return new ToolgateError("MCP_ERROR", message, {
      details: { rpc_code: error.code, data: error.data },
      cause: error,
    });
  }
  if (error instanceof SdkHttpError) {
    const text = error.data.text;
    return errorFromHttp(
      error.status,
      typeof text === "string" && text ? text : error.message,
      error,
    );
  }
  if (error instanceof SdkError) {
    if (error.code === SdkErrorCode.RequestTimeout) {
      const timeout = (error.data as { timeout?: unknown } | undefined)?.timeout;
      const reason = typeof timeout === "number" ? `no answer within ${timeout} ms` : error.message;
      return new ToolgateError("REQUEST_TIMEOUT", `Request timed out: ${reason}`, { cause: error });
    }
    if (error.code === SdkErrorCode.ConnectionClosed) {
      return new ToolgateError("CONNECTION_FAILED", `Connection closed: ${error.message}`, {
        cause: error,
      });
    }
    const cause = error.cause;
    if (error.code === SdkErrorCode.EraNegotiationFailed && cause !== undefined) {
      // A network failure during the probe: described like any other.
      const inner = toToolgateError(cause);
      if (inner.code === "CONNECTION_FAILED") return inner;
    }
    return new ToolgateError("MCP_ERROR", error.message, {
      details: { sdk_code: error.code, data: error.data },
      cause: error,
    });
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof TypeError || (typeof code === "string" && CONNECTION_CODES.has(code))) {
    return new ToolgateError(
      "CONNECTION_FAILED",
      `Cannot reach the server: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ToolgateError("MCP_ERROR", message, { cause: error });
}

/** Whether an error means the server forgot the MCP session (idle expiry, restart). */
function isSessionGone(error: ToolgateError): boolean {
  const status = (error.details as { status?: unknown } | undefined)?.status;
  return status === 404 && /session/i.test(error.message);
}

/**
 * A toolgate client: list and call tools, and (over HTTP) subscribe to events.
 *
 * @example Over HTTP, with events
 * ```ts
 * const client = new ToolgateClient({ baseUrl: "http://127.0.0.1:7821", token });
 * await client.connect();
 * const off = client.on("tool.complete", (event) => {
 *   console.log(event.data.tool, event.data.ok ? event.data.latency_ms : event.data.error_code);
 * });
 * const result = await client.callTool("memory_set", { key: "greeting", value: "hello" });
 * console.log(result.content[0].text);
 * off();
 * await client.disconnect();
 * ```
 *
 * @example Over stdio
 * ```ts
 * const client = new ToolgateClient({ command: "toolgate", args: ["mcp", "start"] });
 * await client.connect();
 * console.log((await client.listTools()).map((tool) => tool.name));
 * await client.disconnect();
 * ```
 */
export class ToolgateClient {
  #options: ToolgateClientOptions;
  #timeoutMs: number;
  #onError: (error: Error) => void;
  #client: Client | undefined;
  #transport: StdioClientTransport | StreamableHTTPClientTransport | undefined;
  #connecting: Promise<void> | undefined;
  #events: ReconnectingEventStream | undefined;
  #handlers = new Map<string, Set<AnyHandler>>();

  /**
   * @param options `{ command, args?, env? }` for stdio or `{ baseUrl, token? }` for HTTP.
   * @throws {ToolgateError} `USAGE` when neither or both are given.
   */
  constructor(options: ToolgateClientOptions) {
    const hasCommand = "command" in options && options.command !== undefined;
    if (hasCommand === isHttp(options)) {
      throw new ToolgateError(
        "USAGE",
        "Invalid client options: give either command (stdio) or baseUrl (HTTP)",
      );
    }
    const { timeoutMs = 60_000, protocol = "auto" } = options;
    if (!(timeoutMs > 0)) {
      throw new ToolgateError("USAGE", `Invalid timeoutMs: ${timeoutMs} is not positive`);
    }
    if (!PROTOCOL_CHOICES.includes(protocol)) {
      throw new ToolgateError(
        "USAGE",
        `Invalid protocol ${JSON.stringify(protocol)}: expected one of ${
          PROTOCOL_CHOICES.map((choice) => JSON.stringify(choice)).join(", ")
        }`,
      );
    }
    this.#options = options;
    this.#timeoutMs = timeoutMs;
    this.#onError = options.onError ??
      ((error: Error) => console.error(`toolgate: ${error.message}`));
  }

  /** The transport this client uses. */
  get transport(): "stdio" | "http" {
    return isHttp(this.#options) ? "http" : "stdio";
  }

  /** Whether {@linkcode ToolgateClient.connect} succeeded and no disconnect followed. */
  get connected(): boolean {
    return this.#client !== undefined;
  }

  /**
   * The MCP session id over HTTP with the 2025 revision (`Mcp-Session-Id`;
   * also the `session_id` of this client's calls in `tool.called` events and
   * the audit log). `undefined` over stdio and with 2026-07-28, which has no
   * sessions.
   */
  get sessionId(): string | undefined {
    const transport = this.#transport;
    return transport instanceof StreamableHTTPClientTransport ? transport.sessionId : undefined;
  }

  /**
   * The MCP protocol revision negotiated at {@linkcode ToolgateClient.connect}:
   * `"2026-07-28"` with a server that speaks it, a 2025 revision (e.g.
   * `"2025-11-25"`) with an older server or with `protocol: "2025"`;
   * `undefined` while not connected.
   */
  get protocolVersion(): string | undefined {
    return this.#client?.getNegotiatedProtocolVersion();
  }

  /**
   * Connects: starts the server (stdio) or opens an MCP session (HTTP), and
   * opens the event stream when handlers are registered. Idempotent.
   *
   * @throws {ToolgateError} `CONNECTION_FAILED`, `UNAUTHORIZED`, …
   */
  async connect(): Promise<void> {
    if (this.#client) return;
    this.#connecting ??= this.#open().finally(() => this.#connecting = undefined);
    await this.#connecting;
    if (this.#handlers.size > 0) this.#startEvents();
  }

  async #open(): Promise<void> {
    const options = this.#options;
    const protocol = options.protocol ?? "auto";
    try {
      await this.#openWith(versionNegotiation(protocol), true);
    } catch (error) {
      // A server that exits on the probe (some 2025 servers do): start it again for the handshake.
      if (protocol !== "auto" || !isClosedDuringProbe(error)) throw toToolgateError(error);
      try {
        await this.#openWith(versionNegotiation("2025"), false);
      } catch (retryError) {
        throw toToolgateError(retryError);
      }
    }
  }

  async #openWith(
    negotiation: ClientOptions["versionNegotiation"],
    probeInPlace: boolean,
  ): Promise<void> {
    const options = this.#options;
    const client = new Client(
      { name: options.name ?? "toolgate-sdk", version: SDK_VERSION },
      { versionNegotiation: negotiation },
    );
    let transport: StdioClientTransport | StreamableHTTPClientTransport;
    if (isHttp(options)) {
      transport = new StreamableHTTPClientTransport(new URL(joinUrl(options.baseUrl, "mcp")), {
        requestInit: { headers: this.#httpHeaders() },
        fetch: options.fetch,
      });
    } else {
      const stdio = options as StdioConnectionOptions;
      const Transport = probeInPlace ? ProbeInPlaceStdioTransport : StdioClientTransport;
      transport = new Transport({
        command: stdio.command,
        args: stdio.args ?? [],
        env: { ...inheritedEnv(), ...stdio.env },
        cwd: stdio.cwd,
        stderr: stdio.stderr ?? "inherit",
      });
    }
    try {
      await client.connect(transport, { timeout: this.#timeoutMs });
    } catch (error) {
      await client.close().catch(() => {
        // Nothing was open; the connect error is what matters.
      });
      await transport.close().catch(() => {
        // Already closed with the client.
      });
      throw error;
    }
    this.#client = client;
    this.#transport = transport;
  }

  #httpHeaders(): Record<string, string> {
    const options = this.#options as HttpConnectionOptions;
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    return headers;
  }

  /** Runs a request; over HTTP, an expired session is replaced once and the request retried. */
  async #request<T>(run: (client: Client) => Promise<T>): Promise<T> {
    const client = this.#client;
    if (!client) throw new ToolgateError("USAGE", "Not connected: call connect() first");
    try {
      return await run(client);
    } catch (thrown) {
      const error = toToolgateError(thrown);
      if (!isHttp(this.#options) || !isSessionGone(error) || this.#client !== client) throw error;
      await this.#closeMcp();
      await this.#open();
      try {
        return await run(this.#client!);
      } catch (retryError) {
        throw toToolgateError(retryError);
      }
    }
  }

  /**
   * Lists every tool on offer (following pagination).
   *
   * @throws {ToolgateError} `USAGE` when not connected; connection errors.
   */
  async listTools(): Promise<Tool[]> {
    return await this.#request(async (client) => {
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, {
          timeout: this.#timeoutMs,
        }) as ListToolsPage;
        for (const tool of page.tools) {
          tools.push({
            name: tool.name,
            description: tool.description,
            inputSchema: tool.inputSchema,
          });
        }
        cursor = page.nextCursor;
      } while (cursor);
      return tools;
    });
  }

  /**
   * Calls a tool through the gateway's pipeline.
   *
   * @param name The tool, e.g. `memory_set`.
   * @param args Its named arguments. @default {}
   * @returns The result: the output as JSON text in `content[0].text`, and as
   * an object in `structuredContent`.
   * @throws {ToolgateError} with the server's code when the call failed
   * (`TOOL_INPUT_INVALID`, `PLUGIN_REQUEST_FAILED`, `CIRCUIT_OPEN`, …) or the
   * tool is unknown (`TOOL_NOT_FOUND`); `CANCELLED` when `options.signal` aborted it.
   */
  async callTool(
    name: string,
    args: Record<string, unknown> = {},
    options: CallOptions = {},
  ): Promise<ToolResult> {
    let result: ToolResult;
    try {
      result = await this.#request(async (client) =>
        (await client.callTool({ name, arguments: args }, {
          timeout: options.timeoutMs ?? this.#timeoutMs,
          signal: options.signal,
        })) as ToolResult
      );
    } catch (error) {
      // The caller's own signal: the server records the call as CANCELLED too.
      if (!options.signal?.aborted) throw error;
      throw new ToolgateError("CANCELLED", `Call of ${name} cancelled by its signal`, {
        details: { tool: name },
        cause: error,
      });
    }
    if (result.isError) throw errorFromResult(result);
    return result;
  }

  /**
   * Subscribes to events (HTTP only; they come from `GET /events`). `event`
   * is one of the 8 event types, `tool.complete` (after every tool call:
   * `data.tool` names the tool and `data.ok` tells success; built from
   * `tool.called` and `tool.failed`), or `*` (every server event). Events of
   * calls made by any client are delivered. The stream opens on the first
   * subscription (or at `connect()`), reconnects by itself and resumes with
   * `Last-Event-ID`.
   *
   * @returns A function that unsubscribes the handler.
   * @throws {ToolgateError} `USAGE` on a stdio client or for an unknown event name.
   */
  on<N extends EventName>(event: N, handler: EventHandler<N>): () => void {
    if (!isHttp(this.#options)) {
      throw new ToolgateError(
        "USAGE",
        "Events need the HTTP transport: create the client with { baseUrl } " +
          "(a stdio client has no event stream)",
      );
    }
    if (!EVENT_NAMES.has(event)) {
      throw new ToolgateError(
        "USAGE",
        `Unknown event ${JSON.stringify(event)}: expected one of ${[...EVENT_NAMES].join(", ")}`,
      );
    }
    let handlers = this.#handlers.get(event);
    if (!handlers) this.#handlers.set(event, handlers = new Set());
    const stored = handler as unknown as AnyHandler;
    handlers.add(stored);
    if (this.#client) this.#startEvents();
    return () => {
      handlers.delete(stored);
      if (handlers.size === 0 && this.#handlers.get(event) === handlers) {
        this.#handlers.delete(event);
      }
    };
  }

  /**
   * Resolves once the event stream is open: events emitted from then on
   * reach the handlers. Opens the stream if no handler did yet.
   *
   * @throws {ToolgateError} `USAGE` on a stdio or unconnected client;
   * `UNAUTHORIZED` when the token is refused.
   */
  async eventsReady(): Promise<void> {
    if (!isHttp(this.#options)) {
      throw new ToolgateError(
        "USAGE",
        "Events need the HTTP transport: create the client with { baseUrl }",
      );
    }
    if (!this.#client) throw new ToolgateError("USAGE", "Not connected: call connect() first");
    this.#startEvents();
    await this.#events!.ready;
  }

  #startEvents(): void {
    if (this.#events || !isHttp(this.#options)) return;
    const options = this.#options;
    this.#events = new ReconnectingEventStream({
      url: joinUrl(options.baseUrl, "events"),
      headers: this.#httpHeaders(),
      fetch: options.fetch,
      reconnectDelayMs: options.reconnectDelayMs,
      maxReconnectDelayMs: options.maxReconnectDelayMs,
      onMessage: (message) => this.#dispatch(message),
      onError: (error) => this.#onError(error),
    });
    this.#events.start();
  }

  #dispatch(message: SseMessage): void {
    if (message.event === "error") {
      let text = message.data;
      let details: unknown;
      try {
        details = JSON.parse(message.data);
        const parsed = details as { message?: unknown };
        if (typeof parsed.message === "string") text = parsed.message;
      } catch {
        // Plain text: reported as it is.
      }
      this.#onError(new ToolgateError("CONNECTION_FAILED", text, { details }));
      return;
    }
    if (!(SERVER_EVENT_TYPES as readonly string[]).includes(message.event)) return;
    let event: ToolgateEvent;
    try {
      event = JSON.parse(message.data) as ToolgateEvent;
    } catch (error) {
      this.#onError(
        new ToolgateError("MCP_ERROR", `Unreadable ${message.event} event: not JSON`, {
          cause: error,
        }),
      );
      return;
    }
    const type = event.type as ServerEventType;
    this.#emit(type, event);
    this.#emit("*", event);
    if (type === "tool.called" || type === "tool.failed") {
      const data = event.data as unknown as Record<string, unknown>;
      const complete: ToolgateEvent<"tool.complete"> = {
        id: event.id,
        type: "tool.complete",
        timestamp: event.timestamp,
        data: { ...data, tool: data.tool_name, ok: type === "tool.called" } as ToolCompleteData,
      };
      this.#emit("tool.complete", complete as ToolgateEvent);
    }
  }

  #emit(name: string, event: ToolgateEvent): void {
    const handlers = this.#handlers.get(name);
    if (!handlers) return;
    for (const handler of [...handlers]) {
      try {
        const result = handler(event);
        if (result instanceof Promise) result.catch((error) => this.#reportHandler(name, error));
      } catch (error) {
        this.#reportHandler(name, error);
      }
    }
  }

  #reportHandler(name: string, error: unknown): void {
    this.#onError(
      error instanceof Error ? error : new Error(`A ${name} handler threw: ${String(error)}`),
    );
  }

  async #closeMcp(): Promise<void> {
    const client = this.#client;
    const transport = this.#transport;
    this.#client = undefined;
    this.#transport = undefined;
    if (!client) return;
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      await transport.terminateSession().catch(() => {
        // The server is gone or already forgot the session: nothing to end.
      });
    }
    await client.close();
  }

  /**
   * Closes the event stream and the MCP session (`DELETE /mcp`), or stops
   * the stdio server. Handlers stay registered for a later `connect()`.
   */
  async disconnect(): Promise<void> {
    await this.#connecting?.catch(() => {
      // A failed connect leaves nothing open.
    });
    const events = this.#events;
    this.#events = undefined;
    await events?.close();
    await this.#closeMcp();
  }

  /** Disconnects (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.disconnect();
  }
}
