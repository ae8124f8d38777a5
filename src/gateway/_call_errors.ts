/**
 * The errors of a tool call that is refused or fails: what each says, and
 * with which code and details.
 *
 * @module
 */
import type { z } from "zod";
import { boundedIssueFields, issueSummary } from "../errors/bounded.ts";
import { GatewayError } from "../errors/mod.ts";
import type { RegisteredTool } from "./_hosted.ts";
import type { PolicyDecision } from "./types.ts";

/**
 * The refusal of a call a policy does not let run now: `FORBIDDEN` for
 * `deny`, naming the rule and its reason; `APPROVAL_REQUIRED` for
 * `require_approval` when the call cannot wait for the approval.
 */
export function refusedBy(tool: string, decision: PolicyDecision): GatewayError {
  const reason = decision.reason ? `: ${decision.reason}` : "";
  const details = {
    tool,
    policy: decision.policy,
    ...(decision.reason ? { reason: decision.reason } : {}),
  };
  return decision.effect === "deny"
    ? new GatewayError("FORBIDDEN", `Forbidden by policy ${decision.policy}${reason}`, { details })
    : new GatewayError(
      "APPROVAL_REQUIRED",
      `Call of ${tool} needs approval (policy ${decision.policy}${reason})`,
      { details },
    );
}

/** `CIRCUIT_OPEN` for a call to `name`, naming the destination when its breaker is the one open. */
export function circuitOpen(
  tool: RegisteredTool,
  name: string,
  key: string | undefined,
): GatewayError {
  const closesAt = (key === undefined ? tool.breaker.closesAt : tool.keyed!.closesAt(key)) ?? 0;
  const retryAfterMs = Math.max(0, closesAt - Date.now());
  return key === undefined
    ? new GatewayError(
      "CIRCUIT_OPEN",
      `Tool ${name} is unavailable: its circuit is open after repeated failures`,
      { details: { tool: name, retry_after_ms: retryAfterMs } },
    )
    : new GatewayError(
      "CIRCUIT_OPEN",
      `Tool ${name} is unavailable for ${key}: its circuit for that destination is open after repeated failures`,
      { details: { tool: name, destination: key, retry_after_ms: retryAfterMs } },
    );
}

/** `TOOL_INPUT_INVALID` for arguments the tool's schema rejects, naming the fields. */
export function invalidInput(tool: string, error: z.ZodError): GatewayError {
  // Bounded: 50 000 unknown keys name 20 of them.
  const { fields, omitted } = boundedIssueFields(error.issues);
  return new GatewayError(
    "TOOL_INPUT_INVALID",
    `Invalid arguments for ${tool}: ${issueSummary(fields, omitted)}`,
    { details: { tool, fields, ...(omitted ? { fields_omitted: omitted } : {}) } },
  );
}

/** The failure of a call whose caller aborted it: `CANCELLED`, unless the tool timed out first. */
export function cancelled(tool: string, thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError && thrown.code === "TOOL_TIMEOUT") return thrown;
  return new GatewayError("CANCELLED", `Call of ${tool} cancelled: the caller went away`, {
    details: { tool },
    cause: thrown,
  });
}

/**
 * What a tool's throw becomes: its own `GatewayError` (arguments it rejects
 * naming the tool), else `TOOL_EXECUTION_FAILED`.
 */
export function asToolError(tool: string, thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError) {
    // Arguments a tool itself rejects name the tool, as schema failures do.
    const details = thrown.details as Record<string, unknown> | undefined;
    if (thrown.code !== "TOOL_INPUT_INVALID" || details?.tool !== undefined) return thrown;
    return new GatewayError(thrown.code, thrown.message, {
      details: { tool, ...details },
      cause: thrown.cause,
    });
  }
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return new GatewayError("TOOL_EXECUTION_FAILED", `Tool ${tool} failed: ${message}`, {
    cause: thrown,
  });
}
