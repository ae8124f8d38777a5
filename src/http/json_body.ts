/**
 * Reads a JSON request body once, before validation: 415 for another media
 * type, 400 `INVALID_JSON` for bad JSON or bytes that are not UTF-8, `{}`
 * for an empty body.
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

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The body's text, decoded strictly: bytes that are not UTF-8 are
 * `INVALID_JSON`, never replaced by U+FFFD and stored.
 */
export function decodeJsonText(bytes: ArrayBuffer | Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    throw new GatewayError(
      "INVALID_JSON",
      `Invalid JSON body: it is not UTF-8 (first bad byte at offset ${firstBadByte(view)}); ` +
        "send the JSON encoded as UTF-8",
    );
  }
}

/** Offset of the first byte that does not decode as UTF-8 (the start of its character). */
function firstBadByte(bytes: Uint8Array): number {
  // The longest prefix that decodes, a character cut at its end allowed...
  let low = 0;
  let high = bytes.length;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, mid), { stream: true });
      low = mid;
    } catch {
      high = mid - 1;
    }
  }
  // ...then back to the start of that cut character, if it ends in one.
  let start = low;
  while (start > 0 && (bytes[start - 1] & 0xc0) === 0x80) start--;
  if (start > 0 && bytes[start - 1] >= 0xc0) start--;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, low));
    return low;
  } catch {
    return start;
  }
}

/**
 * Checks that a JSON body (by its `Content-Type`) is UTF-8 before a route's
 * validator reads it (the bytes read stay cached for `c.req.json()`).
 */
export function utf8JsonBody(skip: (path: string) => boolean): MiddlewareHandler {
  return async function utf8JsonBody(c, next) {
    const contentType = c.req.header("content-type");
    if (
      c.req.method === "GET" || c.req.method === "HEAD" || contentType === undefined ||
      !isJsonContentType(contentType) || skip(c.req.path)
    ) {
      return await next();
    }
    // Checked only: the bytes stay cached (`arrayBuffer`) for the validator's `c.req.json()`.
    decodeJsonText(await c.req.arrayBuffer());
    await next();
  };
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
    const text = decodeJsonText(await c.req.arrayBuffer());
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
