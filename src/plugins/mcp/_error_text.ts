/**
 * The text of an upstream's error as the gateway carries it: one line, without
 * the SDK's prefixes, bounded, and without the secrets a URL may hold.
 *
 * @module
 */

/** Longest upstream error text carried in a message. */
export const MAX_ERROR_TEXT = 2000;

/** An error's message on one line (`unknown error` when it has none). */
export function errorText(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/\s+/g, " ").trim() || "unknown error";
}

/** An MCP error's text without the SDK's `MCP error <code>: ` prefixes (the upstream's may repeat it). */
export function mcpMessage(error: Error): string {
  return error.message.replace(/^(MCP error -?\d+: )+/, "");
}

/** `text`, cut to {@linkcode MAX_ERROR_TEXT} characters. */
export function truncate(text: string): string {
  return text.length <= MAX_ERROR_TEXT ? text : `${text.slice(0, MAX_ERROR_TEXT - 1)}…`;
}

/** The URL without credentials, query or fragment (they may carry secrets). */
export function safeUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
}
