/** @jsxImportSource hono/jsx */
/**
 * The console's routes under `/ui`: sign-in, the pages, their forms, the
 * event stream for live updates and the audit verify's progress stream.
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { JSX } from "hono/jsx/jsx-runtime";
import { type Approvals, approvalView, callerRef } from "../../approvals/mod.ts";
import { AUDIT_KINDS, type AuditEntry, type AuditLog, verifyAuditChain } from "../../audit/mod.ts";
import type { EgressPolicy } from "../../egress/mod.ts";
import { type ErrorCode, GatewayError } from "../../errors/mod.ts";
import { ADMIN_CALLER, LOCAL_CALLER, toToolResult } from "../../gateway/mod.ts";
import { newId } from "../../ids.ts";
import type { ToolPins } from "../../pins/mod.ts";
import { createRedactor } from "../../redact.ts";
import type { Store } from "../../store/mod.ts";
import {
  DEFAULT_ROTATION_OVERLAP_MS,
  disableWebhook,
  enableWebhook,
  getDlqEntry,
  getWebhook,
  listDlq,
  listFailedJobs,
  listWebhooks,
  parseDuration,
  recentAttempts,
  replayDlq,
  replayFailedJobs,
  rotateWebhookSecret,
  testWebhook,
} from "../../webhooks/mod.ts";
import { VERSION } from "../../version.ts";
import type { AppEnv, RouteMount, ToolgateApp } from "../types.ts";
import { CONSOLE_CSS, CONSOLE_JS } from "./assets.ts";
import {
  approvalFlash,
  ApprovalPage,
  ApprovalsPage,
  pinFlash,
  PinPage,
  PinsPage,
  sortPins,
} from "./integrity.tsx";
import { ConsoleSessions, SESSION_COOKIE, SESSION_TTL_MS } from "./session.ts";
import { CallStats } from "./stats.ts";
import {
  ErrorPage,
  type Flash,
  OverviewPage,
  type PageFrame,
  SignInPage,
  ToolPage,
  ToolsPage,
} from "./views.tsx";
import {
  DlqPage,
  DlqRecordPage,
  replayFlash,
  RotateSecretPage,
  secretFlash,
  testFlash,
  WebhooksPage,
} from "./delivery_views.tsx";
import { AuditPage, IncomingPage, type IncomingPayload } from "./log_views.tsx";
import { isConsolePath, UI } from "./paths.ts";
import { OVERLAP_CHOICES, rotationTimes, signatureSwitchAt } from "./rotation.ts";

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

/** Entries the incoming page reads back from the audit log's head. */
const INCOMING_SCAN = 500;
/** Recent incoming payloads shown. */
const INCOMING_SHOWN = 50;
/** Failed incoming jobs shown (the count shows them all). */
const FAILED_SHOWN = 100;
/** How long the overview's dead-letter count is reused, in ms. */
const DLQ_RECOUNT_MS = 5000;
/** Records per dead-letter page. */
const DLQ_PAGE = 50;
/** Pending approvals shown. */
const PENDING_SHOWN = 100;
/** Approvals read for the recently decided ones (pending ones among them are left out). */
const RECENT_APPROVALS = 50;
/** Longest reason of a decision, in characters (as `POST /approvals/{id}/approve` takes). */
const MAX_REASON_CHARS = 1024;
/** Entries per audit page. */
const AUDIT_PAGE = 50;
/**
 * Most entries a filtered audit page reads (about 20 ms on a 2-core
 * machine): a rare filter gives a short page and **Next entries** searches on.
 */
const AUDIT_SCAN = 2000;

type Ctx = Context<AppEnv>;

/** The session of a request (`"open"` on an open server), set by the console's middleware. */
const sessions = new WeakMap<Request, string>();

/** What the console asks of a server with API keys but no `TOOLGATE_API_TOKEN`. */
const NO_ADMIN = "The console needs TOOLGATE_API_TOKEN: API keys or an OAuth issuer " +
  "(auth.oauth) are configured, so the server is not open, and neither a key nor an access token " +
  "may use the management API the console shows. Start the server with TOOLGATE_API_TOKEN set " +
  "and sign in with it.";

function html(
  c: Ctx,
  page: JSX.Element,
  status: 200 | 400 | 401 | 403 | 404 | 409 = 200,
): Promise<Response> {
  return Promise.resolve(page).then((body) =>
    c.html(`<!doctype html>${body}`, status, { "cache-control": "no-store" })
  );
}

/** A `next` address after sign-in: only console paths, never another site. */
function safeNext(raw: unknown): string {
  return typeof raw === "string" && isConsolePath(raw) && !raw.startsWith("//") &&
      !/[\\\s]/.test(raw)
    ? raw
    : UI;
}

function field(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  return typeof value === "string" ? value : undefined;
}

/** `datetime-local` (taken as UTC) or ISO 8601 → ISO 8601, or undefined when empty. */
function sinceOf(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(raw)
    ? `${raw}${raw.length === 16 ? ":00" : ""}Z`
    : raw;
  if (Number.isNaN(Date.parse(iso))) {
    throw new GatewayError(
      "USAGE",
      `Invalid since: ${JSON.stringify(raw)} is not a time; use YYYY-MM-DDTHH:MM (UTC)`,
    );
  }
  return new Date(iso).toISOString();
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

    const pinsOf = (tool: string): ToolPins => {
      // `*` decides every pin at once in ToolPins: the console decides one pin a form.
      if (!pins || tool === "*") {
        const why = pins ? "" : ": pinning is off (plugins.upstream_settings.pinning)";
        throw new GatewayError("NOT_FOUND", `No pin named ${JSON.stringify(tool)}${why}`, {
          details: { tool },
        });
      }
      return pins;
    };
    const pinsPage = async (c: Ctx, flash?: Flash) => {
      const list = pins && sortPins(await pins.list());
      return html(c, <PinsPage frame={frameOf(c, `${UI}/pins`)} pins={list} flash={flash} />);
    };
    const pinPage = async (c: Ctx, tool: string, flash?: Flash, status?: 409) => {
      const pin = await pinsOf(tool).diff(tool);
      const path = `${UI}/pins/${encodeURIComponent(pin.tool)}`;
      return html(c, <PinPage frame={frameOf(c, path)} pin={pin} flash={flash} />, status);
    };
    app.get(`${UI}/pins`, (c) => pinsPage(c));
    app.get(`${UI}/pins/:tool`, (c) => pinPage(c, c.req.param("tool")));
    for (const [action, decision] of [["approve", "approved"], ["reject", "rejected"]] as const) {
      app.post(`${UI}/pins/:tool/${action}`, async (c) => {
        const tool = c.req.param("tool");
        const by = callerRef(deciderOf(c));
        try {
          const decided = action === "approve"
            ? await pinsOf(tool).approve(tool, by)
            : await pinsOf(tool).reject(tool, by);
          return pinsPage(c, pinFlash(decision, decided));
        } catch (error) {
          if (!isRefusal(error, ["CONFLICT"])) throw error;
          return pinPage(c, tool, refusalFlash(error), 409);
        }
      });
    }

    const approvalsPage = async (c: Ctx, flash?: Flash) => {
      const frame = frameOf(c, `${UI}/approvals`);
      const at = clock();
      if (!approvals) return html(c, <ApprovalsPage frame={frame} now={at} flash={flash} />);
      // One after the other: each list expires the pending approvals past their time.
      const pending = await approvals.list({ status: "pending", limit: PENDING_SHOWN });
      const latest = await approvals.list({ limit: RECENT_APPROVALS });
      return html(
        c,
        <ApprovalsPage
          frame={frame}
          pending={pending.map((r) => approvalView(r, redact))}
          recent={latest.filter((r) => r.status !== "pending").map((r) => approvalView(r, redact))}
          now={at}
          flash={flash}
        />,
      );
    };
    const approvalOf = async (id: string) => {
      const record = approvals && /^apr_[0-9A-Za-z]+$/.test(id) ? await approvals.get(id) : null;
      if (!approvals || !record) {
        throw new GatewayError("NOT_FOUND", `No approval ${id}`, { details: { approval_id: id } });
      }
      return { approvals, record };
    };
    const approvalPage = async (c: Ctx, id: string, flash?: Flash, status?: 400 | 403 | 409) => {
      const { record } = await approvalOf(id);
      const path = `${UI}/approvals/${encodeURIComponent(record.id)}`;
      return html(
        c,
        <ApprovalPage
          frame={frameOf(c, path)}
          approval={approvalView(record, redact)}
          now={clock()}
          flash={flash}
        />,
        status,
      );
    };
    app.get(`${UI}/approvals`, (c) => approvalsPage(c));
    app.get(`${UI}/approvals/:id`, (c) => approvalPage(c, c.req.param("id")));
    for (const [action, decision] of [["approve", "approved"], ["deny", "denied"]] as const) {
      app.post(`${UI}/approvals/:id/${action}`, async (c) => {
        const id = c.req.param("id");
        const { approvals } = await approvalOf(id);
        const reason = field(await c.req.parseBody(), "reason")?.trim() || undefined;
        if (reason && reason.length > MAX_REASON_CHARS) {
          const text = `Invalid reason: ${reason.length} characters; at most ${MAX_REASON_CHARS}`;
          return approvalPage(c, id, { kind: "bad", text }, 400);
        }
        const caller = deciderOf(c);
        try {
          const decided = await approvals.decide(id, decision, {
            by: callerRef(caller),
            caller,
            ...(reason ? { reason } : {}),
          });
          return approvalsPage(c, approvalFlash(approvalView(decided, redact)));
        } catch (error) {
          if (!isRefusal(error, ["CONFLICT", "APPROVAL_EXPIRED"])) throw error;
          return approvalPage(c, id, refusalFlash(error), error.status === 409 ? 409 : 403);
        }
      });
    }

    const webhooksPage = async (c: Ctx, flash?: Flash) => {
      const hooks = await listWebhooks(store);
      const rows = await Promise.all(
        hooks.map(async (webhook) => ({
          webhook,
          attempts: await recentAttempts(store, webhook.id),
        })),
      );
      return html(
        c,
        <WebhooksPage frame={frameOf(c, `${UI}/webhooks`)} rows={rows} flash={flash} />,
      );
    };
    app.get(`${UI}/webhooks`, (c) => webhooksPage(c));
    app.post(`${UI}/webhooks/:id/test`, async (c) => {
      const result = await testWebhook(store, c.req.param("id"), { egress });
      return webhooksPage(c, testFlash(result));
    });
    app.post(`${UI}/webhooks/:id/disable`, async (c) => {
      const hook = await disableWebhook(store, c.req.param("id"), "disabled in the console");
      return webhooksPage(c, {
        kind: "ok",
        text: `Disabled ${hook.url}: its events wait in the dead-letter queue`,
      });
    });
    app.post(`${UI}/webhooks/:id/enable`, async (c) => {
      const { webhook } = await enableWebhook(store, c.req.param("id"));
      return webhooksPage(c, { kind: "ok", text: `Enabled ${webhook.url}` });
    });
    // Rotating asks first: the Rotate button opens this confirmation, saying
    // when each signature header switches for each overlap offered.
    const rotatePage = async (c: Ctx, id: string) => {
      const at = clock();
      const webhook = await getWebhook(store, id, { now: () => at });
      const options = OVERLAP_CHOICES.map((choice) => ({
        choice,
        times: rotationTimes(webhook, choice.ms, at),
        checked: choice.ms === DEFAULT_ROTATION_OVERLAP_MS,
      }));
      const path = `${UI}/webhooks/${encodeURIComponent(webhook.id)}/rotate`;
      return html(
        c,
        <RotateSecretPage
          frame={frameOf(c, path)}
          webhook={webhook}
          options={options}
          runningUntil={signatureSwitchAt(webhook, at)}
        />,
      );
    };
    app.get(`${UI}/webhooks/:id/rotate`, (c) => rotatePage(c, c.req.param("id")));
    app.post(`${UI}/webhooks/:id/rotate`, async (c) => {
      const body = await c.req.parseBody();
      // A form without the confirmation's field (a page from before it) only asks.
      if (field(body, "confirm") !== "rotate") return rotatePage(c, c.req.param("id"));
      const raw = field(body, "overlap");
      const overlapMs = raw === undefined
        ? DEFAULT_ROTATION_OVERLAP_MS
        : parseDuration(raw, "overlap");
      const at = clock();
      const id = c.req.param("id");
      const before = await getWebhook(store, id, { now: () => at });
      const { webhook, secret } = await rotateWebhookSecret(store, id, {
        now: () => at,
        overlapMs,
      });
      const times = rotationTimes(before, overlapMs, at);
      return webhooksPage(c, secretFlash(webhook.url, secret, times, before.has_secret));
    });

    const dlqPage = async (c: Ctx, flash?: Flash) => {
      const webhook = c.req.query("webhook") || undefined;
      const after = c.req.query("after") || undefined;
      const records = await listDlq(store, { webhook, after, limit: DLQ_PAGE + 1 });
      const page = records.slice(0, DLQ_PAGE);
      const next = records.length > DLQ_PAGE ? page.at(-1)!.dlq_id : null;
      const params = new URLSearchParams();
      if (webhook) params.set("webhook", webhook);
      if (after) params.set("after", after);
      const path = `${UI}/dlq${params.size ? `?${params}` : ""}`;
      return html(
        c,
        <DlqPage
          frame={frameOf(c, path)}
          records={page}
          webhook={webhook}
          next={next}
          flash={flash}
        />,
      );
    };
    app.get(`${UI}/dlq`, (c) => dlqPage(c));
    app.post(`${UI}/dlq/replay`, async (c) => {
      const webhook = c.req.query("webhook");
      const result = await replayDlq(store, webhook ? { webhook } : "all");
      return dlqPage(c, replayFlash(result));
    });
    app.get(`${UI}/dlq/:id`, async (c) => {
      const record = await getDlqEntry(store, c.req.param("id"));
      const path = `${UI}/dlq/${encodeURIComponent(record.dlq_id)}`;
      return html(c, <DlqRecordPage frame={frameOf(c, path)} record={record} />);
    });
    app.post(`${UI}/dlq/:id/replay`, async (c) => {
      const result = await replayDlq(store, c.req.param("id"));
      return dlqPage(c, replayFlash(result));
    });

    const incomingPage = async (c: Ctx, flash?: Flash) => {
      const endpoints = await store.webhooks.listIncoming();
      const [rows, failed, head] = await Promise.all([
        Promise.all(endpoints.map(async (endpoint) => ({
          endpoint,
          stats: await store.webhooks.incomingStats(endpoint.id),
        }))),
        listFailedJobs(store),
        audit.head(),
      ]);
      const after = Math.max(0, head.head_seq - INCOMING_SCAN);
      const { entries } = await audit.list({ after, limit: INCOMING_SCAN });
      const calls = new Map<string, AuditEntry>();
      for (const entry of entries) {
        if (entry.kind === "tool.call" && entry.session_id) calls.set(entry.session_id, entry);
      }
      const payloads: IncomingPayload[] = entries
        .filter((e) => e.kind === "webhook.incoming")
        .reverse()
        .slice(0, INCOMING_SHOWN)
        .map((entry) => ({
          entry,
          handled: entry.session_id ? calls.get(entry.session_id) : undefined,
        }));
      return html(
        c,
        <IncomingPage
          frame={frameOf(c, `${UI}/incoming`)}
          rows={rows}
          payloads={payloads}
          scanned={entries.length}
          failed={failed.slice(0, FAILED_SHOWN)}
          failedCount={failed.length}
          flash={flash}
        />,
      );
    };
    app.get(`${UI}/incoming`, (c) => incomingPage(c));
    const replayIncoming = async (c: Ctx, target: string) => {
      const { replayed } = await replayFailedJobs(store, target);
      if (replayed.length) options.wakeIncoming?.();
      return incomingPage(c, {
        kind: replayed.length ? "ok" : "info",
        text:
          `Replay: ${replayed.length} failed payload${replayed.length === 1 ? "" : "s"} queued ` +
          "for their handlers again",
      });
    };
    app.post(`${UI}/incoming/failed/replay`, (c) => replayIncoming(c, "all"));
    app.post(`${UI}/incoming/failed/:id/replay`, (c) => replayIncoming(c, c.req.param("id")));

    const auditPage = async (c: Ctx, flash?: Flash) => {
      const tool = c.req.query("tool") || undefined;
      const rawKind = c.req.query("kind") || undefined;
      if (rawKind && !AUDIT_KINDS.includes(rawKind)) {
        throw new GatewayError(
          "USAGE",
          `Invalid kind: ${JSON.stringify(rawKind)}; expected one of ${AUDIT_KINDS.join(", ")}`,
        );
      }
      const caller = c.req.query("caller") || undefined;
      const sinceRaw = c.req.query("since") || undefined;
      const since = sinceOf(sinceRaw);
      const afterRaw = c.req.query("after");
      const head = await audit.head();
      let after = afterRaw === undefined ? undefined : Number(afterRaw);
      if (after !== undefined && (!Number.isInteger(after) || after < 0)) {
        throw new GatewayError("USAGE", `Invalid after: ${JSON.stringify(afterRaw)} is not a seq`);
      }
      // Unfiltered, the page starts with the latest entries; filtered, from the start.
      if (after === undefined && !tool && !rawKind && !caller && !since) {
        after = Math.max(0, head.head_seq - AUDIT_PAGE);
      }
      const page = await audit.list({
        after,
        tool,
        kind: rawKind,
        caller,
        since,
        limit: AUDIT_PAGE,
        maxScan: AUDIT_SCAN,
      });
      return html(
        c,
        <AuditPage
          frame={frameOf(c, pathOf(c).startsWith(`${UI}/audit/`) ? `${UI}/audit` : pathOf(c))}
          kinds={AUDIT_KINDS}
          filters={{ tool, kind: rawKind, caller, since: sinceRaw }}
          entries={page.entries}
          next={page.next_after}
          headSeq={head.head_seq}
          pageSize={AUDIT_PAGE}
          flash={flash}
        />,
      );
    };
    app.get(`${UI}/audit`, (c) => auditPage(c));
    app.post(`${UI}/audit/verify`, async (c) => {
      const result = await verifyAuditChain(store, { signal: c.req.raw.signal });
      const flash: Flash = result.ok
        ? {
          kind: "ok",
          text: `Intact: ${result.count} entries verified up to seq ${result.head_seq}`,
        }
        : {
          kind: "bad",
          text: `Broken at seq ${result.seq} (${result.reason}): ${result.message}`,
        };
      return auditPage(c, flash);
    });
    app.get(`${UI}/audit/verify/stream`, (c) => {
      const encoder = new TextEncoder();
      const signal = AbortSignal.any([c.req.raw.signal, lifecycle.signal]);
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          const send = (event: string, data: unknown) => {
            try {
              controller.enqueue(
                encoder.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
              );
            } catch {
              // The client went away.
            }
          };
          try {
            const result = await verifyAuditChain(store, {
              signal,
              onProgress: (progress) => send("progress", progress),
            });
            send("done", result);
          } catch (error) {
            send("done", {
              ok: false,
              seq: 0,
              reason: "stopped",
              message: (error as Error).message,
            });
          }
          try {
            controller.close();
          } catch {
            // Already cancelled.
          }
        },
      });
      return new Response(body, {
        headers: {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache, no-transform",
        },
      });
    });
  };
}

/** Whether `error` is a decision refused for one of `codes` (shown as a flash, not an error page). */
function isRefusal(error: unknown, codes: readonly ErrorCode[]): error is GatewayError {
  return error instanceof GatewayError && codes.includes(error.code);
}

/** The flash of a refused decision: its message and code. */
function refusalFlash(error: GatewayError): Flash {
  return { kind: "bad", text: `${error.message} (${error.code})` };
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
