/**
 * `GET /metrics`: the server's metrics in the Prometheus text format, behind
 * the API token unless `metrics.public` is set.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { errorResponses } from "./errors.ts";
import type { RouteMount } from "./types.ts";

/** What the route serves: a server's metrics (see `src/metrics`). */
export interface MetricsSource {
  /** `text/plain; version=0.0.4; charset=utf-8`. */
  readonly contentType: string;
  /** Every metric in the Prometheus text exposition format. */
  scrape(): Promise<string>;
}

function metricsRoute(isPublic: boolean) {
  return createRoute({
    method: "get",
    path: "/metrics",
    operationId: "metrics",
    tags: ["server"],
    summary: "Prometheus metrics",
    description: "Tool calls, circuits, plugin and upstream states, webhook deliveries, incoming " +
      "payloads, audit appends and process figures in the Prometheus text format 0.0.4 " +
      "(docs/observability.md lists them). Needs the API token unless `metrics.public` is set.",
    ...(isPublic ? { security: [] } : {}),
    responses: {
      200: {
        description: "The metrics",
        content: { "text/plain; version=0.0.4": { schema: z.string() } },
      },
      ...errorResponses([401, 403]),
    },
  });
}

/**
 * Mounts `GET /metrics`. Whether the token is needed is decided by the app's
 * bearer check (`config.metrics.public`); this only describes it.
 *
 * @example
 * ```ts
 * serveHttp({ gateway, config, routes: [metricsRoutes(metrics)] });
 * ```
 */
export function metricsRoutes(metrics: MetricsSource): RouteMount {
  return function mountMetrics(app, { config }) {
    app.openapi(metricsRoute(config.metrics.public), async (c) => {
      const text = await metrics.scrape();
      return c.text(text, 200, { "Content-Type": metrics.contentType });
    });
  };
}
