/**
 * One error type for the whole gateway, with stable codes.
 *
 * Every failure that crosses a module boundary is a {@linkcode GatewayError}
 * carrying a code from {@linkcode ERROR_CODES}. Edges translate it: the REST
 * layer into `{"error": {code, message, details}}` with the code's HTTP status,
 * MCP into an `isError` result, the CLI into a one-line message and exit code.
 *
 * @module
 */

/** Stable error codes, their HTTP status and CLI exit code. */
export const ERROR_CODES = {
  PLUGIN_REQUEST_FAILED: { status: 502, exit: 1, doc: "A plugin's outbound request failed" },
  PLUGIN_NOT_CONFIGURED: { status: 503, exit: 1, doc: "A plugin lacks required configuration" },
  PLUGIN_INIT_FAILED: { status: 503, exit: 1, doc: "A plugin's initialization failed" },
  TOOL_NOT_FOUND: { status: 404, exit: 1, doc: "No tool with that name is offered" },
  TOOL_INPUT_INVALID: { status: 400, exit: 2, doc: "The tool arguments do not match its schema" },
  TOOL_TIMEOUT: { status: 504, exit: 1, doc: "The tool did not finish within its timeout" },
  TOOL_EXECUTION_FAILED: { status: 500, exit: 1, doc: "The tool threw an error" },
  CIRCUIT_OPEN: { status: 503, exit: 1, doc: "The tool's circuit breaker is open" },
  CANCELLED: {
    status: 499,
    exit: 1,
    doc: "The caller went away or cancelled before the call finished",
  },
  UNAUTHORIZED: {
    status: 401,
    exit: 1,
    doc: "Missing, malformed, wrong, revoked or expired bearer token, API key or OAuth " +
      "access token",
  },
  FORBIDDEN: {
    status: 403,
    exit: 1,
    doc: "The caller may not do this: a tool outside its API key's patterns or its OAuth " +
      "token's scopes, an OAuth token without a required scope, the management API with an " +
      "API key or OAuth token, or a Host or Origin header not allowed",
  },
  EGRESS_DENIED: {
    status: 403,
    exit: 1,
    doc: "The egress policy refused an outgoing connection's address",
  },
  LOOP_DETECTED: {
    status: 508,
    exit: 1,
    doc: "A request from this toolgate deployment reached its own incoming endpoint",
  },
  PAYLOAD_TOO_LARGE: { status: 413, exit: 1, doc: "Request body over the size limit" },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    exit: 1,
    doc: "Request body's Content-Type is not accepted",
  },
  INVALID_JSON: { status: 400, exit: 2, doc: "Request body is not valid JSON" },
  SIGNATURE_INVALID: { status: 401, exit: 1, doc: "Webhook signature missing or wrong" },
  SIGNATURE_EXPIRED: {
    status: 401,
    exit: 1,
    doc: "Webhook signature's timestamp outside the tolerance",
  },
  RATE_LIMITED: { status: 429, exit: 1, doc: "Too many requests" },
  QUEUE_FULL: {
    status: 503,
    exit: 1,
    doc: "An incoming endpoint's queue of accepted payloads is full; retry after Retry-After",
  },
  NOT_FOUND: { status: 404, exit: 1, doc: "No such resource" },
  METHOD_NOT_ALLOWED: { status: 405, exit: 1, doc: "HTTP method not allowed on this path" },
  CONFLICT: { status: 409, exit: 1, doc: "The resource already exists" },
  APPROVAL_REQUIRED: {
    status: 403,
    exit: 1,
    doc: "A policy requires an approval before the call runs, and the caller cannot wait for one " +
      "here: the error names the approval and where a person decides",
  },
  APPROVAL_DENIED: { status: 403, exit: 1, doc: "The approval of the call was denied" },
  APPROVAL_EXPIRED: {
    status: 403,
    exit: 1,
    doc: "Nobody decided on the call's approval before its timeout",
  },
  TOOL_QUARANTINED: {
    status: 409,
    exit: 1,
    doc: "The upstream changed the tool (or prompt) since it was pinned, or offers one not " +
      "approved yet: held until an administrator approves it (toolgate tools approve)",
  },
  USAGE: { status: 400, exit: 2, doc: "Bad command-line usage or argument" },
  CONFIG_INVALID: { status: 500, exit: 1, doc: "The configuration is invalid" },
  STORE_CORRUPT: { status: 500, exit: 1, doc: "The data directory cannot be read" },
  KEY_MISMATCH: {
    status: 500,
    exit: 1,
    doc: "This process's secret key is not the one the store's secrets are sealed with",
  },
  STORE_UNAVAILABLE: { status: 503, exit: 1, doc: "The database cannot be reached; retry later" },
  DELIVERY_FAILED: { status: 502, exit: 1, doc: "A webhook delivery failed" },
  UNAVAILABLE: {
    status: 503,
    exit: 1,
    doc: "The server is not serving, or the OAuth issuer's keys (JWKS) cannot be fetched to " +
      "check an access token; retry after Retry-After",
  },
  LISTEN_FAILED: {
    status: 500,
    exit: 1,
    doc: "The HTTP server cannot listen on its address (port in use, address not here)",
  },
  INTERNAL: { status: 500, exit: 1, doc: "Unexpected internal error" },
} as const;

/** A stable error code. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Options of a {@linkcode GatewayError}. */
export interface GatewayErrorOptions {
  /** Structured details safe to show to the caller (never secrets). */
  details?: unknown;
  /** The underlying error, kept for logs only. */
  cause?: unknown;
}

/** An error with a stable code, safe to show to callers. */
export class GatewayError extends Error {
  /** The stable code. */
  readonly code: ErrorCode;
  /** Structured details safe to show to the caller. */
  readonly details?: unknown;

  /**
   * @param code Stable code from {@linkcode ERROR_CODES}.
   * @param message Capitalised, no trailing period: what failed, then why.
   * @param options Details and cause.
   */
  constructor(code: ErrorCode, message: string, options: GatewayErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "GatewayError";
    this.code = code;
    this.details = options.details;
  }

  /** HTTP status for this error's code. */
  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  /** CLI exit code for this error's code. */
  get exitCode(): number {
    return ERROR_CODES[this.code].exit;
  }

  /** The wire form: `{code, message, details?}`. */
  toJSON(): { code: ErrorCode; message: string; details?: unknown } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

/**
 * Turns anything thrown into a {@linkcode GatewayError}; unknown errors become
 * `INTERNAL` with a generic message (the original stays in `cause`).
 */
export function toGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  return new GatewayError("INTERNAL", "Internal error", { cause: error });
}
