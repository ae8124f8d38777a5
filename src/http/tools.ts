/**
 * `GET /tools` and `POST /tools/{name}`: list and call tools through the
 * gateway's pipeline.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Gateway } from "../gateway/mod.ts";
import { toToolResult } from "../gateway/mod.ts";
import { newId } from "../ids.ts";
import { errorResponses, RECEIPT_HEADER, receiptHeader, TOOL_CALL_VARIABLE } from "./errors.ts";
import { jsonBody } from "./json_body.ts";
import type { ToolgateApp } from "./types.ts";
import { validationHook } from "./validation.ts";

/** A tool as listed by `GET /tools`. */
export const ToolInfoSchema = z.object({
  name: z.string().openapi({ example: "http_request" }),
  description: z.string(),
  plugin: z.string().openapi({ description: "Plugin that offers the tool", example: "http" }),
  inputSchema: z.record(z.string(), z.unknown()).openapi({
    description: "JSON Schema of the arguments object",
  }),
}).openapi("Tool");

/** Body of `GET /tools`. */
export const ToolListSchema = z.object({ tools: z.array(ToolInfoSchema) }).openapi("ToolList");

/** A tool call's result (the MCP `CallToolResult` shape). */
export const ToolResultSchema = z.object({
  content: z.array(z.looseObject({
    type: z.string().openapi({
      description: "`text` for built-in tools; MCP upstream tools may also return `image`, " +
        "`audio`, `resource` or `resource_link` items, passed through as the upstream sent them",
      example: "text",
    }),
    text: z.string().optional().openapi({
      description: "For `text` items: the tool's output (built-in tools: its JSON text)",
    }),
  })),
  structuredContent: z.record(z.string(), z.unknown()).optional().openapi({
    description: "The tool's output object",
  }),
  isError: z.boolean().optional(),
}).openapi("ToolResult");

/** Arguments of a tool call: a JSON object, checked against the tool's `inputSchema`. */
export const ToolArgumentsSchema = z.record(z.string(), z.unknown()).openapi("ToolArguments", {
  description: "The tool's named arguments; an empty body counts as `{}`",
  example: { url: "https://example.com" },
});

/** `X-Session-Id`: the caller's session, reported as `session_id` in events and audit. */
const SessionHeadersSchema = z.object({
  "X-Session-Id": z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/).optional().openapi({
    description: "Session id for events and audit (visible ASCII, at most 128 characters); " +
      "generated when absent",
    example: "ses_dashboard_1",
  }),
});

const listToolsRoute = createRoute({
  method: "get",
  path: "/tools",
  operationId: "listTools",
  tags: ["tools"],
  summary: "List the tools on offer",
  description: "With an API key: only the tools its patterns allow.",
  responses: {
    200: {
      description: "The tools, in registration order",
      content: { "application/json": { schema: ToolListSchema } },
    },
    ...errorResponses([401, 403]),
  },
});

const callToolRoute = createRoute({
  method: "post",
  path: "/tools/{name}",
  operationId: "callTool",
  tags: ["tools"],
  summary: "Call a tool",
  description: "Runs the tool through the gateway pipeline: validate input, circuit check, " +
    "execute with timeout, audit, events.",
  request: {
    params: z.object({
      name: z.string().min(1).openapi({ param: { name: "name", in: "path" }, example: "echo" }),
    }),
    headers: SessionHeadersSchema,
    body: {
      required: false,
      content: { "application/json": { schema: ToolArgumentsSchema } },
    },
  },
  responses: {
    200: {
      description: "The tool's result",
      headers: {
        "X-Session-Id": { description: "The session id used", schema: { type: "string" } },
      },
      content: { "application/json": { schema: ToolResultSchema } },
    },
    ...errorResponses([400, 401, 403, 404, 413, 415, 429, 499, 500, 502, 503, 504], true),
  },
});

/**
 * The `X-Session-Id` header, checked as {@linkcode SessionHeadersSchema} says.
 *
 * @throws {GatewayError} `USAGE` (400) for a malformed value.
 */
function sessionIdOf(c: Context): string | undefined {
  const value = c.req.header("X-Session-Id");
  if (value === undefined) return undefined;
  const parsed = SessionHeadersSchema.safeParse({ "X-Session-Id": value });
  if (!parsed.success) validationHook({ success: false, error: parsed.error, target: "header" }, c);
  return value;
}

/** Registers `GET /tools` and `POST /tools/{name}`. */
export function registerToolRoutes(app: ToolgateApp, gateway: Gateway): void {
  app.openapi(
    listToolsRoute,
    (c) =>
      c.json({
        tools: gateway.listTools(c.get("caller")).map(({ mcpListing: _, ...tool }) => tool),
      }, 200),
  );
  // Documented from `callToolRoute` but served without its generated
  // validators: `jsonBody` already ensures the body is a JSON object (all the
  // route's body schema asks), and the gateway checks the arguments against
  // the tool's own schema, so a call's input is parsed and validated once.
  app.openAPIRegistry.registerPath(callToolRoute);
  app.post("/tools/:name", jsonBody({ object: true }), async (c) => {
    const name = c.req.param("name");
    const sessionId = sessionIdOf(c) ?? newId("ses");
    const args = await c.req.json() as Record<string, unknown>;
    c.set(TOOL_CALL_VARIABLE, true);
    const result = await gateway.call(name, args, {
      sessionId,
      signal: c.req.raw.signal,
      source: "rest",
      caller: c.get("caller"),
    });
    c.header("X-Session-Id", sessionId);
    if (result.receipt) c.header(RECEIPT_HEADER, receiptHeader(result.receipt));
    return c.json(toToolResult(result) as z.infer<typeof ToolResultSchema>, 200);
  });
}
