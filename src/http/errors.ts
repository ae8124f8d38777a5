/**
 * The REST error path: every failure becomes a {@linkcode GatewayError} and
 * one handler turns it into `{"error": {code, message, details?}}` with the
 * code's HTTP status. Also the OpenAPI description of those bodies.
 *
 * @module
 */
import { getLog, lineSink } from "../log/mod.ts";
import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ERROR_CODES, type ErrorCode, GatewayError, toGatewayError } from "../errors/mod.ts";
import { Buffer } from "node:buffer";
import { receiptOf, toErrorResult } from "../gateway/mod.ts";

/** Header of a call's signed audit receipt (base64 of its JSON; docs/audit.md). */
export const RECEIPT_HEADER = "Toolgate-Receipt";

/** A receipt as the header carries it: base64 of its JSON. */
export function receiptHeader(receipt: Readonly<Record<string, unknown>>): string {
  return Buffer.from(JSON.stringify(receipt), "utf8").toString("base64");
}

const CODES = Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]];

/** The error object inside every REST error body. */
export const ErrorObjectSchema = z.object({
  code: z.enum(CODES).openapi({ description: "Stable error code", example: "TOOL_NOT_FOUND" }),
  message: z.string().openapi({
    description: "What failed, then why after a colon",
    example: 'Unknown tool "nope"',
  }),
  details: z.unknown().optional().openapi({
    description:
      "Structured details: `fields` for invalid input, `retry_after_ms` when a circuit is open",
  }),
}).openapi("ErrorObject");

/** A REST error body: `{"error": {code, message, details?}}`. */
export const ErrorBodySchema = z.object({ error: ErrorObjectSchema }).openapi("Error");

/** A REST error body. */
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/**
 * The error body of a failed tool call: the error, plus the MCP-style result
 * fields (`content`, `isError`) so one client code path reads REST and MCP.
 */
export const ToolErrorBodySchema = ErrorBodySchema.extend({
  content: z.array(z.object({ type: z.literal("text"), text: z.string() })).optional()
    .openapi({
      description: "`<CODE>: <message>` as text (present when the call reached the tool pipeline)",
    }),
  isError: z.literal(true).optional(),
}).openapi("ToolError");

/** Which codes each error status carries, for the OpenAPI document. */
const STATUS_CODES: Record<number, ErrorCode[]> = {};
for (const code of CODES) (STATUS_CODES[ERROR_CODES[code].status] ??= []).push(code);

/** One OpenAPI response object per status. */
type ErrorResponses = Record<number, {
  description: string;
  headers?: Record<string, { description: string; schema: { type: "string" | "integer" } }>;
  content: { "application/json": { schema: typeof ErrorBodySchema | typeof ToolErrorBodySchema } };
}>;

/**
 * OpenAPI `responses` entries for error statuses.
 *
 * @param statuses HTTP statuses the route can answer with an error.
 * @param tool Whether the body is a {@linkcode ToolErrorBodySchema}.
 */
export function errorResponses(statuses: readonly number[], tool = false): ErrorResponses {
  const responses: ErrorResponses = {};
  for (const status of statuses) {
    const codes = STATUS_CODES[status] ?? [];
    responses[status] = {
      description: `Error${codes.length ? `: ${codes.join(", ")}` : ""}`,
      content: { "application/json": { schema: tool ? ToolErrorBodySchema : ErrorBodySchema } },
    };
    if (status === 401) {
      responses[status].headers = {
        "WWW-Authenticate": { description: "`Bearer`", schema: { type: "string" } },
      };
    }
    if (status === 429) {
      responses[status].headers = {
        "Retry-After": {
          description: "Seconds until the caller's or the tool's rate allows a call (RATE_LIMITED)",
          schema: { type: "integer" },
        },
      };
    }
    if (status === 503) {
      responses[status].headers = {
        "Retry-After": {
          description:
            "Seconds until the tool's circuit closes (CIRCUIT_OPEN), or before trying again (STORE_UNAVAILABLE)",
          schema: { type: "integer" },
        },
      };
    }
  }
  return responses;
}

/** Context variable set by routes whose errors are tool-call failures. */
export const TOOL_CALL_VARIABLE = "toolCall";

/** Options of {@linkcode errorHandler}. */
export interface ErrorHandlerOptions {
  /** Where unknown errors are logged (with their stack). @default the `http` logger, at error */
  log?: (message: string) => void;
}

/**
 * The app's one error handler (`app.onError`): maps a {@linkcode GatewayError}
 * to its status and body; anything else is logged and becomes `INTERNAL`.
 */
export function errorHandler(
  options: ErrorHandlerOptions = {},
): (error: Error, c: Context) => Response {
  const { log = lineSink(getLog("http"), "error") } = options;
  return function errorHandler(thrown, c) {
    const error = fromThrown(thrown);
    if (!(thrown instanceof GatewayError) && error.code === "INTERNAL") {
      log(`internal error on ${c.req.method} ${c.req.path}: ${thrown.stack ?? thrown.message}`);
    }
    return errorResponse(error, c.get(TOOL_CALL_VARIABLE) === true);
  };
}

/**
 * The response for an error: status from the code's table entry, JSON body,
 * `Retry-After` for `CIRCUIT_OPEN`, `STORE_UNAVAILABLE` and `RATE_LIMITED` (seconds, rounded up),
 * `WWW-Authenticate` for `UNAUTHORIZED`.
 *
 * @param error The error.
 * @param toolCall Add the MCP-style result fields of a failed tool call.
 */
export function errorResponse(error: GatewayError, toolCall = false): Response {
  const body: Record<string, unknown> = { error: error.toJSON() };
  if (toolCall) {
    const { content, isError } = toErrorResult(error);
    Object.assign(body, { content, isError });
  }
  const headers = new Headers({ "content-type": "application/json" });
  // A failed tool call was audited: its receipt, as on a success.
  const receipt = receiptOf(error);
  if (receipt) headers.set(RECEIPT_HEADER, receiptHeader(receipt));
  if (error.code === "UNAUTHORIZED") headers.set("www-authenticate", 'Bearer realm="toolgate"');
  const retryAfterMs = retryAfter(error);
  if (retryAfterMs !== undefined) {
    headers.set("retry-after", String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  }
  return new Response(JSON.stringify(body), { status: error.status, headers });
}

function retryAfter(error: GatewayError): number | undefined {
  if (error.status !== 503 && error.code !== "RATE_LIMITED") return undefined;
  const details = error.details;
  if (details && typeof details === "object" && "retry_after_ms" in details) {
    const value = (details as { retry_after_ms: unknown }).retry_after_ms;
    if (typeof value === "number" && Number.isFinite(value)) return value;
  }
  return error.code === "CIRCUIT_OPEN" || error.code === "STORE_UNAVAILABLE" ||
      error.code === "RATE_LIMITED"
    ? 1000
    : undefined;
}

/** HTTP statuses Hono's own validators may throw, as codes. */
const HTTP_EXCEPTION_CODES: Record<number, ErrorCode> = {
  400: "INVALID_JSON",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
};

function fromThrown(thrown: unknown): GatewayError {
  if (thrown instanceof HTTPException) {
    const code = HTTP_EXCEPTION_CODES[thrown.status];
    if (code) return new GatewayError(code, thrown.message || code, { cause: thrown });
  }
  return toGatewayError(thrown);
}
