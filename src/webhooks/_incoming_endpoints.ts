/**
 * The registered incoming endpoints by path, reloaded when the
 * registrations change, with their parsed mappings. Private to
 * `src/webhooks`.
 *
 * @module
 */
import type { GatewayError } from "../errors/mod.ts";
import type { IncomingWebhook, Store } from "../store/mod.ts";
import { IncomingMapping } from "./incoming_map.ts";

/** The endpoints a router serves, as last loaded. */
export class IncomingEndpoints {
  #store: Store;
  #log: (message: string) => void;
  #byPath = new Map<string, IncomingWebhook>();
  #version = -1n;
  /** Parsed mappings, by endpoint record (replaced when the registration changes). */
  #mappings = new WeakMap<IncomingWebhook, IncomingMapping>();
  /** Endpoints whose mapping gave a handler invalid arguments (reported once). */
  #badMappings = new Set<string>();

  /**
   * @param store Where the registrations are read.
   * @param log Where a bad mapping is said.
   */
  constructor(store: Store, log: (message: string) => void) {
    this.#store = store;
    this.#log = log;
  }

  /** Reloads the endpoints when the registrations changed. */
  async refresh(): Promise<void> {
    const version = await this.#store.registrationsVersion();
    if (version === this.#version) return;
    const endpoints = await this.#store.webhooks.listIncoming();
    this.#byPath = new Map(endpoints.map((endpoint) => [endpoint.path, endpoint]));
    this.#version = version;
  }

  /** The endpoint registered at `path`, if any. */
  match(path: string): IncomingWebhook | undefined {
    return this.#byPath.get(path);
  }

  /** The registered endpoints. */
  list(): IncomingWebhook[] {
    return [...this.#byPath.values()];
  }

  /** The endpoint's mapping, parsed once per registration. */
  mappingOf(endpoint: IncomingWebhook): IncomingMapping {
    let mapping = this.#mappings.get(endpoint);
    if (!mapping) {
      mapping = new IncomingMapping(endpoint, endpoint.handler);
      this.#mappings.set(endpoint, mapping);
    }
    return mapping;
  }

  /**
   * Says once per endpoint, on stderr, that its mapping gave the handler
   * arguments it refused, with the fields named.
   */
  reportBadMapping(endpointId: string, handler: string, error: GatewayError): void {
    const endpoint = [...this.#byPath.values()].find((e) => e.id === endpointId);
    if (!endpoint?.map || this.#badMappings.has(endpointId)) return;
    this.#badMappings.add(endpointId);
    this.#log(
      `incoming ${endpoint.path}: its --map gives ${handler} arguments it refuses: ` +
        `${error.message}; the payloads fail until the mapping (toolgate webhooks show ` +
        `${endpoint.id}) matches ${handler}'s input`,
    );
  }
}
