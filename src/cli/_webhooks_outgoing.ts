/**
 * `toolgate webhooks add|update|disable|enable|rotate-secret|test`: the
 * commands of outgoing webhooks (the logic is in `src/webhooks/endpoints.ts`
 * and `src/webhooks/test_webhook.ts`).
 *
 * @module
 */
import { egressPolicyFromConfig } from "../egress/mod.ts";
import type { Command } from "commander";
import { EVENT_TYPES, OPT_IN_EVENT_TYPES } from "../events/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import {
  addWebhook,
  disableWebhook,
  enableWebhook,
  parseDuration,
  parseEventList as parseEvents,
  parseRetrySchedule,
  parseWebhookUrl as parseUrl,
  rotateWebhookSecret,
  testWebhook,
  updateWebhook,
  validateSecret,
} from "../webhooks/mod.ts";
import { type CliContext, usage } from "./context.ts";
import { readSecret } from "./_webhooks_input.ts";
import { describeEvents } from "./_webhooks_views.ts";

/** Validates `--url` of an outgoing webhook: http or https only. */
export function parseWebhookUrl(raw: string): string {
  return parseUrl(raw, "--url");
}

/** Parses `--events a,b`: known types only, at least one. */
export function parseEventList(raw: string): string[] {
  return parseEvents(raw, "--events");
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

/** Registers `webhooks add`, `update`, `disable`, `enable` and `rotate-secret`. */
export function registerOutgoingCommands(webhooks: Command, context: CliContext): void {
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
}

/** Registers `webhooks test`: one signed `webhook.test` event to an outgoing webhook. */
export function registerTestCommand(webhooks: Command, context: CliContext): void {
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
}
