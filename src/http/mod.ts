/**
 * The HTTP transport: REST, OpenAPI, MCP Streamable HTTP at `/mcp`, the
 * `/events` stream and incoming webhook routes, on one port.
 *
 * Other modules add routes through {@linkcode AppOptions.routes} (behind the
 * host check, bearer token, body limit and the one error handler) and exempt
 * incoming webhook paths from the token with {@linkcode AppOptions.isPublicPath}.
 * Throw a `GatewayError` for any failure; the app renders it.
 *
 * @module
 */
export { createApp } from "./app.ts";
export type { AppOptions } from "./app.ts";
export { isLoopback, serveHttp } from "./serve.ts";
export type { HttpServer, ServeHttpOptions } from "./serve.ts";
export { ServerLifecycle } from "./lifecycle.ts";
export type { AppEnv, RouteMount, ToolgateApp } from "./types.ts";
export {
  ErrorBodySchema,
  ErrorObjectSchema,
  errorResponse,
  errorResponses,
  ToolErrorBodySchema,
} from "./errors.ts";
export type { ErrorBody } from "./errors.ts";
export { bearerAuth, secretsEqual } from "./bearer_auth.ts";
export type { BearerAuthOptions } from "./bearer_auth.ts";
export { bodyLimit } from "./body_limit.ts";
export type { BodyLimitOptions } from "./body_limit.ts";
export { dnsRebindingProtection, isLoopbackHost, isLoopbackOrigin } from "./dns_rebinding.ts";
export type { DnsRebindingProtectionOptions } from "./dns_rebinding.ts";
export { isJsonContentType, jsonBody } from "./json_body.ts";
export { ToolInfoSchema, ToolListSchema, ToolResultSchema } from "./tools.ts";
export { HealthSchema } from "./health.ts";
