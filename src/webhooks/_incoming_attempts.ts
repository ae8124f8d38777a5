/**
 * A failed handler call as a job records it (its attempt), and which
 * failures are not worth retrying. Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { IncomingAttempt } from "../store/mod.ts";

/**
 * Error codes of a handler call that fails because of its input: the same
 * arguments fail again, so the job becomes a failed job at once. Any other
 * failure is retried (`TOOL_NOT_FOUND` too: the handler may appear once its
 * upstream connects).
 */
export const INPUT_ERROR_CODES: ReadonlySet<string> = new Set([
  "TOOL_INPUT_INVALID",
  "INVALID_JSON",
]);

/** The argument fields a `TOOL_INPUT_INVALID` names (`details.fields[].path`). */
function errorFields(error: unknown): string[] | undefined {
  if (!(error instanceof GatewayError) || error.code !== "TOOL_INPUT_INVALID") return undefined;
  const fields = (error.details as { fields?: { path?: unknown }[] } | undefined)?.fields;
  if (!Array.isArray(fields)) return undefined;
  const paths = fields.map((field) => field?.path).filter((p): p is string =>
    typeof p === "string"
  );
  return paths.length ? paths : undefined;
}

/** A failed handler call as recorded: when, code, message, and the fields of an input error. */
export function attemptOf(error: unknown, now: number): IncomingAttempt {
  const fields = errorFields(error);
  return {
    at: new Date(now).toISOString(),
    code: error instanceof GatewayError ? error.code : "INTERNAL",
    message: (error as Error)?.message ?? String(error),
    ...(fields ? { fields } : {}),
  };
}
