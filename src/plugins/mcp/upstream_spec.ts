/**
 * What an MCP upstream plugin is made from: its declaration in
 * `config.json` (`plugins.upstreams.<name>`) or a registration added with
 * `toolgate plugins add`, merged into one list of {@linkcode UpstreamSpec}.
 *
 * @module
 */
import { type Config, UPSTREAM_NAME_PATTERN } from "../../config/mod.ts";
import type { UpstreamRecord } from "../../store/mod.ts";
import { TOOL_NAME_SEPARATOR, type UpstreamShape } from "./_shape.ts";

export { UPSTREAM_NAME_PATTERN };

export { TOOL_NAME_SEPARATOR } from "./_shape.ts";

/** An MCP server to host as a plugin. */
export interface UpstreamSpec {
  /** Plugin name, also the prefix of its tools. */
  name: string;
  /** Where it is declared. */
  source: "config" | "cli";
  /** Command of a stdio upstream. */
  command?: string;
  /** Arguments of the command. */
  args: string[];
  /** Extra environment of the command (literals or `keychain:<name>`). */
  env: Record<string, string>;
  /** Endpoint of a Streamable HTTP upstream. */
  url?: string;
  /** Extra request headers of an HTTP upstream (literals or `keychain:<name>`). */
  headers: Record<string, string>;
  /** `false`: hosted with state `disabled`. */
  enabled: boolean;
  /** What is offered and under which names. @default everything, prefixed */
  shape?: UpstreamShape;
  /** Changes whenever the registration does (CLI upstreams: `updated_at`). */
  revision?: string;
}

/** Connection timing of upstreams (`plugins.upstream_settings`). */
export interface UpstreamSettings {
  /** Bound on spawning or reaching the upstream, its handshake and tool listing, in ms. */
  connectTimeoutMs: number;
  /** First delay before restarting a dead upstream, in ms; doubles per failure. */
  restartInitialMs: number;
  /** Longest delay between restarts, in ms. */
  restartMaxMs: number;
  /**
   * What a stdio upstream inherits from toolgate's environment
   * ({@linkcode inheritedEnv}); its own `env` entries go on top.
   * @default {}
   */
  inheritedEnv?: Readonly<Record<string, string>>;
}

/**
 * Variables a stdio upstream inherits from toolgate's environment: what a
 * shell, `npx`, `uvx` or `deno` needs to find its cache and reach a registry
 * through a proxy or a custom CA. Secrets of toolgate's own (`TOOLGATE_*`)
 * and anything else stay behind.
 */
export const INHERITED_ENV_NAMES: readonly string[] = [
  "HOME",
  "LOGNAME",
  "PATH",
  "SHELL",
  "TERM",
  "USER",
  "TMPDIR",
  "LANG",
  "LC_ALL",
  "LC_CTYPE",
  "TZ",
  "XDG_CONFIG_HOME",
  "XDG_CACHE_HOME",
  "XDG_DATA_HOME",
  "XDG_RUNTIME_DIR",
  "DENO_DIR",
  "DENO_CERT",
  "DENO_TLS_CA_STORE",
  "DENO_AUTH_TOKENS",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "all_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NODE_EXTRA_CA_CERTS",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
];

/** Prefixes of inherited variables (npm's own configuration: registry, cafile, proxy). */
const INHERITED_ENV_PREFIXES = ["NPM_CONFIG_", "npm_config_"];

/**
 * The part of `env` a stdio upstream inherits: {@linkcode INHERITED_ENV_NAMES}
 * and npm's `NPM_CONFIG_*` variables, when set.
 */
export function inheritedEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const inherited: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (
      INHERITED_ENV_NAMES.includes(name) ||
      INHERITED_ENV_PREFIXES.some((prefix) => name.startsWith(prefix))
    ) inherited[name] = value;
  }
  return inherited;
}

/** The upstream settings of a configuration. */
export function upstreamSettings(config: Config): UpstreamSettings {
  const settings = config.plugins.upstream_settings;
  return {
    connectTimeoutMs: settings.connect_timeout_ms,
    restartInitialMs: settings.restart_initial_ms,
    restartMaxMs: settings.restart_max_ms,
    inheritedEnv: inheritedEnv(config.env),
  };
}

/**
 * Why `name` cannot name an upstream plugin, or `undefined` when it can.
 *
 * @param reserved Names taken by built-in plugins.
 */
export function upstreamNameProblem(name: string, reserved: Iterable<string>): string | undefined {
  if (!UPSTREAM_NAME_PATTERN.test(name)) {
    return `expected 1-32 characters: lower-case letters, digits, "_" or "-", starting with a letter or digit`;
  }
  if (name.includes(TOOL_NAME_SEPARATOR)) {
    return `"${TOOL_NAME_SEPARATOR}" separates plugin and tool names`;
  }
  for (const taken of reserved) {
    if (taken === name) return `${name} is a built-in plugin`;
  }
  return undefined;
}

/** Options of {@linkcode upstreamSpecs}. */
export interface UpstreamSpecsOptions {
  /** `plugins.upstreams` of this configuration come first. */
  config: Config;
  /** Registrations stored by `toolgate plugins add`. */
  records: UpstreamRecord[];
  /** Names of the built-in plugins. */
  reserved: Iterable<string>;
  /** Told about registrations that are skipped. */
  log?: (message: string) => void;
}

/**
 * The upstreams to host: `config.json` declarations, then CLI registrations
 * whose names are free (a clash is skipped and logged).
 */
export function upstreamSpecs(options: UpstreamSpecsOptions): UpstreamSpec[] {
  const { config, records, reserved, log = () => {} } = options;
  const specs: UpstreamSpec[] = [];
  const taken = new Set(reserved);
  for (const [name, upstream] of Object.entries(config.plugins.upstreams)) {
    const problem = upstreamNameProblem(name, taken);
    if (problem) {
      log(`upstream ${name} in config.json skipped: ${problem}`);
      continue;
    }
    taken.add(name);
    specs.push({
      name,
      source: "config",
      command: upstream.command,
      args: [...upstream.args],
      env: { ...upstream.env },
      url: upstream.url,
      headers: { ...upstream.headers },
      enabled: upstream.enabled,
      shape: shapeOf(upstream),
    });
  }
  for (const record of records) {
    if (taken.has(record.name)) {
      log(
        `upstream ${record.name} added with toolgate plugins add skipped: the name is taken by ${
          record.name in config.plugins.upstreams ? "config.json" : "a built-in plugin"
        }`,
      );
      continue;
    }
    taken.add(record.name);
    specs.push({
      name: record.name,
      source: "cli",
      command: record.command,
      args: [...record.args],
      env: { ...record.env },
      url: record.url,
      headers: { ...record.headers },
      enabled: record.enabled,
      shape: shapeOf(record),
      revision: record.updated_at,
    });
  }
  return specs;
}

/** A stable text that changes whenever anything about the spec does. */
export function specFingerprint(spec: UpstreamSpec): string {
  return JSON.stringify([
    spec.source,
    spec.command,
    spec.args,
    spec.env,
    spec.url,
    spec.headers,
    spec.enabled,
    spec.shape,
    spec.revision,
  ]);
}

/** The shaping fields of a declaration or registration. */
function shapeOf(
  fields: Pick<UpstreamRecord, "include" | "exclude" | "rename" | "prefix">,
): UpstreamShape {
  return {
    include: [...fields.include],
    exclude: [...fields.exclude],
    rename: { ...fields.rename },
    prefix: fields.prefix,
  };
}
