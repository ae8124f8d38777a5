/**
 * Starts the HTTP transport on a host and port.
 *
 * @module
 */
import type { Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Gateway } from "../gateway/mod.ts";
import { createApp } from "./app.ts";

/** Options of {@linkcode serveHttp}. */
export interface ServeHttpOptions {
  gateway: Gateway;
  config: Config;
  /** Called with the bound address once listening. */
  onListen?: (address: { hostname: string; port: number; url: string }) => void;
}

/** A running HTTP server. */
export interface HttpServer {
  /** Base URL, e.g. `http://127.0.0.1:7821`. */
  url: string;
  /** Stops accepting, drains in-flight requests, resolves when closed. */
  shutdown(): Promise<void>;
  /** Resolves when the server closed. */
  finished: Promise<void>;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/** Whether a bind host is a loopback address. */
export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith("127.");
}

/**
 * Serves the app.
 *
 * @throws {GatewayError} `CONFIG_INVALID` when binding beyond loopback without a token.
 */
export function serveHttp(options: ServeHttpOptions): HttpServer {
  const { gateway, config } = options;
  const { host, port } = config.server;
  if (!isLoopback(host) && !config.apiToken) {
    throw new GatewayError(
      "CONFIG_INVALID",
      `Refusing to bind ${host}: set TOOLGATE_API_TOKEN to expose the API beyond loopback`,
    );
  }
  const app = createApp({ gateway, config });
  let url = "";
  const server = Deno.serve({
    hostname: host,
    port,
    onListen: (addr) => {
      const shown = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
      url = `http://${shown}:${addr.port}`;
      options.onListen?.({ hostname: addr.hostname, port: addr.port, url });
    },
  }, app.fetch);
  return {
    get url() {
      return url;
    },
    shutdown: () => server.shutdown(),
    finished: server.finished,
  };
}
