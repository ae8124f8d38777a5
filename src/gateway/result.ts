/**
 * The client-facing form of a tool result, shared by REST and MCP.
 *
 * @module
 */
import type { GatewayError } from "../errors/mod.ts";
import type { CallResult } from "./types.ts";

/**
 * A tool result as clients see it (MCP `CallToolResult` shape). Raw results
 * of MCP upstream tools may also carry the other MCP content items (`image`,
 * `audio`, `resource`, `resource_link`) as the upstream sent them.
 */
export interface ToolResult {
  [key: string]: unknown;
  content: { type: "text"; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/**
 * The result of a successful call: the output as JSON text and structured
 * content; a raw result (MCP upstream tools) passes its `content` and
 * `structuredContent` through.
 */
export function toToolResult(result: CallResult): ToolResult {
  if (result.rawResult && Array.isArray(result.output.content)) {
    const { content, structuredContent } = result.output;
    const raw: ToolResult = { content: content as ToolResult["content"] };
    if (isObject(structuredContent)) raw.structuredContent = structuredContent;
    return raw;
  }
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

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
