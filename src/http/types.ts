/**
 * Types shared by the app and the modules that mount routes on it.
 *
 * @module
 */
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Config } from "../config/mod.ts";
import type { Caller, Gateway } from "../gateway/mod.ts";
import type { ServerLifecycle } from "./lifecycle.ts";

/** Hono environment of the app: per-request variables. */
export interface AppEnv {
  Variables: {
    /** Set by routes whose errors are tool-call failures (adds `content`/`isError`). */
    toolCall?: boolean;
    /**
     * Who is calling, set by authentication (`src/http/auth.ts`); unset on
     * paths that skip it (`/health`, incoming webhooks).
     */
    caller?: Caller;
  };
}

/** The app: an `OpenAPIHono`, so routes added with `app.openapi()` appear in `/openapi.json`. */
export type ToolgateApp = OpenAPIHono<AppEnv>;

/** What a {@linkcode RouteMount} gets besides the app. */
export interface RouteContext {
  /** The gateway (tools, plugins, `gateway.bus` for events). */
  gateway: Gateway;
  /** The resolved configuration. */
  config: Config;
  /**
   * Serving state: long-lived responses (SSE such as `GET /events`) must end
   * when `lifecycle.signal` aborts, or shutdown waits for them.
   */
  lifecycle: ServerLifecycle;
}

/** Registers routes on the app (e.g. `/audit`, `/events`, incoming webhook paths). */
export type RouteMount = (app: ToolgateApp, context: RouteContext) => void;
