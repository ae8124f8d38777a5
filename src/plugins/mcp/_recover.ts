/**
 * Brings a lost upstream connection back: a new HTTP session at once when the
 * upstream forgot ours, else a restart with exponential backoff while calls
 * fail fast.
 *
 * @module
 */
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { Definitions, UpstreamTool } from "./_definitions.ts";
import { errorText } from "./_error_text.ts";
import type { Link } from "./_link.ts";
import { closeLive, EXIT_REPORT_WAIT_MS, exitReport, type Live, stderrSuffix } from "./_live.ts";
import type { Negotiator } from "./_negotiate.ts";
import type { UpstreamSettings } from "./upstream_spec.ts";

/** Options of {@linkcode Recovery}. */
export interface RecoveryOptions {
  /** Restart backoff. */
  settings: UpstreamSettings;
  /** Where the connection stands. */
  link: Link;
  /** Opens the new connections. */
  negotiator: Negotiator;
  /** The tools and catalog, compared and listed again on a new connection. */
  definitions: Definitions;
  /** Makes a new connection the live one. */
  adopt: (live: Live, tools: UpstreamTool[]) => void;
  /** Told about a changed tool list (after a restart). */
  onToolsChanged: (tools: UpstreamTool[]) => void;
  /** Log sink. */
  log: (message: string) => void;
  /** Clock. */
  now: () => number;
}

/** Restarts one upstream's lost connections and renews its expired sessions. */
export class Recovery {
  #settings: UpstreamSettings;
  #link: Link;
  #negotiator: Negotiator;
  #definitions: Definitions;
  #adopt: (live: Live, tools: UpstreamTool[]) => void;
  #onToolsChanged: (tools: UpstreamTool[]) => void;
  #log: (message: string) => void;
  #now: () => number;
  #restarts = 0;
  #attempt = 0;
  #connectedAt = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** A session renewal in progress (see {@linkcode Recovery.renewSession}). */
  #renewing: Promise<Live | undefined> | undefined;

  /** @param options Backoff, the connection's parts, log and clock. */
  constructor(options: RecoveryOptions) {
    const { settings, link, negotiator, definitions, adopt, onToolsChanged, log, now } = options;
    this.#settings = settings;
    this.#link = link;
    this.#negotiator = negotiator;
    this.#definitions = definitions;
    this.#adopt = adopt;
    this.#onToolsChanged = onToolsChanged;
    this.#log = log;
    this.#now = now;
  }

  /** How many times a new connection replaced a lost or expired one. */
  get restarts(): number {
    return this.#restarts;
  }

  /** Notes that a connection was adopted now: one that stays up a while resets the backoff. */
  connected(): void {
    this.#connectedAt = this.#now();
    this.#link.nextAttemptAt = undefined;
  }

  /** Stops the restart that is waiting, if any. */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Replaces a connection whose HTTP session the upstream no longer knows by
   * a new one, at once (concurrent callers share it). When that fails, the
   * connection is lost as usual and restarts with backoff.
   *
   * @returns The new connection, or `undefined` when none could be opened.
   */
  renewSession(stale: Live): Promise<Live | undefined> {
    if (this.#link.live !== stale) return Promise.resolve(this.#link.live);
    this.#renewing ??= (async () => {
      try {
        const { live, tools } = await this.#negotiator.connect();
        if (this.#link.closed || this.#link.live !== stale) {
          await closeLive(live);
          return this.#link.live;
        }
        const changed = this.#definitions.changed(tools);
        void closeLive(stale);
        this.#adopt(live, tools);
        this.#restarts++;
        this.#log("its session had expired; a new session is open");
        if (changed) this.#onToolsChanged(tools);
        void this.#definitions.refreshCatalog();
        return live;
      } catch (error) {
        this.lost(stale, `its session expired and a new one failed: ${errorText(error)}`);
        return undefined;
      } finally {
        this.#renewing = undefined;
      }
    })();
    return this.#renewing;
  }

  /** The live connection ended by itself (process exit, transport closed). */
  lost(live: Live, reason: string): void {
    if (this.#link.closed || this.#link.live !== live) return;
    this.#link.live = undefined;
    if (!live.stderr) {
      this.#link.recordError(reason);
      void closeLive(live);
      this.#scheduleRestart();
      return;
    }
    // Calls fail fast at once; the restart waits for the exit status and last stderr lines.
    this.#link.state = "reconnecting";
    this.#link.recordError("the upstream process exited");
    void (async () => {
      const exit = await exitReport(live, EXIT_REPORT_WAIT_MS);
      if (this.#link.closed) return;
      this.#link.recordError(
        `the upstream process ${exit.status ?? "exited"}${stderrSuffix(exit)}`,
      );
      await closeLive(live);
      this.#scheduleRestart();
    })();
  }

  #scheduleRestart(): void {
    if (this.#link.closed) return;
    this.#link.state = "reconnecting";
    const now = this.#now();
    // A connection that stayed up a while resets the backoff; a crash loop does not.
    if (this.#connectedAt > 0 && now - this.#connectedAt >= this.#settings.restartMaxMs) {
      this.#attempt = 0;
    }
    this.#connectedAt = 0;
    const delay = Math.min(
      this.#settings.restartInitialMs * 2 ** this.#attempt,
      this.#settings.restartMaxMs,
    );
    this.#attempt++;
    this.#link.nextAttemptAt = now + delay;
    this.#log(`${this.#link.lastError ?? "connection lost"}; reconnecting in ${delay} ms`);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#reconnect(), delay);
  }

  async #reconnect(): Promise<void> {
    this.#timer = undefined;
    if (this.#link.closed) return;
    try {
      const { live, tools } = await this.#negotiator.connect();
      if (this.#link.closed) {
        await closeLive(live);
        return;
      }
      const changed = this.#definitions.changed(tools);
      this.#adopt(live, tools);
      this.#restarts++;
      this.#log(`reconnected (restart ${this.#restarts}), ${tools.length} tools`);
      if (changed) this.#onToolsChanged(tools);
      void this.#definitions.refreshCatalog();
    } catch (error) {
      if (this.#link.closed) return;
      this.#link.recordError(this.#negotiator.connectError(error).message);
      this.#scheduleRestart();
    }
  }
}

/**
 * Whether a request failed because an HTTP upstream answered 404 to our
 * session id: the session expired, or the upstream restarted. The request
 * never reached a handler there.
 */
export function sessionExpired(error: unknown, live: Live): boolean {
  if (!(live.transport instanceof StreamableHTTPClientTransport) || !live.transport.sessionId) {
    return false;
  }
  const data = (error as { data?: { status?: unknown } } | undefined)?.data;
  return data?.status === 404;
}
