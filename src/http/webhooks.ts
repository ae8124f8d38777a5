/**
 * Outgoing webhooks over HTTP, behind the API token: list, add, show,
 * update, disable/enable, rotate the secret, remove, test, recent attempts,
 * as `toolgate webhooks` does on the server's machine. Secrets are shown
 * once, in the answer that made them.
 *
 * @module
 */
import { defaultEgressPolicy, type EgressPolicy } from "../egress/mod.ts";
import { createRoute, z } from "@hono/zod-openapi";
import { GatewayError } from "../errors/mod.ts";
import type { Store } from "../store/mod.ts";
import {
  addWebhook,
  disableWebhook,
  enableWebhook,
  formatRetrySchedule,
  getWebhook,
  listWebhooks,
  parseDuration,
  parseRetrySchedule,
  recentAttempts,
  removeWebhook,
  rotateWebhookSecret,
  testWebhook,
  updateWebhook,
} from "../webhooks/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

const DisabledSchema = z.object({
  at: z.string(),
  reason: z.enum(["manual", "gone", "failing"]).openapi({
    description: "`manual`: disabled by hand; `gone`: the receiver answered 410; `failing`: its " +
      "last events all went to the dead-letter queue",
  }),
  detail: z.string().optional(),
});

/** An outgoing webhook as the API shows it: never its secrets. */
export const WebhookSchema = z.object({
  id: z.string().openapi({ example: "wh_01kmz3q8d2h4c7r9t6w0x5y1zb" }),
  kind: z.literal("outgoing"),
  url: z.string(),
  events: z.union([z.literal("*"), z.array(z.string())]).openapi({
    description: '`"*"`: every enabled event type, now and later',
  }),
  description: z.string().optional(),
  has_secret: z.boolean().openapi({ description: "Whether deliveries are signed" }),
  previous_secrets: z.array(z.object({ expires_at: z.string() })).openapi({
    description: "Replaced secrets still signing until they expire: `webhook-signature` carries " +
      "them beside the current one, and `X-Service-Signature` keeps the oldest of them",
  }),
  disabled: DisabledSchema.optional().openapi({
    description: "Set while the webhook receives nothing (its events wait in the DLQ)",
  }),
  retry_schedule_ms: z.array(z.number().int()).optional().openapi({
    description: "Its own waits before each retry; absent: 1, 2, 4, 8, 16 s",
  }),
  created_at: z.string(),
  updated_at: z.string().optional(),
}).openapi("Webhook");

const SecretSchema = z.string().openapi({
  description: "The signing secret, shown in this answer only, never again",
  example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
});

const AttemptLogSchema = z.object({
  at: z.string(),
  attempt: z.number().int().min(1),
  ok: z.boolean(),
  status: z.number().int().optional(),
  error: z.string().optional(),
  latency_ms: z.number().int().min(0),
  event_id: z.string(),
  event_type: z.string(),
}).openapi("DeliveryLogEntry");

const TestResultSchema = z.object({
  ok: z.boolean().openapi({ description: "The receiver answered 2xx within the timeout" }),
  status: z.number().int().optional(),
  error: z.string().optional(),
  latency_ms: z.number().int().min(0),
  egress_denied: z.boolean().optional().openapi({
    description: "The egress policy refused the receiver's address; `error` names the fix",
  }),
  signed: z.boolean(),
  event_id: z.string(),
}).openapi("WebhookTestResult");

const EventsSchema = z.union([z.literal("*"), z.array(z.string().min(1)).min(1)]).openapi({
  description: 'Event types, or `"*"` for every enabled type',
});

const ScheduleFields = {
  retry_schedule: z.string().min(1).optional().openapi({
    description: "Waits before each retry, as the CLI takes them: `5s,5m,30m,2h,5h,10h,10h`",
  }),
  retry_schedule_ms: z.array(z.number().int()).optional().openapi({
    description: "The same in milliseconds (give one of the two)",
  }),
};

const AddSchema = z.strictObject({
  url: z.string().min(1).openapi({ example: "https://example.com/hooks/toolgate" }),
  events: EventsSchema.optional(),
  secret: z.string().min(1).nullable().optional().openapi({
    description: "Left out: a `whsec_…` secret is generated and returned once; `null`: unsigned",
  }),
  description: z.string().optional(),
  ...ScheduleFields,
}).openapi("NewWebhook");

const UpdateSchema = z.strictObject({
  url: z.string().min(1).optional(),
  events: EventsSchema.optional(),
  description: z.string().nullable().optional().openapi({ description: "`null` clears it" }),
  retry_schedule: ScheduleFields.retry_schedule.unwrap().nullable().optional().openapi({
    description: "`5s,5m,…`; `null` goes back to the default schedule",
  }),
  retry_schedule_ms: ScheduleFields.retry_schedule_ms.unwrap().nullable().optional(),
}).openapi("WebhookUpdate");

const IdParams = z.object({
  id: z.string().min(1).openapi({ param: { name: "id", in: "path" } }),
});

const tags = ["webhooks"];

function json<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { "application/json": { schema } } };
}

function jsonBody<T extends z.ZodType>(schema: T, required = true) {
  return { body: { required, content: { "application/json": { schema } } } };
}

const listRoute = createRoute({
  method: "get",
  path: "/webhooks",
  operationId: "listWebhooks",
  tags,
  summary: "List outgoing webhooks, oldest first",
  responses: {
    200: json(z.object({ webhooks: z.array(WebhookSchema) }), "Every outgoing webhook"),
    ...errorResponses([401, 403]),
  },
});

const addRoute = createRoute({
  method: "post",
  path: "/webhooks",
  operationId: "addWebhook",
  tags,
  summary: "Register an outgoing webhook",
  request: jsonBody(AddSchema),
  responses: {
    201: json(
      z.object({ webhook: WebhookSchema, secret: SecretSchema.optional() }),
      "Registered; `secret` is there when it was generated",
    ),
    ...errorResponses([400, 401, 403, 415]),
  },
});

const showRoute = createRoute({
  method: "get",
  path: "/webhooks/{id}",
  operationId: "getWebhook",
  tags,
  summary: "One outgoing webhook",
  request: { params: IdParams },
  responses: {
    200: json(WebhookSchema, "The webhook"),
    ...errorResponses([401, 403, 404]),
  },
});

const updateRoute = createRoute({
  method: "patch",
  path: "/webhooks/{id}",
  operationId: "updateWebhook",
  tags,
  summary: "Change a webhook's URL, events, description or retry schedule",
  request: { params: IdParams, ...jsonBody(UpdateSchema) },
  responses: {
    200: json(WebhookSchema, "The webhook as it is now"),
    ...errorResponses([400, 401, 403, 404, 415]),
  },
});

const disableRoute = createRoute({
  method: "post",
  path: "/webhooks/{id}/disable",
  operationId: "disableWebhook",
  tags,
  summary: "Stop deliveries to a webhook (its events wait in the DLQ)",
  request: {
    params: IdParams,
    ...jsonBody(z.strictObject({ detail: z.string().max(1024).optional() }), false),
  },
  responses: {
    200: json(WebhookSchema, "The webhook, disabled"),
    ...errorResponses([400, 401, 403, 404, 415]),
  },
});

const enableRoute = createRoute({
  method: "post",
  path: "/webhooks/{id}/enable",
  operationId: "enableWebhook",
  tags,
  summary: "Deliver to a disabled webhook again (then replay its DLQ records)",
  request: { params: IdParams },
  responses: {
    200: json(
      z.object({ webhook: WebhookSchema, was_disabled: z.boolean() }),
      "The webhook, enabled",
    ),
    ...errorResponses([401, 403, 404]),
  },
});

const rotateRoute = createRoute({
  method: "post",
  path: "/webhooks/{id}/rotate-secret",
  operationId: "rotateWebhookSecret",
  tags,
  summary: "Replace a webhook's signing secret; the old one keeps signing during the overlap",
  request: {
    params: IdParams,
    ...jsonBody(
      z.strictObject({
        overlap: z.string().min(1).optional().openapi({
          description: "How long the old secret still signs: `webhook-signature` carries both, " +
            "`X-Service-Signature` keeps the old one until the overlap ends " +
            "(`24h` by default, `0s` to switch both at once)",
          example: "24h",
        }),
        secret: z.string().min(1).optional().openapi({
          description: "The new secret; left out, a `whsec_…` one is generated",
        }),
      }),
      false,
    ),
  },
  responses: {
    200: json(z.object({ webhook: WebhookSchema, secret: SecretSchema }), "The new secret"),
    ...errorResponses([400, 401, 403, 404, 415]),
  },
});

const removeRoute = createRoute({
  method: "delete",
  path: "/webhooks/{id}",
  operationId: "removeWebhook",
  tags,
  summary: "Remove an outgoing webhook (its pending deliveries are dropped)",
  request: { params: IdParams },
  responses: {
    204: { description: "Removed" },
    ...errorResponses([401, 403, 404]),
  },
});

const testRoute = createRoute({
  method: "post",
  path: "/webhooks/{id}/test",
  operationId: "testWebhook",
  tags,
  summary: "Send one signed webhook.test envelope and report the receiver's answer",
  request: { params: IdParams },
  responses: {
    200: json(TestResultSchema, "What the receiver answered (`ok: false` when it failed)"),
    ...errorResponses([401, 403, 404]),
  },
});

const attemptsRoute = createRoute({
  method: "get",
  path: "/webhooks/{id}/attempts",
  operationId: "listWebhookAttempts",
  tags,
  summary: "The webhook's last 20 delivery attempts, newest first",
  request: { params: IdParams },
  responses: {
    200: json(z.object({ attempts: z.array(AttemptLogSchema) }), "Recent attempts"),
    ...errorResponses([401, 403, 404]),
  },
});

/**
 * One retry schedule from `retry_schedule` (`5s,5m`) or `retry_schedule_ms`,
 * held to the CLI's limits; `null` clears it, `undefined` leaves it.
 */
function scheduleOf(
  body: { retry_schedule?: string | null; retry_schedule_ms?: number[] | null },
): number[] | null | undefined {
  const { retry_schedule: text, retry_schedule_ms: ms } = body;
  if (text !== undefined && ms !== undefined) {
    throw new GatewayError(
      "USAGE",
      "Invalid request body: give retry_schedule or retry_schedule_ms, not both",
    );
  }
  if (text === null || ms === null) return null;
  if (text !== undefined) return parseRetrySchedule(text, "retry_schedule");
  if (ms !== undefined) {
    if (ms.some((delay) => !(delay >= 1))) {
      throw new GatewayError(
        "USAGE",
        "Invalid retry_schedule_ms: each delay must be between 1ms and 7d",
      );
    }
    return parseRetrySchedule(formatRetrySchedule(ms), "retry_schedule_ms");
  }
  return undefined;
}

/** Options of {@linkcode webhookRoutes}. */
export interface WebhookRoutesOptions {
  /**
   * The process's egress policy: `test` sends through it, and a new URL
   * whose host is a refused IP address or `localhost` is `403 EGRESS_DENIED`.
   * @default one built from the app's config
   */
  egress?: EgressPolicy;
}

/** Mounts the `/webhooks` routes on the app. */
export function webhookRoutes(store: Store, options: WebhookRoutesOptions = {}): RouteMount {
  return function mountWebhooks(app, { config }) {
    const egress = options.egress ?? defaultEgressPolicy(config);
    app.openapi(listRoute, async (c) => c.json({ webhooks: await listWebhooks(store) }, 200));
    app.openapi(addRoute, async (c) => {
      const body = c.req.valid("json");
      const schedule = scheduleOf(body);
      const result = await addWebhook(store, {
        url: body.url,
        events: body.events,
        secret: body.secret,
        description: body.description,
        ...(schedule ? { retry_schedule_ms: schedule } : {}),
      }, { egress });
      return c.json(result, 201);
    });
    app.openapi(
      showRoute,
      async (c) => c.json(await getWebhook(store, c.req.valid("param").id), 200),
    );
    app.openapi(updateRoute, async (c) => {
      const body = c.req.valid("json");
      const schedule = scheduleOf(body);
      const webhook = await updateWebhook(store, c.req.valid("param").id, {
        url: body.url,
        events: body.events,
        description: body.description,
        ...(schedule !== undefined ? { retry_schedule_ms: schedule } : {}),
      }, { egress });
      return c.json(webhook, 200);
    });
    app.openapi(disableRoute, async (c) => {
      const { detail } = c.req.valid("json") ?? {};
      return c.json(await disableWebhook(store, c.req.valid("param").id, detail), 200);
    });
    app.openapi(enableRoute, async (c) => {
      return c.json(await enableWebhook(store, c.req.valid("param").id), 200);
    });
    app.openapi(rotateRoute, async (c) => {
      const { overlap, secret } = c.req.valid("json") ?? {};
      const overlapMs = overlap === undefined ? undefined : parseDuration(overlap, "overlap");
      const result = await rotateWebhookSecret(store, c.req.valid("param").id, {
        ...(overlapMs !== undefined ? { overlapMs } : {}),
        ...(secret !== undefined ? { secret } : {}),
      });
      return c.json(result, 200);
    });
    app.openapi(removeRoute, async (c) => {
      await removeWebhook(store, c.req.valid("param").id);
      return c.body(null, 204);
    });
    app.openapi(testRoute, async (c) => {
      const result = await testWebhook(store, c.req.valid("param").id, {
        timeoutMs: config.webhooks.timeout_ms,
        egress,
      });
      return c.json(result, 200);
    });
    app.openapi(attemptsRoute, async (c) => {
      const { id } = c.req.valid("param");
      await getWebhook(store, id); // 404 for an unknown id
      return c.json({ attempts: await recentAttempts(store, id) }, 200);
    });
  };
}
