/**
 * The HTTP transport: REST, OpenAPI, MCP Streamable HTTP at `/mcp`, the
 * `/events` stream and incoming webhook routes, on one port.
 *
 * Other modules add routes through {@linkcode AppOptions.routes} (also on
 * {@linkcode serveHttp}): each mount gets the `OpenAPIHono` app and a
 * {@linkcode RouteContext} (`gateway`, `config`, `lifecycle`). Routes sit
 * behind the Host/Origin check, the bearer token and the body limit; throw a
 * `GatewayError` for any failure and the one error handler renders it.
 * Routes added with `app.openapi()` appear in `/openapi.json` (use
 * {@linkcode errorResponses} for their error bodies). Long-lived responses
 * end on `lifecycle.signal`. Incoming webhook paths are exempted from the
 * token and the Host check with {@linkcode AppOptions.isPublicPath}.
 *
 * @example
 * ```ts
 * const server = serveHttp({
 *   gateway,
 *   config,
 *   routes: [
 *     (app) => app.openapi(auditRoute, auditHandler),
 *     (app, { lifecycle }) => app.get("/events", (c) => eventStream(c, lifecycle.signal)),
 *     (app) => app.post("*", incomingHandler), // after the built-ins
 *   ],
 *   isPublicPath: (path) => incoming.has(path),
 * });
 * ```
 *
 * @module
 */
export { createApp } from "./app.ts";
export type { AppOptions } from "./app.ts";
export { isLoopback, serveHttp } from "./serve.ts";
export type { HttpServer, ServeHttpOptions } from "./serve.ts";
export { ServerLifecycle } from "./lifecycle.ts";
export type { AppEnv, RouteContext, RouteMount, ToolgateApp } from "./types.ts";
export {
  ErrorBodySchema,
  ErrorObjectSchema,
  errorResponse,
  errorResponses,
  ToolErrorBodySchema,
} from "./errors.ts";
export type { ErrorBody } from "./errors.ts";
export { bearerAuth, secretsEqual } from "./bearer_auth.ts";
export { authenticate, isManagementPath, MANAGEMENT_PATHS, resolveCaller } from "./auth.ts";
export type { AuthenticateOptions } from "./auth.ts";
export type { BearerAuthOptions } from "./bearer_auth.ts";
export { bodyLimit } from "./body_limit.ts";
export type { BodyLimitOptions } from "./body_limit.ts";
export { dnsRebindingProtection, isLoopbackHost, isLoopbackOrigin } from "./dns_rebinding.ts";
export type { DnsRebindingProtectionOptions } from "./dns_rebinding.ts";
export { isJsonContentType, jsonBody } from "./json_body.ts";
export type { JsonBodyOptions } from "./json_body.ts";
export { ToolInfoSchema, ToolListSchema, ToolResultSchema } from "./tools.ts";
export { HealthSchema } from "./health.ts";
export { Readiness, type ReadinessOptions } from "./readiness.ts";
export { AuditPageSchema, auditRoutes } from "./audit.ts";
export { pinRoutes } from "./pins.ts";
export { policyRoutes } from "./policies.ts";
export { approvalRoutes } from "./approvals.ts";
export { incomingRoutes } from "./incoming.ts";
export { FailedJobSchema, incomingFailedRoutes } from "./incoming_failed.ts";
export { DlqEntrySchema, dlqRoutes } from "./dlq.ts";
export { webhookRoutes, type WebhookRoutesOptions, WebhookSchema } from "./webhooks.ts";
export { eventsRoutes } from "./events.ts";
export { metricsRoutes, type MetricsSource } from "./metrics.ts";
export { type ConsoleOptions, consoleRoutes } from "./ui/routes.tsx";
export { isConsolePath } from "./ui/paths.ts";
export type { EventsRoutesOptions } from "./events.ts";
