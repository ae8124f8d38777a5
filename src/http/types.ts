/**
 * Types shared by the app and the modules that mount routes on it.
 *
 * @module
 */
import type { OpenAPIHono } from "@hono/zod-openapi";

/** Hono environment of the app: per-request variables. */
export interface AppEnv {
  Variables: {
    /** Set by routes whose errors are tool-call failures (adds `content`/`isError`). */
    toolCall?: boolean;
  };
}

/** The app: an `OpenAPIHono`, so routes added with `app.openapi()` appear in `/openapi.json`. */
export type ToolgateApp = OpenAPIHono<AppEnv>;

/** Registers routes on the app (e.g. `/audit`, `/events`, incoming webhook paths). */
export type RouteMount = (app: ToolgateApp) => void;
