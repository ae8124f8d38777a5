/**
 * The built-in plugins, one folder each: `http` (HTTP requests), `memory` (a
 * persistent key/value notebook) and `slack` (needs `slack.bot_token`).
 * MCP servers hosted as plugins live in `./mcp/mod.ts`.
 *
 * @module
 */
import type { EgressPolicy } from "../egress/mod.ts";
import type { PluginDefinition } from "../gateway/mod.ts";
import { httpPlugin } from "./http/mod.ts";
import { memoryPlugin } from "./memory/mod.ts";
import { slackPlugin } from "./slack/mod.ts";

export { httpPlugin, type HttpPluginOptions } from "./http/mod.ts";
export { memoryPlugin } from "./memory/mod.ts";
export { slackPlugin } from "./slack/mod.ts";
export { SERVER_STATUS_MAX_AGE_MS, ServerStatusPublisher } from "./server_status.ts";
export type { ServerStatusPublisherOptions } from "./server_status.ts";

/** Options of {@linkcode builtinPlugins}. */
export interface BuiltinPluginsOptions {
  /** The process's egress policy (`http_request`). @default one built from the config */
  egress?: EgressPolicy;
}

/** The built-in plugins, in the order they are hosted. */
export function builtinPlugins(options: BuiltinPluginsOptions = {}): PluginDefinition[] {
  return [httpPlugin({ egress: options.egress }), memoryPlugin(), slackPlugin()];
}
