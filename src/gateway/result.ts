/**
 * The client-facing form of a tool result, shared by REST and MCP.
 *
 * @module
 */
import type { GatewayError } from "../errors/mod.ts";
import type { CallResult } from "./types.ts";

/** A tool result as clients see it (MCP `CallToolResult` shape). */
export interface ToolResult {
  [key: string]: unknown;
  content: { type: "text"; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** The result of a successful call: the output as JSON text and structured content. */
export function toToolResult(result: CallResult): ToolResult {
  return {
    content: [{ type: "text", text: JSON.stringify(result.output) }],
    structuredContent: result.output,
  };
}

/** The result of a failed call: `isError` and `<CODE>: <message>` as text. */
export function toErrorResult(error: GatewayError): ToolResult {
  return {
    content: [{ type: "text", text: `${error.code}: ${error.message}` }],
    structuredContent: { error: error.toJSON() },
    isError: true,
  };
}
