/**
 * The client-facing form of a tool result, shared by REST and MCP.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
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

/** Receipts of failed calls' audit entries, by the error thrown (see {@linkcode receiptOf}). */
const receipts = new WeakMap<GatewayError, Readonly<Record<string, unknown>>>();

/** Attaches the receipt of a failed call's audit entry to the error its caller gets. */
export function attachReceipt(
  error: GatewayError,
  receipt: Readonly<Record<string, unknown>>,
): void {
  receipts.set(error, receipt);
}

/** The receipt of the audit entry of the failed call that threw `error`, if any. */
export function receiptOf(error: unknown): Readonly<Record<string, unknown>> | undefined {
  return error instanceof GatewayError ? receipts.get(error) : undefined;
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
