/**
 * The SDK's one error type, carrying the server's stable error code.
 *
 * @module
 */

/**
 * Codes the SDK itself uses, besides the server's (`TOOL_NOT_FOUND`,
 * `TOOL_INPUT_INVALID`, `PLUGIN_REQUEST_FAILED`, `CIRCUIT_OPEN`,
 * `UNAUTHORIZED`, …):
 *
 * - `USAGE`: the SDK was used wrongly (e.g. `on()` on a stdio client).
 * - `CONNECTION_FAILED`: the server could not be reached or started, or went away.
 * - `REQUEST_TIMEOUT`: no answer within the request timeout.
 * - `HTTP_ERROR`: an HTTP error without a toolgate error body (`details.status`).
 * - `MCP_ERROR`: another JSON-RPC error (`details.rpc_code`, `details.data`).
 */
export type ClientErrorCode =
  | "USAGE"
  | "CONNECTION_FAILED"
  | "REQUEST_TIMEOUT"
  | "HTTP_ERROR"
  | "MCP_ERROR";

/** Options of a {@linkcode ToolgateError}. */
export interface ToolgateErrorOptions {
  /** Structured details from the server (e.g. `fields` of invalid input). */
  details?: unknown;
  /** The underlying error. */
  cause?: unknown;
}

/**
 * An error with the server's stable code: thrown when a tool call's result
 * has `isError`, on JSON-RPC errors (unknown tool), HTTP errors and
 * connection failures.
 *
 * @example
 * ```ts
 * try {
 *   await client.callTool("memory_get", {});
 * } catch (error) {
 *   if (error instanceof ToolgateError && error.code === "TOOL_INPUT_INVALID") {
 *     console.error(error.message, error.details);
 *   }
 * }
 * ```
 */
export class ToolgateError extends Error {
  /** Stable UPPER_SNAKE code, e.g. `PLUGIN_REQUEST_FAILED`. */
  readonly code: string;
  /** Structured details, when the server sent any. */
  readonly details?: unknown;

  /**
   * @param code Stable code (a server code or a {@linkcode ClientErrorCode}).
   * @param message What failed, then why.
   * @param options Details and cause.
   */
  constructor(code: string, message: string, options: ToolgateErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "ToolgateError";
    this.code = code;
    this.details = options.details;
  }

  /** The wire form: `{code, message, details?}`. */
  toJSON(): { code: string; message: string; details?: unknown } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

/** A tool result as the server sends it (MCP `CallToolResult`). */
interface ResultLike {
  content?: unknown;
  structuredContent?: unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The error of a result with `isError`: `structuredContent.error` when
 * present, else the `<CODE>: <message>` text of its first content item.
 */
export function errorFromResult(result: ResultLike): ToolgateError {
  const structured = isRecord(result.structuredContent)
    ? result.structuredContent.error
    : undefined;
  if (isRecord(structured) && typeof structured.code === "string") {
    return new ToolgateError(
      structured.code,
      typeof structured.message === "string" ? structured.message : structured.code,
      { details: structured.details },
    );
  }
  const first = Array.isArray(result.content) ? result.content[0] : undefined;
  const text = isRecord(first) && typeof first.text === "string" ? first.text : "";
  const match = /^([A-Z][A-Z0-9_]*): ([\s\S]*)$/.exec(text);
  if (match) return new ToolgateError(match[1], match[2]);
  return new ToolgateError("TOOL_EXECUTION_FAILED", text || "The tool call failed");
}

/**
 * The error of a toolgate HTTP error body (`{"error": {code, message,
 * details?}}`), or `HTTP_ERROR` naming the status.
 */
export function errorFromHttp(status: number, body: string, cause?: unknown): ToolgateError {
  try {
    const parsed: unknown = JSON.parse(body);
    const error = isRecord(parsed) ? parsed.error : undefined;
    if (isRecord(error) && typeof error.code === "string" && typeof error.message === "string") {
      return new ToolgateError(error.code, error.message, { details: error.details, cause });
    }
    if (isRecord(error) && typeof error.message === "string") {
      return new ToolgateError("HTTP_ERROR", `HTTP ${status}: ${error.message}`, {
        details: { status },
        cause,
      });
    }
  } catch {
    // Not JSON: described by the status below.
  }
  return new ToolgateError("HTTP_ERROR", `HTTP ${status}${body ? `: ${body.slice(0, 200)}` : ""}`, {
    details: { status },
    cause,
  });
}
