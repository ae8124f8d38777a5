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
import { approvalPath, ApprovalPending } from "../approvals/mod.ts";
import { GatewayError } from "../errors/mod.ts";
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

/** What a call held for approval answers (202). */
const PendingApprovalSchema = z.object({
  approval: z.object({
    id: z.string().openapi({ example: "apr_01JF3Y0Q8Z7RS6MWB8C5X9K2TD" }),
    status: z.literal("pending"),
    url: z.string().openapi({ example: "/approvals/apr_01JF3Y0Q8Z7RS6MWB8C5X9K2TD" }),
    policy: z.string(),
    expires_at: z.string(),
  }),
}).openapi("PendingApproval");

/** Longest `?wait=` of a call held for approval, in seconds. */
const MAX_APPROVAL_WAIT_S = 300;

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
    query: z.object({
      wait: z.coerce.number().int().min(0).max(MAX_APPROVAL_WAIT_S).optional().openapi({
        description: "A call a policy holds for someone's approval: wait up to this many " +
          `seconds (at most ${MAX_APPROVAL_WAIT_S}) for the decision instead of answering 202`,
      }),
    }),
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
    202: {
      description: "Held for approval: the call runs once a person approves it; " +
        "GET /approvals/{id} tells its status and, once it ran, its result",
      content: { "application/json": { schema: PendingApprovalSchema } },
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

/** `?wait=<s>`, checked. @throws {GatewayError} `USAGE` naming the fix. */
function approvalWait(raw: string | undefined): number {
  if (raw === undefined) return 0;
  const seconds = Number(raw);
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > MAX_APPROVAL_WAIT_S) {
    throw new GatewayError(
      "USAGE",
      `Invalid wait ${JSON.stringify(raw)}: use whole seconds from 0 to ${MAX_APPROVAL_WAIT_S}`,
      { details: { field: "wait" } },
    );
  }
  return seconds;
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
    const wait = approvalWait(c.req.query("wait"));
    c.set(TOOL_CALL_VARIABLE, true);
    let result;
    try {
      result = await gateway.call(name, args, {
        sessionId,
        signal: c.req.raw.signal,
        source: "rest",
        caller: c.get("caller"),
        ...(wait ? { approvalWaitMs: wait * 1000 } : {}),
      });
    } catch (error) {
      if (!(error instanceof ApprovalPending)) throw error;
      const { id, status, policy, expires_at } = error.approval;
      return c.json({ approval: { id, status, url: approvalPath(id), policy, expires_at } }, 202);
    }
    c.header("X-Session-Id", sessionId);
    if (result.receipt) c.header(RECEIPT_HEADER, receiptHeader(result.receipt));
    return c.json(toToolResult(result) as z.infer<typeof ToolResultSchema>, 200);
  });
}
