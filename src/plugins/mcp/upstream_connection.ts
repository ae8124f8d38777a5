/**
 * One connection to an MCP upstream (official SDK v2 `Client`), as its
 * callers see it: it composes the parts that negotiate the connection
 * (`_negotiate.ts`), relay requests to the upstream (`_relay_to_upstream.ts`)
 * and back to the callers (`_relay_to_caller.ts`), recover it
 * (`_recover.ts`), keep its definitions (`_definitions.ts`) and its
 * resource subscriptions (`_subscriptions.ts`).
 *
 * @module
 */
import { egressFetch, EgressPolicy } from "../../egress/mod.ts";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import type { CallerInput, ToolOutput, UpstreamStatus } from "../../gateway/mod.ts";
import { traced } from "../../tracing/mod.ts";
import { Definitions, type UpstreamCatalog, type UpstreamTool } from "./_definitions.ts";
import { Link } from "./_link.ts";
import { closeLive, type Live } from "./_live.ts";
import { Negotiator } from "./_negotiate.ts";
import { Recovery } from "./_recover.ts";
import { CallerRelay } from "./_relay_to_caller.ts";
import { type CallListeners, UpstreamRelay } from "./_relay_to_upstream.ts";
import { Subscriptions } from "./_subscriptions.ts";
import type { UpstreamSettings, UpstreamSpec } from "./upstream_spec.ts";

export type { UpstreamCatalog, UpstreamTool } from "./_definitions.ts";
export type { CallListeners } from "./_relay_to_upstream.ts";

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

/** A connection to one MCP upstream that restarts itself. */
export class UpstreamConnection {
  #spec: UpstreamSpec;
  /** Where it stands: shared by its parts. */
  #link: Link;
  #definitions: Definitions;
  #subscriptions: Subscriptions;
  #negotiator: Negotiator;
  #recovery: Recovery;
  #toUpstream: UpstreamRelay;
  #server: { name: string; version: string } | undefined;
  #protocolVersion: string | undefined;

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
    this.#spec = spec;
    const link = new Link(spec.name, now);
    this.#link = link;
    const definitions = new Definitions({ link, settings, log, onToolsChanged, onCatalogChanged });
    this.#definitions = definitions;
    const subscriptions = new Subscriptions(spec.name, settings, link, log);
    this.#subscriptions = subscriptions;
    const callers = new CallerRelay(spec.name, log);
    const negotiator = new Negotiator({
      spec,
      settings,
      resolveSecret,
      fetch: egressFetch({ policy: egress, profile: "operator" }),
      log,
      link,
      callers,
      events: {
        toolsChanged: () => definitions.refreshTools(),
        catalogChanged: () => definitions.refreshCatalog(),
        resourceUpdated: (uri) => {
          if (subscriptions.has(uri)) onResourceUpdated(uri);
        },
        lost: (live, reason) => this.#recovery.lost(live, reason),
      },
    });
    this.#negotiator = negotiator;
    const recovery = new Recovery({
      settings,
      link,
      negotiator,
      definitions,
      adopt: (live, tools) => this.#adopt(live, tools),
      onToolsChanged,
      log,
      now,
    });
    this.#recovery = recovery;
    this.#toUpstream = new UpstreamRelay({ spec, link, definitions, callers, recovery });
  }

  /** `stdio` or `http`. */
  get transport(): "stdio" | "http" {
    return this.#spec.command !== undefined ? "stdio" : "http";
  }

  /** The upstream's tools as last listed. */
  get tools(): UpstreamTool[] {
    return this.#definitions.tools;
  }

  /** The prompts, resources and templates as last listed. */
  get catalog(): UpstreamCatalog {
    return this.#definitions.catalog;
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
      const { live, tools } = await this.#negotiator.connect();
      this.#adopt(live, tools);
      await this.#definitions.refreshCatalog();
      return tools;
    } catch (error) {
      const failure = this.#negotiator.connectError(error);
      this.#link.state = "closed";
      this.#link.recordError(failure.message);
      throw failure;
    }
  }

  /** Live state for `plugins list` and `/health`. */
  status(): UpstreamStatus {
    const link = this.#link;
    const status: UpstreamStatus = {
      kind: "mcp",
      transport: this.transport,
      source: this.#spec.source,
      connection: link.state,
      restarts: this.#recovery.restarts,
    };
    const pid = link.live?.transport instanceof StdioClientTransport
      ? link.live.transport.pid
      : null;
    if (pid !== null && pid !== undefined && link.state === "connected") status.pid = pid;
    if (this.#server) status.server = { ...this.#server };
    if (this.#protocolVersion) status.protocol_version = this.#protocolVersion;
    if (link.lastError !== undefined) {
      status.last_error = link.lastError;
      status.last_error_at = new Date(link.lastErrorAt!).toISOString();
    }
    if (link.state === "reconnecting" && link.nextAttemptAt !== undefined) {
      status.next_attempt_at = new Date(link.nextAttemptAt).toISOString();
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
    }, () => this.#toUpstream.callTool(tool, args, signal, timeoutMs, listeners));
  }

  /**
   * Gets a prompt (`prompts/get`).
   *
   * @throws {GatewayError} `NOT_FOUND` when the upstream does not know it;
   * `PLUGIN_REQUEST_FAILED` when it is down or fails; the signal's reason.
   */
  getPrompt(
    name: string,
    args: Record<string, string>,
    signal: AbortSignal,
    input: CallerInput = {},
  ): Promise<Record<string, unknown>> {
    return this.#toUpstream.getPrompt(name, args, signal, input);
  }

  /**
   * Reads a resource (`resources/read`).
   *
   * @throws {GatewayError} `NOT_FOUND` when the upstream does not have it;
   * `PLUGIN_REQUEST_FAILED`; the signal's reason.
   */
  readResource(
    uri: string,
    signal: AbortSignal,
    input: CallerInput = {},
  ): Promise<Record<string, unknown>> {
    return this.#toUpstream.readResource(uri, signal, input);
  }

  /** Completes an argument (`completion/complete`). */
  complete(params: Record<string, unknown>, signal: AbortSignal): Promise<Record<string, unknown>> {
    return this.#toUpstream.complete(params, signal);
  }

  /**
   * Watches a resource: the upstream's `notifications/resources/updated` for
   * it go to `onResourceUpdated`, now and after every reconnection.
   *
   * @throws {GatewayError} `PLUGIN_REQUEST_FAILED` when the upstream is down
   * or refuses the subscription.
   */
  subscribe(uri: string): Promise<void> {
    return this.#subscriptions.subscribe(uri);
  }

  /** Stops watching a resource. */
  unsubscribe(uri: string): Promise<void> {
    return this.#subscriptions.unsubscribe(uri);
  }

  /** Closes the connection (a stdio upstream's process ends) and stops restarting. */
  async close(): Promise<void> {
    const link = this.#link;
    link.closed = true;
    link.state = "closed";
    this.#recovery.stop();
    this.#negotiator.abort("the plugin is shutting down");
    const live = link.live;
    link.live = undefined;
    if (live) await closeLive(live);
    await this.#definitions.refreshTools.running;
  }

  /** Makes a new connection the live one, with the tools it listed. */
  #adopt(live: Live, tools: UpstreamTool[]): void {
    const link = this.#link;
    link.live = live;
    // A new connection (a restart, a renewed session) watches what the last one did.
    if (this.#subscriptions.size) void this.#subscriptions.resubscribe(live);
    link.state = "connected";
    this.#recovery.connected();
    const version = live.client.getServerVersion();
    if (version) this.#server = { name: version.name, version: version.version };
    this.#protocolVersion = live.client.getNegotiatedProtocolVersion();
    this.#definitions.adopt(tools);
  }
}
