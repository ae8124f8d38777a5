/**
 * The app's validation hook: zod failures of a route's request schemas
 * become {@linkcode GatewayError}s naming the fields.
 *
 * @module
 */
import type { Context } from "hono";
import type { z } from "@hono/zod-openapi";
import { GatewayError } from "../errors/mod.ts";
import { boundedIssueFields, issueSummary } from "../errors/bounded.ts";

/** What `@hono/zod-openapi` hands a hook. */
interface ValidationResult {
  success: boolean;
  error?: z.ZodError;
  target: string;
}

/** The field paths and messages of a zod error (at most 20, unknown keys named at most 20). */
export function issueFields(error: z.ZodError): { path: string; message: string }[] {
  return boundedIssueFields(error.issues).fields;
}

/**
 * `defaultHook` of the app: bad tool arguments → 400 `TOOL_INPUT_INVALID`; a
 * bad body of another route, path, query or header → 400 `USAGE`;
 * `details.fields` names each field.
 *
 * @throws {GatewayError} when validation failed.
 */
export function validationHook(result: ValidationResult, c: Context): undefined {
  if (result.success || !result.error) return undefined;
  const { fields, omitted } = boundedIssueFields(result.error.issues);
  const summary = issueSummary(fields, omitted);
  const tool = result.target === "json" ? c.req.param("name") : undefined;
  if (tool) {
    throw new GatewayError("TOOL_INPUT_INVALID", `Invalid arguments for ${tool}: ${summary}`, {
      details: { tool, fields },
    });
  }
  const target = result.target === "json" ? "body" : result.target;
  throw new GatewayError("USAGE", `Invalid request ${target}: ${summary}`, {
    details: { target: result.target, fields },
  });
}
