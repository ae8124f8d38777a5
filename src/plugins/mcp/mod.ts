/**
 * MCP servers hosted as plugins ("upstreams"): declared in `config.json`
 * (`plugins.upstreams.<name>`) or added with `toolgate plugins add`, spawned
 * over stdio or reached over Streamable HTTP with the official SDK client.
 * Their tools are offered as `<plugin>__<tool>` and called through the
 * gateway's pipeline; a dead upstream is restarted with exponential backoff.
 *
 * @example
 * ```ts
 * const specs = upstreamSpecs({ config, records: await listUpstreams(store), reserved: ["http"] });
 * const plugins = specs.map((spec) =>
 *   mcpUpstreamPlugin(spec, { settings: upstreamSettings(config), resolveSecret: keychain.get })
 * );
 * ```
 *
 * @module
 */
export { mcpUpstreamPlugin, upstreamToolName } from "./upstream_plugin.ts";
export type { McpUpstreamPluginOptions } from "./upstream_plugin.ts";
export { UpstreamConnection } from "./upstream_connection.ts";
export type { UpstreamConnectionOptions, UpstreamTool } from "./upstream_connection.ts";
export {
  INHERITED_ENV_NAMES,
  inheritedEnv,
  specFingerprint,
  TOOL_NAME_SEPARATOR,
  UPSTREAM_NAME_PATTERN,
  upstreamNameProblem,
  upstreamSettings,
  upstreamSpecs,
} from "./upstream_spec.ts";
export type { UpstreamSettings, UpstreamSpec, UpstreamSpecsOptions } from "./upstream_spec.ts";
export { UpstreamSync } from "./upstream_sync.ts";
export type { UpstreamSyncOptions } from "./upstream_sync.ts";
export { KEYCHAIN_REFERENCE_PREFIX, keychainReference } from "./_values.ts";
