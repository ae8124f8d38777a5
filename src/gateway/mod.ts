/**
 * The tool server core: plugin host, tool registry, call pipeline and
 * per-tool circuit breakers.
 *
 * @module
 */
export { Gateway } from "./gateway.ts";
export type { CallObservation, GatewayOptions } from "./gateway.ts";
export { Catalog, templatePattern } from "./catalog.ts";
export type {
  CatalogChange,
  CatalogOptions,
  CatalogRequestOptions,
  CatalogSource,
  CompleteParams,
  PromptEntry,
} from "./catalog.ts";
export { CircuitBreaker } from "./circuit_breaker.ts";
export type { CircuitBreakerOptions, CircuitState } from "./circuit_breaker.ts";
export { attachReceipt, receiptOf, toErrorResult, toToolResult } from "./result.ts";
export type { ToolResult } from "./result.ts";
export type * from "./types.ts";
export {
  ADMIN_CALLER,
  auditCaller,
  describeCaller,
  forbiddenCall,
  isAdministrator,
  LOCAL_CALLER,
  matchesToolPatterns,
  mayCall,
  parseToolPatterns,
} from "./caller.ts";
export type { AuditCaller, Caller } from "./caller.ts";
export {
  coversPlugin,
  followVirtualServers,
  notOnServer,
  VirtualServers,
} from "./virtual_servers.ts";
export type {
  FollowVirtualServersOptions,
  VirtualServer,
  VirtualServerConfig,
} from "./virtual_servers.ts";
