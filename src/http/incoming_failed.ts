/**
 * Failed incoming jobs over HTTP, behind the API token: list, show, replay
 * and purge, as `toolgate incoming failed` does on the server's machine.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Store } from "../store/mod.ts";
import {
  type FailedReplayTarget,
  listFailedJobs,
  purgeFailedJobs,
  replayFailedJobs,
  showFailedJob,
} from "../webhooks/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

const AttemptSchema = z.object({
  at: z.string(),
  code: z.string().openapi({ example: "TOOL_EXECUTION_FAILED" }),
  message: z.string(),
  fields: z.array(z.string()).optional().openapi({
    description: "The argument fields a TOOL_INPUT_INVALID named",
  }),
}).openapi("IncomingAttempt");

/** A failed incoming job, as `toolgate incoming failed list --json` prints it. */
export const FailedJobSchema = z.object({
  id: z.string().openapi({ example: "inj_01kmz3q8d2h4c7r9t6w0x5y1zb" }),
  endpoint_id: z.string(),
  endpoint_path: z.string().optional().openapi({
    description: "The endpoint's path, while it is registered",
  }),
  handler: z.string(),
  received_at: z.string(),
  failed_at: z.string(),
  attempts: z.array(AttemptSchema).openapi({ description: "Every handler call, oldest first" }),
  arguments: z.unknown().optional().openapi({
    description: "The handler's arguments (GET /incoming/failed/{id} only)",
  }),
}).openapi("FailedIncomingJob");

const ReplayResultSchema = z.object({
  replayed: z.array(z.string()).openapi({ description: "Jobs queued again" }),
}).openapi("FailedIncomingReplayResult");

const JobIdParams = z.object({
  id: z.string().min(1).openapi({ param: { name: "id", in: "path" } }),
});

const tags = ["incoming webhooks"];

const listRoute = createRoute({
  method: "get",
  path: "/incoming/failed",
  operationId: "listFailedIncomingJobs",
  tags,
  summary: "List failed incoming jobs, oldest first",
  request: {
    query: z.object({
      endpoint: z.string().min(1).optional().openapi({ description: "Only this endpoint's" }),
    }),
  },
  responses: {
    200: {
      description: "The failed jobs",
      content: {
        "application/json": { schema: z.object({ jobs: z.array(FailedJobSchema) }) },
      },
    },
    ...errorResponses([400, 401, 403, 404]),
  },
});

const showRoute = createRoute({
  method: "get",
  path: "/incoming/failed/{id}",
  operationId: "getFailedIncomingJob",
  tags,
  summary: "One failed incoming job: endpoint, handler, arguments and attempts",
  request: { params: JobIdParams },
  responses: {
    200: { description: "The job", content: { "application/json": { schema: FailedJobSchema } } },
    ...errorResponses([401, 403, 404]),
  },
});

const replayOneRoute = createRoute({
  method: "post",
  path: "/incoming/failed/{id}/replay",
  operationId: "replayFailedIncomingJob",
  tags,
  summary: "Queue one failed job again with a fresh retry schedule (same id and arguments)",
  request: { params: JobIdParams },
  responses: {
    200: {
      description: "Queued; it runs through the normal pipeline",
      content: { "application/json": { schema: ReplayResultSchema } },
    },
    ...errorResponses([401, 403, 404]),
  },
});

const replayManyRoute = createRoute({
  method: "post",
  path: "/incoming/failed/replay",
  operationId: "replayFailedIncomingJobs",
  tags,
  summary: "Queue every failed job, or every failed job of one endpoint, again",
  request: {
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.union([
            z.strictObject({ all: z.literal(true) }),
            z.strictObject({ endpoint: z.string().min(1) }),
          ]).openapi({ description: '`{"all": true}` or `{"endpoint": "in_…"}`' }),
        },
      },
    },
  },
  responses: {
    200: {
      description: "What was queued",
      content: { "application/json": { schema: ReplayResultSchema } },
    },
    ...errorResponses([400, 401, 403, 404, 415]),
  },
});

const deleteRoute = createRoute({
  method: "delete",
  path: "/incoming/failed/{id}",
  operationId: "deleteFailedIncomingJob",
  tags,
  summary: "Delete one failed job",
  request: { params: JobIdParams },
  responses: {
    204: { description: "Deleted" },
    ...errorResponses([401, 403, 404]),
  },
});

const purgeRoute = createRoute({
  method: "post",
  path: "/incoming/failed/purge",
  operationId: "purgeFailedIncomingJobs",
  tags,
  summary: "Delete every failed job, or those that failed before a time",
  request: {
    body: {
      required: false,
      content: {
        "application/json": {
          schema: z.strictObject({
            before: z.string().datetime({ offset: true }).optional().openapi({
              description: "Only jobs that failed before this ISO 8601 time",
            }),
          }),
        },
      },
    },
  },
  responses: {
    200: {
      description: "How many jobs were deleted",
      content: {
        "application/json": { schema: z.object({ purged: z.number().int().min(0) }) },
      },
    },
    ...errorResponses([400, 401, 403, 415]),
  },
});

/**
 * Mounts the `/incoming/failed` routes on the app.
 *
 * @param onReplayed Called after a replay queued jobs (the router claims them at once).
 */
export function incomingFailedRoutes(store: Store, onReplayed?: () => void): RouteMount {
  return function mountIncomingFailed(app) {
    app.openapi(listRoute, async (c) => {
      const { endpoint } = c.req.valid("query");
      return c.json({ jobs: await listFailedJobs(store, { endpoint }) }, 200);
    });
    app.openapi(showRoute, async (c) => {
      return c.json(await showFailedJob(store, c.req.valid("param").id), 200);
    });
    app.openapi(replayOneRoute, async (c) => {
      const result = await replayFailedJobs(store, c.req.valid("param").id);
      onReplayed?.();
      return c.json(result, 200);
    });
    app.openapi(replayManyRoute, async (c) => {
      const body = c.req.valid("json");
      const target: FailedReplayTarget = "all" in body ? "all" : { endpoint: body.endpoint };
      const result = await replayFailedJobs(store, target);
      onReplayed?.();
      return c.json(result, 200);
    });
    app.openapi(deleteRoute, async (c) => {
      await purgeFailedJobs(store, { id: c.req.valid("param").id });
      return c.body(null, 204);
    });
    app.openapi(purgeRoute, async (c) => {
      const { before } = c.req.valid("json") ?? {};
      return c.json({
        purged: await purgeFailedJobs(store, { before: before ? new Date(before) : undefined }),
      }, 200);
    });
  };
}
