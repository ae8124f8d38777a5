/**
 * Starts the HTTP transport on a host and port, and shuts it down
 * gracefully: `/health` turns 503, MCP and event streams end, in-flight
 * requests drain, MCP sessions close.
 *
 * @module
 */
import { getLog, lineSink } from "../log/mod.ts";
import type { Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Gateway } from "../gateway/mod.ts";
import { mcpHttpOptions, McpHttpSessions } from "../mcp/mod.ts";
import { type AppOptions, createApp } from "./app.ts";
import { isLoopback } from "./dns_rebinding.ts";
import { ServerLifecycle } from "./lifecycle.ts";

/** Options of {@linkcode serveHttp}. */
export interface ServeHttpOptions {
  /** The gateway whose tools are served. */
  gateway: Gateway;
  /** The resolved configuration; binds `server.host`:`server.port` (0 picks a free port). */
  config: Config;
  /** Called with the bound address once listening. */
  onListen?: (address: { hostname: string; port: number; url: string }) => void;
  /** More routes (`/audit`, `/events`, incoming webhooks); see {@linkcode AppOptions.routes}. */
  routes?: AppOptions["routes"];
  /** Paths without bearer token or Host check; see {@linkcode AppOptions.isPublicPath}. */
  isPublicPath?: AppOptions["isPublicPath"];
  /** Log sink. @default the `http` logger (stderr) */
  log?: (message: string) => void;
  /** Longest wait for in-flight requests on shutdown, in ms. @default 10000 */
  drainTimeoutMs?: number;
  /** Disabled outgoing webhooks, shown by `/health`; see {@linkcode AppOptions.disabledWebhooks}. */
  disabledWebhooks?: AppOptions["disabledWebhooks"];
  /** Why the instance is degraded, shown by `/health`; see {@linkcode AppOptions.healthReasons}. */
  healthReasons?: AppOptions["healthReasons"];
  /** What `/health/ready` checks; see {@linkcode AppOptions.readiness}. */
  readiness?: AppOptions["readiness"];
  /** API keys; see {@linkcode AppOptions.keys}. */
  keys?: AppOptions["keys"];
  /** Whether any API key exists; see {@linkcode AppOptions.keysExist}. */
  keysExist?: AppOptions["keysExist"];
  /** The OAuth validator; see {@linkcode AppOptions.oauth}. */
  oauth?: AppOptions["oauth"];
}

/** A running HTTP server. */
export interface HttpServer {
  /** Base URL, e.g. `http://127.0.0.1:7821`. */
  readonly url: string;
  /** Serving state (draining once shutdown began). */
  readonly lifecycle: ServerLifecycle;
  /** The MCP sessions behind `/mcp`. */
  readonly mcp: McpHttpSessions;
  /**
   * Stops accepting, ends long-lived streams, drains in-flight requests (at
   * most `drainTimeoutMs`), closes MCP sessions. Idempotent.
   */
  shutdown(): Promise<void>;
  /** Resolves when the server stopped (after {@linkcode HttpServer.shutdown}). */
  readonly finished: Promise<void>;
}

export { isLoopback };

/**
 * Serves the app.
 *
 * @throws {GatewayError} `CONFIG_INVALID` when binding beyond loopback without a token.
 * @example
 * ```ts
 * const server = serveHttp({ gateway, config, onListen: ({ url }) => console.log(url) });
 * Deno.addSignalListener("SIGTERM", () => void server.shutdown());
 * await server.finished;
 * ```
 */
export function serveHttp(options: ServeHttpOptions): HttpServer {
  const {
    gateway,
    config,
    routes,
    isPublicPath,
    log = lineSink(getLog("http")),
    drainTimeoutMs = 10_000,
  } = options;
  const { host, port } = config.server;
  if (!isLoopback(host) && !config.apiToken) {
    throw new GatewayError(
      "CONFIG_INVALID",
      `Refusing to bind ${host}: set TOOLGATE_API_TOKEN to expose the API beyond loopback`,
    );
  }
  const lifecycle = new ServerLifecycle();
  const mcp = new McpHttpSessions(gateway, mcpHttpOptions(config.server));
  const app = createApp({
    gateway,
    config,
    lifecycle,
    mcp,
    routes,
    isPublicPath,
    log,
    disabledWebhooks: options.disabledWebhooks,
    healthReasons: options.healthReasons,
    readiness: options.readiness,
    keys: options.keys,
    keysExist: options.keysExist,
    oauth: options.oauth,
  });
  let url = "";
  const server = listenOrExplain(host, port, () =>
    Deno.serve({
      hostname: host,
      port,
      onListen: (addr) => {
        const shown = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
        url = `http://${shown}:${addr.port}`;
        options.onListen?.({ hostname: addr.hostname, port: addr.port, url });
      },
      onError: (error) => {
        log(`request failed: ${(error as Error)?.stack ?? String(error)}`);
        return new Response(
          JSON.stringify({ error: { code: "INTERNAL", message: "Internal error" } }),
          { status: 500, headers: { "content-type": "application/json" } },
        );
      },
    }, app.fetch));

  let stopping: Promise<void> | undefined;
  const shutdown = () => {
    stopping ??= (async () => {
      lifecycle.beginDrain();
      mcp.drain();
      const drained = server.shutdown();
      if (!await settlesWithin(drained, drainTimeoutMs)) {
        log(`shutdown: requests still in flight after ${drainTimeoutMs} ms; closing MCP sessions`);
      }
      await mcp.closeAll();
      await settlesWithin(drained, 1000);
    })();
    return stopping;
  };
  const finished = Promise.race([
    server.finished,
    new Promise<void>((resolve) => lifecycle.signal.addEventListener("abort", () => resolve())),
  ]).then(() => shutdown());
  return {
    get url() {
      return url;
    },
    lifecycle,
    mcp,
    shutdown,
    finished,
  };
}

/**
 * Runs `serve`, turning the errors of a bind that fails into a message that
 * says what to change.
 *
 * @throws {GatewayError} `LISTEN_FAILED` when the address is in use, not on
 * this machine, or needs privileges.
 */
function listenOrExplain<T>(host: string, port: number, serve: () => T): T {
  try {
    return serve();
  } catch (error) {
    const address = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    const pick = "pick another with --port <n>, --port 0 or TOOLGATE_PORT";
    let why: string | undefined;
    if (error instanceof Deno.errors.AddrInUse) why = `the address is in use; ${pick}`;
    else if (error instanceof Deno.errors.AddrNotAvailable) {
      why = "the address is not on this machine; pick another with --host or TOOLGATE_HOST";
    } else if (error instanceof Deno.errors.PermissionDenied) {
      why = `permission denied (ports below 1024 need privileges); ${pick}`;
    }
    if (!why) throw error;
    throw new GatewayError("LISTEN_FAILED", `Cannot listen on ${address}: ${why}`, {
      cause: error,
    });
  }
}

/** Whether `promise` settles within `ms` (the timer never outlives the wait). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
