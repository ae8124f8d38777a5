/**
 * `toolgate webhooks …`: register, list, remove and test outgoing webhooks,
 * and create incoming endpoints.
 *
 * @module
 */
import type { Command } from "commander";
import { EVENT_TYPES, isEventType } from "../events/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { IncomingWebhook, OutgoingWebhook } from "../store/mod.ts";
import { builtinPlugins } from "../plugins/mod.ts";
import {
  type DeliveryLogEntry,
  parseRetrySchedule,
  recentAttempts,
  testWebhook,
} from "../webhooks/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

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
];

const PATH_PATTERN = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+(\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*$/;

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

/** Validates an outgoing webhook URL: http or https only. */
export function parseWebhookUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usage(`Invalid --url "${raw}": not a URL; expected http://… or https://…`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw usage(
      `Invalid --url "${raw}": scheme ${
        url.protocol.slice(0, -1)
      } is not supported; use http or https`,
    );
  }
  if (url.username || url.password) {
    throw usage(`Invalid --url "${raw}": credentials in the URL are not allowed; use --secret`);
  }
  return url.href;
}

/** Parses `--events a,b`: known types only, at least one. */
export function parseEventList(raw: string): string[] {
  const names = raw.split(",").map((s) => s.trim()).filter(Boolean);
  if (names.length === 0) {
    throw usage(
      `Invalid --events "${raw}": empty; omit --events for all, or list some of: ${
        EVENT_TYPES.join(", ")
      }`,
    );
  }
  const unknown = names.filter((name) => !isEventType(name));
  if (unknown.length) {
    throw usage(
      `Invalid --events: unknown event type ${unknown.map((u) => `"${u}"`).join(", ")}; valid: ${
        EVENT_TYPES.join(", ")
      }`,
    );
  }
  return [...new Set(names)];
}

/** Validates an incoming endpoint path. */
export function parseIncomingPath(raw: string): string {
  if (!raw.startsWith("/")) {
    throw usage(`Invalid --url "${raw}": the path must start with "/", e.g. /hooks/github`);
  }
  if (!PATH_PATTERN.test(raw)) {
    throw usage(
      `Invalid --url "${raw}": use a plain path of letters, digits and - . _ ~ segments, e.g. /hooks/github`,
    );
  }
  const lower = raw.toLowerCase();
  const shadowed = RESERVED_PATHS.find((p) => lower === p || lower.startsWith(p + "/"));
  if (shadowed) {
    throw usage(
      `Invalid --url "${raw}": it shadows the built-in route ${shadowed}; reserved: ${
        RESERVED_PATHS.join(", ")
      }`,
    );
  }
  return raw;
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

/** The public view of an outgoing webhook: the secret is never shown. */
export function publicOutgoing(webhook: OutgoingWebhook) {
  const { secret, ...rest } = webhook;
  return { ...rest, kind: "outgoing" as const, has_secret: secret !== undefined };
}

/** The public view of an incoming endpoint: the secret is never shown. */
export function publicIncoming(webhook: IncomingWebhook) {
  const { secret, ...rest } = webhook;
  return { ...rest, kind: "incoming" as const, has_secret: secret !== undefined };
}

/** Registers the `webhooks` command group. */
export function registerWebhooks(program: Command, context: CliContext): void {
  const webhooks = program.command("webhooks")
    .description("manage outgoing webhooks and incoming webhook endpoints");

  webhooks.command("add")
    .description("register an outgoing webhook; prints its id")
    .requiredOption("--url <url>", "http(s) endpoint that receives the signed events")
    .option(
      "--events <types>",
      `comma-separated event types (default: all): ${EVENT_TYPES.join(",")}`,
    )
    .option("--secret <secret>", "HMAC-SHA256 signing secret; - reads it from stdin")
    .option(
      "--retry-schedule <delays>",
      "this webhook's waits before each retry, e.g. 5s,5m,30m,2h,5h,10h,10h (default: 1s,2s,4s,8s,16s)",
    )
    .option("--json", "print the registration as JSON")
    .action(async (options: {
      url: string;
      events?: string;
      secret?: string;
      retrySchedule?: string;
      json?: boolean;
    }) => {
      const url = parseWebhookUrl(options.url);
      const events = options.events === undefined ? "*" : parseEventList(options.events);
      const retrySchedule = options.retrySchedule === undefined
        ? undefined
        : parseRetrySchedule(options.retrySchedule);
      const secret = await readSecret(context, options.secret);
      const config = await context.config();
      if (events !== "*") {
        const off = events.filter((e) => (config.events.disabled as readonly string[]).includes(e));
        if (off.length) {
          context.warn(
            `event type ${
              off.join(", ")
            } is disabled in config (events.disabled); it will not be delivered until enabled`,
          );
        }
      }
      const webhook = await (await context.store()).webhooks.addOutgoing({
        url,
        events,
        secret,
        ...(retrySchedule ? { retry_schedule_ms: retrySchedule } : {}),
      });
      if (options.json) context.printJson(publicOutgoing(webhook));
      else context.print(webhook.id);
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
      if (options.json) {
        context.printJson({
          outgoing: outgoing.map((w, i) => ({ ...publicOutgoing(w), recent: recent[i] })),
          incoming: incoming.map((w, i) => ({ ...publicIncoming(w), stats: stats[i] })),
        });
        return;
      }
      if (outgoing.length === 0 && incoming.length === 0) {
        context.print("No webhooks registered. Add one with: toolgate webhooks add --url <url>");
        return;
      }
      const rows = [
        ...outgoing.map((w, i) => [
          w.id,
          "outgoing",
          w.url,
          w.events === "*" ? "* (all)" : w.events.join(","),
          w.secret ? "yes" : "no",
          describeRecent(recent[i]),
        ]),
        ...incoming.map((w, i) => [
          w.id,
          "incoming",
          w.path,
          `→ ${w.handler}`,
          w.secret ? "yes" : "no",
          `${stats[i].received} received, ${stats[i].rejected} rejected, ${stats[i].failed} failed${
            stats[i].last_received_at ? `, last ${stats[i].last_received_at}` : ""
          }`,
        ]),
      ];
      context.print(
        table(["ID", "KIND", "URL / PATH", "EVENTS / HANDLER", "SECRET", "STATS"], rows),
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
    .requiredOption("--url <path>", "path on the HTTP server, e.g. /hooks/github")
    .requiredOption("--handler <tool>", "tool that receives each payload as its arguments")
    .option("--secret <secret>", "verify X-Service-Signature (sha256=<hex>); - reads stdin")
    .option("--signature-header <name>", "header carrying the signature, e.g. X-Hub-Signature-256")
    .option("--rate-limit <n/s>", "accepted requests per second, e.g. 10/s")
    .option("--json", "print the registration as JSON")
    .action(async (options: {
      name: string;
      url: string;
      handler: string;
      secret?: string;
      signatureHeader?: string;
      rateLimit?: string;
      json?: boolean;
    }) => {
      const name = options.name.trim();
      if (!name) throw usage("Invalid --name: empty; give the endpoint a name");
      const path = parseIncomingPath(options.url);
      const handler = options.handler.trim();
      if (!/^[A-Za-z0-9_.-]+$/.test(handler)) {
        throw usage(
          `Invalid --handler "${options.handler}": expected a tool name such as memory_set`,
        );
      }
      if (options.signatureHeader !== undefined && options.secret === undefined) {
        throw usage("Invalid --signature-header: it needs --secret to verify against");
      }
      if (
        options.signatureHeader !== undefined && !/^[A-Za-z0-9-]+$/.test(options.signatureHeader)
      ) {
        throw usage(`Invalid --signature-header "${options.signatureHeader}": not a header name`);
      }
      const rateLimit = options.rateLimit === undefined
        ? undefined
        : parseRateLimit(options.rateLimit);
      const secret = await readSecret(context, options.secret);
      const config = await context.config();
      const webhook = await (await context.store()).webhooks.addIncoming({
        name,
        path,
        handler,
        ...(secret ? { secret } : {}),
        ...(options.signatureHeader ? { signature_header: options.signatureHeader } : {}),
        ...(rateLimit ? { rate_limit_per_s: rateLimit } : {}),
      });
      const missing = await missingHandler(context, handler);
      if (missing) context.warn(missing);
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
      const result = await testWebhook(store, id, { timeoutMs });
      if (options.json) context.printJson({ webhook_id: id, url: webhook.url, ...result });
      else {
        const outcome = result.status !== undefined
          ? `HTTP ${result.status}`
          : `error: ${result.error}`;
        context.print(
          `${
            result.ok ? "Delivered" : "Failed"
          }: ${outcome} from ${webhook.url} in ${result.latency_ms} ms; ` +
            `signature ${result.signed ? "sent (X-Service-Signature)" : "not sent (no secret)"}; ` +
            `delivery ${result.event_id}`,
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
      "show one webhook with its recent delivery attempts (outgoing) or counters (incoming)",
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
        if (options.json) context.printJson({ ...publicIncoming(endpoint), stats });
        else {
          context.print(`${endpoint.id}  incoming  ${endpoint.path} → ${endpoint.handler}`);
          context.print(
            `name: ${endpoint.name}; secret: ${endpoint.secret ? "yes" : "no"}${
              endpoint.signature_header ? ` (header ${endpoint.signature_header})` : ""
            }${endpoint.rate_limit_per_s ? `; rate limit ${endpoint.rate_limit_per_s}/s` : ""}`,
          );
          context.print(
            `${stats.received} received, ${stats.rejected} rejected, ${stats.failed} failed; last ${
              stats.last_received_at ?? "never"
            }`,
          );
        }
        return;
      }
      const webhook = await store.webhooks.getOutgoing(id);
      if (!webhook) {
        throw new GatewayError("NOT_FOUND", `No webhook with id ${id}: see toolgate webhooks list`);
      }
      const attempts = await recentAttempts(store, id);
      if (options.json) {
        context.printJson({ ...publicOutgoing(webhook), recent_attempts: attempts });
        return;
      }
      context.print(`${webhook.id}  outgoing  ${webhook.url}`);
      context.print(
        `events: ${webhook.events === "*" ? "* (all)" : webhook.events.join(",")}; secret: ${
          webhook.secret ? "yes" : "no"
        }`,
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
