/**
 * The resources the gateway watches on one upstream: subscribed on the live
 * connection (2025 `resources/subscribe`, a 2026-07-28 `subscriptions/listen`
 * stream) and again on every new one.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { errorText, truncate } from "./_error_text.ts";
import type { Link } from "./_link.ts";
import { isModern, type Live } from "./_live.ts";
import type { UpstreamSettings } from "./upstream_spec.ts";

/** The resources watched on one upstream. */
export class Subscriptions {
  #plugin: string;
  #settings: UpstreamSettings;
  #link: Link;
  #log: (message: string) => void;
  /** The resources the gateway watches here: subscribed again on every new connection. */
  #uris = new Set<string>();
  /** 2026-07-28: the `subscriptions/listen` stream that carries their updates. */
  #listen: { live: Live; close: () => Promise<void> } | undefined;

  /**
   * @param plugin The plugin's name (for errors).
   * @param settings The request timeout (`connectTimeoutMs`).
   * @param link The connection they are subscribed over.
   * @param log Log sink.
   */
  constructor(
    plugin: string,
    settings: UpstreamSettings,
    link: Link,
    log: (message: string) => void,
  ) {
    this.#plugin = plugin;
    this.#settings = settings;
    this.#link = link;
    this.#log = log;
  }

  /** How many resources are watched. */
  get size(): number {
    return this.#uris.size;
  }

  /** Whether `uri` is watched. */
  has(uri: string): boolean {
    return this.#uris.has(uri);
  }

  /**
   * Watches a resource: the upstream's `notifications/resources/updated` for
   * it go to `onResourceUpdated`, now and after every reconnection.
   *
   * @throws {GatewayError} `PLUGIN_REQUEST_FAILED` when the upstream is down
   * or refuses the subscription.
   */
  async subscribe(uri: string): Promise<void> {
    const live = this.#link.live;
    if (!live || this.#link.state !== "connected") throw this.#link.unavailable(uri);
    const added = !this.#uris.has(uri);
    this.#uris.add(uri);
    try {
      if (isModern(live)) await this.#relisten(live);
      else {await live.client.subscribeResource({ uri }, {
          timeout: this.#settings.connectTimeoutMs,
        });}
    } catch (error) {
      if (added) this.#uris.delete(uri);
      throw new GatewayError(
        "PLUGIN_REQUEST_FAILED",
        `Upstream ${this.#plugin} refused a subscription to ${uri}: ${truncate(errorText(error))}`,
        { details: { plugin: this.#plugin, uri } },
      );
    }
  }

  /** Stops watching a resource. */
  async unsubscribe(uri: string): Promise<void> {
    if (!this.#uris.delete(uri)) return;
    const live = this.#link.live;
    if (!live || this.#link.state !== "connected") return;
    if (isModern(live)) await this.#relisten(live);
    else {await live.client.unsubscribeResource({ uri }, {
        timeout: this.#settings.connectTimeoutMs,
      });}
  }

  /**
   * 2026-07-28: replaces the `subscriptions/listen` stream of the resource
   * updates by one for the resources watched now (a stream's filter is fixed).
   */
  async #relisten(live: Live): Promise<void> {
    const previous = this.#listen;
    this.#listen = undefined;
    if (previous) await previous.close().catch(() => {});
    if (!this.#uris.size || this.#link.live !== live) return;
    const subscription = await live.client.listen(
      { resourceSubscriptions: [...this.#uris] },
      { timeout: this.#settings.connectTimeoutMs },
    );
    this.#listen = { live, close: () => subscription.close() };
  }

  /** Subscribes again, on a new connection, to every resource watched. */
  async resubscribe(live: Live): Promise<void> {
    if (!this.#uris.size) return;
    try {
      if (isModern(live)) {
        await this.#relisten(live);
        return;
      }
      for (const uri of this.#uris) {
        await live.client.subscribeResource({ uri }, { timeout: this.#settings.connectTimeoutMs });
      }
    } catch (error) {
      this.#log(`subscribing again to its resources failed: ${errorText(error)}`);
    }
  }
}
