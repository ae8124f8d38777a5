/**
 * `toolgate webhooks …`: register, update, disable, enable, rotate, list,
 * remove and test outgoing webhooks (the logic is in
 * `src/webhooks/endpoints.ts`), and create incoming endpoints.
 *
 * @module
 */
import { egressPolicyFromConfig } from "../egress/mod.ts";
import type { Command } from "commander";
import { EVENT_TYPES, OPT_IN_EVENT_TYPES } from "../events/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { IncomingLogEntry, IncomingWebhook, OutgoingWebhook } from "../store/mod.ts";
import { builtinPlugins } from "../plugins/mod.ts";
import {
  addWebhook,
  DEFAULT_TOLERANCE_S,
  type DeliveryLogEntry,
  disableWebhook,
  enableWebhook,
  formatRetrySchedule,
  isVerifyScheme,
  parseDuration,
  parseEventList as parseEvents,
  parseRetrySchedule,
  parseWebhookUrl as parseUrl,
  recentAttempts,
  rotateWebhookSecret,
  testWebhook,
  updateWebhook,
  validateSecret,
  VERIFY_SCHEMES,
  type VerifyScheme,
  type WebhookView,
  webhookView,
} from "../webhooks/mod.ts";
import {
  type IncomingMappingSpec,
  parseHeaderEntry,
  parseMapEntry,
  parseRouteEntry,
  validateMapping,
} from "../webhooks/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

/** What became of a logged payload, as one cell of `webhooks show`. */
function payloadOutcome(entry: IncomingLogEntry): string {
  const calls = entry.attempts !== undefined ? ` (${entry.attempts} call(s))` : "";
  const error = entry.code
    ? `${entry.code}: ${entry.message ?? ""}${
      entry.fields?.length ? ` [fields: ${entry.fields.join(", ")}]` : ""
    }`
    : "";
  switch (entry.status) {
    case "accepted":
      return "accepted, queued";
    case "ok":
      return `ran ok${calls}`;
    case "retrying":
      return `retrying at ${entry.next_attempt_at}${calls}: ${error}`;
    case "failed":
      return `failed${calls}: ${error}; toolgate incoming failed show ${entry.id}`;
    case "skipped":
      return `skipped: ${entry.reason ?? ""}`;
    case "duplicate":
      return `duplicate of ${entry.job_id}`;
  }
}

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

/** Schemes that sign a timestamp, which `--tolerance` applies to. */
const TIMED_SCHEMES: readonly VerifyScheme[] = ["stripe", "slack", "standard-webhooks"];

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

/** The EVENTS cell of an outgoing webhook. */
function describeEvents(webhook: WebhookView): string {
  return webhook.events === "*" ? "* (all)" : webhook.events.join(",");
}

/** Summary of an outgoing webhook's latest delivery attempts (its delivery log). */
interface RecentDeliveries {
  /** Attempts in the log (it keeps the last 20). */
  attempts: number;
  /** Of those, answered 2xx. */
  ok: number;
  /** The latest attempt: when, and its HTTP status or error. */
  last?: { at: string; ok: boolean; status?: number; error?: string };
}

/** Summarizes a delivery log given newest first. */
function recentDeliveries(log: readonly DeliveryLogEntry[]): RecentDeliveries {
  const latest = log[0];
  return {
    attempts: log.length,
    ok: log.filter((entry) => entry.ok).length,
    ...(latest
      ? {
        last: {
          at: latest.at,
          ok: latest.ok,
          ...(latest.status !== undefined ? { status: latest.status } : {}),
          ...(latest.error !== undefined ? { error: latest.error } : {}),
        },
      }
      : {}),
  };
}

/** The STATS cell of an outgoing webhook in `webhooks list`. */
function describeRecent(recent: RecentDeliveries): string {
  const { last } = recent;
  if (!last) return "no deliveries yet";
  const result = last.status !== undefined ? `HTTP ${last.status}` : `error: ${last.error}`;
  return `${recent.ok} of last ${recent.attempts} ok; last ${result} at ${last.at}`;
}

/** Validates `--url` of an outgoing webhook: http or https only. */
export function parseWebhookUrl(raw: string): string {
  return parseUrl(raw, "--url");
}

/** Parses `--events a,b`: known types only, at least one. */
export function parseEventList(raw: string): string[] {
  return parseEvents(raw, "--events");
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

async function readSecret(
  context: CliContext,
  raw: string | undefined,
): Promise<string | undefined> {
  if (raw === undefined) return undefined;
  const secret = raw === "-" ? (await context.io.readStdin()).replace(/\r?\n$/, "") : raw;
  if (secret.length === 0) throw usage("Invalid --secret: empty; give a value or - to read stdin");
  return secret;
}

/** The public view of an outgoing webhook: no secret, not even a previous one. */
export function publicOutgoing(webhook: OutgoingWebhook): WebhookView {
  return webhookView(webhook);
}

/** The SECRET cell of an outgoing webhook: whether signed, and previous secrets still signing. */
function describeSecret(webhook: WebhookView): string {
  if (!webhook.has_secret) return "no";
  const previous = webhook.previous_secrets.length;
  return previous ? `yes (+${previous} previous)` : "yes";
}

/** The STATE cell of an outgoing webhook: enabled, or disabled with its reason. */
function describeState(webhook: WebhookView): string {
  const { disabled } = webhook;
  if (!disabled) return "enabled";
  return `disabled (${disabled.reason}${disabled.detail ? `: ${disabled.detail}` : ""})`;
}

/** Warns about subscribed event types switched off in config. */
async function warnDisabledEvents(context: CliContext, events: "*" | string[]): Promise<void> {
  if (events === "*") return;
  const config = await context.config();
  const off = events.filter((e) => (config.events.disabled as readonly string[]).includes(e));
  if (off.length) {
    context.warn(
      `event type ${
        off.join(", ")
      } is disabled in config (events.disabled); it will not be delivered until enabled`,
    );
  }
}

/** Prints a secret shown once: on stdout for `rotate-secret`, on stderr beside `add`'s id. */
function secretNotice(secret: string): string {
  return `Signing secret (shown only now; give it to the receiver): ${secret}`;
}

/**
 * The public view of an incoming endpoint: the secret is never shown; a
 * signed endpoint's scheme (and tolerance, for schemes that sign a
 * timestamp) is.
 */
export function publicIncoming(webhook: IncomingWebhook) {
  const { secret, verify, tolerance_s, ...rest } = webhook;
  const scheme = secret === undefined ? undefined : verify ?? "hmac-sha256";
  return {
    ...rest,
    kind: "incoming" as const,
    has_secret: secret !== undefined,
    ...(scheme ? { verify: scheme } : {}),
    ...(scheme && TIMED_SCHEMES.includes(scheme)
      ? { tolerance_s: tolerance_s ?? DEFAULT_TOLERANCE_S }
      : {}),
  };
}

/** The SECRET cell of an incoming endpoint: its scheme, or no. */
function describeVerify(webhook: IncomingWebhook): string {
  const view = publicIncoming(webhook);
  if (!view.verify) return "no";
  return view.tolerance_s === undefined
    ? `yes (${view.verify})`
    : `yes (${view.verify}, ±${view.tolerance_s}s)`;
}

/** Commander's collector for a repeatable option. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
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

/** The lines of `webhooks show` describing an endpoint's mapping, filter, routes and dedupe. */
function describeMapping(endpoint: IncomingWebhook): string[] {
  const lines: string[] = [];
  const map = Object.entries(endpoint.map ?? {});
  if (map.length) {
    lines.push(
      `arguments: ${map.map(([name, source]) => `${name}=${source || "(payload)"}`).join(", ")}`,
    );
  }
  if (endpoint.when?.length) lines.push(`runs when: ${endpoint.when.join(" and ")}`);
  if (endpoint.route_by !== undefined) {
    const routes = Object.entries(endpoint.routes ?? {}).map(([v, h]) => `${v} → ${h}`);
    lines.push(
      `routed by ${endpoint.route_by}: ${routes.join(", ")}; otherwise → ${endpoint.handler}`,
    );
  }
  if (endpoint.dedupe_header) {
    lines.push(`de-duplicated on ${endpoint.dedupe_header} (24 h)`);
  }
  return lines;
}

/** Registers the `webhooks` command group. */
export function registerWebhooks(program: Command, context: CliContext): void {
  const webhooks = program.command("webhooks")
    .description("manage outgoing webhooks and incoming webhook endpoints");

  webhooks.command("add")
    .description(
      "register an outgoing webhook; prints its id (and, on stderr, the generated secret)",
    )
    .requiredOption("--url <url>", "http(s) endpoint that receives the signed events")
    .option(
      "--events <types>",
      `comma-separated event types (default: the 8): ${EVENT_TYPES.join(",")}; opt-in: ${
        OPT_IN_EVENT_TYPES.join(",")
      }`,
    )
    .option(
      "--secret <secret>",
      "signing secret; - reads it from stdin (default: a generated whsec_… secret)",
    )
    .option("--no-secret", "send deliveries unsigned (not recommended)")
    .option("--description <text>", "a note for operators")
    .option(
      "--retry-schedule <delays>",
      "this webhook's waits before each retry, e.g. 5s,5m,30m,2h,5h,10h,10h (default: 1s,2s,4s,8s,16s)",
    )
    .option("--json", "print the registration as JSON (with the generated secret)")
    .action(
      async (options: {
        url: string;
        events?: string;
        secret?: string | false;
        description?: string;
        retrySchedule?: string;
        json?: boolean;
      }) => {
        if (options.url.trim().startsWith("/")) {
          throw usage(
            `Invalid --url "${options.url}": webhooks add registers an outgoing webhook and ` +
              `needs the http(s) URL to send events to; to receive requests at ` +
              `${options.url}, use toolgate webhooks create --path ${options.url} ` +
              `--name <name> --handler <tool>`,
          );
        }
        const url = parseWebhookUrl(options.url);
        const events = options.events === undefined ? "*" : parseEventList(options.events);
        const retrySchedule = options.retrySchedule === undefined
          ? undefined
          : parseRetrySchedule(options.retrySchedule);
        const secret = options.secret === false ? null : await readSecret(context, options.secret);
        if (secret) validateSecret(secret, "--secret");
        await warnDisabledEvents(context, events);
        // An address the deliveries would be refused: said now, with the fix.
        const egress = egressPolicyFromConfig(await context.config());
        const added = await addWebhook(await context.store(), {
          url,
          events,
          secret,
          ...(options.description ? { description: options.description } : {}),
          ...(retrySchedule ? { retry_schedule_ms: retrySchedule } : {}),
        }, { egress });
        if (secret === null) {
          context.warn(
            `webhook ${added.webhook.id} is unsigned (--no-secret): receivers cannot tell its ` +
              `deliveries from forged ones; add a secret with toolgate webhooks rotate-secret ` +
              added.webhook.id,
          );
        }
        if (options.json) {
          context.printJson({
            ...added.webhook,
            ...(added.secret ? { secret: added.secret } : {}),
          });
          return;
        }
        context.print(added.webhook.id);
        if (added.secret) context.io.stderr(secretNotice(added.secret) + "\n");
      },
    );

  webhooks.command("update")
    .description("change an outgoing webhook's URL, events, description or retry schedule")
    .argument("<id>", "the outgoing webhook id (wh_…)")
    .option("--url <url>", "new http(s) endpoint")
    .option("--events <types>", `comma-separated event types, or * for all`)
    .option("--description <text>", `a note for operators ("" removes it)`)
    .option(
      "--retry-schedule <delays>",
      "waits before each retry, e.g. 5s,5m,30m,2h; default goes back to the default schedule",
    )
    .option("--json", "print the webhook as JSON")
    .action(
      async (
        id: string,
        options: {
          url?: string;
          events?: string;
          description?: string;
          retrySchedule?: string;
          json?: boolean;
        },
      ) => {
        const url = options.url === undefined ? undefined : parseWebhookUrl(options.url);
        const events = options.events === undefined
          ? undefined
          : options.events.trim() === "*"
          ? "*"
          : parseEventList(options.events);
        const retrySchedule = options.retrySchedule === undefined
          ? undefined
          : options.retrySchedule.trim() === "default"
          ? null
          : parseRetrySchedule(options.retrySchedule);
        if (
          url === undefined && events === undefined && options.description === undefined &&
          retrySchedule === undefined
        ) {
          throw usage(
            `Nothing to update on ${id}: give --url, --events, --description or --retry-schedule`,
          );
        }
        if (events !== undefined) await warnDisabledEvents(context, events);
        const egress = egressPolicyFromConfig(await context.config());
        const webhook = await updateWebhook(await context.store(), id, {
          ...(url !== undefined ? { url } : {}),
          ...(events !== undefined ? { events } : {}),
          ...(options.description !== undefined ? { description: options.description } : {}),
          ...(retrySchedule !== undefined ? { retry_schedule_ms: retrySchedule } : {}),
        }, { egress });
        if (options.json) context.printJson(webhook);
        else {context.print(
            `Updated ${webhook.id}: ${webhook.url}, events ${describeEvents(webhook)}`,
          );}
      },
    );

  webhooks.command("disable")
    .description("stop deliveries to an outgoing webhook until it is enabled again")
    .argument("<id>", "the outgoing webhook id (wh_…)")
    .option("--reason <text>", "why (shown by list and show)")
    .option("--json", "print the webhook as JSON")
    .action(async (id: string, options: { reason?: string; json?: boolean }) => {
      const webhook = await disableWebhook(await context.store(), id, options.reason);
      if (options.json) context.printJson(webhook);
      else context.print(`Disabled ${webhook.id}: it gets no deliveries until enabled`);
    });

  webhooks.command("enable")
    .description("let a disabled outgoing webhook receive deliveries again")
    .argument("<id>", "the outgoing webhook id (wh_…)")
    .option("--json", "print the webhook as JSON")
    .action(async (id: string, options: { json?: boolean }) => {
      const { webhook, was_disabled } = await enableWebhook(await context.store(), id);
      if (options.json) context.printJson(webhook);
      else {context.print(
          was_disabled ? `Enabled ${webhook.id}` : `${webhook.id} was already enabled`,
        );}
    });

  webhooks.command("rotate-secret")
    .description(
      "replace an outgoing webhook's signing secret; prints the new one once. During the " +
        "overlap the old secret keeps signing: webhook-signature carries both, " +
        "X-Service-Signature keeps the old one, then switches",
    )
    .argument("<id>", "the outgoing webhook id (wh_…)")
    .option(
      "--overlap <duration>",
      "how long the old secret keeps signing (beside the new one in webhook-signature, " +
        "instead of it in X-Service-Signature), e.g. 24h, 30m; 0 switches both at once",
      "24h",
    )
    .option("--json", "print {webhook, secret} as JSON")
    .action(async (id: string, options: { overlap: string; json?: boolean }) => {
      const overlapMs = parseDuration(options.overlap, "--overlap");
      const { webhook, secret } = await rotateWebhookSecret(await context.store(), id, {
        overlapMs,
      });
      if (options.json) {
        context.printJson({ webhook, secret });
        return;
      }
      context.print(secret);
      const until = overlapMs > 0 ? webhook.previous_secrets[0]?.expires_at : undefined;
      // X-Service-Signature switches when the last overlap still running ends.
      const switchAt = webhook.previous_secrets.reduce<string | undefined>(
        (latest, p) => latest === undefined || p.expires_at > latest ? p.expires_at : latest,
        undefined,
      );
      context.io.stderr(
        `Rotated the secret of ${webhook.id}: the line above is the new secret, shown only now; ` +
          (until
            ? `the old one also signs webhook-signature until ${until}`
            : `the old one no longer signs webhook-signature`) +
          (switchAt
            ? `, and X-Service-Signature keeps ${
              until ? "the old secret" : "an earlier secret (a rotation's overlap is running)"
            } until ${switchAt}, then switches to the new one: give the new secret to the ` +
              `receiver before then\n`
            : `, and X-Service-Signature switches to the new one at once\n`),
      );
    });

  webhooks.command("list")
    .description("list outgoing webhooks and incoming endpoints")
    .option("--json", "print JSON: {outgoing: [...], incoming: [...]}")
    .option("--outgoing", "only outgoing webhooks")
    .option("--incoming", "only incoming endpoints")
    .action(async (options: { json?: boolean; outgoing?: boolean; incoming?: boolean }) => {
      const store = await context.store();
      const both = !options.outgoing && !options.incoming;
      const outgoing = both || options.outgoing ? await store.webhooks.listOutgoing() : [];
      const incoming = both || options.incoming ? await store.webhooks.listIncoming() : [];
      const stats = await Promise.all(incoming.map((w) => store.webhooks.incomingStats(w.id)));
      const recent = await Promise.all(
        outgoing.map(async (w) => recentDeliveries(await recentAttempts(store, w.id))),
      );
      const views = outgoing.map((w) => webhookView(w));
      if (options.json) {
        context.printJson({
          outgoing: views.map((w, i) => ({ ...w, recent: recent[i] })),
          incoming: incoming.map((w, i) => ({ ...publicIncoming(w), stats: stats[i] })),
        });
        return;
      }
      if (outgoing.length === 0 && incoming.length === 0) {
        context.print("No webhooks registered. Add one with: toolgate webhooks add --url <url>");
        return;
      }
      const rows = [
        ...views.map((w, i) => [
          w.id,
          "outgoing",
          w.url,
          describeEvents(w),
          describeSecret(w),
          describeState(w),
          describeRecent(recent[i]),
        ]),
        ...incoming.map((w, i) => [
          w.id,
          "incoming",
          w.path,
          `→ ${w.handler}`,
          describeVerify(w),
          "enabled",
          `${stats[i].received} received, ${stats[i].rejected} rejected, ${stats[i].failed} failed${
            stats[i].last_received_at ? `, last ${stats[i].last_received_at}` : ""
          }`,
        ]),
      ];
      context.print(
        table(["ID", "KIND", "URL / PATH", "EVENTS / HANDLER", "SECRET", "STATE", "STATS"], rows),
      );
    });

  webhooks.command("remove")
    .description("remove an outgoing webhook (wh_…) or incoming endpoint (in_…)")
    .argument("<id>", "the webhook id")
    .action(async (id: string) => {
      const removed = await (await context.store()).webhooks.remove(id);
      if (!removed) {
        throw new GatewayError(
          "NOT_FOUND",
          `No webhook with id ${id}: see toolgate webhooks list`,
        );
      }
      context.print(`Removed ${removed} webhook ${id}`);
    });

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

  webhooks.command("test")
    .description("send one signed webhook.test event to an outgoing webhook; exit 1 unless 2xx")
    .argument("<id>", "the outgoing webhook id (wh_…)")
    .option("--timeout <ms>", "how long to wait for the response (default: webhooks.timeout_ms)")
    .option("--json", "print the result as JSON")
    .action(async (id: string, options: { timeout?: string; json?: boolean }) => {
      const timeoutMs = options.timeout === undefined
        ? (await context.config()).webhooks.timeout_ms
        : Number(options.timeout);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
        throw usage(`Invalid --timeout "${options.timeout}": expected milliseconds, e.g. 5000`);
      }
      if (!id.startsWith("wh_")) {
        throw usage(`Invalid id "${id}": webhooks test takes an outgoing webhook id (wh_…)`);
      }
      const store = await context.store();
      const webhook = await store.webhooks.getOutgoing(id);
      if (!webhook) {
        throw new GatewayError(
          "NOT_FOUND",
          `No outgoing webhook with id ${id}: see toolgate webhooks list`,
        );
      }
      const egress = egressPolicyFromConfig(await context.config(), {
        marker: await store.deploymentId(),
      });
      const result = await testWebhook(store, id, { timeoutMs, egress });
      if (options.json) context.printJson({ webhook_id: id, url: webhook.url, ...result });
      else {
        const outcome = result.status !== undefined
          ? `HTTP ${result.status}`
          : `error: ${result.error}`;
        context.print(
          `${
            result.ok ? "Delivered" : "Failed"
          }: ${outcome} from ${webhook.url} in ${result.latency_ms} ms; ` +
            `${
              result.signed
                ? "signed (X-Service-Signature, webhook-signature)"
                : "unsigned (no secret)"
            }; ` +
            `delivery ${result.event_id}`,
        );
      }
      if (result.egress_denied) {
        throw new GatewayError(
          "EGRESS_DENIED",
          `Test delivery to ${webhook.url} refused: ${
            result.error?.replace(/^EGRESS_DENIED: /, "")
          }`,
        );
      }
      if (!result.ok) {
        throw new GatewayError(
          "DELIVERY_FAILED",
          `Test delivery to ${webhook.url} failed: ${
            result.status !== undefined ? `HTTP ${result.status}` : result.error
          }`,
        );
      }
    });

  webhooks.command("show")
    .description(
      "show one webhook with its recent delivery attempts (outgoing) or its counters and last " +
        "20 payloads with their outcome (incoming)",
    )
    .argument("<id>", "the webhook id (wh_… or in_…)")
    .option("--json", "print JSON")
    .action(async (id: string, options: { json?: boolean }) => {
      const store = await context.store();
      if (id.startsWith("in_")) {
        const endpoint = await store.webhooks.getIncoming(id);
        if (!endpoint) {
          throw new GatewayError(
            "NOT_FOUND",
            `No webhook with id ${id}: see toolgate webhooks list`,
          );
        }
        const stats = await store.webhooks.incomingStats(id);
        const waiting = (await store.incoming.pendingCounts())[id] ?? 0;
        const payloads = await store.incoming.readPayloadLog(id);
        if (options.json) {
          context.printJson({
            ...publicIncoming(endpoint),
            stats,
            waiting,
            recent_payloads: payloads,
          });
        } else {
          context.print(`${endpoint.id}  incoming  ${endpoint.path} → ${endpoint.handler}`);
          const view = publicIncoming(endpoint);
          context.print(
            `name: ${endpoint.name}; secret: ${endpoint.secret ? "yes" : "no"}${
              view.verify ? `; verify: ${view.verify}` : ""
            }${endpoint.signature_header ? ` (header ${endpoint.signature_header})` : ""}${
              view.tolerance_s !== undefined ? ` (tolerance ${view.tolerance_s}s)` : ""
            }${endpoint.rate_limit_per_s ? `; rate limit ${endpoint.rate_limit_per_s}/s` : ""}`,
          );
          for (const line of describeMapping(endpoint)) context.print(line);
          context.print(
            `${stats.received} received, ${stats.rejected} rejected, ${stats.failed} failed; last ${
              stats.last_received_at ?? "never"
            }; ${waiting} waiting for the handler`,
          );
          if (!payloads.length) context.print("No payloads yet.");
          else {
            context.print(table(
              ["RECEIVED", "JOB", "HANDLER", "OUTCOME"],
              payloads.map((p) => [p.received_at, p.id, p.handler ?? "", payloadOutcome(p)]),
            ));
          }
        }
        return;
      }
      const record = await store.webhooks.getOutgoing(id);
      if (!record) {
        throw new GatewayError("NOT_FOUND", `No webhook with id ${id}: see toolgate webhooks list`);
      }
      const webhook = webhookView(record);
      const attempts = await recentAttempts(store, id);
      if (options.json) {
        context.printJson({ ...webhook, recent_attempts: attempts });
        return;
      }
      context.print(`${webhook.id}  outgoing  ${webhook.url}`);
      if (webhook.description) context.print(`description: ${webhook.description}`);
      const previous = webhook.previous_secrets.map((p) => `until ${p.expires_at}`);
      context.print(
        `events: ${describeEvents(webhook)}; secret: ${webhook.has_secret ? "yes" : "no"}${
          previous.length
            ? ` (+${previous.length} previous secret${
              previous.length > 1 ? "s" : ""
            } also signing webhook-signature, ${previous.join(", ")})`
            : ""
        }`,
      );
      if (webhook.retry_schedule_ms) {
        context.print(`retry schedule: ${formatRetrySchedule(webhook.retry_schedule_ms)}`);
      }
      const { disabled } = webhook;
      context.print(
        disabled
          ? `state: disabled since ${disabled.at} (${disabled.reason}${
            disabled.detail ? `: ${disabled.detail}` : ""
          }); enable with toolgate webhooks enable ${webhook.id}`
          : "state: enabled",
      );
      if (attempts.length === 0) {
        context.print("No delivery attempts yet.");
        return;
      }
      context.print(table(
        ["TIME", "EVENT", "ATTEMPT", "RESULT", "LATENCY"],
        attempts.map((a) => [
          a.at,
          `${a.event_type} ${a.event_id}`,
          String(a.attempt),
          a.ok
            ? `ok ${a.status}`
            : a.status !== undefined
            ? `HTTP ${a.status}`
            : `error: ${a.error}`,
          `${a.latency_ms} ms`,
        ]),
      ));
    });
}
