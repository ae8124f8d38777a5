/**
 * The HTTP transport's Hono app: REST (`/tools`, `/health`, `/openapi.json`),
 * MCP Streamable HTTP at `/mcp`, and the hooks other modules use to mount
 * `/audit`, `/events` and incoming webhook paths.
 *
 * @module
 */
import { getLog, lineSink } from "../log/mod.ts";
import { OpenAPIHono } from "@hono/zod-openapi";
import { cors } from "hono/cors";
import { benchLayerOff, type Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { type Caller, describeCaller, type Gateway } from "../gateway/mod.ts";
import type { ApiKeyStore } from "../store/mod.ts";
import { mcpHttpOptions, McpHttpSessions } from "../mcp/mod.ts";
import { OAuthValidator } from "../auth/oauth.ts";
import { authenticate, registerProtectedResourceMetadata } from "./auth.ts";
import { bodyLimit } from "./body_limit.ts";
import { utf8JsonBody } from "./json_body.ts";
import { dnsRebindingProtection, isLoopback } from "./dns_rebinding.ts";
import { errorHandler, errorResponse } from "./errors.ts";
import { type DisabledWebhookStatus, type HealthReason, registerHealthRoute } from "./health.ts";
import type { Readiness } from "./readiness.ts";
import { ServerLifecycle } from "./lifecycle.ts";
import { registerOpenApi } from "./openapi.ts";
import { registerToolRoutes } from "./tools.ts";
import type { AppEnv, RouteMount, ToolgateApp } from "./types.ts";
import { isConsolePath } from "./ui/paths.ts";
import { validationHook } from "./validation.ts";

/** Options of {@linkcode createApp}. */
export interface AppOptions {
  /** The gateway whose tools are served. */
  gateway: Gateway;
  /** The resolved configuration (`server.*`, `incoming.body_limit_bytes`, the API token). */
  config: Config;
  /** Serving state (`/health` 503 while draining). @default a new one, started now */
  lifecycle?: ServerLifecycle;
  /** MCP sessions behind `/mcp`. @default new ones from `config.server` */
  mcp?: McpHttpSessions;
  /**
   * Mounts more routes behind the same middleware (host/origin check, bearer
   * token, body limit, error handler), after the built-in ones: `/audit`,
   * `/events`, incoming webhook paths. Routes added with `app.openapi()`
   * appear in `/openapi.json`. @default []
   */
  routes?: readonly RouteMount[];
  /**
   * Paths served without the bearer token and without the `Host` check
   * (their `Origin` is still checked), limited to
   * `config.incoming.body_limit_bytes`: incoming webhook paths, which verify
   * their own secrets. Called per request, so registrations may change at
   * run time. @default none
   */
  isPublicPath?: (path: string) => boolean;
  /** Where unknown errors are logged. @default stderr */
  log?: (message: string) => void;
  /** Disabled outgoing webhooks, shown by `/health`. @default none */
  disabledWebhooks?: () => readonly DisabledWebhookStatus[];
  /** Problems that make `/health` say `degraded`. @default none */
  healthReasons?: () => readonly HealthReason[];
  /** What `/health/ready` checks (the store probe, problems that stop deliveries). @default ready while serving */
  readiness?: Readiness;
  /**
   * The API keys callers may authenticate with (`toolgate keys`), beside
   * `TOOLGATE_API_TOKEN`. @default none: only the API token
   */
  keys?: ApiKeyStore;
  /**
   * Whether any API key exists (a request without a key is refused then),
   * kept by the caller (`ApiKeyPresence`) so that a request reads nothing.
   * @default `keys.any()` on every request that needs to know
   */
  keysExist?: () => Promise<boolean>;
  /**
   * The validator of OAuth access tokens (`auth.oauth`), when the caller
   * shares it (its key cache) with other users of the same checks.
   * @default a new one when `auth.oauth` is set
   */
  oauth?: OAuthValidator;
  /** Clock for API key expiry, ms since the epoch. @default Date.now */
  now?: () => number;
}

/**
 * The caller of a request to `/mcp` (`server` undefined) or `/mcp/<server>`.
 *
 * @throws {GatewayError} `FORBIDDEN` when the caller is bound to another
 * virtual server (an API key made with `--server`).
 */
function boundTo(caller: Caller | undefined, server: string | undefined): Caller | undefined {
  if (caller?.server === undefined || caller.server === server) return caller;
  throw new GatewayError(
    "FORBIDDEN",
    `Forbidden: ${describeCaller(caller)} is bound to virtual server ${caller.server}; ` +
      `use /mcp/${caller.server}`,
    { details: { server: caller.server } },
  );
}

/** Headers browsers may send and read cross-origin (when `cors_origins` is set). */
const CORS_ALLOW_HEADERS = [
  "Authorization",
  "Content-Type",
  "Accept",
  "Last-Event-ID",
  "Mcp-Session-Id",
  "Mcp-Protocol-Version",
  "X-Session-Id",
];
const CORS_EXPOSE_HEADERS = ["Mcp-Session-Id", "Retry-After", "WWW-Authenticate", "X-Session-Id"];

/**
 * Builds the app. Middleware, in order: DNS-rebinding protection (loopback
 * bind only), CORS (only with `server.cors_origins`), authentication (the
 * caller from `TOOLGATE_API_TOKEN` or an API key; not `/health` or public
 * paths; see `auth.ts`), body limit. Every
 * error goes through one handler into `{"error": {code, message, details?}}`.
 *
 * @example
 * ```ts
 * const app = createApp({
 *   gateway,
 *   config,
 *   routes: [(app) => app.openapi(auditRoute, auditHandler)],
 *   isPublicPath: (path) => incoming.has(path),
 * });
 * const response = await app.request("/health");
 * ```
 */
export function createApp(options: AppOptions): ToolgateApp {
  const {
    gateway,
    config,
    lifecycle = new ServerLifecycle(),
    routes = [],
    isPublicPath = () => false,
    log = lineSink(getLog("http")),
  } = options;
  const { server } = config;
  // A benchmark measuring what they cost may switch the request checks off (never a user's server,
  // and never beyond loopback).
  const checks = !benchLayerOff(config, "http_checks");
  if ((!checks || benchLayerOff(config, "identity")) && !isLoopback(server.host)) {
    throw new GatewayError(
      "CONFIG_INVALID",
      `Invalid TOOLGATE_BENCH_LAYERS_OFF: it switches request checks off, allowed only on a ` +
        `loopback address (server.host is ${server.host}); unset it to serve users`,
    );
  }
  const mcp = options.mcp ?? new McpHttpSessions(gateway, mcpHttpOptions(server));
  const app: ToolgateApp = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  app.onError(errorHandler({ log }));
  app.notFound((c) =>
    errorResponse(
      new GatewayError("NOT_FOUND", `No route for ${c.req.method} ${c.req.path}`),
    )
  );
  if (checks && isLoopback(server.host)) {
    app.use(dnsRebindingProtection({
      allowedHosts: [server.host],
      allowedOrigins: server.cors_origins,
      skipHost: isPublicPath,
    }));
  }
  if (server.cors_origins.length) {
    app.use(cors({
      origin: [...server.cors_origins],
      allowMethods: ["GET", "POST", "DELETE", "OPTIONS"],
      allowHeaders: CORS_ALLOW_HEADERS,
      exposeHeaders: CORS_EXPOSE_HEADERS,
      maxAge: 600,
    }));
  }
  // Every request gets a caller: the administrator (TOOLGATE_API_TOKEN), an
  // API key, an OAuth access token (auth.oauth), or the local caller when
  // nothing is configured.
  const oauth = options.oauth ??
    (config.auth.oauth && new OAuthValidator(config.auth.oauth, { now: options.now, log }));
  if (!benchLayerOff(config, "identity")) {
    app.use(authenticate({
      adminToken: config.apiToken,
      keys: options.keys,
      ...(options.keysExist ? { keysExist: options.keysExist } : {}),
      oauth,
      // The console checks its own session (signed in with TOOLGATE_API_TOKEN).
      skip: (path) =>
        path === "/health" || path === "/health/live" || path === "/health/ready" ||
        (path === "/metrics" && config.metrics.public) ||
        isConsolePath(path) || isPublicPath(path),
      now: options.now,
      log,
    }));
  }
  // Incoming webhook paths enforce `incoming.body_limit_bytes` themselves,
  // so their rejections are counted and logged per endpoint.
  if (checks) {
    app.use(bodyLimit({
      maxBytes: (path) => isPublicPath(path) ? undefined : server.body_limit_bytes,
    }));
    // Management routes validate bodies with zod through `c.req.json()`:
    // strict UTF-8 first. /tools checks its own; /mcp answers JSON-RPC errors.
    app.use(
      utf8JsonBody((path) =>
        path.startsWith("/tools/") || path === "/mcp" || path.startsWith("/mcp/") ||
        isPublicPath(path)
      ),
    );
  }
  registerHealthRoute(app, {
    gateway,
    lifecycle,
    mcpSessions: () => mcp.size,
    disabledWebhooks: options.disabledWebhooks,
    reasons: options.healthReasons,
    readiness: options.readiness,
  });
  if (oauth) {
    registerProtectedResourceMetadata(
      app,
      oauth,
      (name) => gateway.servers.get(name) !== undefined,
    );
  }
  registerToolRoutes(app, gateway);
  registerOpenApi(app, {
    tokenRequired: config.apiToken !== undefined || config.auth.oauth !== undefined,
  });
  app.all("/mcp", (c) => mcp.handle(c.req.raw, boundTo(c.get("caller"), undefined)));
  // Each virtual server (config `servers`, `toolgate servers create`) at /mcp/<name>.
  app.all("/mcp/:server", (c) => {
    const name = c.req.param("server");
    if (!gateway.servers.get(name)) {
      throw new GatewayError("NOT_FOUND", `No virtual server named ${name}`, {
        details: { server: name },
      });
    }
    return mcp.forServer(name).handle(c.req.raw, boundTo(c.get("caller"), name));
  });
  for (const mount of routes) mount(app, { gateway, config, lifecycle });
  return app;
}
