/**
 * The built-in plugins.
 *
 * @module
 */
import type { PluginDefinition } from "../gateway/mod.ts";

/** The built-in plugins, in the order they are hosted. */
export function builtinPlugins(): PluginDefinition[] {
  return [];
}
