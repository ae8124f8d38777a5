/**
 * Opens a connection to an upstream: spawns its stdio process or reaches its
 * Streamable HTTP endpoint, negotiates the protocol era (2026-07-28 when it
 * offers it, else the 2025 handshake) and lists its tools.
 *
 * @module
 */
import type { EgressFetch } from "../../egress/mod.ts";
import {
  Client,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
} from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { GatewayError } from "../../errors/mod.ts";
import { VERSION } from "../../version.ts";
import { listAllTools, type UpstreamTool } from "./_definitions.ts";
import { errorText, MAX_ERROR_TEXT, safeUrl, truncate } from "./_error_text.ts";
import type { Link } from "./_link.ts";
import {
  closeLive,
  EXIT_REPORT_WAIT_MS,
  type ExitReport,
  exitReport,
  keepChild,
  type Live,
  MODERN_REVISION,
  stderrSuffix,
  StderrTail,
} from "./_live.ts";
import { type CallerRelay, INPUT_METHODS, watchCallNotifications } from "./_relay_to_caller.ts";
import { resolveValues } from "./_values.ts";
import type { UpstreamSettings, UpstreamSpec } from "./upstream_spec.ts";

/** Most `tools/list` pages read from one upstream. */
const MAX_TOOL_PAGES = 100;

/** What a connection tells the parts that keep up with it. */
export interface ConnectionEvents {
  /** Its tool list changed (`notifications/tools/list_changed`). */
  toolsChanged(): unknown;
  /** Its prompts or resources changed (their `list_changed`). */
  catalogChanged(): unknown;
  /** A resource changed (`notifications/resources/updated`). */
  resourceUpdated(uri: string): void;
  /** It ended by itself (process exit, transport closed). */
  lost(live: Live, reason: string): void;
}

/** Options of {@linkcode Negotiator}. */
export interface NegotiatorOptions {
  /** The upstream. */
  spec: UpstreamSpec;
  /** Connect timeout and inherited environment. */
  settings: UpstreamSettings;
  /** Reads a keychain entry by its full name (for `keychain:` references). */
  resolveSecret: (name: string) => Promise<string | undefined>;
  /** The fetch an HTTP upstream's requests go through (the egress policy). */
  fetch: EgressFetch;
  /** Log sink; a stdio upstream's stderr lines come here too. */
  log: (message: string) => void;
  /** Where the connection stands (whether it is closed, which connection is live). */
  link: Link;
  /** Answers the upstream's requests for input. */
  callers: CallerRelay;
  /** Told what a live connection reports. */
  events: ConnectionEvents;
}

/** Opens connections to one upstream, in the era it speaks. */
export class Negotiator {
  #spec: UpstreamSpec;
  #settings: UpstreamSettings;
  #resolveSecret: (name: string) => Promise<string | undefined>;
  #fetch: EgressFetch;
  #log: (message: string) => void;
  #link: Link;
  #callers: CallerRelay;
  #events: ConnectionEvents;
  #generation = 0;
  #connecting: AbortController | undefined;
  /** It ended its connection on `server/discover`: only the 2025 handshake from now on. */
  #legacyOnly = false;

  /** @param options The upstream, timing, secrets, egress, log and who hears the connection. */
  constructor(options: NegotiatorOptions) {
    const { spec, settings, resolveSecret, fetch, log, link, callers, events } = options;
    this.#spec = spec;
    this.#settings = settings;
    this.#resolveSecret = resolveSecret;
    this.#fetch = fetch;
    this.#log = log;
    this.#link = link;
    this.#callers = callers;
    this.#events = events;
  }

  /** Aborts the connect in progress, if any, with `reason` as its error. */
  abort(reason: string): void {
    this.#connecting?.abort(new Error(reason));
  }

  /**
   * Connects: 2026-07-28 when the upstream offers it, else the 2025
   * handshake. A stdio upstream that ends its connection on the
   * `server/discover` probe (some 2025 servers do) is started again for the
   * handshake, and is not probed again.
   */
  async connect(): Promise<{ live: Live; tools: UpstreamTool[] }> {
    if (!this.#legacyOnly) {
      try {
        return await this.#connectOnce(false);
      } catch (error) {
        if (this.#link.closed || !closedOnProbe(error)) throw error;
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
        tools: onListChanged(() => live && this.#link.live === live && this.#events.toolsChanged()),
        prompts: onListChanged(() =>
          live && this.#link.live === live && this.#events.catalogChanged()
        ),
        resources: onListChanged(() =>
          live && this.#link.live === live && this.#events.catalogChanged()
        ),
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
        if (this.#link.live === current) {
          this.#events.resourceUpdated(notification.params.uri);
        }
      });
      for (const method of INPUT_METHODS) {
        client.setRequestHandler(
          method,
          (
            request: { params?: Record<string, unknown> },
            context: { mcpReq: { signal: AbortSignal } },
          ) =>
            this.#callers.answer(current, method, request.params, context.mcpReq.signal) as never,
        );
      }
      if (transport instanceof StdioClientTransport) keepChild(transport, current);
      client.onclose = () => this.#events.lost(current, "connection closed");
      client.onerror = (error: Error) => {
        if (this.#link.live === current) this.#log(`transport error: ${error.message}`);
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
      if (!live?.child?.pid || this.#link.closed) {
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

  /** The `PLUGIN_INIT_FAILED` error that explains a failed connect (a `GatewayError` as it is). */
  connectError(error: unknown): GatewayError {
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
}

/** A `list_changed` handler of the SDK client that only tells `refresh` (which lists again itself). */
function onListChanged(refresh: () => unknown) {
  return { autoRefresh: false, debounceMs: 0, onChanged: () => void refresh() };
}

/**
 * The SDK's stdio transport as a subclass, so that the client sends its
 * `server/discover` probe to this very process: with the base class it
 * starts a second, throw-away copy of the upstream for the probe, which
 * would run the upstream's start-up twice and can outlive us when it
 * ignores SIGTERM.
 */
class InPlaceStdioClientTransport extends StdioClientTransport {}

/** Whether a connect failed because the upstream ended the connection on the `server/discover` probe. */
function closedOnProbe(error: unknown): boolean {
  const message = error instanceof Error ? error.message : "";
  return /during the server\/discover probe/.test(message) ||
    (error instanceof SdkError && error.code === SdkErrorCode.EraNegotiationFailed &&
      /closed/i.test(message));
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

/** `promise`, or the signal's reason once it aborts first. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
