/**
 * The circuit breakers of a registered tool, built with what opening and
 * closing one of their circuits logs and emits.
 *
 * @module
 */
import type { EventBus } from "../events/mod.ts";
import type { Log } from "../log/mod.ts";
import { CircuitBreaker } from "./circuit_breaker.ts";
import { KeyedBreakers } from "./keyed_breakers.ts";
import type { RegisteredTool } from "./_hosted.ts";

/** When a circuit opens and how long it stays open. */
export interface BreakerLimits {
  threshold: number;
  resetAfterMs: number;
}

/** Builds the breakers of registered tools; their events go to one log and one bus. */
export class ToolBreakers {
  #log: Log;
  #bus: EventBus;
  #maxKeys: number;

  /**
   * @param log Where opened and closed circuits are logged.
   * @param bus Where `circuit.opened` / `circuit.closed` are emitted.
   * @param maxKeys Most destinations one tool's per-destination breakers hold.
   */
  constructor(log: Log, bus: EventBus, maxKeys: number) {
    this.#log = log;
    this.#bus = bus;
    this.#maxKeys = maxKeys;
  }

  /** The tool's own breaker. */
  forTool(tool: RegisteredTool, limits: BreakerLimits): CircuitBreaker {
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
        void this.#bus.emit("circuit.opened", {
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
        void this.#bus.emit("circuit.closed", {
          tool_name,
          plugin,
          downtime_ms: Math.round(downtimeMs),
        });
      },
    };
  }

  /**
   * The per-destination breakers of a tool with `breakerKey`: their events
   * are the tool's (see {@linkcode ToolBreakers.#circuitEvents}), so the
   * destination is in the log line, `/health`, the metrics and the
   * `CIRCUIT_OPEN` error, not in the event.
   */
  perDestination(tool: RegisteredTool, limits: BreakerLimits): KeyedBreakers {
    const tool_name = tool.definition.name;
    const events = this.#circuitEvents(tool);
    return new KeyedBreakers({
      ...limits,
      maxKeys: this.#maxKeys,
      onOpen: (destination, info) => events.opened(destination, info),
      onClose: (destination, info) => events.closed(destination, info),
      onFull: (destination) => {
        this.#log.warn(
          `circuit breakers of ${tool_name} full: ${this.#maxKeys} destinations have an ` +
            `open circuit, failures of ${destination} and other new ones are not counted until one closes`,
          { tool: tool_name, destination },
        );
      },
    });
  }
}

/** Stops the reset timers of a tool's breakers. */
export function disposeBreakers(tool: RegisteredTool | undefined): void {
  tool?.breaker.dispose();
  tool?.keyed?.dispose();
}
