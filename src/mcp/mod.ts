/**
 * MCP server wiring for the stdio and Streamable HTTP transports.
 *
 * @module
 */
export { createMcpServer } from "./server.ts";
export type { McpServerOptions } from "./server.ts";
export { serveStdio } from "./stdio.ts";
export type { ServeStdioOptions } from "./stdio.ts";
export { mcpHttpOptions, McpHttpSessions } from "./http.ts";
export type { McpHttpSessionsOptions } from "./http.ts";
