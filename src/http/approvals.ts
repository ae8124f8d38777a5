/**
 * `/approvals`: calls held for a person's approval, and their decisions.
 * Not the management API: an approver may be an API key or an OAuth
 * caller; each route lets through the administrator, the approval's
 * approvers and (to read it) its caller.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { type Approvals, approvalView, callerRef } from "../approvals/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller } from "../gateway/mod.ts";
import type { Redactor } from "../redact.ts";
import type { ApprovalRecord } from "../store/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

const ApprovalSchema = z.object({
  id: z.string(),
  status: z.enum(["pending", "approved", "denied", "expired"]),
  tool: z.string(),
  plugin: z.string(),
  caller: z.record(z.string(), z.unknown()),
  args: z.record(z.string(), z.unknown()).openapi({ description: "The arguments, redacted" }),
  args_sha256: z.string(),
  policy: z.string(),
  policy_sha256: z.string(),
  reason: z.string().nullable().openapi({ description: "The policy's reason" }),
  approvers: z.array(z.string()),
  created_at: z.string(),
  expires_at: z.string(),
  decided_by: z.string().nullable(),
  decided_at: z.string().nullable(),
  decision_reason: z.string().nullable(),
  running: z.boolean(),
  result: z.object({
    at: z.string(),
    ok: z.boolean(),
    output: z.record(z.string(), z.unknown()).optional(),
    error: z.object({ code: z.string(), message: z.string() }).optional(),
  }).nullable().openapi({ description: "How the approved call ended, once it ran" }),
}).openapi("Approval");

const IdParam = z.object({
  id: z.string().regex(/^apr_[0-9A-Za-z]+$/).openapi({ param: { name: "id", in: "path" } }),
});

const listRoute = createRoute({
  method: "get",
  path: "/approvals",
  operationId: "listApprovals",
  tags: ["approvals"],
  summary: "Approvals this caller may decide or asked for, newest first",
  request: {
    query: z.object({
      status: z.enum(["pending", "approved", "denied", "expired"]).optional(),
      limit: z.coerce.number().int().min(1).max(1000).optional(),
    }),
  },
  responses: {
    200: {
      description: "The approvals",
      content: {
        "application/json": { schema: z.object({ approvals: z.array(ApprovalSchema) }) },
      },
    },
    ...errorResponses([400, 401]),
  },
});

const showRoute = createRoute({
  method: "get",
  path: "/approvals/{id}",
  operationId: "getApproval",
  tags: ["approvals"],
  summary: "One approval: its status and, once the approved call ran, its result",
  request: { params: IdParam },
  responses: {
    200: {
      description: "The approval",
      content: { "application/json": { schema: ApprovalSchema } },
    },
    ...errorResponses([401, 403, 404]),
  },
});

function decisionRoute(decision: "approve" | "deny") {
  return createRoute({
    method: "post",
    path: `/approvals/{id}/${decision}`,
    operationId: decision === "approve" ? "approveCall" : "denyCall",
    tags: ["approvals"],
    summary: decision === "approve"
      ? "Approves the held call: it runs once (its caller gets the result)"
      : "Denies the held call: its caller gets APPROVAL_DENIED",
    request: {
      params: IdParam,
      body: {
        required: false,
        content: {
          "application/json": { schema: z.object({ reason: z.string().max(1024).optional() }) },
        },
      },
    },
    responses: {
      200: {
        description: "The approval decided",
        content: { "application/json": { schema: ApprovalSchema } },
      },
      ...errorResponses([401, 403, 404, 409]),
    },
  });
}

function mayRead(
  approvals: Approvals,
  record: ApprovalRecord,
  caller: Caller | undefined,
): boolean {
  return approvals.mayDecide(record, caller) || record.caller_ref === callerRef(caller);
}

function hidden(id: string): GatewayError {
  // Neither approver nor caller: as if there were none, so ids tell nothing.
  return new GatewayError("NOT_FOUND", `No approval ${id}`, { details: { approval_id: id } });
}

/** Mounts `/approvals`. */
export function approvalRoutes(approvals: Approvals, redact: Redactor): RouteMount {
  return function mountApprovals(app) {
    app.openapi(listRoute, async (c) => {
      const { status, limit } = c.req.valid("query");
      const caller = c.get("caller");
      const records = await approvals.list({ ...(status ? { status } : {}), limit: limit ?? 100 });
      return c.json({
        approvals: records.filter((r) => mayRead(approvals, r, caller)).map((r) =>
          approvalView(r, redact)
        ),
      }, 200);
    });
    app.openapi(showRoute, async (c) => {
      const { id } = c.req.valid("param");
      const record = await approvals.get(id);
      if (!record || !mayRead(approvals, record, c.get("caller"))) throw hidden(id);
      return c.json(approvalView(record, redact), 200);
    });
    for (const decision of ["approve", "deny"] as const) {
      app.openapi(decisionRoute(decision), async (c) => {
        const { id } = c.req.valid("param");
        const caller = c.get("caller");
        const body = await c.req.json().catch(() => ({})) as { reason?: string };
        const current = await approvals.get(id);
        if (!current || !mayRead(approvals, current, caller)) throw hidden(id);
        const record = await approvals.decide(id, decision === "approve" ? "approved" : "denied", {
          by: callerRef(caller),
          caller,
          ...(body.reason ? { reason: body.reason } : {}),
        });
        return c.json(approvalView(record, redact), 200);
      });
    }
  };
}
