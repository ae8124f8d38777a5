/**
 * The tools on offer by name, each with its settings (timeout, retries) and
 * circuit breakers, and who is told when the list changes.
 *
 * @module
 */
import { z } from "zod";
import type { Config } from "../config/mod.ts";
import { DeadlineQueue } from "../deadlines.ts";
import type { Log } from "../log/mod.ts";
import type { Caller } from "./caller.ts";
import type { CircuitBreaker } from "./circuit_breaker.ts";
import { disposeBreakers, type ToolBreakers } from "./_tool_breakers.ts";
import type { HostedPlugin, RegisteredTool } from "./_hosted.ts";
import type { OpenCircuit, ToolDefinition, ToolInfo } from "./types.ts";

/** Which tools a caller sees (`Gateway.offers`). */
export interface ToolView {
  /** Whether `caller` may see and call `name`. */
  offers(caller: Caller | undefined, name: string): boolean;
}

/** The registered tools of every hosted plugin, in registration order. */
export class ToolRegistry {
  #tools = new Map<string, RegisteredTool>();
  #listeners = new Set<() => void>();
  #settings: Config["tools"];
  #log: Log;
  #breakers: ToolBreakers;

  /**
   * @param settings `config.tools`: timeouts, retries and circuit limits, with per-tool overrides.
   * @param log Where skipped tools are logged.
   * @param breakers Builds each tool's circuit breakers.
   */
  constructor(settings: Config["tools"], log: Log, breakers: ToolBreakers) {
    this.#settings = settings;
    this.#log = log;
    this.#breakers = breakers;
  }

  /** The tool of that name, if on offer. */
  get(name: string): RegisteredTool | undefined {
    return this.#tools.get(name);
  }

  /** Whether a tool with that name is on offer. */
  has(name: string): boolean {
    return this.#tools.has(name);
  }

  /** How many tools are on offer. */
  get size(): number {
    return this.#tools.size;
  }

  /**
   * Registers `tools` as those of `plugin`, in place of the ones it had: a
   * name another plugin has is skipped (logged).
   */
  register(plugin: HostedPlugin, tools: ToolDefinition[]): void {
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
    const settings = this.#settings;
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
      registered.breaker = before?.breaker ?? this.#breakers.forTool(registered, limits);
      if (definition.breakerKey) {
        registered.keyed = before?.keyed ?? this.#breakers.perDestination(registered, limits);
      } else {
        before?.keyed?.dispose();
      }
      this.#tools.set(definition.name, registered);
      plugin.toolNames.push(definition.name);
    }
    for (const tool of kept.values()) disposeBreakers(tool);
    plugin.status.tool_count = plugin.toolNames.length;
  }

  /** Takes the tools of `plugin` off offer and stops their breakers. */
  unregister(plugin: HostedPlugin): void {
    for (const name of plugin.toolNames) {
      disposeBreakers(this.#tools.get(name));
      this.#tools.delete(name);
    }
    plugin.toolNames = [];
    plugin.status.tool_count = 0;
  }

  /**
   * The tools on offer, in registration order: those `caller` may call
   * (as `view` says), when given.
   */
  list(caller: Caller | undefined, view: ToolView): ToolInfo[] {
    let tools = [...this.#tools.values()];
    if (caller?.tools || caller?.server !== undefined) {
      tools = tools.filter((tool) => view.offers(caller, tool.definition.name));
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
  onChanged(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Tells the subscribers that the tool list changed. */
  notify(): void {
    for (const listener of this.#listeners) listener();
  }

  /** Stops the breaker timers of every tool. */
  dispose(): void {
    for (const tool of this.#tools.values()) disposeBreakers(tool);
  }
}

/** A zod schema as JSON Schema 2020-12 (the dialect MCP 2025-11-25 names), `$schema` included. */
function toJsonSchema(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io: "input",
    unrepresentable: "any",
  }) as Record<string, unknown>;
}
