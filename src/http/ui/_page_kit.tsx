/** @jsxImportSource hono/jsx */
/**
 * What the console's page groups share: the request's session, answering a
 * page, reading a form field, and the refusals a form shows as a flash.
 *
 * @module
 */
import type { Context } from "hono";
import type { JSX } from "hono/jsx/jsx-runtime";
import type { AuditLog } from "../../audit/mod.ts";
import { type ErrorCode, GatewayError } from "../../errors/mod.ts";
import type { Caller } from "../../gateway/mod.ts";
import type { Redactor } from "../../redact.ts";
import type { Store } from "../../store/mod.ts";
import type { AppEnv, ToolgateApp } from "../types.ts";
import type { Flash, PageFrame } from "./views.tsx";

/** A console request's context. */
export type Ctx = Context<AppEnv>;

/** The session of a request (`"open"` on an open server), set by the console's middleware. */
export const sessions = new WeakMap<Request, string>();

/** What a group of console pages is mounted with (built once by `consoleRoutes`). */
export interface ConsolePages {
  /** The app the pages are mounted on. */
  readonly app: ToolgateApp;
  /** The store the pages read and change. */
  readonly store: Store;
  /** The audit log the pages browse. */
  readonly audit: AuditLog;
  /** The console's clock, in ms since the epoch. */
  readonly clock: () => number;
  /** Redacts what a page shows of arguments (the server's `redact.patterns`). */
  readonly redact: Redactor;
  /** The frame (CSRF token, sign-in state, current path) of a page at `path`. */
  frameOf(c: Ctx, path: string): PageFrame;
  /** The request's path and query. */
  pathOf(c: Ctx): string;
  /** Who decides from the console: the administrator, or the local user of an open console. */
  deciderOf(c: Ctx): Caller;
}

/** Answers `page` as an uncached HTML document. */
export function html(
  c: Ctx,
  page: JSX.Element,
  status: 200 | 400 | 401 | 403 | 404 | 409 = 200,
): Promise<Response> {
  return Promise.resolve(page).then((body) =>
    c.html(`<!doctype html>${body}`, status, { "cache-control": "no-store" })
  );
}

/** A form's text field, or undefined when it is missing or a file. */
export function field(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  return typeof value === "string" ? value : undefined;
}

/** Whether `error` is a decision refused for one of `codes` (shown as a flash, not an error page). */
export function isRefusal(error: unknown, codes: readonly ErrorCode[]): error is GatewayError {
  return error instanceof GatewayError && codes.includes(error.code);
}

/** The flash of a refused decision: its message and code. */
export function refusalFlash(error: GatewayError): Flash {
  return { kind: "bad", text: `${error.message} (${error.code})` };
}
