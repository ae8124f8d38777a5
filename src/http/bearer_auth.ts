/**
 * Bearer-token authentication (`TOOLGATE_API_TOKEN`), compared in constant time.
 *
 * @module
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { GatewayError } from "../errors/mod.ts";

/** Options of {@linkcode bearerAuth}. */
export interface BearerAuthOptions {
  /** The expected token. */
  token: string;
  /** Paths that need no token (`/health`, incoming webhooks). @default none */
  skip?: (path: string) => boolean;
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

/**
 * Whether two secrets are equal, in time independent of where they differ
 * and of their lengths (both are hashed first).
 */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * Requires `Authorization: Bearer <token>`; otherwise 401 `UNAUTHORIZED`.
 *
 * @throws {RangeError} when the token is empty.
 * @example
 * ```ts
 * app.use(bearerAuth({ token, skip: (path) => path === "/health" }));
 * ```
 */
export function bearerAuth(options: BearerAuthOptions): MiddlewareHandler {
  const { token, skip } = options;
  if (!token) throw new RangeError("Invalid bearer token: it is empty");
  const expected = digest(token);
  return async function bearerAuth(c, next) {
    if (skip?.(c.req.path)) return await next();
    const header = c.req.header("authorization");
    const match = header === undefined ? null : /^Bearer +([^\s]+) *$/i.exec(header);
    if (!match) {
      throw new GatewayError(
        "UNAUTHORIZED",
        "Unauthorized: send Authorization: Bearer <TOOLGATE_API_TOKEN>",
      );
    }
    if (!timingSafeEqual(digest(match[1]), expected)) {
      throw new GatewayError("UNAUTHORIZED", "Unauthorized: the bearer token is wrong");
    }
    await next();
  };
}
