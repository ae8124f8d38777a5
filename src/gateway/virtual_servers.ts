/**
 * Virtual servers: named subsets of the tools (`servers` in config,
 * `toolgate servers create` in the store), each served at `/mcp/<name>` and by
 * `mcp start --server <name>`. A caller bound to one (its `server`) lists and
 * calls only the tools its patterns match; the prompts and resources of an
 * upstream plugin belong to its tools' prefix `<plugin>__`.
 *
 * @module
 */
import type { Store, VirtualServerRecord } from "../store/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { matchesToolPatterns } from "./caller.ts";

/** One virtual server, as the gateway serves it. */
export interface VirtualServer {
  /** Its name (`team-a`), the path segment of `/mcp/<name>`. */
  name: string;
  /** Glob patterns of its tools. */
  tools: readonly string[];
  /** What it is for. */
  description?: string;
  /** Where it is defined: `config` wins over `store` for a name in both. */
  source: "config" | "store";
}

/** A definition of `servers` in the configuration file. */
export interface VirtualServerConfig {
  tools: readonly string[];
  description?: string;
}

/**
 * Whether tool patterns cover the whole prefix `<plugin>__` (`github__*`,
 * `git*`, `*`): the plugin's prompts and resources are then shown.
 */
export function coversPlugin(patterns: readonly string[], plugin: string): boolean {
  // A pattern that matches the literal name `<plugin>__*` matches every name with the prefix.
  return matchesToolPatterns(`${plugin}__*`, patterns);
}

/**
 * The `TOOL_NOT_FOUND` of a call outside a virtual server: on that server
 * the tool does not exist.
 */
export function notOnServer(server: string, tool: string): GatewayError {
  return new GatewayError(
    "TOOL_NOT_FOUND",
    `Unknown tool ${JSON.stringify(tool)} on virtual server ${server}`,
    { details: { tool, server } },
  );
}

/** The virtual servers one process knows: those of its config, and those in the store. */
export class VirtualServers {
  #configured: Map<string, VirtualServer>;
  #stored = new Map<string, VirtualServer>();
  #listeners = new Set<(names: readonly string[]) => void>();

  /** @param configured The `servers` of the configuration. */
  constructor(configured: Record<string, VirtualServerConfig> = {}) {
    this.#configured = new Map(
      Object.entries(configured).map(([name, definition]) => [name, {
        name,
        tools: [...definition.tools],
        ...(definition.description === undefined ? {} : { description: definition.description }),
        source: "config" as const,
      }]),
    );
  }

  /** The virtual server of that name (config first), or `undefined`. */
  get(name: string): VirtualServer | undefined {
    return this.#configured.get(name) ?? this.#stored.get(name);
  }

  /** Every virtual server, by name (a stored one of a configured name is not listed). */
  list(): VirtualServer[] {
    const all = new Map(this.#stored);
    for (const [name, server] of this.#configured) all.set(name, server);
    return [...all.values()].sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  }

  /** Whether `tool` is on the virtual server `name` (an unknown server has no tool). */
  has(name: string, tool: string): boolean {
    const server = this.get(name);
    return server !== undefined && matchesToolPatterns(tool, server.tools);
  }

  /**
   * Replaces the stored definitions (read from the store) and tells the
   * listeners which servers' membership changed.
   */
  setStored(records: readonly VirtualServerRecord[]): void {
    const before = new Map([...this.#stored].map(([name]) => [name, this.#fingerprint(name)]));
    this.#stored = new Map(records.map((record) => [record.name, {
      name: record.name,
      tools: [...record.tools],
      ...(record.description === null ? {} : { description: record.description }),
      source: "store" as const,
    }]));
    const changed = new Set<string>();
    for (const name of new Set([...before.keys(), ...this.#stored.keys()])) {
      if (this.#configured.has(name)) continue; // Config wins: nothing changes.
      if (before.get(name) !== this.#fingerprint(name)) changed.add(name);
    }
    if (!changed.size) return;
    const names = [...changed];
    for (const listener of this.#listeners) listener(names);
  }

  #fingerprint(name: string): string | undefined {
    const server = this.get(name);
    return server && JSON.stringify(server.tools);
  }

  /**
   * Calls `listener` with the names of the servers whose tool patterns
   * changed (defined, edited or removed). @returns Unsubscribes.
   */
  onChanged(listener: (names: readonly string[]) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/** Options of {@linkcode followVirtualServers}. */
export interface FollowVirtualServersOptions {
  /** The registry to keep current. */
  servers: VirtualServers;
  /** The store holding `toolgate servers` definitions. */
  store: Store;
  /** Polling interval of the registrations version, in ms. */
  pollMs: number;
  /** The registrations version the definitions were read at. */
  version: bigint;
  /** Log sink. @default none */
  log?: (message: string) => void;
  /** Called after each move of the registrations version (the definitions read again). @default none */
  onMoved?: () => void;
}

/**
 * Keeps a running server's virtual servers in step with `toolgate servers
 * create|update|remove`: reads them again whenever the registrations version
 * moves (polled; at once where the store pushes changes).
 *
 * @returns Stops following.
 */
export function followVirtualServers(options: FollowVirtualServersOptions): () => Promise<void> {
  const { servers, store, pollMs, log = () => {} } = options;
  if (!(pollMs > 0)) throw new RangeError(`Invalid pollMs: ${pollMs} is not positive`);
  let version = options.version;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  const tick = async () => {
    try {
      const now = await store.registrationsVersion();
      if (now === version) return;
      servers.setStored(await store.servers.list());
      version = now;
      options.onMoved?.();
    } catch (error) {
      log(`virtual servers: refresh failed: ${(error as Error).message}`);
    }
  };
  const schedule = (delayMs = pollMs) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick().finally(() => {
        running = undefined;
        schedule();
      });
    }, delayMs);
  };
  const unsubscribe = store.changes.subscribe((name) => {
    if (name !== "registrations" || stopped || running) return;
    clearTimeout(timer);
    schedule(0);
  });
  schedule();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    unsubscribe();
    await running;
  };
}
