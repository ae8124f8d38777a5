/**
 * What of an upstream is exposed, and under which names: `include` and
 * `exclude` globs on its own tool and prompt names and resource URIs,
 * `rename` of tools and prompts, and `prefix` (`<plugin>__<name>`, or the
 * names as they are).
 *
 * @module
 */
/** Separator between the plugin name and the upstream tool name: `<plugin>__<tool>`. */
export const TOOL_NAME_SEPARATOR = "__";

/** How an upstream is shaped (`config.json` or `toolgate plugins add`). */
export interface UpstreamShape {
  /** Only what matches one of these globs (none: everything). */
  include: string[];
  /** Nothing that matches one of these globs. */
  exclude: string[];
  /** The upstream's own name of a tool or prompt → the name to expose. */
  rename: Record<string, string>;
  /** `false`: names as they are (after `rename`), without `<plugin>__`. */
  prefix: boolean;
}

/** No shaping: everything, prefixed. */
export const UNSHAPED: UpstreamShape = { include: [], exclude: [], rename: {}, prefix: true };

/** A glob (`*` any characters, `?` one) as a whole-string pattern. */
export function globPattern(glob: string): RegExp {
  const body = [...glob].map((char) =>
    char === "*" ? ".*" : char === "?" ? "." : char.replace(/[.+^${}()|[\]\\/]/g, "\\$&")
  ).join("");
  return new RegExp(`^${body}$`);
}

/** Applies an {@linkcode UpstreamShape} to one upstream's names. */
export class Shaper {
  #include: RegExp[];
  #exclude: RegExp[];
  #rename: Record<string, string>;
  #prefix: boolean;
  #plugin: string;

  /** @param plugin The plugin's name (the prefix). */
  constructor(plugin: string, shape: UpstreamShape = UNSHAPED) {
    this.#plugin = plugin;
    this.#include = shape.include.map(globPattern);
    this.#exclude = shape.exclude.map(globPattern);
    this.#rename = shape.rename;
    this.#prefix = shape.prefix;
  }

  /** Whether a tool or prompt (by its own name) or a resource (by URI) is exposed. */
  exposes(name: string): boolean {
    if (this.#include.length && !this.#include.some((pattern) => pattern.test(name))) return false;
    return !this.#exclude.some((pattern) => pattern.test(name));
  }

  /**
   * The name a tool or prompt is exposed under: renamed, then `<plugin>__`
   * in front unless `prefix` is off; characters outside `A-Z a-z 0-9 _ . -`
   * become `_`.
   */
  exposedName(name: string): string {
    const renamed = (this.#rename[name] ?? name).replace(/[^A-Za-z0-9_.-]/g, "_");
    return this.#prefix ? `${this.#plugin}${TOOL_NAME_SEPARATOR}${renamed}` : renamed;
  }
}
