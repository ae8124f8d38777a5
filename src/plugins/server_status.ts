/**
 * A running server publishes its plugins' live state (upstream connection,
 * pid, restarts, last error) to the store every second, so that
 * `toolgate plugins list` in another process can show it.
 *
 * @module
 */
import type { Gateway } from "../gateway/mod.ts";
import { newId } from "../ids.ts";
import type { Store } from "../store/mod.ts";

/** Published states older than this are treated as a dead server's, in ms. */
export const SERVER_STATUS_MAX_AGE_MS = 5_000;

/** Options of {@linkcode ServerStatusPublisher}. */
export interface ServerStatusPublisherOptions {
  /** The gateway whose plugins are shown. */
  gateway: Gateway;
  /** The data directory's store. */
  store: Store;
  /** The server's transport (`stdio`, `http`). */
  transport: string;
  /** How often to publish, in ms. @default 1000 */
  intervalMs?: number;
  /** Log sink for failures. @default none */
  log?: (message: string) => void;
}

/** Publishes a server's plugin states until stopped. */
export class ServerStatusPublisher {
  readonly serverId: string = newId("srv");
  #gateway: Gateway;
  #store: Store;
  #transport: string;
  #intervalMs: number;
  #log: (message: string) => void;
  #startedAt = new Date().toISOString();
  #url: string | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #publishing: Promise<void> | undefined;
  #stopped = false;

  /** @param options Gateway, store, transport and interval. */
  constructor(options: ServerStatusPublisherOptions) {
    const { gateway, store, transport, intervalMs = 1000, log = () => {} } = options;
    if (!(intervalMs > 0) || intervalMs * 2 >= SERVER_STATUS_MAX_AGE_MS) {
      throw new RangeError(
        `Invalid intervalMs: ${intervalMs} must be positive and under ${
          SERVER_STATUS_MAX_AGE_MS / 2
        }`,
      );
    }
    this.#gateway = gateway;
    this.#store = store;
    this.#transport = transport;
    this.#intervalMs = intervalMs;
    this.#log = log;
  }

  /**
   * Publishes the HTTP server's URL from now on (and at once), so that CLI
   * commands on the same data directory or database call it.
   */
  announceUrl(url: string): Promise<void> {
    this.#url = url;
    return this.#publishing ?? this.#publish();
  }

  /** Publishes now, then every interval. */
  async start(): Promise<void> {
    await this.#publish();
    this.#schedule();
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#publishing = this.#publish().finally(() => {
        this.#publishing = undefined;
        this.#schedule();
      });
    }, this.#intervalMs);
  }

  async #publish(): Promise<void> {
    try {
      await this.#store.upstreams.putServerStatus({
        server_id: this.serverId,
        pid: Deno.pid,
        transport: this.#transport,
        ...(this.#url ? { url: this.#url, hostname: Deno.hostname() } : {}),
        started_at: this.#startedAt,
        updated_at: new Date().toISOString(),
        plugins: this.#gateway.listPlugins() as unknown as Record<string, unknown>[],
      }, SERVER_STATUS_MAX_AGE_MS * 2);
    } catch (error) {
      this.#log(`publishing plugin states failed: ${(error as Error).message}`);
    }
  }

  /** Stops publishing and withdraws the published state. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#publishing;
    try {
      await this.#store.upstreams.deleteServerStatus(this.serverId);
    } catch (error) {
      this.#log(`withdrawing plugin states failed: ${(error as Error).message}`);
    }
  }
}
