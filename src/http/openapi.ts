/**
 * `GET /openapi.json`: the OpenAPI 3.1 document, generated from the routes'
 * zod schemas (so routes mounted later with `app.openapi()` appear too),
 * plus a description of the MCP endpoint.
 *
 * @module
 */
import { z } from "@hono/zod-openapi";
import { VERSION } from "../version.ts";
import { ErrorBodySchema, errorResponses } from "./errors.ts";
import type { ToolgateApp } from "./types.ts";

/** Options of {@linkcode registerOpenApi}. */
export interface OpenApiOptions {
  /** Whether a bearer token guards the API (`TOOLGATE_API_TOKEN` is set). */
  tokenRequired: boolean;
}

const JsonRpcMessageSchema = z.record(z.string(), z.unknown()).openapi("JsonRpcMessage", {
  description: "A JSON-RPC 2.0 message (MCP)",
});

const McpHeadersSchema = z.object({
  "Mcp-Session-Id": z.string().optional().openapi({
    description: "Session id from the initialize response; required after initialization",
  }),
});

const MCP_TAGS = ["mcp"];

/** Registers the security scheme, the `/mcp` description and `GET /openapi.json`. */
export function registerOpenApi(app: ToolgateApp, options: OpenApiOptions): void {
  const { tokenRequired } = options;
  app.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "`TOOLGATE_API_TOKEN` (the administrator), an API key (`tg_…`, " +
      "`toolgate keys create`) or, with auth.oauth, an OAuth access token (a JWT of its issuer; " +
      "a 401 names the RFC 9728 metadata in WWW-Authenticate resource_metadata); required on " +
      "every route but /health and incoming webhook paths when the token is set, auth.oauth " +
      "is configured or a key exists. A key or token lists and calls only its tools (403 " +
      "FORBIDDEN otherwise) and may not use /webhooks, /dlq, /incoming, /audit or /metrics",
  });
  const mcpErrors = errorResponses([401, 403, 413]);
  const rpcError = (description: string) => ({
    description,
    content: { "application/json": { schema: JsonRpcMessageSchema } },
  });
  // `/mcp` serves every tool the caller may call; `/mcp/{server}` one virtual server's.
  const ServerParamsSchema = z.object({
    server: z.string().openapi({
      description: "A virtual server's name (`servers` in config.json, or `toolgate servers add`)",
    }),
  });
  const endpoints = [
    { path: "/mcp", suffix: "", params: undefined },
    { path: "/mcp/{server}", suffix: "VirtualServer", params: ServerParamsSchema },
  ];
  for (const { path, suffix, params } of endpoints) {
    const request = params ? { params } : {};
    // An unknown virtual server is the REST error body (NOT_FOUND); a session's, JSON-RPC.
    const unknownServer = params
      ? {
        404: {
          description: "Unknown virtual server (NOT_FOUND), or unknown or expired session",
          content: {
            "application/json": { schema: z.union([ErrorBodySchema, JsonRpcMessageSchema]) },
          },
        },
      }
      : {};
    app.openAPIRegistry.registerPath({
      method: "post",
      path,
      operationId: `mcpPost${suffix}`,
      tags: MCP_TAGS,
      summary: "MCP Streamable HTTP: send JSON-RPC messages",
      description: "Revision 2025-06-18/2025-11-25: an `initialize` request without " +
        "`Mcp-Session-Id` opens a session; the response carries its `Mcp-Session-Id`. " +
        "Revision 2026-07-28: each request stands alone, with `MCP-Protocol-Version`, " +
        "`Mcp-Method` and `Mcp-Name` headers and its `_meta` envelope (docs/mcp.md). " +
        "Send `Accept: application/json, text/event-stream`.",
      request: {
        ...request,
        headers: McpHeadersSchema,
        body: {
          required: true,
          content: {
            "application/json": {
              schema: z.union([JsonRpcMessageSchema, z.array(JsonRpcMessageSchema)]),
            },
          },
        },
      },
      responses: {
        200: {
          description: "JSON-RPC responses, as an SSE stream or JSON",
          content: {
            "text/event-stream": { schema: z.string() },
            "application/json": { schema: JsonRpcMessageSchema },
          },
        },
        202: { description: "Notifications or responses accepted" },
        400: rpcError(
          "Not a valid JSON-RPC message, no session id, or headers that do not match the body",
        ),
        404: rpcError("Unknown or expired session: start a new one"),
        406: rpcError("Accept must list application/json and text/event-stream"),
        415: rpcError("Content-Type must be application/json"),
        503: rpcError("Shutting down, or too many sessions"),
        ...mcpErrors,
        ...unknownServer,
      },
    });
    app.openAPIRegistry.registerPath({
      method: "get",
      path,
      operationId: `mcpStream${suffix}`,
      tags: MCP_TAGS,
      summary: "MCP Streamable HTTP: server-to-client SSE stream",
      request: { ...request, headers: McpHeadersSchema },
      responses: {
        200: {
          description: "SSE stream of server notifications",
          content: { "text/event-stream": { schema: z.string() } },
        },
        400: rpcError("No session id"),
        404: rpcError("Unknown or expired session"),
        406: rpcError("Accept must list text/event-stream"),
        409: rpcError("The session already has a stream"),
        503: rpcError("Shutting down"),
        ...mcpErrors,
        ...unknownServer,
      },
    });
    app.openAPIRegistry.registerPath({
      method: "delete",
      path,
      operationId: `mcpEndSession${suffix}`,
      tags: MCP_TAGS,
      summary: "MCP Streamable HTTP: end the session",
      request: { ...request, headers: McpHeadersSchema },
      responses: {
        200: { description: "Session ended" },
        400: rpcError("No session id"),
        404: rpcError("Unknown or expired session"),
        ...mcpErrors,
        ...unknownServer,
      },
    });
  }
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/openapi.json",
    operationId: "openapi",
    tags: ["server"],
    summary: "This OpenAPI 3.1 document",
    responses: {
      200: {
        description: "The OpenAPI document",
        content: { "application/json": { schema: z.record(z.string(), z.unknown()) } },
      },
      ...errorResponses([401, 403]),
    },
  });
  app.doc31("/openapi.json", (c) => ({
    openapi: "3.1.0",
    info: {
      title: "toolgate",
      version: VERSION,
      description: "Tool gateway: REST access to tools, MCP Streamable HTTP at /mcp. Errors are " +
        '`{"error": {"code", "message", "details"?}}`.',
    },
    servers: [{ url: new URL(c.req.url).origin }],
    ...(tokenRequired ? { security: [{ bearerAuth: [] }] } : {}),
  }));
}
