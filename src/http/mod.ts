/**
 * The HTTP transport: REST, OpenAPI, MCP Streamable HTTP at `/mcp`, the
 * `/events` stream and incoming webhook routes, on one port.
 *
 * @module
 */
export { createApp } from "./app.ts";
export type { AppOptions } from "./app.ts";
export { isLoopback, serveHttp } from "./serve.ts";
export type { HttpServer, ServeHttpOptions } from "./serve.ts";
