/**
 * Request body size limit: 413 `PAYLOAD_TOO_LARGE` from `Content-Length`
 * without reading, or as soon as a streamed body passes the limit.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { bodyLimit as honoBodyLimit } from "hono/body-limit";
import { GatewayError } from "../errors/mod.ts";

/** Options of {@linkcode bodyLimit}. */
export interface BodyLimitOptions {
  /** Largest body in bytes, per request path; `undefined` leaves the path unlimited here. */
  maxBytes: (path: string) => number | undefined;
}

/**
 * Limits request bodies (a wrapper around `hono/body-limit` that throws a
 * {@linkcode GatewayError}).
 *
 * @example
 * ```ts
 * app.use(bodyLimit({ maxBytes: () => 1024 * 1024 }));
 * ```
 */
export function bodyLimit(options: BodyLimitOptions): MiddlewareHandler {
  const limits = new Map<number, MiddlewareHandler>();
  const limiter = (maxSize: number) => {
    let handler = limits.get(maxSize);
    if (!handler) {
      handler = honoBodyLimit({
        maxSize,
        onError: () => {
          throw tooLarge(maxSize);
        },
      });
      limits.set(maxSize, handler);
    }
    return handler;
  };
  return async function bodyLimit(c, next) {
    // Decided from the headers when they can: reading `request.body` would
    // create the body's stream, and the handler then reads the body through
    // it instead of in one piece.
    const { headers } = c.req.raw;
    const length = headers.get("content-length");
    if (length !== null && !headers.has("transfer-encoding")) {
      const maxBytes = options.maxBytes(c.req.path);
      if (maxBytes !== undefined && Number(length) > maxBytes) throw tooLarge(maxBytes);
      return await next();
    }
    const maxBytes = c.req.raw.body === null ? undefined : options.maxBytes(c.req.path);
    if (maxBytes === undefined) return await next();
    return await limiter(maxBytes)(c, next);
  };
}

function tooLarge(maxBytes: number): GatewayError {
  return new GatewayError(
    "PAYLOAD_TOO_LARGE",
    `Payload too large: the request body is over ${maxBytes} bytes`,
    { details: { limit_bytes: maxBytes } },
  );
}
