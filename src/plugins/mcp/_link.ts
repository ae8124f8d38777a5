/**
 * Where one upstream connection stands — its live connection, its state and
 * its last error — as the parts that negotiate, relay and recover it share it.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { UpstreamConnectionState } from "../../gateway/mod.ts";
import type { Live } from "./_live.ts";

/** The standing of one upstream connection, shared by its parts. */
export class Link {
  /** The open connection; none while it is down. */
  live: Live | undefined;
  /** What `status()` reports as `connection`. */
  state: UpstreamConnectionState = "connecting";
  /** Closed for good: it neither reconnects nor adopts a new connection. */
  closed = false;
  /** Why it last failed. */
  lastError: string | undefined;
  lastErrorAt: number | undefined;
  /** When it tries to reconnect next (while `reconnecting`). */
  nextAttemptAt: number | undefined;
  #plugin: string;
  #now: () => number;

  /**
   * @param plugin The plugin's name (for errors).
   * @param now The clock.
   */
  constructor(plugin: string, now: () => number) {
    this.#plugin = plugin;
    this.#now = now;
  }

  /** Keeps `message` as the last error, now. */
  recordError(message: string): void {
    this.lastError = message;
    this.lastErrorAt = this.#now();
  }

  /** The error of a request made while it is not connected (`tool` names it). */
  unavailable(tool: string): GatewayError {
    const next = this.nextAttemptAt === undefined
      ? ""
      : `; next reconnection attempt in ${Math.max(0, this.nextAttemptAt - this.#now())} ms`;
    return new GatewayError(
      "PLUGIN_REQUEST_FAILED",
      `Upstream ${this.#plugin} is unavailable: ${this.lastError ?? this.state}${next}`,
      { details: { plugin: this.#plugin, upstream_tool: tool, connection: this.state } },
    );
  }
}
