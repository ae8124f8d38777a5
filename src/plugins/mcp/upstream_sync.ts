/**
 * Keeps a running server's upstream plugins in step with the registrations
 * made by `toolgate plugins add|remove|enable|disable`: polls the
 * registrations version and adds, removes or restarts upstream plugins live.
 *
 * @module
 */
import { type Log, type LogLike, toLog } from "../../log/mod.ts";
import type { Config } from "../../config/mod.ts";
import type { Gateway, PluginDefinition } from "../../gateway/mod.ts";
import type { Store } from "../../store/mod.ts";
import { specFingerprint, type UpstreamSpec, upstreamSpecs } from "./upstream_spec.ts";

/** Options of {@linkcode UpstreamSync}. */
export interface UpstreamSyncOptions {
  /** The gateway hosting the upstream plugins. */
  gateway: Gateway;
  /** The data directory's store. */
  store: Store;
  /** The resolved configuration (its `plugins.upstreams` come first). */
  config: Config;
  /** Names of the built-in plugins. */
  reserved: Iterable<string>;
  /** The upstreams hosted at start. */
  hosted: UpstreamSpec[];
  /** Makes the plugin of an upstream. */
  plugin: (spec: UpstreamSpec) => PluginDefinition;
  /** Polling interval, in ms. @default config.plugins.upstream_settings.poll_ms */
  pollMs?: number;
  /** Log sink. @default none */
  log?: LogLike;
}

/** Adds, removes and restarts upstream plugins as their registrations change. */
export class UpstreamSync {
  #gateway: Gateway;
  #store: Store;
  #config: Config;
  #reserved: string[];
  #plugin: (spec: UpstreamSpec) => PluginDefinition;
  #pollMs: number;
  #log: Log;
  #hosted = new Map<string, string>();
  #version: bigint | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #unsubscribe: () => void = () => {};
  #running: Promise<void> | undefined;
  #stopped = false;

  /** @param options Gateway, store, configuration and the upstreams hosted at start. */
  constructor(options: UpstreamSyncOptions) {
    const { gateway, store, config, reserved, hosted, plugin, log = () => {} } = options;
    const pollMs = options.pollMs ?? config.plugins.upstream_settings.poll_ms;
    if (!(pollMs > 0)) throw new RangeError(`Invalid pollMs: ${pollMs} is not positive`);
    this.#gateway = gateway;
    this.#store = store;
    this.#config = config;
    this.#reserved = [...reserved];
    this.#plugin = plugin;
    this.#pollMs = pollMs;
    this.#log = toLog(log);
    for (const spec of hosted) this.#hosted.set(spec.name, specFingerprint(spec));
  }

  /**
   * Starts polling.
   *
   * @param version The registrations version the hosted upstreams were read at.
   */
  start(version: bigint): void {
    this.#version = version;
    // Where the store pushes changes (PostgreSQL), look at once instead of at the next poll.
    this.#unsubscribe = this.#store.changes.subscribe((name) => {
      if (name !== "registrations" || this.#stopped || this.#running) return;
      clearTimeout(this.#timer);
      this.#schedule(0);
    });
    this.#schedule();
  }

  #schedule(delayMs: number = this.#pollMs): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.#tick().finally(() => {
        this.#running = undefined;
        this.#schedule();
      });
    }, delayMs);
  }

  async #tick(): Promise<void> {
    try {
      const version = await this.#store.registrationsVersion();
      if (version === this.#version) return;
      await this.sync();
      this.#version = version;
    } catch (error) {
      this.#log.warn(`upstream plugins: sync failed: ${(error as Error).message}`);
    }
  }

  /** Reads the registrations now and applies every change. */
  async sync(): Promise<void> {
    const specs = upstreamSpecs({
      config: this.#config,
      records: await this.#store.upstreams.list(),
      reserved: this.#reserved,
    });
    const wanted = new Map(specs.map((spec) => [spec.name, spec]));
    for (const [name, fingerprint] of [...this.#hosted]) {
      if (this.#stopped) return;
      const spec = wanted.get(name);
      if (spec && specFingerprint(spec) === fingerprint) continue;
      this.#hosted.delete(name);
      await this.#gateway.removePlugin(name);
      this.#log.info(`upstream plugin ${name} ${spec ? "changed: restarting it" : "removed"}`, {
        plugin: name,
      });
    }
    for (const spec of specs) {
      if (this.#stopped) return;
      if (this.#hosted.has(spec.name)) continue;
      this.#hosted.set(spec.name, specFingerprint(spec));
      try {
        const status = await this.#gateway.addPlugin(this.#plugin(spec));
        this.#log.info(`upstream plugin ${spec.name} added: ${status.state}`, {
          plugin: spec.name,
          state: status.state,
        });
      } catch (error) {
        this.#hosted.delete(spec.name);
        this.#log.warn(`upstream plugin ${spec.name}: cannot add it: ${(error as Error).message}`, {
          plugin: spec.name,
        });
      }
    }
  }

  /** Stops polling and waits for a sync in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}
