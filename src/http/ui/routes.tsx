/** @jsxImportSource hono/jsx */
/**
 * The console under `/ui`: sign-in and sessions, the overview and tool pages,
 * the live event stream, and the mounting of the page groups (integrity,
 * deliveries, logs), each in its own `*_routes.tsx`.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { Approvals } from "../../approvals/mod.ts";
import type { AuditLog } from "../../audit/mod.ts";
import type { EgressPolicy } from "../../egress/mod.ts";
import { GatewayError } from "../../errors/mod.ts";
import { ADMIN_CALLER, LOCAL_CALLER, toToolResult } from "../../gateway/mod.ts";
import { newId } from "../../ids.ts";
import type { ToolPins } from "../../pins/mod.ts";
import { createRedactor } from "../../redact.ts";
import type { Store } from "../../store/mod.ts";
import { listWebhooks } from "../../webhooks/mod.ts";
import { VERSION } from "../../version.ts";
import type { AppEnv, RouteMount, ToolgateApp } from "../types.ts";
import { CONSOLE_CSS, CONSOLE_JS } from "./assets.ts";
import { mountDeliveryPages } from "./delivery_routes.tsx";
import { mountIntegrityPages } from "./integrity_routes.tsx";
import { mountLogPages } from "./log_routes.tsx";
import { type ConsolePages, type Ctx, field, html, sessions } from "./_page_kit.tsx";
import { isConsolePath, UI } from "./paths.ts";
import { ConsoleSessions, SESSION_COOKIE, SESSION_TTL_MS } from "./session.ts";
import { CallStats } from "./stats.ts";
import {
  ErrorPage,
  OverviewPage,
  type PageFrame,
  SignInPage,
  ToolPage,
  ToolsPage,
} from "./views.tsx";

/** Options of {@linkcode consoleRoutes}. */
export interface ConsoleOptions {
  /** The store (webhooks, dead letters, incoming endpoints, the audit chain). */
  store: Store;
  /** The audit log the pages browse. */
  audit: AuditLog;
  /** The egress policy webhook tests send through. @default the store's defaults */
  egress?: EgressPolicy;
  /** Tells the incoming router that replayed jobs wait (`IncomingRouter.wake`). @default none */
  wakeIncoming?: () => void;
  /** The pins of upstream definitions the pins page shows and decides. @default none: pinning is off */
  pins?: ToolPins;
  /** The held calls the approvals page shows and decides. @default none: the page says so */
  approvals?: Approvals;
  /**
   * Clock of the console's sessions and of the times a secret rotation
   * shows and uses, in ms since the epoch. @default Date.now
   */
  now?: () => number;
}

const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": "default-src 'none'; style-src 'self'; script-src 'self'; " +
    "connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; " +
    "base-uri 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
};

/** How long the overview's dead-letter count is reused, in ms. */
const DLQ_RECOUNT_MS = 5000;

/** What the console asks of a server with API keys but no `TOOLGATE_API_TOKEN`. */
const NO_ADMIN = "The console needs TOOLGATE_API_TOKEN: API keys or an OAuth issuer " +
  "(auth.oauth) are configured, so the server is not open, and neither a key nor an access token " +
  "may use the management API the console shows. Start the server with TOOLGATE_API_TOKEN set " +
  "and sign in with it.";

/** A `next` address after sign-in: only console paths, never another site. */
function safeNext(raw: unknown): string {
  return typeof raw === "string" && isConsolePath(raw) && !raw.startsWith("//") &&
      !/[\\\s]/.test(raw)
    ? raw
    : UI;
}

/**
 * Mounts the web console at `/ui` (see docs/console.md). With an API token
 * the pages need a session from the sign-in form (an HttpOnly, SameSite=Strict
 * cookie; the session is kept in the store, so every instance on it honours
 * it); without one (a loopback-only server) they are open like the rest
 * of the API. Every form carries a CSRF token, and a form from another
 * origin is refused. Mount it before routes that answer every path.
 *
 * @example
 * ```ts
 * serveHttp({ gateway, config, routes: [consoleRoutes({ store, audit })] });
 * ```
 */
export function consoleRoutes(options: ConsoleOptions): RouteMount {
  const { store, audit, egress, now, pins, approvals } = options;
  const clock = now ?? Date.now;
  return function mountConsole(app: ToolgateApp, { gateway, config, lifecycle }) {
    const redact = createRedactor({ patterns: config.redact.patterns });
    const auth = new ConsoleSessions({ token: config.apiToken, store: store.consoleSessions, now });
    // Open like the rest of the API: no token, no OAuth issuer, and no API key yet.
    const isOpen = async () => !config.apiToken && !config.auth.oauth && !await store.apiKeys.any();
    const stats = new CallStats();
    const unfollow = stats.follow(gateway.bus);
    lifecycle.signal.addEventListener("abort", unfollow, { once: true });

    // The overview's dead-letter count (the store's count, no record read):
    // asked at most once per DLQ_RECOUNT_MS, requests meanwhile share it.
    let dlqCounted: { at: number; count: Promise<number> } | undefined;
    const countDlq = (): Promise<number> => {
      const now = Date.now();
      if (!dlqCounted || now - dlqCounted.at >= DLQ_RECOUNT_MS) {
        const count = store.deliveries.countDlq();
        dlqCounted = { at: now, count };
        count.catch(() => dlqCounted = undefined);
      }
      return dlqCounted.count;
    };

    const frameOf = (c: Ctx, path: string): PageFrame => {
      const session = sessions.get(c.req.raw) ?? "open";
      return { csrf: auth.csrfToken(session), signedIn: session !== "open", path };
    };
    const pathOf = (c: Ctx) => {
      const url = new URL(c.req.url);
      return url.pathname + url.search;
    };

    // Errors of pages and forms answer a page, not the API's JSON (streams keep it).
    const errorPages: MiddlewareHandler<AppEnv> = async (c, next) => {
      await next();
      const error = c.error;
      if (!(error instanceof GatewayError)) return;
      if (c.req.path === `${UI}/events` || c.req.path.endsWith("/stream")) return;
      const session = sessions.get(c.req.raw);
      const frame = session === undefined ? undefined : frameOf(c, UI);
      const status = c.res.status;
      const page = await Promise.resolve(
        <ErrorPage frame={frame} status={status} code={error.code} message={error.message} />,
      );
      c.res = new Response(`<!doctype html>${page}`, {
        status,
        headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" },
      });
    };
    app.use(`${UI}/*`, securityHeaders, errorPages);
    app.use(UI, securityHeaders, errorPages);

    app.get(`${UI}/assets/console.css`, (c) =>
      c.body(CONSOLE_CSS, 200, {
        "content-type": "text/css; charset=utf-8",
        "cache-control": `public, max-age=3600`,
        etag: `"${VERSION}"`,
      }));
    app.get(`${UI}/assets/console.js`, (c) =>
      c.body(CONSOLE_JS, 200, {
        "content-type": "text/javascript; charset=utf-8",
        "cache-control": `public, max-age=3600`,
        etag: `"${VERSION}"`,
      }));

    app.get(`${UI}/login`, async (c) => {
      if (await isOpen()) return c.redirect(UI, 303);
      const error = config.apiToken ? undefined : NO_ADMIN;
      return html(c, <SignInPage next={safeNext(c.req.query("next"))} error={error} />);
    });
    app.post(`${UI}/login`, async (c) => {
      sameOrigin(c);
      const body = await c.req.parseBody();
      const next = safeNext(field(body, "next"));
      if (await isOpen()) return c.redirect(next, 303);
      const cookie = await auth.signIn(field(body, "token") ?? "");
      if (!cookie) {
        const error = config.apiToken
          ? "That is not the API token (TOOLGATE_API_TOKEN)."
          : NO_ADMIN;
        return html(c, <SignInPage next={next} error={error} />, 401);
      }
      setCookie(c, SESSION_COOKIE, cookie, {
        httpOnly: true,
        sameSite: "Strict",
        secure: new URL(c.req.url).protocol === "https:",
        path: UI,
        maxAge: SESSION_TTL_MS / 1000,
      });
      return c.redirect(next, 303);
    });

    // Everything below needs a session (or a server without a token).
    const requireSession: MiddlewareHandler<AppEnv> = async (c, next) => {
      const path = c.req.path;
      if (path === `${UI}/login` || path.startsWith(`${UI}/assets/`)) return await next();
      const session = await auth.check(getCookie(c, SESSION_COOKIE)) ??
        (await isOpen() ? "open" : undefined);
      if (!session) {
        if (c.req.method === "GET" && !path.endsWith("/stream") && path !== `${UI}/events`) {
          return c.redirect(`${UI}/login?next=${encodeURIComponent(pathOf(c))}`, 303);
        }
        throw new GatewayError("UNAUTHORIZED", "Unauthorized: sign in to the console at /ui/login");
      }
      sessions.set(c.req.raw, session);
      if (c.req.method === "POST") {
        sameOrigin(c);
        const body = await c.req.parseBody();
        if (!auth.csrfValid(session, field(body, "_csrf"))) {
          throw new GatewayError(
            "FORBIDDEN",
            "Forbidden: the form's CSRF token is missing or stale; reload the page and try again",
          );
        }
      }
      await next();
    };
    app.use(`${UI}/*`, requireSession);
    app.use(UI, requireSession);

    app.post(`${UI}/logout`, async (c) => {
      const session = sessions.get(c.req.raw);
      if (session && session !== "open") await auth.signOut(session);
      deleteCookie(c, SESSION_COOKIE, { path: UI });
      return c.redirect(session === "open" ? UI : `${UI}/login`, 303);
    });

    // Live updates: the event stream, authorized by the session cookie.
    app.get(`${UI}/events`, (c) => {
      const headers = new Headers();
      for (const name of ["host", "last-event-id", "accept"]) {
        const value = c.req.header(name);
        if (value !== undefined) headers.set(name, value);
      }
      if (sessions.get(c.req.raw) !== "open" && config.apiToken) {
        headers.set("authorization", `Bearer ${config.apiToken}`);
      }
      const url = new URL(c.req.url);
      return app.fetch(
        new Request(new URL(`/events${url.search}`, url), { headers, signal: c.req.raw.signal }),
      );
    });

    app.get(UI, async (c) => {
      const [webhooks, dlqCount] = await Promise.all([listWebhooks(store), countDlq()]);
      return html(
        c,
        <OverviewPage
          frame={frameOf(c, UI)}
          data={{
            status: lifecycle.draining ? "draining" : "ok",
            version: VERSION,
            uptimeMs: Math.max(0, Date.now() - lifecycle.startedAt),
            toolCount: gateway.listTools().length,
            plugins: gateway.listPlugins(),
            openCircuits: gateway.openCircuits(),
            minutes: stats.lastHour(),
            webhooks: webhooks.length,
            disabledWebhooks: webhooks.filter((w) => w.disabled).length,
            dlqCount,
          }}
        />,
      );
    });

    app.get(`${UI}/tools`, (c) => {
      return html(c, <ToolsPage frame={frameOf(c, `${UI}/tools`)} tools={gateway.listTools()} />);
    });
    const toolOf = (name: string) => {
      const tool = gateway.listTools().find((t) => t.name === name);
      if (!tool) throw new GatewayError("TOOL_NOT_FOUND", `Unknown tool ${JSON.stringify(name)}`);
      return tool;
    };
    app.get(`${UI}/tools/:name`, (c) => {
      const tool = toolOf(c.req.param("name"));
      const path = `${UI}/tools/${encodeURIComponent(tool.name)}`;
      return html(c, <ToolPage frame={frameOf(c, path)} tool={tool} args="{}" />);
    });
    app.post(`${UI}/tools/:name`, async (c) => {
      const tool = toolOf(c.req.param("name"));
      const frame = frameOf(c, `${UI}/tools/${encodeURIComponent(tool.name)}`);
      const raw = field(await c.req.parseBody(), "arguments")?.trim() || "{}";
      let args: unknown;
      try {
        args = JSON.parse(raw);
      } catch (error) {
        const text = `Invalid arguments: not JSON (${(error as Error).message}); ` +
          `write a JSON object such as {"key": "value"}`;
        return html(
          c,
          <ToolPage frame={frame} tool={tool} args={raw} flash={{ kind: "bad", text }} />,
          400,
        );
      }
      if (typeof args !== "object" || args === null || Array.isArray(args)) {
        const text = 'Invalid arguments: expected a JSON object such as {"key": "value"}';
        return html(
          c,
          <ToolPage frame={frame} tool={tool} args={raw} flash={{ kind: "bad", text }} />,
          400,
        );
      }
      try {
        const result = await gateway.call(tool.name, args, {
          sessionId: newId("ses"),
          signal: c.req.raw.signal,
          source: "console",
          caller: sessions.get(c.req.raw) === "open" ? LOCAL_CALLER : ADMIN_CALLER,
        });
        return html(
          c,
          <ToolPage
            frame={frame}
            tool={tool}
            args={raw}
            result={{ ok: true, body: toToolResult(result), latencyMs: result.latency_ms }}
          />,
        );
      } catch (error) {
        if (!(error instanceof GatewayError)) throw error;
        const body = { code: error.code, message: error.message, details: error.details };
        return html(
          c,
          <ToolPage frame={frame} tool={tool} args={raw} result={{ ok: false, body }} />,
        );
      }
    });

    // Who decides from the console: the administrator (signed in with the API token), or the
    // local user of an open console, as REST records them.
    const deciderOf = (c: Ctx) => sessions.get(c.req.raw) === "open" ? LOCAL_CALLER : ADMIN_CALLER;

    const pages: ConsolePages = { app, store, audit, clock, redact, frameOf, pathOf, deciderOf };
    mountIntegrityPages(pages, { pins, approvals });
    mountDeliveryPages(pages, egress);
    mountLogPages(pages, { wakeIncoming: options.wakeIncoming, stopping: lifecycle.signal });
  };
}

const securityHeaders: MiddlewareHandler<AppEnv> = async (c, next) => {
  await next();
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(name, value);
};

/**
 * Refuses a form sent from another origin: its `Origin` (or, without one,
 * its `Referer`) must name this server's `Host`.
 *
 * @throws {GatewayError} `FORBIDDEN`
 */
function sameOrigin(c: Ctx): void {
  const host = c.req.header("host") ?? new URL(c.req.url).host;
  const from = c.req.header("origin") ?? c.req.header("referer");
  let fromHost: string | undefined;
  try {
    fromHost = from === undefined || from === "null" ? undefined : new URL(from).host;
  } catch {
    fromHost = undefined;
  }
  if (fromHost === undefined || fromHost.toLowerCase() !== host.toLowerCase()) {
    throw new GatewayError(
      "FORBIDDEN",
      "Forbidden: console forms are taken only from the console's own pages " +
        "(Origin or Referer must name this server)",
    );
  }
}
