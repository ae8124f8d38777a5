/**
 * `/policies`: the policy rules (config's and the stored ones), adding and
 * removing stored ones, and testing which rule decides a call (the REST
 * form of `toolgate policies list|add|remove|test`).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Gateway } from "../gateway/mod.ts";
import {
  addPolicy,
  listPolicies,
  type Policies,
  removePolicy,
  testCaller,
} from "../policies/mod.ts";
import type { Store } from "../store/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

const PolicySchema = z.object({
  name: z.string(),
  source: z.enum(["config", "store"]),
  position: z.number().int().optional(),
  sha256: z.string().openapi({ description: "SHA-256 of the rule's canonical JSON: its version" }),
  rule: z.record(z.string(), z.unknown()),
}).openapi("Policy");

const DecisionSchema = z.object({
  policy: z.string(),
  source: z.enum(["config", "store"]),
  effect: z.enum(["allow", "deny", "require_approval"]),
  sha256: z.string(),
  reason: z.string().optional(),
  approver: z.literal("caller").optional(),
  approvers: z.array(z.string()).optional(),
  timeout_ms: z.number().int().optional(),
}).openapi("PolicyDecision");

const TestSchema = z.object({
  tool: z.string().min(1),
  args: z.record(z.string(), z.unknown()).optional(),
  as: z.string().min(1).optional().openapi({
    description:
      "admin, local, oauth:<subject>[@client] or an API key's id or name (default local)",
  }),
  scopes: z.array(z.string()).optional().openapi({ description: "An OAuth caller's scopes" }),
  server: z.string().optional(),
  transport: z.string().optional().openapi({ description: "rest (default), mcp-http, …" }),
}).openapi("PolicyTest");

const listRoute = createRoute({
  method: "get",
  path: "/policies",
  operationId: "listPolicies",
  tags: ["policies"],
  summary: "The policy rules in the order they are matched: config's, then the stored ones",
  responses: {
    200: {
      description: "The rules",
      content: { "application/json": { schema: z.object({ policies: z.array(PolicySchema) }) } },
    },
    ...errorResponses([401, 403]),
  },
});

const addRoute = createRoute({
  method: "post",
  path: "/policies",
  operationId: "addPolicy",
  tags: ["policies"],
  summary: "Stores a rule after the stored ones (or at position); running servers use it at once",
  request: {
    body: {
      content: {
        "application/json": {
          schema: z.object({
            rule: z.record(z.string(), z.unknown()),
            position: z.number().int().optional(),
          }),
        },
      },
      required: true,
    },
  },
  responses: {
    201: {
      description: "The rule stored",
      content: { "application/json": { schema: z.object({ policy: PolicySchema }) } },
    },
    ...errorResponses([400, 401, 403, 409, 500]),
  },
});

const removeRoute = createRoute({
  method: "delete",
  path: "/policies/{name}",
  operationId: "removePolicy",
  tags: ["policies"],
  summary: "Removes a stored rule",
  request: {
    params: z.object({ name: z.string().openapi({ param: { name: "name", in: "path" } }) }),
  },
  responses: {
    204: { description: "Removed" },
    ...errorResponses([401, 403, 404, 409]),
  },
});

const testRoute = createRoute({
  method: "post",
  path: "/policies/test",
  operationId: "testPolicies",
  tags: ["policies"],
  summary: "Which rule decides a call (nothing runs), and what each rule before it said",
  request: { body: { content: { "application/json": { schema: TestSchema } }, required: true } },
  responses: {
    200: {
      description: "The decision (none: allowed) and the rules looked at",
      content: {
        "application/json": {
          schema: z.object({
            decision: DecisionSchema.nullable(),
            trace: z.array(z.object({
              name: z.string(),
              source: z.enum(["config", "store"]),
              matched: z.boolean(),
              why: z.string(),
            })),
          }),
        },
      },
    },
    ...errorResponses([400, 401, 403, 404]),
  },
});

/** What a test call needs to know of a tool from the gateway. */
function toolFacts(gateway: Gateway, name: string) {
  const tool = gateway.listTools().find((t) => t.name === name);
  if (!tool) {
    throw new GatewayError("NOT_FOUND", `Unknown tool ${JSON.stringify(name)}; see GET /tools`, {
      details: { tool: name },
    });
  }
  return {
    plugin: tool.plugin,
    annotations: tool.mcpListing?.annotations as Record<string, unknown> | undefined,
  };
}

/** Mounts `/policies` (the management API: the administrator's only). */
export function policyRoutes(
  config: Config,
  store: Store,
  policies: Policies,
  reload: () => Promise<void>,
): RouteMount {
  return function mountPolicies(app, { gateway }) {
    app.openapi(
      listRoute,
      async (c) => c.json({ policies: await listPolicies(config.policies, store) }, 200),
    );
    app.openapi(addRoute, async (c) => {
      const { rule, position } = c.req.valid("json");
      const policy = await addPolicy(config.policies, store, rule, position);
      await reload();
      return c.json({ policy }, 201);
    });
    app.openapi(removeRoute, async (c) => {
      await removePolicy(config.policies, store, c.req.valid("param").name);
      await reload();
      return c.body(null, 204);
    });
    app.openapi(testRoute, async (c) => {
      const body = c.req.valid("json");
      const caller = await testCaller(store, body.as, body.scopes);
      const { decision, trace } = policies.explain({
        tool: body.tool,
        ...toolFacts(gateway, body.tool),
        caller,
        server: body.server ?? caller.server,
        transport: body.transport ?? "rest",
        args: body.args ?? {},
      });
      const { approvers, timeoutMs, ...rest } = decision ?? {};
      return c.json({
        decision: decision
          ? {
            ...rest as Omit<typeof decision, "approvers" | "timeoutMs">,
            ...(approvers ? { approvers: [...approvers] } : {}),
            ...(timeoutMs !== undefined ? { timeout_ms: timeoutMs } : {}),
          }
          : null,
        trace,
      }, 200);
    });
  };
}
