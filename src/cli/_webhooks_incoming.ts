/**
 * `toolgate webhooks create`: registers an incoming endpoint, with the
 * checks of its path, verification, rate limit, mapping and handler.
 *
 * @module
 */
import type { Command } from "commander";
import { builtinPlugins } from "../plugins/mod.ts";
import {
  type IncomingMappingSpec,
  isVerifyScheme,
  parseDuration,
  parseHeaderEntry,
  parseMapEntry,
  parseRouteEntry,
  validateMapping,
  VERIFY_SCHEMES,
  type VerifyScheme,
} from "../webhooks/mod.ts";
import { type CliContext, usage } from "./context.ts";
import { collect, readSecret } from "./_webhooks_input.ts";
import { publicIncoming, TIMED_SCHEMES } from "./_webhooks_views.ts";

/** Paths served by the HTTP transport itself; incoming endpoints may not shadow them. */
export const RESERVED_PATHS = [
  "/tools",
  "/health",
  "/audit",
  "/openapi.json",
  "/mcp",
  "/events",
  "/webhooks",
  "/dlq",
  "/incoming",
  "/metrics",
  "/ui",
  "/.well-known",
];

/** A plain URL path: segments of letters, digits and `-._~`, each after one `/`. */
const PATH_PATTERN = /^(\/[A-Za-z0-9._~-]+)+$/;

/** The rule of {@linkcode PATH_PATTERN}, as messages state it. */
const PATH_RULE = `a plain URL path: "/" then segments of letters, digits and - . _ ~, ` +
  `separated by single "/" (no %, spaces or other characters, no "//", no "." or ".." ` +
  `segments, no trailing "/"), e.g. /hooks/github`;

/** Most seconds `--tolerance` allows: a day. */
const MAX_TOLERANCE_S = 86_400;

/**
 * Why an incoming endpoint's handler will not be found when payloads arrive,
 * or `undefined` when a plugin offers it: a built-in tool of an enabled
 * plugin, or `<plugin>__<tool>` of a configured MCP upstream (whose tools are
 * known only once it runs).
 */
async function missingHandler(context: CliContext, handler: string): Promise<string | undefined> {
  const config = await context.config();
  const plugins = builtinPlugins();
  const owner = plugins.find((plugin) => plugin.tools.some((tool) => tool.name === handler));
  if (owner) {
    return config.plugins.disabled.includes(owner.name)
      ? `handler ${handler} belongs to plugin ${owner.name}, which is disabled in config ` +
        `(plugins.disabled); payloads will fail with TOOL_NOT_FOUND until it is enabled`
      : undefined;
  }
  const separator = handler.indexOf("__");
  if (separator > 0) {
    const plugin = handler.slice(0, separator);
    const upstreams = [
      ...Object.keys(config.plugins.upstreams),
      ...(await (await context.store()).upstreams.list()).map((upstream) => upstream.name),
    ];
    if (upstreams.includes(plugin)) return undefined;
  }
  const tools = plugins.flatMap((plugin) => plugin.tools.map((tool) => tool.name));
  return `no plugin offers a tool named ${handler} (built-in tools: ${tools.join(", ")}; ` +
    `an MCP upstream's are named <plugin>__<tool>); payloads will fail with TOOL_NOT_FOUND ` +
    `until one does`;
}

/** Whether `raw` is an absolute URL (`http://…`) rather than a path. */
function isFullUrl(raw: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(raw.trim());
}

/**
 * Validates an incoming endpoint path: {@linkcode PATH_RULE}, not shadowing
 * a built-in route.
 *
 * @param raw The path as given.
 * @param flag How the user gave it (`--path` or `--url`), for messages.
 * @throws {GatewayError} `USAGE` naming the rule, or `webhooks add` for a full URL.
 */
export function parseIncomingPath(raw: string, flag = "--path"): string {
  if (isFullUrl(raw)) {
    throw usage(
      `Invalid ${flag} "${raw}": webhooks create registers an incoming endpoint at a path on ` +
        `this server, e.g. --path /hooks/github; to send events to ${raw}, use ` +
        `toolgate webhooks add --url ${raw}`,
    );
  }
  if (!raw.startsWith("/")) {
    throw usage(`Invalid ${flag} "${raw}": the path must start with "/", e.g. /hooks/github`);
  }
  const dotSegment = raw.split("/").some((segment) => segment === "." || segment === "..");
  if (!PATH_PATTERN.test(raw) || dotSegment) {
    throw usage(`Invalid ${flag} "${raw}": use ${PATH_RULE}`);
  }
  const lower = raw.toLowerCase();
  const shadowed = RESERVED_PATHS.find((p) => lower === p || lower.startsWith(p + "/"));
  if (shadowed) {
    throw usage(
      `Invalid ${flag} "${raw}": it shadows the built-in route ${shadowed}; reserved: ${
        RESERVED_PATHS.join(", ")
      }`,
    );
  }
  return raw;
}

/** Parses `--verify`: one of {@linkcode VERIFY_SCHEMES}. */
export function parseVerifyScheme(raw: string): VerifyScheme {
  const scheme = raw.trim().toLowerCase();
  if (!isVerifyScheme(scheme)) {
    throw usage(`Invalid --verify "${raw}": expected one of ${VERIFY_SCHEMES.join(", ")}`);
  }
  return scheme;
}

/** Parses `--tolerance` (`300s`, `5m`): whole seconds, 1 s to a day. */
export function parseTolerance(raw: string): number {
  const ms = parseDuration(raw, "--tolerance");
  if (ms % 1000 !== 0 || ms < 1000 || ms > MAX_TOLERANCE_S * 1000) {
    throw usage(
      `Invalid --tolerance "${raw}": expected whole seconds from 1s to 24h, e.g. 300s or 5m`,
    );
  }
  return ms / 1000;
}

function parseRateLimit(raw: string): number {
  const match = /^(\d+(?:\.\d+)?)(?:\/s)?$/.exec(raw.trim());
  const value = match ? Number(match[1]) : NaN;
  if (!(value > 0)) throw usage(`Invalid --rate-limit "${raw}": expected <n>/s, e.g. 10/s`);
  return value;
}

/** The mapping fields of `webhooks create`, validated. */
function parseMappingOptions(options: {
  map: string[];
  header: string[];
  when: string[];
  routeBy?: string;
  route: string[];
}): IncomingMappingSpec {
  const map: Record<string, string> = {};
  for (
    const [name, source] of [
      ...options.map.map(parseMapEntry),
      ...options.header.map(parseHeaderEntry),
    ]
  ) {
    if (name in map) throw usage(`Invalid --map: argument "${name}" is mapped twice`);
    map[name] = source;
  }
  const routes: Record<string, string> = {};
  for (const [value, handler] of options.route.map(parseRouteEntry)) {
    if (value in routes) throw usage(`Invalid --route: value "${value}" is routed twice`);
    routes[value] = handler;
  }
  const spec: IncomingMappingSpec = {
    ...(Object.keys(map).length ? { map } : {}),
    ...(options.when.length ? { when: options.when } : {}),
    ...(options.routeBy !== undefined ? { route_by: options.routeBy } : {}),
    ...(Object.keys(routes).length ? { routes } : {}),
  };
  validateMapping(spec);
  return spec;
}

/**
 * A warning when a built-in handler does not take some mapped argument
 * (its input schema is known here; an upstream's is not until it runs).
 */
function unknownArguments(handler: string, names: readonly string[]): string | undefined {
  if (!names.length) return undefined;
  const tool = builtinPlugins().flatMap((plugin) => plugin.tools).find((t) => t.name === handler);
  const shape = (tool?.input as { shape?: Record<string, unknown> } | undefined)?.shape;
  if (!shape) return undefined;
  const unknown = names.filter((name) => !(name in shape));
  if (!unknown.length) return undefined;
  return `${handler} takes ${Object.keys(shape).join(", ")}; --map gives it ${
    unknown.join(", ")
  }, which it refuses: payloads will fail with TOOL_INPUT_INVALID`;
}

/** Registers `webhooks create`. */
export function registerCreateCommand(webhooks: Command, context: CliContext): void {
  webhooks.command("create")
    .description("register an incoming webhook endpoint served by the HTTP transport")
    .requiredOption("--name <name>", "unique name of the endpoint")
    .option("--path <path>", "path on the HTTP server, e.g. /hooks/github")
    .option("--url <path>", "the same as --path (the spec's name)")
    .requiredOption("--handler <tool>", "tool that receives each payload as its arguments")
    .option("--secret <secret>", "the sender's signing secret; - reads stdin")
    .option(
      "--verify <scheme>",
      `how the sender signs: ${VERIFY_SCHEMES.join("|")} (default with --secret: hmac-sha256)`,
    )
    .option(
      "--tolerance <duration>",
      "how far a signed timestamp may be from now (stripe, slack, standard-webhooks), e.g. 300s",
    )
    .option(
      "--signature-header <name>",
      "hmac-sha256: header carrying sha256=<hex> (default X-Service-Signature)",
    )
    .option("--rate-limit <n/s>", "accepted requests per second, e.g. 10/s")
    .option(
      "--map <argument=source>",
      "build the handler's arguments: a JSON Pointer into the payload (key=/issue/html_url) " +
        "or a header (event=header:X-GitHub-Event); repeatable",
      collect,
      [] as string[],
    )
    .option(
      "--header <name[=argument]>",
      "pass a request header as an argument (default name: x_github_event); repeatable",
      collect,
      [] as string[],
    )
    .option(
      "--when <condition>",
      "run only payloads where <source>=<value> (or !=, or <source> alone: present); " +
        "others are answered 202 and recorded as skipped; repeatable",
      collect,
      [] as string[],
    )
    .option("--route-by <source>", "the value that picks the handler among --route entries")
    .option(
      "--route <value=handler>",
      "send payloads whose --route-by value is <value> to <handler>; repeatable",
      collect,
      [] as string[],
    )
    .option(
      "--dedupe-header <name>",
      "header with the sender's delivery id (e.g. X-GitHub-Delivery): a repeat within 24 h runs nothing",
    )
    .option("--json", "print the registration as JSON")
    .action(async (options: {
      name: string;
      path?: string;
      url?: string;
      handler: string;
      secret?: string;
      verify?: string;
      tolerance?: string;
      signatureHeader?: string;
      rateLimit?: string;
      map: string[];
      header: string[];
      when: string[];
      routeBy?: string;
      route: string[];
      dedupeHeader?: string;
      json?: boolean;
    }) => {
      const name = options.name.trim();
      if (!name) throw usage("Invalid --name: empty; give the endpoint a name");
      if (options.path !== undefined && options.url !== undefined) {
        throw usage("Invalid --url: give the path once, with --path (or --url, its other name)");
      }
      if (options.path === undefined && options.url === undefined) {
        throw usage("Missing --path: give the endpoint's path, e.g. --path /hooks/github");
      }
      const path = options.path !== undefined
        ? parseIncomingPath(options.path, "--path")
        : parseIncomingPath(options.url!, "--url");
      const handler = options.handler.trim();
      if (!/^[A-Za-z0-9_.-]+$/.test(handler)) {
        throw usage(
          `Invalid --handler "${options.handler}": expected a tool name such as memory_set`,
        );
      }
      const scheme = options.verify === undefined ? undefined : parseVerifyScheme(options.verify);
      if (scheme !== undefined && options.secret === undefined) {
        throw usage(
          `Invalid --verify: it needs --secret, the signing secret ${
            scheme === "hmac-sha256" ? "the sender uses" : `${scheme} shows for this endpoint`
          }`,
        );
      }
      if (options.signatureHeader !== undefined && options.secret === undefined) {
        throw usage("Invalid --signature-header: it needs --secret to verify against");
      }
      if (options.signatureHeader !== undefined && (scheme ?? "hmac-sha256") !== "hmac-sha256") {
        throw usage(
          `Invalid --signature-header: --verify ${scheme} has its own headers; ` +
            `--signature-header applies to hmac-sha256 only`,
        );
      }
      if (
        options.signatureHeader !== undefined && !/^[A-Za-z0-9-]+$/.test(options.signatureHeader)
      ) {
        throw usage(`Invalid --signature-header "${options.signatureHeader}": not a header name`);
      }
      const tolerance = options.tolerance === undefined
        ? undefined
        : parseTolerance(options.tolerance);
      if (tolerance !== undefined && !(scheme && TIMED_SCHEMES.includes(scheme))) {
        throw usage(
          `Invalid --tolerance: only schemes that sign a timestamp have one (--verify ${
            TIMED_SCHEMES.join("|")
          })`,
        );
      }
      const rateLimit = options.rateLimit === undefined
        ? undefined
        : parseRateLimit(options.rateLimit);
      const mapping = parseMappingOptions(options);
      if (
        options.dedupeHeader !== undefined && !/^[A-Za-z0-9-]{1,128}$/.test(options.dedupeHeader)
      ) {
        throw usage(`Invalid --dedupe-header "${options.dedupeHeader}": not a header name`);
      }
      const secret = await readSecret(context, options.secret);
      const config = await context.config();
      const webhook = await (await context.store()).webhooks.addIncoming({
        name,
        path,
        handler,
        ...(secret ? { secret, verify: scheme ?? "hmac-sha256" } : {}),
        ...(options.signatureHeader ? { signature_header: options.signatureHeader } : {}),
        ...(tolerance ? { tolerance_s: tolerance } : {}),
        ...(rateLimit ? { rate_limit_per_s: rateLimit } : {}),
        ...mapping,
        ...(options.dedupeHeader ? { dedupe_header: options.dedupeHeader } : {}),
      });
      if (!secret) {
        context.warn(
          `endpoint ${webhook.id} has no secret: anyone who can reach ${webhook.path} can ` +
            `call ${handler} with any arguments; give the sender's signing secret with ` +
            `--secret (and --verify ${VERIFY_SCHEMES.join("|")})`,
        );
      }
      const handlers = [handler, ...Object.values(mapping.routes ?? {})];
      for (const name of new Set(handlers)) {
        const missing = await missingHandler(context, name);
        if (missing) context.warn(missing);
        const unknown = unknownArguments(name, Object.keys(mapping.map ?? {}));
        if (unknown) context.warn(unknown);
      }
      const host = config.server.host.includes(":")
        ? `[${config.server.host}]`
        : config.server.host;
      const url = `http://${host}:${config.server.port}${webhook.path}`;
      if (options.json) context.printJson({ ...publicIncoming(webhook), served_at: url });
      else {
        context.print(webhook.id);
        context.print(`Served at ${url} by: toolgate mcp start --transport http`);
      }
    });
}
