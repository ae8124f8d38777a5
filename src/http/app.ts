/**
 * The HTTP transport's Hono app.
 *
 * @module
 */
import { Hono } from "hono";
import type { Config } from "../config/mod.ts";
import type { Gateway } from "../gateway/mod.ts";
import { VERSION } from "../version.ts";

/** Options of {@linkcode createApp}. */
export interface AppOptions {
  gateway: Gateway;
  config: Config;
  /** Process start, for uptime. @default Date.now() */
  startedAt?: number;
}

/** Builds the app serving REST, `/mcp` and incoming webhooks. */
export function createApp(options: AppOptions): Hono {
  const { gateway, startedAt = Date.now() } = options;
  const app = new Hono();
  app.get("/health", (c) =>
    c.json({
      status: "ok",
      version: VERSION,
      uptime_ms: Date.now() - startedAt,
      plugins: gateway.listPlugins(),
      open_circuits: gateway.openCircuits(),
    }));
  return app;
}
