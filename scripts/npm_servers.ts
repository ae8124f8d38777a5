/**
 * The npm programs that tests and benchmarks run as separate processes: the
 * MCP reference servers, supergateway and mcp-proxy. They are pinned and locked in
 * `scripts/npm_servers/` (a config and lock file of their own, so their
 * dependencies stay out of the project's `deno.lock`), cached by
 * `scripts/prefetch.ts`, and run with `--cached-only`: a test never downloads.
 *
 * @module
 */

const ROOT = new URL("..", import.meta.url).pathname;

/** The config (with its frozen lock file) the npm programs run under. */
export const NPM_SERVERS_CONFIG = `${ROOT}scripts/npm_servers/deno.json`;

/** The reference "everything" MCP server. */
export const EVERYTHING_PACKAGE = "npm:@modelcontextprotocol/server-everything@2026.8.31";

/** The reference knowledge-graph memory MCP server. */
export const MEMORY_PACKAGE = "npm:@modelcontextprotocol/server-memory@2026.8.31";

/** supergateway, a stdio-to-HTTP MCP bridge (a peer in the benchmarks). */
export const SUPERGATEWAY_PACKAGE = "npm:supergateway@4.0.0";

/** mcp-proxy, a TypeScript stdio-to-HTTP MCP proxy (the other peer in the benchmarks). */
export const MCP_PROXY_PACKAGE = "npm:mcp-proxy@6.7.19";

/** Every package above, for the prefetch step. */
export const NPM_SERVER_PACKAGES: readonly string[] = [
  EVERYTHING_PACKAGE,
  MEMORY_PACKAGE,
  SUPERGATEWAY_PACKAGE,
  MCP_PROXY_PACKAGE,
];

/**
 * Arguments of `deno` that run one of the packages above from the cache, under
 * its lock file; a package missing from the cache fails at once instead of
 * being downloaded.
 *
 * @example
 * ```ts
 * new Deno.Command(Deno.execPath(), { args: npmServerArgs(EVERYTHING_PACKAGE, "stdio") });
 * ```
 */
export function npmServerArgs(pkg: string, ...args: string[]): string[] {
  return ["run", "--config", NPM_SERVERS_CONFIG, "--cached-only", "-A", "--quiet", pkg, ...args];
}
