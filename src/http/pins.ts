/**
 * `/pins`: the pins of upstream tools, prompts and resource templates, the
 * diff of a quarantined one, and the administrator's decisions (the REST
 * form of `toolgate tools pins|diff|approve|reject`).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { callerRef } from "../approvals/mod.ts";
import type { ToolPins } from "../pins/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

const PinSchema = z.object({
  tool: z.string().openapi({
    description: "The name clients see",
    example: "github__create_issue",
  }),
  plugin: z.string(),
  kind: z.enum(["tool", "prompt", "resource_template"]),
  name: z.string().openapi({ description: "The upstream's own name" }),
  status: z.enum(["pinned", "changed", "new", "rejected"]).openapi({
    description: "pinned: listed as pinned; changed: quarantined, its upstream changed it; " +
      "new: held until approved (pinning: approve); rejected: the change was rejected",
  }),
  pinned_sha256: z.string().nullable(),
  pending_sha256: z.string().nullable(),
  changed: z.array(z.string()).openapi({ description: "The pinned fields that differ" }),
  decided_by: z.string().nullable(),
  updated_at: z.string(),
}).openapi("Pin");

const PinDiffSchema = PinSchema.extend({
  pinned: z.record(z.string(), z.unknown()).nullable(),
  pending: z.record(z.string(), z.unknown()).nullable(),
  diff: z.string().openapi({
    description: "Unified diff of the pinned and the offered definition",
  }),
}).openapi("PinDiff");

const DecisionSchema = z.object({ pins: z.array(PinSchema) }).openapi("PinDecision");

const ToolParam = z.object({
  tool: z.string().min(1).openapi({
    param: { name: "tool", in: "path" },
    example: "everything__echo",
  }),
});

const listRoute = createRoute({
  method: "get",
  path: "/pins",
  operationId: "listPins",
  tags: ["pins"],
  summary: "Pins of upstream tools, prompts and resource templates",
  request: {
    query: z.object({
      changed: z.enum(["true", "false"]).optional().openapi({
        description: "Only those quarantined, held or rejected",
      }),
    }),
  },
  responses: {
    200: {
      description: "The pins",
      content: { "application/json": { schema: z.object({ pins: z.array(PinSchema) }) } },
    },
    ...errorResponses([401, 403]),
  },
});

const showRoute = createRoute({
  method: "get",
  path: "/pins/{tool}",
  operationId: "getPin",
  tags: ["pins"],
  summary: "A pin with its pinned and offered definitions and their diff",
  request: { params: ToolParam },
  responses: {
    200: { description: "The pin", content: { "application/json": { schema: PinDiffSchema } } },
    ...errorResponses([401, 403, 404]),
  },
});

function decisionRoute(decision: "approve" | "reject") {
  return createRoute({
    method: "post",
    path: `/pins/{tool}/${decision}`,
    operationId: decision === "approve" ? "approvePin" : "rejectPin",
    tags: ["pins"],
    summary: decision === "approve"
      ? "Approves what the upstream offers now: it becomes the pin and is listed again"
      : "Rejects what the upstream offers now: it stays out while offered",
    request: { params: ToolParam },
    responses: {
      200: {
        description: "The pin decided",
        content: { "application/json": { schema: DecisionSchema } },
      },
      ...errorResponses([401, 403, 404, 409]),
    },
  });
}

const approveAllRoute = createRoute({
  method: "post",
  path: "/pins/approve-all",
  operationId: "approveAllPins",
  tags: ["pins"],
  summary: "Approves every quarantined or held definition",
  responses: {
    200: {
      description: "The pins approved",
      content: { "application/json": { schema: DecisionSchema } },
    },
    ...errorResponses([401, 403]),
  },
});

/** Mounts `/pins` (the management API: the administrator's only). */
export function pinRoutes(pins: ToolPins): RouteMount {
  return function mountPins(app) {
    app.openapi(listRoute, async (c) => {
      const { changed } = c.req.valid("query");
      return c.json({ pins: await pins.list({ changed: changed === "true" }) }, 200);
    });
    app.openapi(approveAllRoute, async (c) => {
      return c.json({ pins: await pins.approve("*", callerRef(c.get("caller"))) }, 200);
    });
    app.openapi(showRoute, async (c) => c.json(await pins.diff(c.req.valid("param").tool), 200));
    app.openapi(decisionRoute("approve"), async (c) =>
      c.json({
        pins: await pins.approve(c.req.valid("param").tool, callerRef(c.get("caller"))),
      }, 200));
    app.openapi(decisionRoute("reject"), async (c) =>
      c.json({
        pins: await pins.reject(c.req.valid("param").tool, callerRef(c.get("caller"))),
      }, 200));
  };
}
