/**
 * Reads a JSON request body once, before validation: 415 for another media
 * type, 400 `INVALID_JSON` for bad JSON, `{}` for an empty body.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { GatewayError } from "../errors/mod.ts";

/** Whether a `Content-Type` is JSON (`application/json` or `application/*+json`). */
export function isJsonContentType(contentType: string): boolean {
  const essence = contentType.split(";")[0].trim().toLowerCase();
  return /^application\/(?:[\w.-]+\+)?json$/.test(essence);
}

/** Options of {@linkcode jsonBody}. */
export interface JsonBodyOptions {
  /** Require a JSON object (else 400 `INVALID_JSON`). @default false */
  object?: boolean;
}

/**
 * Checks that the body is JSON and caches its text for `c.req.json()` (and
 * so for the route's zod validator). An empty body counts as `{}`.
 *
 * @example
 * ```ts
 * app.post("/tools/:name", jsonBody(), async (c) => c.json(await c.req.json()));
 * ```
 */
export function jsonBody(options: JsonBodyOptions = {}): MiddlewareHandler {
  const { object = false } = options;
  return async function jsonBody(c, next) {
    const contentType = c.req.header("content-type");
    if (contentType !== undefined && !isJsonContentType(contentType)) {
      throw unsupported(contentType);
    }
    // Not `c.req.raw.body === null`: creating the body's stream makes the
    // read below go through it instead of taking the body in one piece.
    const text = await c.req.text();
    if (text.trim() === "") {
      const headers = new Headers(c.req.raw.headers);
      headers.set("content-type", "application/json");
      c.req.raw = new Request(c.req.raw, { headers, body: "{}" });
      c.req.bodyCache = {};
      return await next();
    }
    if (contentType === undefined) throw unsupported(undefined);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new GatewayError("INVALID_JSON", `Invalid JSON body: ${(error as Error).message}`);
    }
    if (object && (value === null || typeof value !== "object" || Array.isArray(value))) {
      const kind = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
      throw new GatewayError(
        "INVALID_JSON",
        `Invalid JSON body: expected a JSON object, got ${kind}`,
      );
    }
    // `c.req.json()` (the route's validator) reuses this instead of parsing again.
    c.req.bodyCache.json = Promise.resolve(value);
    await next();
  };
}

function unsupported(contentType: string | undefined): GatewayError {
  return new GatewayError(
    "UNSUPPORTED_MEDIA_TYPE",
    `Unsupported media type ${
      contentType === undefined ? "(none)" : JSON.stringify(contentType)
    }: send Content-Type: application/json`,
  );
}
