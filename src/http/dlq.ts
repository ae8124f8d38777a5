/**
 * The dead-letter queue over HTTP, behind the API token: list, show, replay
 * and purge, as `toolgate dlq` does on the server's machine.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Store } from "../store/mod.ts";
import {
  deleteDlqEntry,
  getDlqEntry,
  listDlq,
  purgeDlq,
  replayDlq,
  type ReplayTarget,
} from "../webhooks/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

/** Most records per `GET /dlq` page. */
export const MAX_DLQ_PAGE = 500;

const AttemptSchema = z.object({
  attempt: z.number().int().min(1),
  at: z.string(),
  status: z.number().int().optional(),
  error: z.string().optional(),
  duration_ms: z.number().int().min(0),
}).openapi("DeliveryAttempt");

/** A dead-lettered delivery, as `toolgate dlq list --json` prints it. */
export const DlqEntrySchema = z.object({
  dlq_id: z.string().openapi({ example: "dlq_01kmz3q8d2h4c7r9t6w0x5y1zb" }),
  webhook_id: z.string(),
  url: z.string().openapi({ description: "The webhook's URL when the delivery failed" }),
  event: z.record(z.string(), z.unknown()).openapi({
    description: "The whole envelope that was sent ({id, type, timestamp, data}); only " +
      "{id, type} when `body_lost`",
  }),
  body_lost: z.literal(true).optional().openapi({
    description: "The event's body was lost before it was sent (a store defect fixed in " +
      "issue 33): the record cannot be replayed",
  }),
  attempts: z.array(AttemptSchema),
  reason: z.string().optional().openapi({
    description: "Why it is here besides its attempts: a 410 Gone, or a disabled webhook " +
      "(then nothing was sent)",
  }),
  failed_at: z.string(),
}).openapi("DlqEntry");

const DlqPageSchema = z.object({
  records: z.array(DlqEntrySchema),
  next: z.string().nullable().openapi({
    description: "Pass as `after` for the next page; null on the last page",
  }),
}).openapi("DlqPage");

const ReplayResultSchema = z.object({
  queued: z.array(z.string()).openapi({ description: "DLQ ids queued for a fresh delivery" }),
  already_queued: z.array(z.string()),
  skipped: z.array(z.object({ dlq_id: z.string(), reason: z.string() })).openapi({
    description: "Records left alone: their webhook was removed or is disabled",
  }),
}).openapi("DlqReplayResult");

const DlqIdParams = z.object({
  dlq_id: z.string().min(1).openapi({ param: { name: "dlq_id", in: "path" } }),
});

const IsoTime = z.string().datetime({ offset: true });

const tags = ["dead-letter queue"];

const listRoute = createRoute({
  method: "get",
  path: "/dlq",
  operationId: "listDlq",
  tags,
  summary: "List dead-lettered deliveries, oldest failure first",
  request: {
    query: z.object({
      webhook: z.string().min(1).optional().openapi({ description: "Only this webhook's" }),
      after: z.string().min(1).optional().openapi({
        description: "The `next` of the previous page",
      }),
      limit: z.coerce.number().int().min(1).max(MAX_DLQ_PAGE).default(100).openapi({
        description: `Records per page, 1 to ${MAX_DLQ_PAGE}`,
      }),
    }),
  },
  responses: {
    200: {
      description: "A page of records",
      content: { "application/json": { schema: DlqPageSchema } },
    },
    ...errorResponses([400, 401, 403]),
  },
});

const showRoute = createRoute({
  method: "get",
  path: "/dlq/{dlq_id}",
  operationId: "getDlq",
  tags,
  summary: "One dead-lettered delivery: its event and attempts",
  request: { params: DlqIdParams },
  responses: {
    200: { description: "The record", content: { "application/json": { schema: DlqEntrySchema } } },
    ...errorResponses([401, 403, 404]),
  },
});

const replayOneRoute = createRoute({
  method: "post",
  path: "/dlq/{dlq_id}/replay",
  operationId: "replayDlqRecord",
  tags,
  summary: "Queue one record's event again for its webhook (same event id and bytes)",
  request: { params: DlqIdParams },
  responses: {
    200: {
      description: "Queued; the record leaves the queue once delivered",
      content: { "application/json": { schema: ReplayResultSchema } },
    },
    ...errorResponses([401, 403, 404, 409]),
  },
});

const replayManyRoute = createRoute({
  method: "post",
  path: "/dlq/replay",
  operationId: "replayDlq",
  tags,
  summary: "Queue every record, or every record of one webhook, again",
  request: {
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.union([
            z.strictObject({ all: z.literal(true) }),
            z.strictObject({
              webhook: z.string().min(1),
              since: IsoTime.optional().openapi({
                description: "Only records that failed at or after this ISO 8601 time",
              }),
            }),
          ]).openapi({
            description: '`{"all": true}`, or `{"webhook": "wh_…", "since"?: time}` to catch up ' +
              "a webhook after enabling it",
          }),
        },
      },
    },
  },
  responses: {
    200: {
      description: "What was queued and skipped",
      content: { "application/json": { schema: ReplayResultSchema } },
    },
    ...errorResponses([400, 401, 403, 404, 409, 415]),
  },
});

const deleteRoute = createRoute({
  method: "delete",
  path: "/dlq/{dlq_id}",
  operationId: "deleteDlqRecord",
  tags,
  summary: "Delete one record",
  request: { params: DlqIdParams },
  responses: {
    204: { description: "Deleted" },
    ...errorResponses([401, 403, 404]),
  },
});

const purgeRoute = createRoute({
  method: "post",
  path: "/dlq/purge",
  operationId: "purgeDlq",
  tags,
  summary: "Delete every record, or those that failed before a time",
  request: {
    body: {
      required: false,
      content: {
        "application/json": {
          schema: z.strictObject({
            before: IsoTime.optional().openapi({
              description: "Only records that failed before this ISO 8601 time",
            }),
          }),
        },
      },
    },
  },
  responses: {
    200: {
      description: "How many records were deleted",
      content: {
        "application/json": { schema: z.object({ purged: z.number().int().min(0) }) },
      },
    },
    ...errorResponses([400, 401, 403, 415]),
  },
});

/** Mounts `/dlq` routes on the app. */
export function dlqRoutes(store: Store): RouteMount {
  return function mountDlq(app) {
    app.openapi(listRoute, async (c) => {
      const { webhook, after, limit } = c.req.valid("query");
      const records = await listDlq(store, { webhook, after, limit: limit + 1 });
      const page = records.slice(0, limit);
      const next = records.length > limit ? page.at(-1)!.dlq_id : null;
      return c.json({ records: page, next }, 200);
    });
    app.openapi(showRoute, async (c) => {
      return c.json(await getDlqEntry(store, c.req.valid("param").dlq_id), 200);
    });
    app.openapi(replayOneRoute, async (c) => {
      return c.json(await replayDlq(store, c.req.valid("param").dlq_id), 200);
    });
    app.openapi(replayManyRoute, async (c) => {
      const body = c.req.valid("json");
      const target: ReplayTarget = "all" in body
        ? "all"
        : { webhook: body.webhook, since: body.since };
      return c.json(await replayDlq(store, target), 200);
    });
    app.openapi(deleteRoute, async (c) => {
      await deleteDlqEntry(store, c.req.valid("param").dlq_id);
      return c.body(null, 204);
    });
    app.openapi(purgeRoute, async (c) => {
      const { before } = c.req.valid("json") ?? {};
      return c.json({ purged: await purgeDlq(store, { before }) }, 200);
    });
  };
}
