/**
 * What the gateway keeps of a hosted plugin and of each tool it registered:
 * the records the plugin host, the tool registry and the call pipeline share.
 *
 * @module
 */
import type { DeadlineQueue } from "../deadlines.ts";
import type { CircuitBreaker } from "./circuit_breaker.ts";
import type { KeyedBreakers } from "./keyed_breakers.ts";
import type { PluginContext, PluginDefinition, PluginStatus, ToolDefinition } from "./types.ts";

/** A tool on offer, with its settings and circuit breakers. */
export interface RegisteredTool {
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

/** A plugin the gateway hosts, with its status and the names of its registered tools. */
export interface HostedPlugin {
  definition: PluginDefinition;
  status: PluginStatus;
  context: PluginContext;
  toolNames: string[];
  /** Tools set by `setTools` before the plugin was ready. */
  pendingTools?: ToolDefinition[];
  /** `initialize()` is running. */
  initializing?: boolean;
}
