/**
 * The HTTP server's lifecycle as routes see it: when it started and whether
 * it is draining (shutting down).
 *
 * @module
 */

/** Serving state shared by `/health`, `/mcp`, `/events` and the server. */
export class ServerLifecycle {
  /** When the server started, in ms since the epoch (for `uptime_ms`). */
  readonly startedAt: number;
  #drain = new AbortController();

  /** @param startedAt When the server started. @default Date.now() */
  constructor(startedAt: number = Date.now()) {
    this.startedAt = startedAt;
  }

  /** Whether shutdown began: `/health` answers 503 from then on. */
  get draining(): boolean {
    return this.#drain.signal.aborted;
  }

  /**
   * Aborted when shutdown begins. Long-lived responses (SSE streams such as
   * `GET /events`) end themselves on it, so in-flight requests can drain.
   */
  get signal(): AbortSignal {
    return this.#drain.signal;
  }

  /** Marks the server as draining; idempotent. */
  beginDrain(): void {
    this.#drain.abort(new Error("Server is shutting down"));
  }
}
