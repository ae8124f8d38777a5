/**
 * The plugin host, tool registry and call pipeline: every entry point (CLI,
 * MCP stdio, MCP HTTP, REST, incoming webhooks) calls tools through
 * {@linkcode Gateway.call}.
 *
 * @module
 */
import { boundedIssueFields, issueSummary } from "../errors/bounded.ts";
import { getLog, type Log, type LogLike, toLog } from "../log/mod.ts";
import { z } from "zod";
import type { Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { ErrorCode } from "../errors/mod.ts";
import type { EventBus } from "../events/mod.ts";
import { DeadlineQueue } from "../deadlines.ts";
import { newId } from "../ids.ts";
import { createRedactor, type Redactor } from "../redact.ts";
import type { Store } from "../store/mod.ts";
import { VERSION } from "../version.ts";
import { auditCaller, type Caller, forbiddenCall, mayCall } from "./caller.ts";
import { traced } from "../tracing/mod.ts";
import { Catalog, pausingWhileAsking } from "./catalog.ts";
import { CircuitBreaker, type CircuitState } from "./circuit_breaker.ts";
import { KeyedBreakers } from "./keyed_breakers.ts";
import { RateLimiter } from "./rate_limit.ts";
import { coversPlugin, notOnServer, VirtualServers } from "./virtual_servers.ts";
import { attachReceipt } from "./result.ts";
import type {
  ApprovalGate,
  AuditedEntry,
  AuditSink,
  CallOptions,
  CallResult,
  HeldApproval,
  HeldCall,
  OpenCircuit,
  PinGuard,
  PluginContext,
  PluginDefinition,
  PluginStatus,
  PolicyDecision,
  PolicyGuard,
  ReceiptSigner,
  SecretReader,
  ToolDefinition,
  ToolInfo,
  ToolOutput,
} from "./types.ts";

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

/** A call as {@linkcode GatewayOptions.onCall} is told of it. */
export interface CallObservation {
  tool: string;
  plugin: string;
  source: string;
  errorCode?: string;
  durationMs: number;
}

/** Codes that count as a tool failure for the circuit breaker. */
const BREAKER_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "TOOL_EXECUTION_FAILED",
  "TOOL_TIMEOUT",
  "PLUGIN_REQUEST_FAILED",
  "INTERNAL",
]);

interface RegisteredTool {
  definition: ToolDefinition;
  plugin: HostedPlugin;
  /** JSON Schema of the input; computed on first listing (not on the start-up path). */
  inputSchema: Record<string, unknown> | undefined;
  breaker: CircuitBreaker;
  /** The per-destination breakers of a tool with `breakerKey`. */
  keyed: KeyedBreakers | undefined;
  timeoutMs: number;
  /** The timeouts of the tool's calls in flight, on one timer. */
  timeouts: DeadlineQueue;
  retries: number;
}

interface HostedPlugin {
  definition: PluginDefinition;
  status: PluginStatus;
  context: PluginContext;
  toolNames: string[];
  /** Tools set by `setTools` before the plugin was ready. */
  pendingTools?: ToolDefinition[];
  /** `initialize()` is running. */
  initializing?: boolean;
}

const NO_SECRETS: SecretReader = { get: () => Promise.resolve(undefined) };

const NOTHING = () => {};

/** The tool server core. */
export class Gateway {
  readonly config: Config;
  readonly store: Store;
  readonly bus: EventBus;
  /** Prompts and resources of the plugins (MCP upstreams), with their audited reads. */
  readonly catalog: Catalog;
  /** The virtual servers (named tool subsets) callers may be bound to. */
  readonly servers: VirtualServers;
  #audit: AuditSink | undefined;
  #receipts: ReceiptSigner | undefined;
  #secrets: (plugin: string) => SecretReader;
  #log: Log;
  #now: () => number;
  #redact: Redactor;
  #onCall: ((call: CallObservation) => void) | undefined;
  #limiter: RateLimiter;
  #maxBreakerKeys: number;
  #plugins: HostedPlugin[] = [];
  #tools = new Map<string, RegisteredTool>();
  #toolListeners = new Set<() => void>();
  #started = false;
  #stopped = false;
  #announced = false;
  #definitions: PluginDefinition[];
  #pins: PinGuard | undefined;
  #policies: PolicyGuard | undefined;
  #approvals: ApprovalGate | undefined;

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
    const names = new Set<string>();
    for (const plugin of plugins) {
      if (names.has(plugin.name)) throw new Error(`Duplicate plugin name: ${plugin.name}`);
      names.add(plugin.name);
    }
    this.config = config;
    this.store = store;
    this.bus = bus;
    this.#definitions = plugins;
    this.#audit = audit;
    this.#receipts = audit ? options.receipts : undefined;
    this.#pins = options.pins;
    this.#policies = options.policies;
    this.#approvals = options.approvals;
    this.#redact = redact;
    this.catalog = new Catalog({ audit, timeoutMs: config.tools.timeout_ms, now, redact });
    this.#secrets = secrets;
    this.#log = toLog(log);
    this.#now = now;
    this.#onCall = options.onCall;
    this.#limiter = new RateLimiter(store.rateLimits, {
      perCaller: config.limits.per_caller,
      tools: Object.fromEntries(
        Object.entries(config.tools.overrides).map(([tool, settings]) => [tool, settings.rate]),
      ),
    }, options.clock ?? Date.now);
    this.servers = options.servers ?? new VirtualServers(config.servers);
    this.#maxBreakerKeys = options.maxBreakerKeys ?? 100;
  }

  /**
   * Initializes every plugin (concurrently; one failing plugin never stops the
   * others), registers the tools of those that are ready, and emits
   * `plugin.ready` / `plugin.error` in plugin order.
   */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    const disabled = new Set(this.config.plugins.disabled);
    this.#plugins = this.#definitions.map((definition) => this.#host(definition));
    for (const plugin of this.#plugins) plugin.initializing = true;
    const outcomes = await Promise.all(
      this.#plugins.map((plugin) =>
        disabled.has(plugin.definition.name) || plugin.definition.disabled
          ? Promise.resolve<PluginOutcome>({ state: "disabled" })
          : this.#initialize(plugin)
      ),
    );
    const hosted = [...this.#plugins];
    for (const [index, plugin] of hosted.entries()) {
      plugin.initializing = false;
      if (this.#plugins.includes(plugin)) await this.#settle(plugin, outcomes[index]);
      else await this.#dispose(plugin);
    }
  }

  /**
   * Hosts one more plugin while serving (an MCP upstream added with
   * `toolgate plugins add`): initializes it, registers its tools, emits
   * `plugin.ready` / `plugin.error` and tells tool-list listeners.
   *
   * @returns The plugin's status once settled.
   * @throws {GatewayError} `CONFLICT` when a plugin of that name is hosted.
   */
  async addPlugin(definition: PluginDefinition): Promise<PluginStatus> {
    if (this.#stopped) {
      throw new GatewayError(
        "UNAVAILABLE",
        `Cannot add plugin ${definition.name}: the gateway stopped`,
      );
    }
    if (this.#plugins.some((p) => p.definition.name === definition.name)) {
      throw new GatewayError(
        "CONFLICT",
        `Cannot add plugin ${definition.name}: a plugin of that name is hosted`,
      );
    }
    if (!this.#started) {
      this.#definitions = [...this.#definitions, definition];
      return this.#statusOf(this.#host(definition));
    }
    const plugin = this.#host(definition);
    this.#plugins.push(plugin);
    plugin.initializing = true;
    const outcome: PluginOutcome =
      this.config.plugins.disabled.includes(definition.name) || definition.disabled
        ? { state: "disabled" }
        : await this.#initialize(plugin);
    plugin.initializing = false;
    if (!this.#plugins.includes(plugin)) {
      // Removed while it was initializing.
      await this.#dispose(plugin);
      return this.#statusOf(plugin);
    }
    await this.#settle(plugin, outcome);
    if (plugin.toolNames.length > 0) this.#notifyTools();
    return this.#statusOf(plugin);
  }

  /**
   * Stops hosting a plugin: its tools go (tool-list listeners are told) and
   * it is disposed.
   *
   * @returns Whether a plugin of that name was hosted.
   */
  async removePlugin(name: string): Promise<boolean> {
    const index = this.#plugins.findIndex((p) => p.definition.name === name);
    if (index < 0) return false;
    const [plugin] = this.#plugins.splice(index, 1);
    const hadTools = plugin.toolNames.length > 0;
    this.#unregister(plugin);
    plugin.status.state = "disabled";
    if (hadTools) this.#notifyTools();
    // A plugin still initializing is disposed by addPlugin() once that ends.
    if (!plugin.initializing) await this.#dispose(plugin);
    return true;
  }

  async #dispose(plugin: HostedPlugin): Promise<void> {
    try {
      await plugin.definition.dispose?.();
    } catch (error) {
      this.#log.warn(
        `plugin ${plugin.definition.name}: dispose failed: ${(error as Error).message}`,
        {
          plugin: plugin.definition.name,
        },
      );
    }
  }

  #unregister(plugin: HostedPlugin): void {
    this.catalog.set(plugin.definition.name, undefined);
    for (const name of plugin.toolNames) {
      disposeBreakers(this.#tools.get(name));
      this.#tools.delete(name);
    }
    plugin.toolNames = [];
    plugin.status.tool_count = 0;
  }

  #host(definition: PluginDefinition): HostedPlugin {
    const plugin: HostedPlugin = {
      definition,
      status: {
        name: definition.name,
        version: definition.version,
        state: "initializing",
        tool_count: 0,
        zero_config: definition.zeroConfig,
      },
      toolNames: [],
      context: undefined as unknown as PluginContext,
    };
    plugin.context = {
      config: this.config,
      store: this.store,
      secrets: this.#secrets(definition.name),
      log: (message) =>
        this.#log.warn(`[${definition.name}] ${message}`, { plugin: definition.name }),
      setTools: (tools) => {
        if (plugin.status.state === "ready") {
          this.#register(plugin, tools);
          this.#notifyTools();
        } else {
          plugin.pendingTools = tools;
        }
      },
      setCatalog: (source) => {
        // A plugin removed or disabled meanwhile offers nothing.
        if (this.#plugins.includes(plugin) && plugin.status.state !== "disabled") {
          this.catalog.set(definition.name, source);
        }
      },
      resourceUpdated: (uri) => this.catalog.updated(definition.name, uri),
      ...(this.#pins && definition.upstreamStatus ? { pins: this.#pins } : {}),
    };
    return plugin;
  }

  async #initialize(plugin: HostedPlugin): Promise<PluginOutcome> {
    const { definition, context } = plugin;
    try {
      const missing: string[] = [];
      for (const key of definition.secrets ?? []) {
        if (!(await context.secrets.get(key))) missing.push(`${definition.name}.${key}`);
      }
      if (missing.length) {
        const [first] = missing;
        return {
          state: "not_configured",
          code: "PLUGIN_NOT_CONFIGURED",
          error: `Plugin ${definition.name} is not configured: ${missing.join(", ")} ${
            missing.length > 1 ? "are" : "is"
          } not set; store ${
            missing.length > 1 ? "each" : "it"
          } with toolgate keychain set ${first}`,
        };
      }
      if (definition.isConfigured && !(await definition.isConfigured(context))) {
        return {
          state: "not_configured",
          code: "PLUGIN_NOT_CONFIGURED",
          error: `Plugin ${definition.name} is not configured: a required credential is missing`,
        };
      }
      await definition.initialize?.(context);
      return { state: "ready" };
    } catch (error) {
      const gatewayError = error instanceof GatewayError ? error : undefined;
      const code = gatewayError?.code ?? "PLUGIN_INIT_FAILED";
      return {
        state: code === "PLUGIN_NOT_CONFIGURED" ? "not_configured" : "error",
        code,
        error: `Plugin ${definition.name} failed to initialize: ${(error as Error).message}`,
      };
    }
  }

  async #settle(plugin: HostedPlugin, outcome: PluginOutcome): Promise<void> {
    const { definition, status } = plugin;
    if (outcome.state === "ready") {
      const taken = this.#takenNames(plugin, plugin.pendingTools ?? definition.tools);
      if (taken) {
        // Refused as a whole at start: half of its tools under other plugins' names would mislead.
        outcome = { state: "error", code: "PLUGIN_INIT_FAILED", error: taken };
        this.catalog.set(definition.name, undefined);
        await this.#dispose(plugin);
      }
    }
    status.state = outcome.state;
    if (outcome.state === "disabled") return;
    if (outcome.state !== "ready") {
      // An upstream's error may name its URL, credentials included.
      const error = outcome.error === undefined ? undefined : this.#redact(outcome.error);
      status.error = error;
      status.error_code = outcome.code;
      this.#log.warn(`plugin ${definition.name}: ${outcome.state}: ${error}`, {
        plugin: definition.name,
        state: outcome.state,
      });
      await this.bus.emit("plugin.error", {
        plugin_name: definition.name,
        error: error ?? "unknown",
        error_code: outcome.code ?? "PLUGIN_INIT_FAILED",
        state: outcome.state,
      });
      return;
    }
    this.#register(plugin, plugin.pendingTools ?? definition.tools);
    plugin.pendingTools = undefined;
    await this.bus.emit("plugin.ready", {
      plugin_name: definition.name,
      tool_count: status.tool_count,
      zero_config: definition.zeroConfig,
      version: this.#statusOf(plugin).version,
    });
  }

  /** Why `tools` cannot be registered for `plugin` (names other plugins have), or `undefined`. */
  #takenNames(plugin: HostedPlugin, tools: ToolDefinition[]): string | undefined {
    const clashes = tools.flatMap((tool) => {
      const owner = this.#tools.get(tool.name)?.plugin;
      return owner && owner !== plugin ? [`${tool.name} (plugin ${owner.definition.name})`] : [];
    });
    const prompts = this.catalog.promptNames(plugin.definition.name);
    for (const other of this.#plugins) {
      // Those that settled before it, in plugin order.
      if (other === plugin || other.status.state !== "ready") continue;
      const theirs = new Set(this.catalog.promptNames(other.definition.name));
      for (const prompt of prompts) {
        if (theirs.has(prompt)) clashes.push(`prompt ${prompt} (plugin ${other.definition.name})`);
      }
    }
    if (!clashes.length) return undefined;
    return `Plugin ${plugin.definition.name} offers names that are taken: ${
      clashes.join(", ")
    }; rename them (rename) or keep the ${plugin.definition.name}__ prefix`;
  }

  #register(plugin: HostedPlugin, tools: ToolDefinition[]): void {
    // A tool that stays keeps its circuit breakers (and so open circuits).
    const kept = new Map<string, RegisteredTool>();
    const staying = new Set(tools.map((tool) => tool.name));
    for (const name of plugin.toolNames) {
      const tool = this.#tools.get(name);
      if (tool && staying.has(name)) kept.set(name, tool);
      else disposeBreakers(tool);
      this.#tools.delete(name);
    }
    plugin.toolNames = [];
    const { tools: settings } = this.config;
    for (const definition of tools) {
      if (this.#tools.has(definition.name)) {
        const owner = this.#tools.get(definition.name)!.plugin.definition.name;
        this.#log.warn(
          `plugin ${plugin.definition.name}: tool ${definition.name} skipped: name already used by plugin ${owner}`,
        );
        continue;
      }
      const override = settings.overrides[definition.name] ?? {};
      const timeoutMs = override.timeout_ms ?? definition.timeoutMs ?? settings.timeout_ms;
      const registered: RegisteredTool = {
        definition,
        plugin,
        inputSchema: definition.inputJsonSchema,
        timeoutMs,
        timeouts: new DeadlineQueue(timeoutMs),
        retries: definition.idempotent ? override.retries ?? 0 : 0,
        breaker: undefined as unknown as CircuitBreaker,
        keyed: undefined,
      };
      const limits = {
        threshold: override.circuit_threshold ?? settings.circuit_threshold,
        resetAfterMs: override.circuit_reset_ms ?? settings.circuit_reset_ms,
      };
      const before = kept.get(definition.name);
      kept.delete(definition.name);
      registered.breaker = before?.breaker ?? this.#breaker(registered, limits);
      if (definition.breakerKey) {
        registered.keyed = before?.keyed ?? this.#keyedBreakers(registered, limits);
      } else {
        before?.keyed?.dispose();
      }
      this.#tools.set(definition.name, registered);
      plugin.toolNames.push(definition.name);
    }
    for (const tool of kept.values()) disposeBreakers(tool);
    plugin.status.tool_count = plugin.toolNames.length;
  }

  #breaker(tool: RegisteredTool, limits: { threshold: number; resetAfterMs: number }) {
    const events = this.#circuitEvents(tool);
    return new CircuitBreaker({
      ...limits,
      onOpen: (info) => events.opened(undefined, info),
      onClose: (info) => events.closed(undefined, info),
    });
  }

  /**
   * What opening and closing a circuit of `tool` logs and emits; with a
   * destination (`http_request`) the log line names it, while
   * `circuit.opened` / `circuit.closed` keep exactly the spec's fields.
   */
  #circuitEvents(tool: RegisteredTool) {
    const tool_name = tool.definition.name;
    const plugin = tool.plugin.definition.name;
    const to = (destination: string | undefined) => destination ? ` to ${destination}` : "";
    return {
      opened: (
        destination: string | undefined,
        { failureCount, threshold, resetAfterMs }: {
          failureCount: number;
          threshold: number;
          resetAfterMs: number;
        },
      ) => {
        this.#log.warn(
          `circuit opened for ${tool_name}${to(destination)} after ${failureCount} failures`,
          { tool: tool_name, destination },
        );
        void this.bus.emit("circuit.opened", {
          tool_name,
          plugin,
          failure_count: failureCount,
          threshold,
          reset_after_ms: resetAfterMs,
        });
      },
      closed: (destination: string | undefined, { downtimeMs }: { downtimeMs: number }) => {
        this.#log.info(
          `circuit closed for ${tool_name}${to(destination)} after ${downtimeMs} ms`,
          { tool: tool_name, destination },
        );
        void this.bus.emit("circuit.closed", {
          tool_name,
          plugin,
          downtime_ms: Math.round(downtimeMs),
        });
      },
    };
  }

  /**
   * The per-destination breakers of a tool with `breakerKey`: their events
   * are the tool's (see {@linkcode Gateway.#circuitEvents}), so the
   * destination is in the log line, `/health`, the metrics and the
   * `CIRCUIT_OPEN` error, not in the event.
   */
  #keyedBreakers(tool: RegisteredTool, limits: { threshold: number; resetAfterMs: number }) {
    const tool_name = tool.definition.name;
    const events = this.#circuitEvents(tool);
    return new KeyedBreakers({
      ...limits,
      maxKeys: this.#maxBreakerKeys,
      onOpen: (destination, info) => events.opened(destination, info),
      onClose: (destination, info) => events.closed(destination, info),
      onFull: (destination) => {
        this.#log.warn(
          `circuit breakers of ${tool_name} full: ${this.#maxBreakerKeys} destinations have an ` +
            `open circuit, failures of ${destination} and other new ones are not counted until one closes`,
          { tool: tool_name, destination },
        );
      },
    });
  }

  /**
   * Emits `server.started` once, when a transport finished initialization.
   *
   * @param transport `stdio` or `http`.
   */
  async announceStarted(transport: string): Promise<void> {
    if (this.#announced) return;
    this.#announced = true;
    const ready = this.#plugins.filter((p) => p.status.state === "ready");
    await this.bus.emit("server.started", {
      version: VERSION,
      tool_count: this.#tools.size,
      plugin_count: ready.length,
      transport,
      zero_config_plugins: ready.filter((p) => p.definition.zeroConfig).length,
    });
  }

  /**
   * The tools on offer, in registration order: those `caller` may call,
   * when given.
   */
  listTools(caller?: Caller): ToolInfo[] {
    let tools = [...this.#tools.values()];
    if (caller?.tools || caller?.server !== undefined) {
      tools = tools.filter((tool) => this.offers(caller, tool.definition.name));
    }
    return tools.map((tool) => ({
      name: tool.definition.name,
      description: tool.definition.description,
      plugin: tool.plugin.definition.name,
      inputSchema: tool.inputSchema ??= toJsonSchema(tool.definition.input),
      ...(tool.definition.mcpListing ? { mcpListing: tool.definition.mcpListing } : {}),
    }));
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

  /** Where a disabled plugin was turned off, and so how to turn it on. */
  #howDisabled(name: string, status: PluginStatus): string {
    if (this.config.plugins.disabled.includes(name)) {
      return "disabled in config (remove it from plugins.disabled)";
    }
    return status.upstream?.source === "config"
      ? `disabled in config (plugins.upstreams.${name}.enabled)`
      : `disabled (toolgate plugins enable ${name})`;
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
    if (this.#tools.has(name)) return undefined;
    const plugin = this.#plugins.find((p) => p.definition.tools.some((t) => t.name === name)) ??
      this.#plugins.find((p) => name.startsWith(`${p.definition.name}__`)) ??
      this.#onlyUnreadyOwner(name);
    if (!plugin) return undefined;
    const status = this.#statusOf(plugin);
    // It holds the tool back (quarantined), or simply has no such tool.
    if (status.state === "ready") return plugin.definition.withheld?.(name);
    const owner = plugin.definition.name;
    const proxy = plugin.definition.upstreamStatus !== undefined;
    const code = status.error_code === "PLUGIN_NOT_CONFIGURED" ||
        status.error_code === "PLUGIN_INIT_FAILED"
      ? status.error_code
      : "TOOL_NOT_FOUND";
    const why = status.state === "disabled"
      ? `plugin ${owner} is ${this.#howDisabled(owner, status)}`
      : status.error ?? `plugin ${owner} is ${status.state}`;
    const named = (plugin.definition.secrets ?? []).length > 0;
    const hint = code !== "PLUGIN_NOT_CONFIGURED" || proxy
      ? ""
      : named
      ? " (a running server needs a restart to pick it up)"
      : `; store its credentials with toolgate keychain set ${owner}.<key> ` +
        `(a running server needs a restart to pick them up)`;
    return new GatewayError(code, `Tool ${name} is unavailable: ${why}${hint}`, {
      details: { tool: name, plugin: owner, state: status.state },
    });
  }

  /**
   * The one plugin not ready yet that may offer `name` once it is (an
   * unprefixed MCP upstream still connecting, or failed); none when several may.
   */
  #onlyUnreadyOwner(name: string): HostedPlugin | undefined {
    const candidates = this.#plugins.filter((plugin) =>
      plugin.definition.mayOffer?.(name) && this.#statusOf(plugin).state !== "ready"
    );
    return candidates.length === 1 ? candidates[0] : undefined;
  }

  /**
   * Status of every plugin. A ready proxy plugin whose upstream is down shows
   * state `reconnecting`; proxy plugins carry `upstream` and `last_error`.
   */
  listPlugins(): PluginStatus[] {
    return this.#plugins.map((plugin) => this.#statusOf(plugin));
  }

  #statusOf(plugin: HostedPlugin): PluginStatus {
    const status: PluginStatus = { ...plugin.status };
    let upstream;
    try {
      upstream = plugin.definition.upstreamStatus?.();
    } catch (error) {
      this.#log.warn(
        `plugin ${plugin.definition.name}: status failed: ${(error as Error).message}`,
      );
    }
    if (!upstream) return status;
    // A proxy plugin's version is its server's own (serverInfo.version).
    if (upstream.server?.version) status.version = upstream.server.version;
    if (status.state === "ready" && upstream.connection === "reconnecting") {
      status.state = "reconnecting";
    }
    // Disabled in config (plugins.disabled): never started, so no connection.
    if (status.state === "disabled") upstream = { ...upstream, connection: "closed" as const };
    if (upstream.last_error) status.last_error = upstream.last_error;
    status.upstream = upstream;
    return status;
  }

  /**
   * The open circuits, with when they close: tools whose own circuit is
   * open, and the destinations of tools with one breaker per destination.
   */
  openCircuits(): OpenCircuit[] {
    const open: OpenCircuit[] = [];
    for (const tool of this.#tools.values()) {
      const tool_name = tool.definition.name;
      const plugin = tool.plugin.definition.name;
      if (tool.breaker.state === "open") {
        open.push({ tool_name, plugin, closes_at: new Date(tool.breaker.closesAt!).toISOString() });
      }
      for (const { key, closesAt } of tool.keyed?.open() ?? []) {
        open.push({
          tool_name,
          plugin,
          destination: key,
          closes_at: new Date(closesAt).toISOString(),
        });
      }
    }
    return open;
  }

  /**
   * Subscribes to changes of the tool list.
   *
   * @returns A function that unsubscribes.
   */
  onToolsChanged(listener: () => void): () => void {
    this.#toolListeners.add(listener);
    return () => this.#toolListeners.delete(listener);
  }

  #notifyTools(): void {
    for (const listener of this.#toolListeners) listener();
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
    // One span per call (OpenTelemetry GenAI `execute_tool`), a child of the caller's trace.
    const caller = options.caller;
    return traced(`execute_tool ${name}`, {
      parent: options.trace,
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "toolgate.tool": name,
        "toolgate.transport": options.source ?? "api",
        "toolgate.caller": caller ? (caller.name ?? caller.id ?? caller.kind) : undefined,
      },
    }, async (span) => {
      try {
        const result = await this.#callTool(name, args, options);
        span.set({ "toolgate.plugin": result.plugin, "toolgate.outcome": "ok" });
        return result;
      } catch (error) {
        span.set({
          "toolgate.plugin": this.#tools.get(name)?.plugin.definition.name,
          "toolgate.outcome": error instanceof GatewayError ? error.code : "INTERNAL",
        });
        throw error;
      }
    });
  }

  async #callTool(name: string, args: unknown, options: CallOptions): Promise<CallResult> {
    const server = options.caller?.server;
    // Not on the caller's virtual server: the tool does not exist there.
    if (server !== undefined && !this.servers.has(server, name)) {
      return await this.#refuse(name, args, options, notOnServer(server, name));
    }
    // Outside the caller's patterns whether the tool exists or not, so a
    // refusal says nothing about what is on offer.
    if (options.caller && !mayCall(options.caller, name)) {
      return await this.#refuse(name, args, options, forbiddenCall(options.caller, name));
    }
    const tool = this.#tools.get(name);
    if (!tool) {
      throw this.unavailable(name) ??
        new GatewayError("TOOL_NOT_FOUND", `Unknown tool ${JSON.stringify(name)}`, {
          details: { tool: name },
        });
    }
    // A policy that denies it: refused (and audited) before anything runs; one that asks for
    // an approval: held until a person decides.
    let approval: HeldApproval | undefined;
    // toolgate's own approval notices (to Slack) are not held by policies: they would hold themselves.
    if (this.#policies?.active && options.source !== "approvals") {
      const held: HeldCall = {
        tool: name,
        plugin: tool.plugin.definition.name,
        args: args !== null && typeof args === "object" && !Array.isArray(args)
          ? args as Record<string, unknown>
          : {},
        caller: options.caller,
        transport: options.source ?? "api",
        server: options.caller?.server,
      };
      const decision = this.#policies.decide({
        ...held,
        annotations: tool.definition.mcpListing?.annotations as Record<string, unknown> | undefined,
      });
      if (
        decision?.effect === "deny" || (decision?.effect === "require_approval" && !this.#approvals)
      ) {
        return await this.#refuse(name, args, options, refusedBy(name, decision));
      }
      if (decision?.effect === "require_approval") {
        if (options.approval) {
          this.#approvals!.check(options.approval, held, decision);
          approval = options.approval;
        } else {
          try {
            approval = await this.#approvals!.hold(held, decision, {
              waitMs: options.approvalWaitMs ?? 0,
              signal: options.signal,
              onProgress: options.onProgress,
              input: options.input,
            });
          } catch (error) {
            // Denied or expired: a call that does not run, recorded as such; pending: not yet.
            if (
              error instanceof GatewayError &&
              (error.code === "APPROVAL_DENIED" || error.code === "APPROVAL_EXPIRED")
            ) {
              return await this.#refuse(name, args, options, error);
            }
            throw error;
          }
        }
        options = { ...options, approval };
      }
    }
    // Past the caller's or the tool's rate: refused before anything runs (no breaker count).
    if (this.#limiter.active || options.caller?.rate) {
      try {
        await this.#limiter.check(name, options.caller);
      } catch (error) {
        if (!(error instanceof GatewayError && error.code === "RATE_LIMITED")) throw error;
        this.#onCall?.({
          tool: name,
          plugin: tool.plugin.definition.name,
          source: options.source ?? "api",
          errorCode: error.code,
          durationMs: 0,
        });
        return await this.#refuse(name, args, options, error);
      }
    }
    // Concurrent calls share audit commits: the log briefly waits for the announced appends.
    const appended = this.#audit?.expect?.() ?? NOTHING;
    try {
      if (!approval) return await this.#call(tool, name, args, options, appended);
      // One approval runs one call: its outcome is kept with it.
      let result: CallResult;
      try {
        result = await this.#call(tool, name, args, options, appended);
      } catch (error) {
        await this.#approvals!.finish(approval, {
          error: error instanceof GatewayError ? error : asToolError(name, error),
        });
        throw error;
      }
      await this.#approvals!.finish(approval, { output: result.output });
      return result;
    } finally {
      appended();
    }
  }

  /**
   * Records a refused call in the audit log, then throws its error:
   * `FORBIDDEN` (outside the caller's rights) unless `error` is given
   * (`RATE_LIMITED`).
   */
  async #refuse(
    name: string,
    args: unknown,
    options: CallOptions,
    error: GatewayError = forbiddenCall(options.caller!, name),
  ): Promise<never> {
    const caller = options.caller;
    const stored = await this.#audit?.append({
      kind: "tool.call",
      tool: name,
      session_id: options.sessionId ?? newId("ses"),
      ...(caller ? { caller: auditCaller(caller) } : {}),
      input: this.#redact(args ?? {}),
      outcome: {
        ok: false,
        error_code: error.code,
        error: error.message,
        latency_ms: 0,
        attempts: 0,
        source: options.source ?? "api",
        // A denied or expired approval: the entry links to it.
        ...(typeof (error.details as { approval_id?: unknown } | undefined)?.approval_id ===
            "string"
          ? { approval_id: (error.details as { approval_id: string }).approval_id }
          : {}),
      },
    });
    if (this.#receipts && stored) attachReceipt(error, this.#receipts(stored as AuditedEntry));
    throw error;
  }

  async #call(
    tool: RegisteredTool,
    name: string,
    args: unknown,
    options: CallOptions,
    appended: () => void,
  ): Promise<CallResult> {
    const sessionId = options.sessionId ?? newId("ses");
    const plugin = tool.plugin.definition.name;
    const started = this.#now();
    const parsed = tool.definition.input.safeParse(args ?? {});
    if (!parsed.success) {
      const error = invalidInput(name, parsed.error);
      await this.#fail(tool, error, 1, sessionId, args, options, started, appended);
      throw error;
    }
    const input = parsed.data;
    // The destination whose breaker the call counts towards (tools with `breakerKey` only).
    const key = tool.keyed && this.#breakerKey(tool, input);
    if (this.#circuitState(tool, key) === "open") {
      const error = circuitOpen(tool, name, key);
      await this.#fail(tool, error, 1, sessionId, input, options, started, appended, key);
      throw error;
    }
    const attempts = 1 + tool.retries;
    for (let attempt = 1;; attempt++) {
      try {
        const output = await this.#execute(tool, input, sessionId, options);
        if (key === undefined) tool.breaker.recordSuccess();
        else tool.keyed!.recordSuccess(key);
        const latency_ms = Math.max(0, Math.round(this.#now() - started));
        const redactedInput = this.#redact(input);
        const entry = {
          kind: "tool.call",
          tool: name,
          session_id: sessionId,
          ...(options.caller ? { caller: auditCaller(options.caller) } : {}),
          input: redactedInput,
          outcome: {
            ok: true,
            latency_ms,
            source: options.source ?? "api",
            ...(options.approval ? { approval_id: options.approval.id } : {}),
          },
        };
        const called = {
          tool_name: name,
          plugin,
          input: redactedInput,
          output: this.#redact(output),
          latency_ms,
          session_id: sessionId,
        };
        let stored: unknown;
        if (this.#audit?.publishesEvents) {
          // One commit holds the entry and the webhook deliveries of both events.
          const appending = this.#audit.append(entry, {
            events: [{ type: "tool.called", data: called }],
          });
          appended();
          stored = await appending;
        } else {
          const appending = Promise.all([
            this.#audit?.append(entry),
            this.bus.emit("tool.called", called),
          ]);
          appended();
          [stored] = await appending;
        }
        this.#onCall?.({
          tool: name,
          plugin,
          source: options.source ?? "api",
          durationMs: this.#now() - started,
        });
        const result: CallResult = tool.definition.rawResult
          ? { tool: name, plugin, output, latency_ms, rawResult: true }
          : { tool: name, plugin, output, latency_ms };
        if (this.#receipts && stored) result.receipt = this.#receipts(stored as AuditedEntry);
        return result;
      } catch (thrown) {
        // A caller that leaves (or cancels) aborts the tool; that is not the tool failing.
        const error = options.signal?.aborted ? cancelled(name, thrown) : asToolError(name, thrown);
        if (BREAKER_CODES.has(error.code)) {
          if (key === undefined) tool.breaker.recordFailure();
          else tool.keyed!.recordFailure(key);
        }
        const retry = attempt < attempts && BREAKER_CODES.has(error.code) &&
          this.#circuitState(tool, key) === "closed" && !options.signal?.aborted;
        if (retry) {
          await this.#emitFailed(tool, error, attempt, key);
          continue;
        }
        await this.#fail(tool, error, attempt, sessionId, input, options, started, appended, key);
        throw error;
      }
    }
  }

  /**
   * The destination of a call to a tool with `breakerKey`; `undefined` (the
   * tool's own breaker) when it names none or throws (logged).
   */
  #breakerKey(tool: RegisteredTool, input: Record<string, unknown>): string | undefined {
    try {
      return tool.definition.breakerKey!(input);
    } catch (error) {
      this.#log.warn(
        `tool ${tool.definition.name}: breakerKey failed, the tool's own breaker counts the call: ${
          (error as Error).message
        }`,
        { tool: tool.definition.name },
      );
      return undefined;
    }
  }

  /** The state of the breaker a call counts towards: its destination's, else the tool's. */
  #circuitState(tool: RegisteredTool, key: string | undefined): CircuitState {
    return key === undefined ? tool.breaker.state : tool.keyed!.state(key);
  }

  async #execute(
    tool: RegisteredTool,
    input: Record<string, unknown>,
    sessionId: string,
    options: CallOptions,
  ): Promise<ToolOutput> {
    const { signal: callerSignal, onProgress, onLogMessage } = options;
    const controller = new AbortController();
    const onAbort = () => controller.abort(callerSignal?.reason);
    callerSignal?.addEventListener("abort", onAbort, { once: true });
    let cancelTimeout = NOTHING;
    let expire: (error: GatewayError) => void = NOTHING;
    const timeout = new Promise<never>((_, reject) => expire = reject);
    const armTimeout = () => {
      cancelTimeout = tool.timeouts.add(() => {
        const error = new GatewayError(
          "TOOL_TIMEOUT",
          `Tool ${tool.definition.name} timed out after ${tool.timeoutMs} ms`,
          { details: { tool: tool.definition.name, timeout_ms: tool.timeoutMs } },
        );
        controller.abort(error);
        expire(error);
      });
    };
    armTimeout();
    // Waiting for the caller's answer is not the tool's time: each stretch of work gets the full timeout.
    const caller = options.input && pausingWhileAsking(options.input, () => cancelTimeout(), () => {
      if (!controller.signal.aborted) armTimeout();
    });
    try {
      const run = tool.definition.execute(input, {
        ...tool.plugin.context,
        signal: controller.signal,
        sessionId,
        ...(onProgress ? { progress: onProgress } : {}),
        ...(onLogMessage ? { logMessage: onLogMessage } : {}),
        ...(caller ? { input: caller } : {}),
        ...(options.source ? { source: options.source } : {}),
      });
      const output = await Promise.race([run, timeout]);
      if (output === null || typeof output !== "object" || Array.isArray(output)) {
        throw new GatewayError(
          "TOOL_EXECUTION_FAILED",
          `Tool ${tool.definition.name} returned an invalid result: expected a JSON object`,
        );
      }
      return output;
    } finally {
      cancelTimeout();
      callerSignal?.removeEventListener("abort", onAbort);
    }
  }

  #emitFailed(
    tool: RegisteredTool,
    error: GatewayError,
    attempt: number,
    key: string | undefined,
  ): Promise<unknown> {
    return this.bus.emit("tool.failed", {
      tool_name: tool.definition.name,
      plugin: tool.plugin.definition.name,
      error: this.#redact(error.message),
      error_code: error.code,
      circuit_state: this.#circuitState(tool, key),
      attempt,
    });
  }

  async #fail(
    tool: RegisteredTool,
    error: GatewayError,
    attempt: number,
    sessionId: string,
    input: unknown,
    options: CallOptions,
    started: number,
    appended: () => void,
    key?: string,
  ): Promise<void> {
    const latency_ms = Math.max(0, Math.round(this.#now() - started));
    const recorded = Promise.all([
      this.#audit?.append({
        kind: "tool.call",
        tool: tool.definition.name,
        session_id: sessionId,
        ...(options.caller ? { caller: auditCaller(options.caller) } : {}),
        input: this.#redact(input),
        outcome: {
          ok: false,
          error_code: error.code,
          error: error.message,
          latency_ms,
          attempts: attempt,
          source: options.source ?? "api",
          ...(options.approval ? { approval_id: options.approval.id } : {}),
        },
      }),
      this.#emitFailed(tool, error, attempt, key),
    ]);
    appended();
    const [stored] = await recorded;
    if (this.#receipts && stored) attachReceipt(error, this.#receipts(stored as AuditedEntry));
    this.#onCall?.({
      tool: tool.definition.name,
      plugin: tool.plugin.definition.name,
      source: options.source ?? "api",
      errorCode: error.code,
      durationMs: this.#now() - started,
    });
  }

  /** Disposes plugins and breaker timers. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const tool of this.#tools.values()) disposeBreakers(tool);
    await Promise.all(this.#plugins.map((plugin) => this.#dispose(plugin)));
  }
}

interface PluginOutcome {
  state: "ready" | "not_configured" | "error" | "disabled";
  code?: string;
  error?: string;
}

/** A zod schema as JSON Schema 2020-12 (the dialect MCP 2025-11-25 names), `$schema` included. */
function toJsonSchema(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io: "input",
    unrepresentable: "any",
  }) as Record<string, unknown>;
}

/** Stops the reset timers of a tool's breakers. */
/**
 * The refusal of a call a policy does not let run now: `FORBIDDEN` for
 * `deny`, naming the rule and its reason; `APPROVAL_REQUIRED` for
 * `require_approval` when the call cannot wait for the approval.
 */
function refusedBy(tool: string, decision: PolicyDecision): GatewayError {
  const reason = decision.reason ? `: ${decision.reason}` : "";
  const details = {
    tool,
    policy: decision.policy,
    ...(decision.reason ? { reason: decision.reason } : {}),
  };
  return decision.effect === "deny"
    ? new GatewayError("FORBIDDEN", `Forbidden by policy ${decision.policy}${reason}`, { details })
    : new GatewayError(
      "APPROVAL_REQUIRED",
      `Call of ${tool} needs approval (policy ${decision.policy}${reason})`,
      { details },
    );
}

function disposeBreakers(tool: RegisteredTool | undefined): void {
  tool?.breaker.dispose();
  tool?.keyed?.dispose();
}

/** `CIRCUIT_OPEN` for a call to `name`, naming the destination when its breaker is the one open. */
function circuitOpen(tool: RegisteredTool, name: string, key: string | undefined): GatewayError {
  const closesAt = (key === undefined ? tool.breaker.closesAt : tool.keyed!.closesAt(key)) ?? 0;
  const retryAfterMs = Math.max(0, closesAt - Date.now());
  return key === undefined
    ? new GatewayError(
      "CIRCUIT_OPEN",
      `Tool ${name} is unavailable: its circuit is open after repeated failures`,
      { details: { tool: name, retry_after_ms: retryAfterMs } },
    )
    : new GatewayError(
      "CIRCUIT_OPEN",
      `Tool ${name} is unavailable for ${key}: its circuit for that destination is open after repeated failures`,
      { details: { tool: name, destination: key, retry_after_ms: retryAfterMs } },
    );
}

function invalidInput(tool: string, error: z.ZodError): GatewayError {
  // Bounded: 50 000 unknown keys name 20 of them.
  const { fields, omitted } = boundedIssueFields(error.issues);
  return new GatewayError(
    "TOOL_INPUT_INVALID",
    `Invalid arguments for ${tool}: ${issueSummary(fields, omitted)}`,
    { details: { tool, fields, ...(omitted ? { fields_omitted: omitted } : {}) } },
  );
}

/** The failure of a call whose caller aborted it: `CANCELLED`, unless the tool timed out first. */
function cancelled(tool: string, thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError && thrown.code === "TOOL_TIMEOUT") return thrown;
  return new GatewayError("CANCELLED", `Call of ${tool} cancelled: the caller went away`, {
    details: { tool },
    cause: thrown,
  });
}

function asToolError(tool: string, thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError) {
    // Arguments a tool itself rejects name the tool, as schema failures do.
    const details = thrown.details as Record<string, unknown> | undefined;
    if (thrown.code !== "TOOL_INPUT_INVALID" || details?.tool !== undefined) return thrown;
    return new GatewayError(thrown.code, thrown.message, {
      details: { tool, ...details },
      cause: thrown.cause,
    });
  }
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return new GatewayError("TOOL_EXECUTION_FAILED", `Tool ${tool} failed: ${message}`, {
    cause: thrown,
  });
}
