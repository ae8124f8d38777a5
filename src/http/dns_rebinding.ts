/**
 * DNS-rebinding protection for a loopback bind: only loopback `Host` names,
 * and only loopback or configured `Origin`s.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { GatewayError } from "../errors/mod.ts";

/** Options of {@linkcode dnsRebindingProtection}. */
export interface DnsRebindingProtectionOptions {
  /** Host names allowed besides localhost, 127.0.0.1 and [::1] (e.g. the bind address). @default [] */
  allowedHosts?: readonly string[];
  /** Origins allowed besides loopback ones (`server.cors_origins`). @default [] */
  allowedOrigins?: readonly string[];
  /**
   * Requests whose `Host` is not checked (incoming webhook paths reached
   * through a tunnel); their `Origin` still is. @default none
   */
  skipHost?: (path: string) => boolean;
}

const LOOPBACK_BINDS = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/** Whether a bind address (`server.host`) is loopback, so the API stays on this machine. */
export function isLoopback(host: string): boolean {
  return LOOPBACK_BINDS.has(host.toLowerCase()) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

const LOOPBACK_HOST = /^(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?$/i;
const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** Whether a `Host` header value names loopback: localhost, 127.0.0.1 or [::1], any port. */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK_HOST.test(host);
}

/** Whether an `Origin` is `http(s)://` localhost, 127.0.0.1 or [::1], any port. */
export function isLoopbackOrigin(origin: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  return (url.protocol === "http:" || url.protocol === "https:") && url.origin === origin &&
    LOOPBACK_NAMES.has(url.hostname);
}

/**
 * Rejects requests whose `Host` is not loopback, or whose `Origin` (when
 * present) is neither loopback nor allowed, with 403 `FORBIDDEN`.
 *
 * @example
 * ```ts
 * app.use(dnsRebindingProtection({ allowedOrigins: ["https://app.example"] }));
 * ```
 */
export function dnsRebindingProtection(
  options: DnsRebindingProtectionOptions = {},
): MiddlewareHandler {
  const { skipHost } = options;
  const allowedOrigins = new Set(options.allowedOrigins ?? []);
  const allowedHosts = new Set((options.allowedHosts ?? []).map((h) => h.toLowerCase()));
  const hostAllowed = (host: string) =>
    isLoopbackHost(host) || allowedHosts.has(host.toLowerCase().replace(/:\d{1,5}$/, ""));
  return async function dnsRebindingProtection(c, next) {
    if (!skipHost?.(c.req.path)) {
      const host = c.req.header("host") ?? new URL(c.req.url).host;
      if (!hostAllowed(host)) {
        throw new GatewayError(
          "FORBIDDEN",
          `Forbidden: Host ${
            JSON.stringify(host)
          } is not allowed: the server is bound to loopback (use localhost, 127.0.0.1 or [::1])`,
        );
      }
    }
    const origin = c.req.header("origin");
    if (origin !== undefined && !allowedOrigins.has(origin) && !isLoopbackOrigin(origin)) {
      throw new GatewayError(
        "FORBIDDEN",
        `Forbidden: Origin ${JSON.stringify(origin)} is not allowed: add it to server.cors_origins`,
      );
    }
    await next();
  };
}
