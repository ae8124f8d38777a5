/**
 * The plugin host: starts, adds, removes and disposes plugins, settles each
 * into its status (registering the tools of those that are ready), and says
 * why a tool a plugin that is not ready claims cannot be called.
 *
 * @module
 */
import type { Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { EventBus } from "../events/mod.ts";
import type { Log } from "../log/mod.ts";
import type { Redactor } from "../redact.ts";
import type { Store } from "../store/mod.ts";
import { VERSION } from "../version.ts";
import type { Catalog } from "./catalog.ts";
import type { ToolRegistry } from "./_tool_registry.ts";
import type { HostedPlugin } from "./_hosted.ts";
import type {
  PinGuard,
  PluginContext,
  PluginDefinition,
  PluginStatus,
  SecretReader,
  ToolDefinition,
} from "./types.ts";

/** What {@linkcode PluginHost} needs of the gateway. */
export interface PluginHostOptions {
  config: Config;
  store: Store;
  bus: EventBus;
  /** The plugins to host, in order. */
  plugins: PluginDefinition[];
  /** Prompts and resources of the plugins. */
  catalog: Catalog;
  /** Where the tools of ready plugins are registered. */
  tools: ToolRegistry;
  secrets: (plugin: string) => SecretReader;
  log: Log;
  redact: Redactor;
  pins: PinGuard | undefined;
}

interface PluginOutcome {
  state: "ready" | "not_configured" | "error" | "disabled";
  code?: string;
  error?: string;
}

/**
 * Rejects a list of plugins in which two share a name.
 *
 * @throws {Error} Naming the first name taken twice.
 */
export function checkPluginNames(plugins: readonly PluginDefinition[]): void {
  const names = new Set<string>();
  for (const plugin of plugins) {
    if (names.has(plugin.name)) throw new Error(`Duplicate plugin name: ${plugin.name}`);
    names.add(plugin.name);
  }
}

/** The hosted plugins, in order, and their lifecycle. */
export class PluginHost {
  #config: Config;
  #store: Store;
  #bus: EventBus;
  #catalog: Catalog;
  #tools: ToolRegistry;
  #secrets: (plugin: string) => SecretReader;
  #log: Log;
  #redact: Redactor;
  #pins: PinGuard | undefined;
  #plugins: HostedPlugin[] = [];
  #started = false;
  #stopped = false;
  #announced = false;
  #definitions: PluginDefinition[];

  /** @param options The gateway's configuration, store, bus, catalog and tool registry. */
  constructor(options: PluginHostOptions) {
    this.#config = options.config;
    this.#store = options.store;
    this.#bus = options.bus;
    this.#definitions = options.plugins;
    this.#catalog = options.catalog;
    this.#tools = options.tools;
    this.#secrets = options.secrets;
    this.#log = options.log;
    this.#redact = options.redact;
    this.#pins = options.pins;
  }

  /**
   * Initializes every plugin (concurrently; one failing plugin never stops the
   * others), registers the tools of those that are ready, and emits
   * `plugin.ready` / `plugin.error` in plugin order.
   */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    const disabled = new Set(this.#config.plugins.disabled);
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
  async add(definition: PluginDefinition): Promise<PluginStatus> {
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
      this.#config.plugins.disabled.includes(definition.name) || definition.disabled
        ? { state: "disabled" }
        : await this.#initialize(plugin);
    plugin.initializing = false;
    if (!this.#plugins.includes(plugin)) {
      // Removed while it was initializing.
      await this.#dispose(plugin);
      return this.#statusOf(plugin);
    }
    await this.#settle(plugin, outcome);
    if (plugin.toolNames.length > 0) this.#tools.notify();
    return this.#statusOf(plugin);
  }

  /**
   * Stops hosting a plugin: its tools go (tool-list listeners are told) and
   * it is disposed.
   *
   * @returns Whether a plugin of that name was hosted.
   */
  async remove(name: string): Promise<boolean> {
    const index = this.#plugins.findIndex((p) => p.definition.name === name);
    if (index < 0) return false;
    const [plugin] = this.#plugins.splice(index, 1);
    const hadTools = plugin.toolNames.length > 0;
    this.#unregister(plugin);
    plugin.status.state = "disabled";
    if (hadTools) this.#tools.notify();
    // A plugin still initializing is disposed by add() once that ends.
    if (!plugin.initializing) await this.#dispose(plugin);
    return true;
  }

  /** Disposes plugins and breaker timers. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#tools.dispose();
    await Promise.all(this.#plugins.map((plugin) => this.#dispose(plugin)));
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
    await this.#bus.emit("server.started", {
      version: VERSION,
      tool_count: this.#tools.size,
      plugin_count: ready.length,
      transport,
      zero_config_plugins: ready.filter((p) => p.definition.zeroConfig).length,
    });
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
    this.#catalog.set(plugin.definition.name, undefined);
    this.#tools.unregister(plugin);
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
      config: this.#config,
      store: this.#store,
      secrets: this.#secrets(definition.name),
      log: (message) =>
        this.#log.warn(`[${definition.name}] ${message}`, { plugin: definition.name }),
      setTools: (tools) => {
        if (plugin.status.state === "ready") {
          this.#tools.register(plugin, tools);
          this.#tools.notify();
        } else {
          plugin.pendingTools = tools;
        }
      },
      setCatalog: (source) => {
        // A plugin removed or disabled meanwhile offers nothing.
        if (this.#plugins.includes(plugin) && plugin.status.state !== "disabled") {
          this.#catalog.set(definition.name, source);
        }
      },
      resourceUpdated: (uri) => this.#catalog.updated(definition.name, uri),
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
        this.#catalog.set(definition.name, undefined);
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
      await this.#bus.emit("plugin.error", {
        plugin_name: definition.name,
        error: error ?? "unknown",
        error_code: outcome.code ?? "PLUGIN_INIT_FAILED",
        state: outcome.state,
      });
      return;
    }
    this.#tools.register(plugin, plugin.pendingTools ?? definition.tools);
    plugin.pendingTools = undefined;
    await this.#bus.emit("plugin.ready", {
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
    const prompts = this.#catalog.promptNames(plugin.definition.name);
    for (const other of this.#plugins) {
      // Those that settled before it, in plugin order.
      if (other === plugin || other.status.state !== "ready") continue;
      const theirs = new Set(this.#catalog.promptNames(other.definition.name));
      for (const prompt of prompts) {
        if (theirs.has(prompt)) clashes.push(`prompt ${prompt} (plugin ${other.definition.name})`);
      }
    }
    if (!clashes.length) return undefined;
    return `Plugin ${plugin.definition.name} offers names that are taken: ${
      clashes.join(", ")
    }; rename them (rename) or keep the ${plugin.definition.name}__ prefix`;
  }

  /** Where a disabled plugin was turned off, and so how to turn it on. */
  #howDisabled(name: string, status: PluginStatus): string {
    if (this.#config.plugins.disabled.includes(name)) {
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
  list(): PluginStatus[] {
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
}
