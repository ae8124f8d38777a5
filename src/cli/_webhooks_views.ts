/**
 * How `toolgate webhooks` shows registrations: the public views of outgoing
 * webhooks and incoming endpoints (no secrets), and the cells and lines of
 * `list` and `show`.
 *
 * @module
 */
import type { IncomingLogEntry, IncomingWebhook, OutgoingWebhook } from "../store/mod.ts";
import {
  DEFAULT_TOLERANCE_S,
  type DeliveryLogEntry,
  type VerifyScheme,
  type WebhookView,
  webhookView,
} from "../webhooks/mod.ts";

/** What became of a logged payload, as one cell of `webhooks show`. */
export function payloadOutcome(entry: IncomingLogEntry): string {
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

/** Schemes that sign a timestamp, which `--tolerance` applies to. */
export const TIMED_SCHEMES: readonly VerifyScheme[] = ["stripe", "slack", "standard-webhooks"];

/** The EVENTS cell of an outgoing webhook. */
export function describeEvents(webhook: WebhookView): string {
  return webhook.events === "*" ? "* (all)" : webhook.events.join(",");
}

/** Summary of an outgoing webhook's latest delivery attempts (its delivery log). */
export interface RecentDeliveries {
  /** Attempts in the log (it keeps the last 20). */
  attempts: number;
  /** Of those, answered 2xx. */
  ok: number;
  /** The latest attempt: when, and its HTTP status or error. */
  last?: { at: string; ok: boolean; status?: number; error?: string };
}

/** Summarizes a delivery log given newest first. */
export function recentDeliveries(log: readonly DeliveryLogEntry[]): RecentDeliveries {
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
export function describeRecent(recent: RecentDeliveries): string {
  const { last } = recent;
  if (!last) return "no deliveries yet";
  const result = last.status !== undefined ? `HTTP ${last.status}` : `error: ${last.error}`;
  return `${recent.ok} of last ${recent.attempts} ok; last ${result} at ${last.at}`;
}

/** The public view of an outgoing webhook: no secret, not even a previous one. */
export function publicOutgoing(webhook: OutgoingWebhook): WebhookView {
  return webhookView(webhook);
}

/** The SECRET cell of an outgoing webhook: whether signed, and previous secrets still signing. */
export function describeSecret(webhook: WebhookView): string {
  if (!webhook.has_secret) return "no";
  const previous = webhook.previous_secrets.length;
  return previous ? `yes (+${previous} previous)` : "yes";
}

/** The STATE cell of an outgoing webhook: enabled, or disabled with its reason. */
export function describeState(webhook: WebhookView): string {
  const { disabled } = webhook;
  if (!disabled) return "enabled";
  return `disabled (${disabled.reason}${disabled.detail ? `: ${disabled.detail}` : ""})`;
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
export function describeVerify(webhook: IncomingWebhook): string {
  const view = publicIncoming(webhook);
  if (!view.verify) return "no";
  return view.tolerance_s === undefined
    ? `yes (${view.verify})`
    : `yes (${view.verify}, ±${view.tolerance_s}s)`;
}

/** The lines of `webhooks show` describing an endpoint's mapping, filter, routes and dedupe. */
export function describeMapping(endpoint: IncomingWebhook): string[] {
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
