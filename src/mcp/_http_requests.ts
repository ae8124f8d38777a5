/**
 * What MCP over HTTP reads of a request before the transport does: its
 * parsed JSON body, the era and shape of that body, and the caller handed to
 * the SDK.
 *
 * @module
 */
import type { AuthInfo } from "@modelcontextprotocol/server";
import type { Caller } from "../gateway/mod.ts";
import { CALLER_AUTH_KEY } from "./server.ts";

/** Whether a POST body is one request, other than `initialize`, with a 2026-07-28 `_meta` envelope. */
export function carriesEnvelope(body: unknown): boolean {
  const request = body as
    | { method?: unknown; params?: { _meta?: Record<string, unknown> } }
    | undefined;
  return typeof request === "object" && request !== null && !Array.isArray(request) &&
    request.method !== "initialize" &&
    typeof request.params?._meta?.["io.modelcontextprotocol/protocolVersion"] === "string";
}

/** The resources a 2026 `subscriptions/listen` request asks to hear about. */
export function listenedResources(body: unknown): string[] {
  const request = body as
    | { method?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } }
    | undefined;
  if (request?.method !== "subscriptions/listen") return [];
  const uris = request.params?.notifications?.resourceSubscriptions;
  return Array.isArray(uris) ? uris.filter((uri): uri is string => typeof uri === "string") : [];
}

/** Whether a POST body is one JSON-RPC request (not a batch, not a notification or response). */
export function isSingleRequest(body: unknown): boolean {
  return typeof body === "object" && body !== null && !Array.isArray(body) && "method" in body &&
    "id" in body;
}

/**
 * The request and its parsed JSON body for the transport. A POST's body is
 * read here in one piece: the SDK transport would read it chunk by chunk
 * through a stream reader, which cost more per call than the rest of its
 * request handling. A body that is not JSON, or is over `maxBytes` (the HTTP
 * app's body limit normally refused it before), is handed back to the
 * transport in a new request, so that it answers with its own error as
 * before; other methods go through untouched.
 */
export async function withParsedBody(
  request: Request,
  maxBytes: number,
): Promise<ParsedRequest | Response> {
  // `request.body` is not touched: creating its stream would make text() read through it.
  if (request.method !== "POST") return [request];
  const bytes = new Uint8Array(await request.arrayBuffer());
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    // Never decoded with U+FFFD in place of the bad bytes and passed on.
    return Response.json({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: "Parse error: the body is not UTF-8 (INVALID_JSON)" },
    }, { status: 400 });
  }
  const overLimit = text.length > maxBytes ||
    (text.length * 3 > maxBytes && encoder.encode(text).length > maxBytes);
  if (!overLimit) {
    try {
      return [request, { parsedBody: JSON.parse(text) }];
    } catch {
      // Not JSON: the transport answers it.
    }
  }
  return [new Request(request, { body: text })];
}

const encoder = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A request and, for a JSON POST, its parsed body; the caller rides along as `authInfo`. */
export type ParsedRequest = [Request, { parsedBody?: unknown; authInfo?: AuthInfo }?];

/**
 * Hands the caller to the SDK as the request's `authInfo` (its `extra`
 * carries the {@linkcode Caller}); handlers read it back with
 * `callerOf` in `server.ts`. The token is never passed on.
 */
export function withCaller(parsed: ParsedRequest, caller: Caller | undefined): ParsedRequest {
  if (!caller) return parsed;
  const authInfo: AuthInfo = {
    token: "",
    clientId: caller.id ?? caller.kind,
    scopes: [],
    extra: { [CALLER_AUTH_KEY]: caller },
  };
  return [parsed[0], { ...parsed[1], authInfo }];
}

/** Who a session belongs to, as a string. */
export function callerKey(caller: Caller | undefined): string {
  if (!caller || caller.kind === "local" || caller.kind === "admin") return "admin";
  return `${caller.kind}:${caller.id ?? caller.name ?? ""}`;
}
