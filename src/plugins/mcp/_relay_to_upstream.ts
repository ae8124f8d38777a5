/**
 * Relays the gateway's requests to an upstream — tool calls, prompts,
 * resource reads, completions — over the live connection, renewing an
 * expired session once, and turns its failures into gateway errors.
 *
 * @module
 */
import {
  type Client,
  DEFAULT_REQUEST_TIMEOUT_MSEC,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
} from "@modelcontextprotocol/client";
import { GatewayError } from "../../errors/mod.ts";
import type {
  AskCaller,
  CallerInput,
  InputCapabilities,
  LogMessage,
  ProgressUpdate,
  ToolOutput,
} from "../../gateway/mod.ts";
import { traceHeaders } from "../../tracing/mod.ts";
import { describeFetchError } from "../_fetch_error.ts";
import type { Definitions } from "./_definitions.ts";
import { errorText, mcpMessage, truncate } from "./_error_text.ts";
import type { Link } from "./_link.ts";
import type { Live } from "./_live.ts";
import { type Recovery, sessionExpired } from "./_recover.ts";
import type { CallerRelay, InputRequiredResult } from "./_relay_to_caller.ts";
import type { UpstreamSpec } from "./upstream_spec.ts";

/** The per-request log level key of MCP 2026-07-28 (`_meta`). */
const LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel";

/**
 * How long the SDK waits for a 2025 upstream's answer to a call that may ask
 * its caller for input, beyond the tool's timeout: a person may be answering
 * (the gateway's own timeout, paused while the caller answers, still applies).
 */
const ANSWER_WAIT_MS = 10 * 60_000;

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

/** `completion/complete` params. */
type CompleteRequestParams = Record<string, unknown>;

/** Options of {@linkcode UpstreamRelay}. */
export interface UpstreamRelayOptions {
  /** The upstream. */
  spec: UpstreamSpec;
  /** Where the connection stands. */
  link: Link;
  /** Which tools take `x-mcp-header` arguments. */
  definitions: Definitions;
  /** Asks the callers for the input the upstream requests. */
  callers: CallerRelay;
  /** Renews an expired session; told about a lost HTTP upstream. */
  recovery: Recovery;
}

/** Sends the gateway's requests to one upstream. */
export class UpstreamRelay {
  #spec: UpstreamSpec;
  #link: Link;
  #definitions: Definitions;
  #callers: CallerRelay;
  #recovery: Recovery;
  /** Progress tokens handed out (see `watchCallNotifications`). */
  #progressTokens = 0;

  /** @param options The upstream and the connection's parts the requests use. */
  constructor(options: UpstreamRelayOptions) {
    const { spec, link, definitions, callers, recovery } = options;
    this.#spec = spec;
    this.#link = link;
    this.#definitions = definitions;
    this.#callers = callers;
    this.#recovery = recovery;
  }

  /** Calls an upstream tool (`UpstreamConnection.callTool`, inside its span). */
  async callTool(
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    timeoutMs: number,
    listeners: CallListeners,
  ): Promise<ToolOutput> {
    const { progress, logMessage, ask, capabilities = {} } = listeners;
    let live = this.#link.live;
    if (!live || this.#link.state !== "connected") throw this.#link.unavailable(tool);
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
        return await this.#callers.withInput(
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
            return (this.#definitions.headerTools.has(tool)
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
        ? await this.#recovery.renewSession(live)
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
   * {@linkcode UpstreamRelay.#request} of a request whose upstream may
   * ask the caller for input ({@linkcode CallerRelay.withInput}):
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
        this.#callers.withInput(
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
    const current = this.#link.live;
    const name = this.#spec.name;
    if (!current || this.#link.state !== "connected") {
      throw new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream ${name} is unavailable: ${this.#link.lastError ?? this.#link.state}`,
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
          ? await this.#recovery.renewSession(live)
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

  /** The gateway error of a failed tool call. */
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
        `Upstream ${name} is unavailable: ${this.#link.lastError ?? "connection closed"}`,
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
    if (this.#spec.url !== undefined) this.#recovery.lost(live, reason);
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
