/**
 * One connection to an MCP upstream (official SDK v2 `Client`): spawns a
 * stdio server or reaches a Streamable HTTP one, negotiates the protocol era
 * with it (2026-07-28 when it offers it, else the 2025 handshake), lists its
 * tools (every page), follows its tool-list changes, calls tools, and
 * restarts a dead upstream with exponential backoff while its calls fail fast.
 *
 * @module
 */
import { type EgressFetch, egressFetch, EgressPolicy } from "../../egress/mod.ts";
import {
  Client,
  CLIENT_CAPABILITIES_META_KEY,
  DEFAULT_REQUEST_TIMEOUT_MSEC,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import type { JSONRPCMessage } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { GatewayError } from "../../errors/mod.ts";
import type {
  AskCaller,
  CallerInput,
  InputCapabilities,
  InputMethod,
  InputRequest,
  LogMessage,
  ProgressUpdate,
  ToolOutput,
  UpstreamConnectionState,
  UpstreamStatus,
} from "../../gateway/mod.ts";
import { traced, traceHeaders } from "../../tracing/mod.ts";
import { VERSION } from "../../version.ts";
import { describeFetchError } from "../_fetch_error.ts";
import { resolveValues } from "./_values.ts";
import type { UpstreamSettings, UpstreamSpec } from "./upstream_spec.ts";

/** Most `tools/list` pages read from one upstream. */
const MAX_TOOL_PAGES = 100;

/** The per-request log level key of MCP 2026-07-28 (`_meta`). */
const LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel";

/** The protocol revision without sessions, whose requests carry their log level. */
const MODERN_REVISION = "2026-07-28";

/** Longest upstream error text carried in a message. */
const MAX_ERROR_TEXT = 2000;

/** Most rounds of input (2026 `input_required` results) one call may ask for. */
const MAX_INPUT_ROUNDS = 10;

/**
 * How long the SDK waits for a 2025 upstream's answer to a call that may ask
 * its caller for input, beyond the tool's timeout: a person may be answering
 * (the gateway's own timeout, paused while the caller answers, still applies).
 */
const ANSWER_WAIT_MS = 10 * 60_000;

/** The client requests an upstream may send (2025) or embed in `input_required` (2026). */
const INPUT_METHODS: InputMethod[] = ["elicitation/create", "sampling/createMessage", "roots/list"];

/** Stderr lines of a stdio upstream kept for its `last_error`. */
const STDERR_TAIL_LINES = 5;

/** How long a failed start or a lost process is given to report its exit and last stderr. */
const EXIT_REPORT_WAIT_MS = 1000;

/** A tool as an upstream lists it (the fields the gateway uses). */
export interface UpstreamTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: { idempotentHint?: boolean };
}

/** An upstream's prompts, resources and resource templates, as it lists them. */
export interface UpstreamCatalog {
  prompts: Record<string, unknown>[];
  resources: Record<string, unknown>[];
  templates: Record<string, unknown>[];
  /** It answers `completion/complete`. */
  completions: boolean;
  /** It offers resource subscriptions (`resources.subscribe`). */
  subscribe: boolean;
}

/** One item of an upstream tool result's `content`. */
interface ContentItem {
  type: string;
  text?: string;
}

/** What `tools/call` returns (the fields the gateway uses). */
interface UpstreamCallResult {
  content?: ContentItem[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** Options of {@linkcode UpstreamConnection}. */
export interface UpstreamConnectionOptions {
  /** The upstream. */
  spec: UpstreamSpec;
  /** Connect timeout and restart backoff. */
  settings: UpstreamSettings;
  /** Reads a keychain entry by its full name (for `keychain:` references). */
  resolveSecret: (name: string) => Promise<string | undefined>;
  /**
   * The egress policy an HTTP upstream's requests pass (profile `operator`:
   * loopback and private addresses allowed, link-local and metadata ones not,
   * toolgate's own address never); each request goes to the address checked.
   * @default the policy of an empty config
   */
  egress?: EgressPolicy;
  /** Log sink (stderr); the upstream's own stderr lines come here too. */
  log: (message: string) => void;
  /** Told about a changed tool list (after `list_changed` or a restart). */
  onToolsChanged: (tools: UpstreamTool[]) => void;
  /** Told about changed prompts or resources (after `list_changed`, a restart or the first listing). @default none */
  onCatalogChanged?: (catalog: UpstreamCatalog) => void;
  /** Told that a resource subscribed to ({@linkcode UpstreamConnection.subscribe}) changed. @default none */
  onResourceUpdated?: (uri: string) => void;
  /** Clock. @default Date.now */
  now?: () => number;
}

interface Live {
  client: Client;
  transport: StdioClientTransport | StreamableHTTPClientTransport;
  generation: number;
  /** A stdio upstream's last stderr lines. */
  stderr?: StderrTail;
  /** Progress listeners of the calls in flight, by the progress token sent with each. */
  progress: Map<string, (update: ProgressUpdate) => void>;
  /** Log listeners of the calls in flight (a log message names no request: each gets it). */
  logs: Set<(message: LogMessage) => void>;
  /** The calls in flight whose callers can answer requests for input. */
  askers: Set<Asker>;
  /** A stdio upstream's process, once spawned (the SDK forgets it when it ends). */
  child?: ChildEvents;
}

/** A call in flight whose caller can be asked for input. */
interface Asker {
  ask: AskCaller;
  signal: AbortSignal;
}

/** Who hears what an upstream tool call sends back before its result. */
export interface CallListeners {
  progress?: (update: ProgressUpdate) => void;
  logMessage?: (message: LogMessage) => void;
  /** Asks the caller for input the upstream requests (elicitation, sampling, roots). */
  ask?: AskCaller;
  /** Which of those the caller answers: what a 2026 upstream is told the client can do. */
  capabilities?: InputCapabilities;
}

/** The active trace context as `_meta` keys (SEP-414); none when tracing is off. */
function traceMeta(): Record<string, string> {
  const { traceparent, tracestate } = traceHeaders();
  return {
    ...(traceparent ? { traceparent } : {}),
    ...(tracestate ? { tracestate } : {}),
  };
}

/** `params` with the active trace context in `_meta`, when there is one. */
function withTraceMeta(params: Record<string, unknown>): Record<string, unknown> {
  const meta = traceMeta();
  return Object.keys(meta).length ? { ...params, _meta: meta } : params;
}

/** A connection to one MCP upstream that restarts itself. */
export class UpstreamConnection {
  #spec: UpstreamSpec;
  #settings: UpstreamSettings;
  #resolveSecret: (name: string) => Promise<string | undefined>;
  #fetch: EgressFetch;
  #log: (message: string) => void;
  #onToolsChanged: (tools: UpstreamTool[]) => void;
  #onCatalogChanged: (catalog: UpstreamCatalog) => void;
  #onResourceUpdated: (uri: string) => void;
  #catalog: UpstreamCatalog = {
    prompts: [],
    resources: [],
    templates: [],
    completions: false,
    subscribe: false,
  };
  /** The resources the gateway watches here: subscribed again on every new connection. */
  #subscriptions = new Set<string>();
  /** 2026-07-28: the `subscriptions/listen` stream that carries their updates. */
  #listen: { live: Live; close: () => Promise<void> } | undefined;
  #catalogFingerprint = JSON.stringify(this.#catalog);
  #now: () => number;
  #live: Live | undefined;
  #state: UpstreamConnectionState = "connecting";
  #generation = 0;
  #tools: UpstreamTool[] = [];
  /** Its tools with `x-mcp-header` arguments (the SDK's callTool sends those as headers). */
  #headerTools = new Set<string>();
  #fingerprint = "";
  #server: { name: string; version: string } | undefined;
  #protocolVersion: string | undefined;
  #restarts = 0;
  #attempt = 0;
  #connectedAt = 0;
  #lastError: string | undefined;
  #lastErrorAt: number | undefined;
  #nextAttemptAt: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #connecting: AbortController | undefined;
  /** It ended its connection on `server/discover`: only the 2025 handshake from now on. */
  #legacyOnly = false;
  /** Progress tokens handed out (see {@linkcode watchProgress}). */
  #progressTokens = 0;
  /** Keys given to a 2025 upstream's requests for input when they are relayed. */
  #inputKeys = 0;
  /** A session renewal in progress (see {@linkcode UpstreamConnection.#renewSession}). */
  #renewing: Promise<Live | undefined> | undefined;

  /** @param options The upstream, timing, secrets, log and tool-change listener. */
  constructor(options: UpstreamConnectionOptions) {
    const {
      spec,
      settings,
      resolveSecret,
      egress = new EgressPolicy(),
      log,
      onToolsChanged,
      onCatalogChanged = () => {},
      onResourceUpdated = () => {},
      now = Date.now,
    } = options;
    this.#onCatalogChanged = onCatalogChanged;
    this.#onResourceUpdated = onResourceUpdated;
    this.#spec = spec;
    this.#settings = settings;
    this.#resolveSecret = resolveSecret;
    this.#fetch = egressFetch({ policy: egress, profile: "operator" });
    this.#log = log;
    this.#onToolsChanged = onToolsChanged;
    this.#now = now;
  }

  /** `stdio` or `http`. */
  get transport(): "stdio" | "http" {
    return this.#spec.command !== undefined ? "stdio" : "http";
  }

  /** The upstream's tools as last listed. */
  get tools(): UpstreamTool[] {
    return this.#tools;
  }

  /**
   * Connects for the first time and lists the tools.
   *
   * @throws {GatewayError} `PLUGIN_NOT_CONFIGURED` when a keychain reference
   * is not set; `PLUGIN_INIT_FAILED` when the process cannot start, the
   * handshake fails or the connect timeout passes.
   */
  async start(): Promise<UpstreamTool[]> {
    try {
      const { live, tools } = await this.#connect();
      this.#adopt(live, tools);
      await this.#refreshCatalog();
      return tools;
    } catch (error) {
      const failure = this.#connectError(error);
      this.#state = "closed";
      this.#recordError(failure.message);
      throw failure;
    }
  }

  /** Live state for `plugins list` and `/health`. */
  status(): UpstreamStatus {
    const status: UpstreamStatus = {
      kind: "mcp",
      transport: this.transport,
      source: this.#spec.source,
      connection: this.#state,
      restarts: this.#restarts,
    };
    const pid = this.#live?.transport instanceof StdioClientTransport
      ? this.#live.transport.pid
      : null;
    if (pid !== null && pid !== undefined && this.#state === "connected") status.pid = pid;
    if (this.#server) status.server = { ...this.#server };
    if (this.#protocolVersion) status.protocol_version = this.#protocolVersion;
    if (this.#lastError !== undefined) {
      status.last_error = this.#lastError;
      status.last_error_at = new Date(this.#lastErrorAt!).toISOString();
    }
    if (this.#state === "reconnecting" && this.#nextAttemptAt !== undefined) {
      status.next_attempt_at = new Date(this.#nextAttemptAt).toISOString();
    }
    return status;
  }

  /**
   * Calls an upstream tool.
   *
   * @returns `{content, structuredContent?}` as the upstream sent them.
   * @throws {GatewayError} `PLUGIN_REQUEST_FAILED` when the upstream is down,
   * unreachable or answers `isError`; `TOOL_TIMEOUT`; `TOOL_INPUT_INVALID`
   * when the upstream rejects the arguments.
   */
  callTool(
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    timeoutMs: number,
    listeners: CallListeners = {},
  ): Promise<ToolOutput> {
    // The MCP client span (OpenTelemetry MCP conventions): its context goes to the upstream in
    // `_meta` (SEP-414); over HTTP, Deno's span of the request (its child) in `traceparent`.
    return traced(`tools/call ${tool}`, {
      kind: "client",
      attributes: {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "toolgate.upstream": this.#spec.name,
      },
    }, () => this.#callTool(tool, args, signal, timeoutMs, listeners));
  }

  /** {@linkcode UpstreamConnection.callTool} inside its span. */
  async #callTool(
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    timeoutMs: number,
    listeners: CallListeners,
  ): Promise<ToolOutput> {
    const { progress, logMessage, ask, capabilities = {} } = listeners;
    let live = this.#live;
    if (!live || this.#state !== "connected") throw this.#unavailable(tool);
    // The upstream's progress goes to the caller (who gets it under its own token).
    const call = async (on: Live) => {
      const token = progress ? `toolgate-${++this.#progressTokens}` : undefined;
      if (token) on.progress.set(token, progress!);
      if (logMessage) on.logs.add(logMessage);
      try {
        const meta = {
          ...traceMeta(),
          ...(token ? { progressToken: token } : {}),
          // 2026-07-28: log messages come only with a level asked for per request.
          ...(logMessage ? { [LOG_LEVEL_META_KEY]: "debug" } : {}),
        };
        return await this.#withInput(
          on,
          `tool ${this.#spec.name}/${tool}`,
          { name: tool, arguments: args, ...(Object.keys(meta).length ? { _meta: meta } : {}) },
          { ask, capabilities, signal },
          (params) => {
            const options = {
              signal,
              timeout: ask ? timeoutMs + ANSWER_WAIT_MS : timeoutMs,
              allowInputRequired: true,
            };
            // The SDK's callTool mirrors x-mcp-header arguments into headers (2026 HTTP), and
            // checks the result against the tool's outputSchema, the calling client's job.
            return (this.#headerTools.has(tool)
              ? on.client.callTool(params as Parameters<Client["callTool"]>[0], options)
              : on.client.request({ method: "tools/call", params }, AS_SENT, options)) as Promise<
                UpstreamCallResult | InputRequiredResult
              >;
          },
        );
      } finally {
        if (token) on.progress.delete(token);
        if (logMessage) on.logs.delete(logMessage);
      }
    };
    let result: UpstreamCallResult;
    try {
      result = await call(live);
    } catch (error) {
      // An HTTP upstream that forgot our session (it restarted, or expired it)
      // never started the call: open a new session and send it once more.
      const renewed = !signal.aborted && sessionExpired(error, live)
        ? await this.#renewSession(live)
        : undefined;
      if (!renewed) throw this.#callError(tool, error, signal, live);
      live = renewed;
      try {
        result = await call(live);
      } catch (retryError) {
        throw this.#callError(tool, retryError, signal, live);
      }
    }
    const content = Array.isArray(result.content) ? result.content : [];
    if (result.isError) {
      const text = content
        .map((item) => item.type === "text" ? item.text : `[${item.type}]`)
        .join("\n")
        .trim();
      throw new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream tool ${this.#spec.name}/${tool} failed: ${
          truncate(text || "it returned isError without text")
        }`,
        { details: { plugin: this.#spec.name, upstream_tool: tool, content } },
      );
    }
    const output: ToolOutput = { content };
    if (result.structuredContent) output.structuredContent = result.structuredContent;
    return output;
  }

  /**
   * Sends a request the upstream may answer by asking the caller for input:
   * a 2025 upstream with requests of its own while this one runs (relayed
   * by {@linkcode UpstreamConnection.#answer} to this caller), a 2026 one
   * with `input_required` results: the caller answers their requests, and
   * the request is sent again with the answers and the upstream's state.
   * A 2026 upstream is told which kinds of input the caller can give.
   */
  async #withInput<R extends object>(
    live: Live,
    subject: string,
    params: Record<string, unknown>,
    input: { ask?: AskCaller; capabilities?: InputCapabilities; signal: AbortSignal },
    send: (params: Record<string, unknown>) => Promise<R | InputRequiredResult>,
  ): Promise<R> {
    const { ask, capabilities = {}, signal } = input;
    const asker = ask ? { ask, signal } : undefined;
    if (asker) live.askers.add(asker);
    try {
      const meta = params._meta as Record<string, unknown> | undefined;
      let current: Record<string, unknown> = isModern(live)
        ? { ...params, _meta: { ...meta, [CLIENT_CAPABILITIES_META_KEY]: ask ? capabilities : {} } }
        : params;
      for (let round = 0;; round++) {
        const result = await send(current);
        if (!isInputRequired(result)) return result;
        const requests = result.inputRequests ?? {};
        const methods = Object.values(requests).map((request) => request.method);
        if (round === MAX_INPUT_ROUNDS) {
          throw new GatewayError(
            "PLUGIN_REQUEST_FAILED",
            `Upstream ${subject} still asked for input after ${MAX_INPUT_ROUNDS} rounds`,
            { details: { plugin: this.#spec.name } },
          );
        }
        if (!ask && methods.length) {
          throw new GatewayError(
            "PLUGIN_REQUEST_FAILED",
            `Upstream ${subject} asks its caller for input (${
              [...new Set(methods)].join(", ")
            }): only an MCP client can answer, and this caller is not one`,
            { details: { plugin: this.#spec.name, methods } },
          );
        }
        const answers = methods.length ? await ask!(requests, signal) : {};
        current = {
          ...current,
          ...(Object.keys(answers).length ? { inputResponses: answers } : {}),
          ...(result.requestState !== undefined ? { requestState: result.requestState } : {}),
        };
      }
    } finally {
      if (asker) live.askers.delete(asker);
    }
  }

  /**
   * Answers a 2025 upstream's request for input (elicitation, sampling,
   * roots) by asking the caller of the call it belongs to. A 2025 request
   * names no call: it is relayed when exactly one call that can ask is in
   * flight on this connection, and refused when several are (the wrong
   * caller must never see it). Roots asked outside any call are none.
   */
  async #answer(
    live: Live,
    method: InputMethod,
    params: Record<string, unknown> | undefined,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const askers = [...live.askers];
    if (askers.length !== 1) {
      if (method === "roots/list" && askers.length === 0) return { roots: [] };
      const why = askers.length === 0
        ? `no call that can ask its caller for input is in flight`
        : `${askers.length} calls that can ask their callers are in flight and the request names none of them`;
      this.#log(`its ${method} request was refused: ${why}`);
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `toolgate cannot relay ${method}: ${why}`,
      );
    }
    const [{ ask, signal: callSignal }] = askers;
    const key = `toolgate-${++this.#inputKeys}`;
    const request: InputRequest = { method, ...(params ? { params } : {}) };
    const answers = await ask({ [key]: request }, AbortSignal.any([signal, callSignal]));
    const answer = answers[key];
    if (answer === null || typeof answer !== "object") {
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `toolgate's caller gave no answer to ${method}`,
      );
    }
    return answer as Record<string, unknown>;
  }

  /**
   * Replaces a connection whose HTTP session the upstream no longer knows by
   * a new one, at once (concurrent callers share it). When that fails, the
   * connection is lost as usual and restarts with backoff.
   *
   * @returns The new connection, or `undefined` when none could be opened.
   */
  #renewSession(stale: Live): Promise<Live | undefined> {
    if (this.#live !== stale) return Promise.resolve(this.#live);
    this.#renewing ??= (async () => {
      try {
        const { live, tools } = await this.#connect();
        if (this.#closed || this.#live !== stale) {
          await closeLive(live);
          return this.#live;
        }
        const changed = toolsFingerprint(tools) !== this.#fingerprint;
        void closeLive(stale);
        this.#adopt(live, tools);
        this.#restarts++;
        this.#log("its session had expired; a new session is open");
        if (changed) this.#onToolsChanged(tools);
        void this.#refreshCatalog();
        return live;
      } catch (error) {
        this.#lost(stale, `its session expired and a new one failed: ${errorText(error)}`);
        return undefined;
      } finally {
        this.#renewing = undefined;
      }
    })();
    return this.#renewing;
  }

  /** Closes the connection (a stdio upstream's process ends) and stops restarting. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#state = "closed";
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#connecting?.abort(new Error("the plugin is shutting down"));
    const live = this.#live;
    this.#live = undefined;
    if (live) await closeLive(live);
    await this.#refresh.running;
  }

  /**
   * Connects: 2026-07-28 when the upstream offers it, else the 2025
   * handshake. A stdio upstream that ends its connection on the
   * `server/discover` probe (some 2025 servers do) is started again for the
   * handshake, and is not probed again.
   */
  async #connect(): Promise<{ live: Live; tools: UpstreamTool[] }> {
    if (!this.#legacyOnly) {
      try {
        return await this.#connectOnce(false);
      } catch (error) {
        if (this.#closed || !closedOnProbe(error)) throw error;
        this.#legacyOnly = true;
        this.#log("it ended the connection on server/discover; connecting with the 2025 handshake");
      }
    }
    return await this.#connectOnce(true);
  }

  async #connectOnce(legacy: boolean): Promise<{ live: Live; tools: UpstreamTool[] }> {
    const generation = ++this.#generation;
    const controller = new AbortController();
    this.#connecting = controller;
    const timeoutMs = this.#settings.connectTimeoutMs;
    const timer = setTimeout(
      () => controller.abort(new Error(`no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    let live: Live | undefined;
    const client = new Client({ name: "toolgate", version: VERSION }, {
      // Requests for input are relayed to the caller of the call they belong to.
      capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} },
      // 2026-07-28 input_required results come back to callTool, which relays them.
      inputRequired: { autoFulfill: false },
      // 2026-07-28 when the upstream offers it (server/discover), else the 2025 handshake.
      versionNegotiation: { mode: legacy ? "legacy" : "auto" },
      listMaxPages: MAX_TOOL_PAGES,
      // notifications/tools/list_changed: on the session (2025) or a subscriptions/listen stream (2026).
      listChanged: {
        tools: onListChanged(() => live && this.#live === live && this.#refresh()),
        prompts: onListChanged(() => live && this.#live === live && this.#refreshCatalog()),
        resources: onListChanged(() => live && this.#live === live && this.#refreshCatalog()),
      },
    });
    try {
      const { transport, stderr } = await this.#transport();
      live = {
        client,
        transport,
        generation,
        stderr,
        progress: new Map(),
        logs: new Set(),
        askers: new Set(),
      };
      const current = live;
      client.setNotificationHandler("notifications/resources/updated", (notification) => {
        if (this.#live === current && this.#subscriptions.has(notification.params.uri)) {
          this.#onResourceUpdated(notification.params.uri);
        }
      });
      for (const method of INPUT_METHODS) {
        client.setRequestHandler(
          method,
          (
            request: { params?: Record<string, unknown> },
            context: { mcpReq: { signal: AbortSignal } },
          ) => this.#answer(current, method, request.params, context.mcpReq.signal) as never,
        );
      }
      if (transport instanceof StdioClientTransport) keepChild(transport, current);
      client.onclose = () => this.#lost(current, "connection closed");
      client.onerror = (error: Error) => {
        if (this.#live === current) this.#log(`transport error: ${error.message}`);
      };
      const options = { signal: controller.signal, timeout: timeoutMs };
      await abortable(client.connect(transport, options), controller.signal);
      watchCallNotifications(
        current,
        (message) =>
          this.#log(
            `${message.level}: ${
              typeof message.data === "string" ? message.data : JSON.stringify(message.data)
            }`,
          ),
      );
      // 2025: every level, so that each caller gets what its own level lets through.
      if (
        client.getServerCapabilities()?.logging &&
        client.getNegotiatedProtocolVersion() !== MODERN_REVISION
      ) {
        await abortable(client.setLoggingLevel("debug", options), controller.signal).catch(
          (error) => this.#log(`setting its log level failed: ${errorText(error)}`),
        );
      }
      const tools = await abortable(listAllTools(client, options), controller.signal);
      return { live, tools };
    } catch (error) {
      const reason = controller.signal.aborted ? controller.signal.reason : error;
      if (!live?.child?.pid || this.#closed) {
        if (live) await closeLive(live, true);
        throw reason;
      }
      // A process that ran and failed: its exit status and last stderr lines say why
      // (one that is still running after a timeout is not waited for).
      const exit = await exitReport(live, controller.signal.aborted ? 0 : EXIT_REPORT_WAIT_MS);
      await closeLive(live, true);
      throw new UpstreamStartError(errorText(reason), exit);
    } finally {
      clearTimeout(timer);
      if (this.#connecting === controller) this.#connecting = undefined;
    }
  }

  async #transport(): Promise<{
    transport: StdioClientTransport | StreamableHTTPClientTransport;
    stderr?: StderrTail;
  }> {
    const spec = this.#spec;
    if (spec.command !== undefined) {
      const own = await resolveValues(spec.env, "env", this.#resolveSecret);
      const transport = new InPlaceStdioClientTransport({
        command: spec.command,
        args: spec.args,
        env: { ...this.#settings.inheritedEnv, ...own },
        stderr: "pipe",
      });
      const stderr = this.#pipeStderr(transport);
      return { transport, stderr };
    }
    const headers = await resolveValues(spec.headers, "header", this.#resolveSecret);
    return {
      transport: new StreamableHTTPClientTransport(new URL(spec.url!), {
        requestInit: { headers },
        fetch: this.#fetch,
      }),
    };
  }

  /**
   * Forwards the upstream's stderr, line by line, to our log (never our
   * stdout), keeping the last lines for its `last_error`.
   */
  #pipeStderr(transport: StdioClientTransport): StderrTail {
    const tail = new StderrTail();
    const stream = transport.stderr;
    if (!stream) return tail;
    const decoder = new TextDecoder();
    let pending = "";
    const line = (text: string) => {
      if (!text) return;
      this.#log(truncate(text));
      tail.push(text);
    };
    stream.on("data", (chunk: Uint8Array) => {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const text of lines) line(text.trimEnd());
      if (pending.length > MAX_ERROR_TEXT) {
        line(pending);
        pending = "";
      }
    });
    stream.on("end", () => {
      line((pending + decoder.decode()).trimEnd());
      pending = "";
      tail.end();
    });
    return tail;
  }

  #adopt(live: Live, tools: UpstreamTool[]): void {
    this.#live = live;
    // A new connection (a restart, a renewed session) watches what the last one did.
    if (this.#subscriptions.size) void this.#resubscribe(live);
    this.#state = "connected";
    this.#connectedAt = this.#now();
    this.#nextAttemptAt = undefined;
    const version = live.client.getServerVersion();
    if (version) this.#server = { name: version.name, version: version.version };
    this.#protocolVersion = live.client.getNegotiatedProtocolVersion();
    this.#tools = tools;
    this.#headerTools = headerTools(tools);
    this.#fingerprint = toolsFingerprint(tools);
  }

  /** The live connection ended by itself (process exit, transport closed). */
  #lost(live: Live, reason: string): void {
    if (this.#closed || this.#live !== live) return;
    this.#live = undefined;
    if (!live.stderr) {
      this.#recordError(reason);
      void closeLive(live);
      this.#scheduleRestart();
      return;
    }
    // Calls fail fast at once; the restart waits for the exit status and last stderr lines.
    this.#state = "reconnecting";
    this.#recordError("the upstream process exited");
    void (async () => {
      const exit = await exitReport(live, EXIT_REPORT_WAIT_MS);
      if (this.#closed) return;
      this.#recordError(`the upstream process ${exit.status ?? "exited"}${stderrSuffix(exit)}`);
      await closeLive(live);
      this.#scheduleRestart();
    })();
  }

  #scheduleRestart(): void {
    if (this.#closed) return;
    this.#state = "reconnecting";
    const now = this.#now();
    // A connection that stayed up a while resets the backoff; a crash loop does not.
    if (this.#connectedAt > 0 && now - this.#connectedAt >= this.#settings.restartMaxMs) {
      this.#attempt = 0;
    }
    this.#connectedAt = 0;
    const delay = Math.min(
      this.#settings.restartInitialMs * 2 ** this.#attempt,
      this.#settings.restartMaxMs,
    );
    this.#attempt++;
    this.#nextAttemptAt = now + delay;
    this.#log(`${this.#lastError ?? "connection lost"}; reconnecting in ${delay} ms`);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#reconnect(), delay);
  }

  async #reconnect(): Promise<void> {
    this.#timer = undefined;
    if (this.#closed) return;
    try {
      const { live, tools } = await this.#connect();
      if (this.#closed) {
        await closeLive(live);
        return;
      }
      const changed = toolsFingerprint(tools) !== this.#fingerprint;
      this.#adopt(live, tools);
      this.#restarts++;
      this.#log(`reconnected (restart ${this.#restarts}), ${tools.length} tools`);
      if (changed) this.#onToolsChanged(tools);
      void this.#refreshCatalog();
    } catch (error) {
      if (this.#closed) return;
      this.#recordError(this.#connectError(error).message);
      this.#scheduleRestart();
    }
  }

  /**
   * Lists the upstream's prompts, resources and resource templates (those its
   * capabilities offer; every page) and tells the listener when they changed.
   * Coalesced; a failure is logged and keeps what was listed before.
   */
  #refreshCatalog = coalesced(async () => {
    const live = this.#live;
    if (!live || this.#closed) return;
    try {
      const catalog = await listCatalog(live.client, this.#settings.connectTimeoutMs);
      const fingerprint = JSON.stringify(catalog);
      if (this.#live !== live || fingerprint === this.#catalogFingerprint) return;
      this.#catalog = catalog;
      this.#catalogFingerprint = fingerprint;
      this.#onCatalogChanged(catalog);
    } catch (error) {
      this.#log(`listing prompts and resources failed: ${errorText(error)}`);
    }
  });

  /** The prompts, resources and templates as last listed. */
  get catalog(): UpstreamCatalog {
    return this.#catalog;
  }

  /**
   * Gets a prompt (`prompts/get`).
   *
   * @throws {GatewayError} `NOT_FOUND` when the upstream does not know it;
   * `PLUGIN_REQUEST_FAILED` when it is down or fails; the signal's reason.
   */
  async getPrompt(
    name: string,
    args: Record<string, string>,
    signal: AbortSignal,
    input: CallerInput = {},
  ): Promise<Record<string, unknown>> {
    return await this.#requestAsking(
      `prompt ${name}`,
      `prompt ${this.#spec.name}/${name}`,
      withTraceMeta({ name, arguments: args }),
      signal,
      input,
      (live, params, options) =>
        live.client.getPrompt(params as Parameters<Client["getPrompt"]>[0], options),
    );
  }

  /**
   * Reads a resource (`resources/read`).
   *
   * @throws {GatewayError} `NOT_FOUND` when the upstream does not have it;
   * `PLUGIN_REQUEST_FAILED`; the signal's reason.
   */
  async readResource(
    uri: string,
    signal: AbortSignal,
    input: CallerInput = {},
  ): Promise<Record<string, unknown>> {
    return await this.#requestAsking(
      `resource ${uri}`,
      `resource ${uri}`,
      withTraceMeta({ uri }),
      signal,
      input,
      (live, params, options) =>
        live.client.readResource(params as Parameters<Client["readResource"]>[0], {
          ...options,
          cacheMode: "bypass",
        }),
    );
  }

  /**
   * Watches a resource: the upstream's `notifications/resources/updated` for
   * it go to `onResourceUpdated`, now and after every reconnection.
   *
   * @throws {GatewayError} `PLUGIN_REQUEST_FAILED` when the upstream is down
   * or refuses the subscription.
   */
  async subscribe(uri: string): Promise<void> {
    const live = this.#live;
    if (!live || this.#state !== "connected") throw this.#unavailable(uri);
    const added = !this.#subscriptions.has(uri);
    this.#subscriptions.add(uri);
    try {
      if (isModern(live)) await this.#relisten(live);
      else {await live.client.subscribeResource({ uri }, {
          timeout: this.#settings.connectTimeoutMs,
        });}
    } catch (error) {
      if (added) this.#subscriptions.delete(uri);
      throw new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream ${this.#spec.name} refused a subscription to ${uri}: ${
          truncate(errorText(error))
        }`,
        { details: { plugin: this.#spec.name, uri } },
      );
    }
  }

  /** Stops watching a resource. */
  async unsubscribe(uri: string): Promise<void> {
    if (!this.#subscriptions.delete(uri)) return;
    const live = this.#live;
    if (!live || this.#state !== "connected") return;
    if (isModern(live)) await this.#relisten(live);
    else {await live.client.unsubscribeResource({ uri }, {
        timeout: this.#settings.connectTimeoutMs,
      });}
  }

  /**
   * 2026-07-28: replaces the `subscriptions/listen` stream of the resource
   * updates by one for the resources watched now (a stream's filter is fixed).
   */
  async #relisten(live: Live): Promise<void> {
    const previous = this.#listen;
    this.#listen = undefined;
    if (previous) await previous.close().catch(() => {});
    if (!this.#subscriptions.size || this.#live !== live) return;
    const subscription = await live.client.listen(
      { resourceSubscriptions: [...this.#subscriptions] },
      { timeout: this.#settings.connectTimeoutMs },
    );
    this.#listen = { live, close: () => subscription.close() };
  }

  /** Subscribes again, on a new connection, to every resource watched. */
  async #resubscribe(live: Live): Promise<void> {
    if (!this.#subscriptions.size) return;
    try {
      if (isModern(live)) {
        await this.#relisten(live);
        return;
      }
      for (const uri of this.#subscriptions) {
        await live.client.subscribeResource({ uri }, { timeout: this.#settings.connectTimeoutMs });
      }
    } catch (error) {
      this.#log(`subscribing again to its resources failed: ${errorText(error)}`);
    }
  }

  /**
   * {@linkcode UpstreamConnection.#request} of a request whose upstream may
   * ask the caller for input ({@linkcode UpstreamConnection.#withInput}):
   * the SDK waits longer for it when the caller can be asked.
   */
  async #requestAsking(
    what: string,
    subject: string,
    params: Record<string, unknown>,
    signal: AbortSignal,
    input: CallerInput,
    send: (
      live: Live,
      params: Record<string, unknown>,
      options: { signal: AbortSignal; allowInputRequired: true; timeout?: number },
    ) => Promise<object>,
  ): Promise<Record<string, unknown>> {
    const options = {
      signal,
      allowInputRequired: true as const,
      ...(input.ask ? { timeout: DEFAULT_REQUEST_TIMEOUT_MSEC + ANSWER_WAIT_MS } : {}),
    };
    return await this.#request(
      what,
      signal,
      (live) =>
        this.#withInput(
          live,
          subject,
          params,
          { ...input, signal },
          (current) => send(live, current, options),
        ),
    );
  }

  /** Completes an argument (`completion/complete`). */
  async complete(
    params: CompleteRequestParams,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    return await this.#request(
      "completion",
      signal,
      (live) => live.client.complete(params as Parameters<Client["complete"]>[0], { signal }),
    );
  }

  /** Sends a request other than a tool call, renewing an expired HTTP session once. */
  async #request(
    what: string,
    signal: AbortSignal,
    send: (live: Live) => Promise<unknown>,
  ): Promise<Record<string, unknown>> {
    const current = this.#live;
    const name = this.#spec.name;
    if (!current || this.#state !== "connected") {
      throw new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream ${name} is unavailable: ${this.#lastError ?? this.#state}`,
        { details: { plugin: name } },
      );
    }
    let live: Live = current;
    for (let attempt = 0;; attempt++) {
      try {
        return await send(live) as Record<string, unknown>;
      } catch (error) {
        if (signal.aborted) {
          if (signal.reason instanceof GatewayError) throw signal.reason;
          throw new GatewayError("CANCELLED", `Request for ${what} of ${name} was cancelled`, {
            details: { plugin: name },
          });
        }
        const renewed: Live | undefined = attempt === 0 && sessionExpired(error, live)
          ? await this.#renewSession(live)
          : undefined;
        if (renewed) {
          live = renewed;
          continue;
        }
        if (
          error instanceof ProtocolError &&
          error.code === ProtocolErrorCode.MissingRequiredClientCapability
        ) {
          throw missingCapability(error, what, { plugin: name });
        }
        if (error instanceof ProtocolError && error.code === ProtocolErrorCode.InvalidParams) {
          throw new GatewayError("NOT_FOUND", `Upstream ${name}: ${truncate(mcpMessage(error))}`, {
            details: { plugin: name },
          });
        }
        throw new GatewayError(
          "PLUGIN_REQUEST_FAILED",
          `Upstream ${name} failed on ${what}: ${truncate(mcpMessage(error as Error))}`,
          { details: { plugin: name }, cause: error },
        );
      }
    }
  }

  /** Re-lists the tools after `notifications/tools/list_changed` (coalesced). */
  #refresh = coalesced(async () => {
    const live = this.#live;
    if (!live || this.#closed) return;
    try {
      const tools = await listAllTools(live.client, { timeout: this.#settings.connectTimeoutMs });
      const fingerprint = toolsFingerprint(tools);
      if (this.#live !== live || fingerprint === this.#fingerprint) return;
      this.#tools = tools;
      this.#headerTools = headerTools(tools);
      this.#fingerprint = fingerprint;
      this.#log(`tool list changed: ${tools.length} tools`);
      this.#onToolsChanged(tools);
    } catch (error) {
      this.#log(`listing tools after list_changed failed: ${errorText(error)}`);
    }
  });

  #recordError(message: string): void {
    this.#lastError = message;
    this.#lastErrorAt = this.#now();
  }

  #unavailable(tool: string): GatewayError {
    const next = this.#nextAttemptAt === undefined
      ? ""
      : `; next reconnection attempt in ${Math.max(0, this.#nextAttemptAt - this.#now())} ms`;
    return new GatewayError(
      "PLUGIN_REQUEST_FAILED",
      `Upstream ${this.#spec.name} is unavailable: ${this.#lastError ?? this.#state}${next}`,
      { details: { plugin: this.#spec.name, upstream_tool: tool, connection: this.#state } },
    );
  }

  #connectError(error: unknown): GatewayError {
    if (error instanceof GatewayError) return error;
    if (error instanceof UpstreamStartError) {
      const { status } = error.exit;
      const message = status
        ? `MCP upstream ${this.#spec.command} ${status} while starting`
        : `MCP upstream ${this.#spec.command} did not start: ${error.message}`;
      return new GatewayError("PLUGIN_INIT_FAILED", message + stderrSuffix(error.exit), {
        cause: error,
      });
    }
    const how = this.#spec.command !== undefined
      ? `cannot run ${this.#spec.command}`
      : `cannot reach ${safeUrl(this.#spec.url!)}`;
    return new GatewayError("PLUGIN_INIT_FAILED", `MCP upstream ${how}: ${errorText(error)}`, {
      cause: error,
    });
  }

  #callError(tool: string, error: unknown, signal: AbortSignal, live: Live): GatewayError {
    if (error instanceof GatewayError) return error;
    const name = this.#spec.name;
    const details = { plugin: name, upstream_tool: tool };
    if (signal.aborted) {
      // The gateway's timeout (its reason is TOOL_TIMEOUT) or the caller went away.
      if (signal.reason instanceof GatewayError) return signal.reason;
      return new GatewayError(
        "CANCELLED",
        `Call to upstream tool ${name}/${tool} was cancelled: the caller went away`,
        { details },
      );
    }
    if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
      return new GatewayError(
        "TOOL_TIMEOUT",
        `Upstream tool ${name}/${tool} timed out: ${mcpMessage(error)}`,
        { details },
      );
    }
    if (error instanceof SdkError && error.code === SdkErrorCode.ConnectionClosed) {
      return new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream ${name} is unavailable: ${this.#lastError ?? "connection closed"}`,
        { details },
      );
    }
    if (error instanceof SdkError) {
      return new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream tool ${name}/${tool} failed: ${truncate(mcpMessage(error))}`,
        { details },
      );
    }
    if (error instanceof ProtocolError) {
      if (error.code === ProtocolErrorCode.MissingRequiredClientCapability) {
        return missingCapability(error, `tool ${name}/${tool}`, details);
      }
      if (
        error.code === ProtocolErrorCode.InvalidParams &&
        !/structured content/i.test(error.message)
      ) {
        return new GatewayError(
          "TOOL_INPUT_INVALID",
          `Invalid arguments for ${name}${"__"}${tool}: the upstream rejected them: ${
            truncate(mcpMessage(error))
          }`,
          { details },
        );
      }
      return new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream tool ${name}/${tool} failed: ${truncate(mcpMessage(error))}`,
        { details },
      );
    }
    // Transport failure: an HTTP upstream went away or lost our session.
    const reason = this.#spec.url !== undefined
      ? describeFetchError(error, new URL(this.#spec.url))
      : errorText(error);
    if (this.#spec.url !== undefined) this.#lost(live, reason);
    return new GatewayError(
      "PLUGIN_REQUEST_FAILED",
      `Upstream ${name} request failed: ${truncate(reason)}`,
      { details, cause: error },
    );
  }
}

/**
 * An upstream's -32021: it needs a capability the caller's client did not
 * declare. The caller is told which (`details.required_capabilities`).
 */
function missingCapability(
  error: ProtocolError,
  subject: string,
  details: Record<string, unknown>,
): GatewayError {
  const required = (error.data as { requiredCapabilities?: Record<string, unknown> } | undefined)
    ?.requiredCapabilities ?? {};
  return new GatewayError(
    "PLUGIN_REQUEST_FAILED",
    `Upstream ${subject} needs the caller's client to declare ${
      Object.keys(required).join(", ") || "a capability it did not declare"
    }: ${truncate(mcpMessage(error))}`,
    { details: { ...details, required_capabilities: required } },
  );
}

/**
 * The schema of a tool result taken as the upstream sent it (a Standard
 * Schema that accepts anything): the client that called validates it.
 */
const AS_SENT = {
  "~standard": {
    version: 1 as const,
    vendor: "toolgate",
    validate: (value: unknown) => ({ value }),
  },
};

/** The names of the tools whose input schema declares `x-mcp-header` arguments. */
function headerTools(tools: UpstreamTool[]): Set<string> {
  return new Set(
    tools.filter((tool) => JSON.stringify(tool.inputSchema).includes('"x-mcp-header"'))
      .map((tool) => tool.name),
  );
}

/** A 2026-07-28 `input_required` result. */
interface InputRequiredResult {
  resultType: "input_required";
  inputRequests?: Record<string, InputRequest>;
  requestState?: string;
}

function isInputRequired(result: object): result is InputRequiredResult {
  return (result as { resultType?: unknown }).resultType === "input_required";
}

/** A `list_changed` handler of the SDK client that only tells `refresh` (which lists again itself). */
function onListChanged(refresh: () => unknown) {
  return { autoRefresh: false, debounceMs: 0, onChanged: () => void refresh() };
}

/** A coalesced task: awaits it, with {@linkcode CoalescedTask.running} while it runs. */
interface CoalescedTask {
  (): Promise<void>;
  /** The run in progress, if any. */
  readonly running: Promise<void> | undefined;
}

/**
 * Wraps `task` so that calls made while it runs share that run and make it
 * run once more after it (what changed meanwhile is seen), never twice at once.
 */
function coalesced(task: () => Promise<void>): CoalescedTask {
  let running: Promise<void> | undefined;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return await running;
    }
    running = (async () => {
      do {
        again = false;
        await task();
      } while (again);
    })();
    try {
      await running;
    } finally {
      running = undefined;
    }
  };
  return Object.defineProperty(run, "running", { get: () => running }) as CoalescedTask;
}

/** Lists an upstream's prompts, resources and templates, as far as its capabilities offer them. */
async function listCatalog(client: Client, timeout: number): Promise<UpstreamCatalog> {
  const capabilities = client.getServerCapabilities() ?? {};
  const options = { timeout, cacheMode: "refresh" as const };
  const [prompts, resources, templates] = await Promise.all([
    capabilities.prompts ? client.listPrompts(undefined, options) : { prompts: [] },
    capabilities.resources ? client.listResources(undefined, options) : { resources: [] },
    capabilities.resources
      ? client.listResourceTemplates(undefined, options).catch(() => ({ resourceTemplates: [] }))
      : { resourceTemplates: [] },
  ]);
  return {
    prompts: prompts.prompts as Record<string, unknown>[],
    resources: resources.resources as Record<string, unknown>[],
    templates: templates.resourceTemplates as Record<string, unknown>[],
    completions: capabilities.completions !== undefined,
    subscribe: capabilities.resources?.subscribe === true,
  };
}

/** Whether a connection speaks 2026-07-28 (no sessions: subscriptions are `subscriptions/listen` streams). */
function isModern(live: Live): boolean {
  return live.client.getNegotiatedProtocolVersion() === MODERN_REVISION;
}

/** `completion/complete` params. */
type CompleteRequestParams = Record<string, unknown>;

/**
 * Lists every page of an upstream's tools (the client walks the pages, at
 * most `listMaxPages`), always from the upstream: never a cached list.
 */
async function listAllTools(
  client: Client,
  options: { signal?: AbortSignal; timeout: number },
): Promise<UpstreamTool[]> {
  const result = await client.listTools(undefined, { ...options, cacheMode: "refresh" });
  return result.tools as UpstreamTool[];
}

/**
 * The SDK's stdio transport as a subclass, so that the client sends its
 * `server/discover` probe to this very process: with the base class it
 * starts a second, throw-away copy of the upstream for the probe, which
 * would run the upstream's start-up twice and can outlive us when it
 * ignores SIGTERM.
 */
class InPlaceStdioClientTransport extends StdioClientTransport {}

/**
 * Whether a request failed because an HTTP upstream answered 404 to our
 * session id: the session expired, or the upstream restarted. The request
 * never reached a handler there.
 */
function sessionExpired(error: unknown, live: Live): boolean {
  if (!(live.transport instanceof StreamableHTTPClientTransport) || !live.transport.sessionId) {
    return false;
  }
  const data = (error as { data?: { status?: unknown } } | undefined)?.data;
  return data?.status === 404;
}

/** Whether a connect failed because the upstream ended the connection on the `server/discover` probe. */
function closedOnProbe(error: unknown): boolean {
  const message = error instanceof Error ? error.message : "";
  return /during the server\/discover probe/.test(message) ||
    (error instanceof SdkError && error.code === SdkErrorCode.EraNegotiationFailed &&
      /closed/i.test(message));
}

/**
 * Hands the upstream's `notifications/progress` for our tokens to the calls
 * that sent them, and its `notifications/message` to every call in flight
 * (or to `unclaimed` when none is), as the transport delivers them: in order,
 * before the call's response. (The SDK's own `onprogress` can see a last
 * progress notification after the response it preceded, and then drops it.)
 */
function watchCallNotifications(live: Live, unclaimed: (message: LogMessage) => void): void {
  type OnMessage = (message: JSONRPCMessage, extra?: unknown) => void;
  const transport = live.transport as unknown as { onmessage?: OnMessage };
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if ("method" in message && message.method === "notifications/progress") {
      const params = (message.params ?? {}) as Record<string, unknown>;
      const listener = live.progress.get(String(params.progressToken));
      if (listener && typeof params.progress === "number") {
        listener({
          progress: params.progress,
          ...(typeof params.total === "number" ? { total: params.total } : {}),
          ...(typeof params.message === "string" ? { message: params.message } : {}),
        });
        return;
      }
    }
    if ("method" in message && message.method === "notifications/message") {
      const params = (message.params ?? {}) as unknown as LogMessage;
      const log: LogMessage = {
        level: params.level,
        data: params.data,
        ...(params.logger !== undefined ? { logger: params.logger } : {}),
      };
      if (live.logs.size) { for (const listener of live.logs) listener(log); }
      else unclaimed(log);
    }
    deliver?.(message, extra);
  };
}

/** What is used of the SDK transport's child process (a `node:child_process` one). */
interface ChildEvents {
  pid?: number;
  exitCode: number | null;
  signalCode: string | null;
  once(event: "exit", listener: () => void): unknown;
}

/**
 * Keeps the transport's child process in `live` once it is spawned: the SDK
 * holds it privately and drops it when the process ends, which is when its
 * exit status is wanted.
 */
function keepChild(transport: StdioClientTransport, live: Live): void {
  const start = transport.start.bind(transport);
  transport.start = async () => {
    try {
      await start();
    } finally {
      live.child = (transport as unknown as { _process?: ChildEvents })._process;
    }
  };
}

/** The last lines a stdio upstream wrote to stderr, and whether it closed stderr. */
class StderrTail {
  #lines: string[] = [];
  #ended = Promise.withResolvers<void>();

  /** Keeps `line`, dropping the oldest beyond {@linkcode STDERR_TAIL_LINES}. */
  push(line: string): void {
    this.#lines.push(line);
    if (this.#lines.length > STDERR_TAIL_LINES) this.#lines.shift();
  }

  /** Marks stderr closed (every line is in). */
  end(): void {
    this.#ended.resolve();
  }

  /** Resolves once stderr is closed. */
  get ended(): Promise<void> {
    return this.#ended.promise;
  }

  /** The kept lines, one text (`undefined` when there were none). */
  text(): string | undefined {
    return this.#lines.length ? truncate(this.#lines.join(" | ")) : undefined;
  }
}

/** A stdio upstream that started but did not complete the handshake. */
class UpstreamStartError extends Error {
  /** How its process ended, and its last stderr lines. */
  readonly exit: ExitReport;

  constructor(message: string, exit: ExitReport) {
    super(message);
    this.exit = exit;
  }
}

/** How a stdio upstream's process ended, for `last_error`. */
interface ExitReport {
  /** `exited with code 1`, `was killed by SIGKILL`; none while it runs. */
  status?: string;
  /** Its last stderr lines, `" | "`-joined. */
  stderr?: string;
}

/** `; stderr: <lines>`, or nothing. */
function stderrSuffix(exit: ExitReport): string {
  return exit.stderr ? `; stderr: ${exit.stderr}` : "";
}

/**
 * How a stdio upstream's process ended and what it last wrote to stderr;
 * waits up to `waitMs` for the exit and the end of its stderr.
 */
async function exitReport(live: Live, waitMs: number): Promise<ExitReport> {
  const { child } = live;
  const exitedNow = () =>
    child !== undefined && (child.exitCode !== null || child.signalCode !== null);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<void>((resolve) => timer = setTimeout(resolve, waitMs));
  const exited = new Promise<void>((resolve) => {
    if (!child || exitedNow()) resolve();
    else child.once("exit", () => resolve());
  });
  await Promise.race([Promise.all([exited, live.stderr?.ended]), timeout]);
  clearTimeout(timer);
  const report: ExitReport = { stderr: live.stderr?.text() };
  if (exitedNow()) {
    report.status = child!.signalCode !== null
      ? `was killed by ${child!.signalCode}`
      : `exited with code ${child!.exitCode}`;
  }
  return report;
}

/**
 * Closes a connection: a stdio upstream gets its stdin closed and, if it
 * does not exit, SIGTERM then SIGKILL (the SDK's sequence, 2 s apart); with
 * `force`, SIGTERM right away (a failed or stuck start). The SDK's SIGKILL
 * is sent through `node:child_process`, which in Deno does nothing after an
 * earlier `kill()`; so a child still running once the SDK is done gets
 * SIGKILL from here.
 */
async function closeLive(live: Live, force = false): Promise<void> {
  live.client.onclose = undefined;
  const pid = live.transport instanceof StdioClientTransport ? live.transport.pid : null;
  const { child } = live;
  // Exited before (a crash): never signal its pid, which may have been reused.
  let exited = !child || child.exitCode !== null || child.signalCode !== null;
  child?.once("exit", () => {
    exited = true;
  });
  if (force && pid !== null) {
    try {
      Deno.kill(pid, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
  try {
    if (live.transport instanceof StreamableHTTPClientTransport && live.transport.sessionId) {
      await live.transport.terminateSession().catch(() => {
        // The server may be gone already; the session expires there.
      });
    }
    await live.client.close();
  } catch {
    // Closing a dead connection: nothing left to release.
  }
  if (pid !== null && !exited) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch {
      // It exited meanwhile.
    }
  }
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function toolsFingerprint(tools: UpstreamTool[]): string {
  return JSON.stringify(tools.map((tool) => [tool.name, tool.description, tool.inputSchema]));
}

function errorText(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/\s+/g, " ").trim() || "unknown error";
}

/** An MCP error's text without the SDK's `MCP error <code>: ` prefixes (the upstream's may repeat it). */
function mcpMessage(error: Error): string {
  return error.message.replace(/^(MCP error -?\d+: )+/, "");
}

function truncate(text: string): string {
  return text.length <= MAX_ERROR_TEXT ? text : `${text.slice(0, MAX_ERROR_TEXT - 1)}…`;
}

/** The URL without credentials, query or fragment (they may carry secrets). */
function safeUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
}
