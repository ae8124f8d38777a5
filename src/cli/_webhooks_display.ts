/**
 * `toolgate webhooks list|show`: the registered outgoing webhooks and
 * incoming endpoints as tables, lines or JSON, with their recent deliveries
 * or payloads.
 *
 * @module
 */
import type { Command } from "commander";
import { GatewayError } from "../errors/mod.ts";
import { formatRetrySchedule, recentAttempts, webhookView } from "../webhooks/mod.ts";
import { type CliContext, table } from "./context.ts";
import {
  describeEvents,
  describeMapping,
  describeRecent,
  describeSecret,
  describeState,
  describeVerify,
  payloadOutcome,
  publicIncoming,
  recentDeliveries,
} from "./_webhooks_views.ts";

/** Registers `webhooks list`. */
export function registerListCommand(webhooks: Command, context: CliContext): void {
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
}

/** Registers `webhooks show`. */
export function registerShowCommand(webhooks: Command, context: CliContext): void {
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
