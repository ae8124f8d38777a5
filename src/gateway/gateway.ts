/**
 * The tool server core every entry point (CLI, MCP stdio, MCP HTTP, REST,
 * incoming webhooks) calls tools through ({@linkcode Gateway.call}): it
 * composes the plugin host (`_plugin_host.ts`), the tool registry
 * (`_tool_registry.ts`) and the call pipeline (`_call_pipeline.ts`, which
 * has `_tool_run.ts` run what it lets through).
 *
 * @module
 */
import { getLog, type LogLike, toLog } from "../log/mod.ts";
import type { Config } from "../config/mod.ts";
import { benchLayerOff } from "../config/bench_layers.ts";
import type { GatewayError } from "../errors/mod.ts";
import type { EventBus } from "../events/mod.ts";
import { createRedactor, type Redactor } from "../redact.ts";
import type { Store } from "../store/mod.ts";
import { type Caller, mayCall } from "./caller.ts";
import { Catalog } from "./catalog.ts";
import { RateLimiter } from "./rate_limit.ts";
import { coversPlugin, VirtualServers } from "./virtual_servers.ts";
import { CallPipeline } from "./_call_pipeline.ts";
import { checkPluginNames, PluginHost } from "./_plugin_host.ts";
import { ToolBreakers } from "./_tool_breakers.ts";
import { ToolRegistry } from "./_tool_registry.ts";
import { type CallObservation, ToolRunner } from "./_tool_run.ts";
import type {
  ApprovalGate,
  AuditSink,
  CallOptions,
  CallResult,
  OpenCircuit,
  PinGuard,
  PluginDefinition,
  PluginStatus,
  PolicyGuard,
  ReceiptSigner,
  SecretReader,
  ToolInfo,
} from "./types.ts";

export type { CallObservation } from "./_tool_run.ts";

/** Options of {@linkcode Gateway}. */
export interface GatewayOptions {
  /** The resolved configuration. */
  config: Config;
  /** The data directory's store. */
  store: Store;
  /** Where events go. */
  bus: EventBus;
  /** The plugins to host, in order. */
  plugins: PluginDefinition[];
  /** The audit log; calls are recorded durably before they are answered. */
  audit?: AuditSink;
  /** Signs a receipt of each answered call's audit entry (`audit.receipts`). @default none */
  receipts?: ReceiptSigner;
  /** Pinning of upstream definitions, given to proxy plugins. @default none: off */
  pins?: PinGuard;
  /** Policies deciding each call before it runs. @default none: every call allowed */
  policies?: PolicyGuard;
  /** Holds calls that policies mark `require_approval`. @default none: they are refused */
  approvals?: ApprovalGate;
  /** Credentials of a plugin. @default none */
  secrets?: (plugin: string) => SecretReader;
  /** Where it logs (plugin states, circuits). @default the `gateway` logger */
  log?: LogLike;
  /** Clock. @default performance.now for latency, Date.now for time */
  now?: () => number;
  /** Wall-clock time in ms since the epoch, of rate limit buckets. @default Date.now */
  clock?: () => number;
  /**
   * Redacts tool inputs, outputs and errors for the audit log and events.
   * @default the built-in rules and `config.redact.patterns`
   */
  redact?: Redactor;
  /**
   * Told of every answered call (metrics): tool, plugin, entry point
   * (`CallOptions.source`), the error code of a failure, and the time to the
   * answer in ms of `now`. @default none
   */
  onCall?: (call: CallObservation) => void;
  /**
   * The virtual servers a caller may be bound to (`Caller.server`).
   * @default those of `config.servers`
   */
  servers?: VirtualServers;
  /**
   * Most destinations whose circuit breaker one tool with
   * {@linkcode ToolDefinition.breakerKey} (`http_request`) holds at once
   * (those with recent failures or an open circuit). @default 100
   */
  maxBreakerKeys?: number;
}

const NO_SECRETS: SecretReader = { get: () => Promise.resolve(undefined) };

/** The tool server core. */
export class Gateway {
  readonly config: Config;
  readonly store: Store;
  readonly bus: EventBus;
  /** Prompts and resources of the plugins (MCP upstreams), with their audited reads. */
  readonly catalog: Catalog;
  /** The virtual servers (named tool subsets) callers may be bound to. */
  readonly servers: VirtualServers;
  #tools: ToolRegistry;
  #plugins: PluginHost;
  #pipeline: CallPipeline;

  /** @param options Configuration, store, bus, plugins and audit log. */
  constructor(options: GatewayOptions) {
    const {
      config,
      store,
      bus,
      plugins,
      audit,
      secrets = () => NO_SECRETS,
      log = getLog("gateway"),
      now = () => performance.now(),
      redact = createRedactor({ patterns: config.redact.patterns }),
    } = options;
    checkPluginNames(plugins);
    this.config = config;
    this.store = store;
    this.bus = bus;
    const receipts = audit ? options.receipts : undefined;
    this.catalog = new Catalog({ audit, timeoutMs: config.tools.timeout_ms, now, redact });
    const gatewayLog = toLog(log);
    // A benchmark may switch rate limits and call events off to measure them (never a user's server).
    const limiter = new RateLimiter(
      store.rateLimits,
      benchLayerOff(config, "rate_limits") ? { tools: {} } : {
        perCaller: config.limits.per_caller,
        tools: Object.fromEntries(
          Object.entries(config.tools.overrides).map(([tool, settings]) => [tool, settings.rate]),
        ),
      },
      options.clock ?? Date.now,
    );
    this.servers = options.servers ?? new VirtualServers(config.servers);
    const breakers = new ToolBreakers(gatewayLog, bus, options.maxBreakerKeys ?? 100);
    this.#tools = new ToolRegistry(config.tools, gatewayLog, breakers);
    this.#plugins = new PluginHost({
      config,
      store,
      bus,
      plugins,
      catalog: this.catalog,
      tools: this.#tools,
      secrets,
      log: gatewayLog,
      redact,
      pins: options.pins,
    });
    const runner = new ToolRunner({
      bus,
      audit,
      receipts,
      redact,
      log: gatewayLog,
      now,
      onCall: options.onCall,
      callEvents: !benchLayerOff(config, "events"),
    });
    this.#pipeline = new CallPipeline({
      tools: this.#tools,
      plugins: this.#plugins,
      servers: this.servers,
      limiter,
      policies: options.policies,
      approvals: options.approvals,
      audit,
      receipts,
      redact,
      onCall: options.onCall,
      runner,
    });
  }

  /**
   * Initializes every plugin (concurrently; one failing plugin never stops the
   * others), registers the tools of those that are ready, and emits
   * `plugin.ready` / `plugin.error` in plugin order.
   */
  start(): Promise<void> {
    return this.#plugins.start();
  }

  /**
   * Hosts one more plugin while serving (an MCP upstream added with
   * `toolgate plugins add`): initializes it, registers its tools, emits
   * `plugin.ready` / `plugin.error` and tells tool-list listeners.
   *
   * @returns The plugin's status once settled.
   * @throws {GatewayError} `CONFLICT` when a plugin of that name is hosted.
   */
  addPlugin(definition: PluginDefinition): Promise<PluginStatus> {
    return this.#plugins.add(definition);
  }

  /**
   * Stops hosting a plugin: its tools go (tool-list listeners are told) and
   * it is disposed.
   *
   * @returns Whether a plugin of that name was hosted.
   */
  removePlugin(name: string): Promise<boolean> {
    return this.#plugins.remove(name);
  }

  /**
   * Emits `server.started` once, when a transport finished initialization.
   *
   * @param transport `stdio` or `http`.
   */
  announceStarted(transport: string): Promise<void> {
    return this.#plugins.announceStarted(transport);
  }

  /**
   * The tools on offer, in registration order: those `caller` may call,
   * when given.
   */
  listTools(caller?: Caller): ToolInfo[] {
    return this.#tools.list(caller, this);
  }

  /**
   * Whether `caller` may see and call `name`: its own patterns allow it and,
   * when it is bound to a virtual server, the tool is on that server.
   */
  offers(caller: Caller | undefined, name: string): boolean {
    return mayCall(caller, name) &&
      (caller?.server === undefined || this.servers.has(caller.server, name));
  }

  /**
   * Whether `caller` sees the prompts and resources of `plugin`: its
   * patterns and its virtual server's cover the plugin's prefix `<plugin>__`.
   */
  showsPlugin(caller: Caller | undefined, plugin: string): boolean {
    if (caller?.tools && !coversPlugin(caller.tools, plugin)) return false;
    if (caller?.server === undefined) return true;
    const server = this.servers.get(caller.server);
    return server !== undefined && coversPlugin(server.tools, plugin);
  }

  /** Whether a tool with that name is on offer. */
  hasTool(name: string): boolean {
    return this.#tools.has(name);
  }

  /**
   * Why a tool that is not on offer cannot be called, when a plugin that is
   * not ready claims it (one of its static tools, or `<plugin>__<tool>` of a
   * proxy plugin): `PLUGIN_NOT_CONFIGURED` or `PLUGIN_INIT_FAILED` with the
   * plugin's error, else `TOOL_NOT_FOUND` naming the plugin's state
   * (disabled, reconnecting, still starting). `undefined` when no plugin
   * claims the name or the plugin that does is ready (it has no such tool).
   */
  unavailable(name: string): GatewayError | undefined {
    return this.#plugins.unavailable(name);
  }

  /**
   * Status of every plugin. A ready proxy plugin whose upstream is down shows
   * state `reconnecting`; proxy plugins carry `upstream` and `last_error`.
   */
  listPlugins(): PluginStatus[] {
    return this.#plugins.list();
  }

  /**
   * The open circuits, with when they close: tools whose own circuit is
   * open, and the destinations of tools with one breaker per destination.
   */
  openCircuits(): OpenCircuit[] {
    return this.#tools.openCircuits();
  }

  /**
   * Subscribes to changes of the tool list.
   *
   * @returns A function that unsubscribes.
   */
  onToolsChanged(listener: () => void): () => void {
    return this.#tools.onChanged(listener);
  }

  /**
   * Calls a tool through the pipeline: caller's rights → rate limits →
   * validate input → circuit check →
   * execute with timeout (retrying idempotent tools as configured) → audit →
   * events.
   *
   * @throws {GatewayError} `TOOL_NOT_FOUND`, `PLUGIN_NOT_CONFIGURED` or
   * `PLUGIN_INIT_FAILED` (see {@linkcode Gateway.unavailable}), `FORBIDDEN`
   * (outside `options.caller`'s tool patterns; audited, no event), `RATE_LIMITED`
   * (past the caller's or the tool's rate; audited, no event, not counted by
   * the breaker), `TOOL_NOT_FOUND`
   * also when the tool is not on the caller's virtual server (audited), `CANCELLED`
   * (`options.signal` aborted: not counted by the breaker), `TOOL_INPUT_INVALID`,
   * `CIRCUIT_OPEN`, `TOOL_TIMEOUT`, `PLUGIN_REQUEST_FAILED`,
   * `TOOL_EXECUTION_FAILED`, or a plugin's own code.
   */
  call(name: string, args: unknown, options: CallOptions = {}): Promise<CallResult> {
    return this.#pipeline.call(name, args, options);
  }

  /** Disposes plugins and breaker timers. */
  stop(): Promise<void> {
    return this.#plugins.stop();
  }
}
