/**
 * Managing outgoing webhook endpoints: add, update, disable, enable, rotate
 * the signing secret, remove; every input validated here, whoever asks (the
 * CLI, the management API). Records come back as {@linkcode WebhookView}s,
 * which never carry a secret: a secret is shown once, by the call that made
 * it ({@linkcode addWebhook} when it generated one, {@linkcode rotateWebhookSecret}).
 *
 * @module
 */
import type { EgressPolicy } from "../egress/mod.ts";
import { Buffer } from "node:buffer";
import { GatewayError } from "../errors/mod.ts";
import { describeEventTypes, isEventType } from "../events/mod.ts";
import type { DisabledReason, OutgoingWebhook, OutgoingWebhookPatch, Store } from "../store/mod.ts";
import { MAX_SCHEDULE_DELAY_MS, MAX_SCHEDULE_RETRIES } from "./retry_policy.ts";
import { STANDARD_SECRET_PREFIX, standardKeyBytes } from "./signer.ts";
import { parseDuration } from "../duration.ts";

export { parseDuration };

/** Random bytes in a generated secret (`whsec_` + their base64): a full HMAC-SHA256 key. */
export const GENERATED_SECRET_BYTES = 32;

/** The overlap of {@linkcode rotateWebhookSecret} when none is given: 24 hours. */
export const DEFAULT_ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

/** The longest rotation overlap accepted: 30 days. */
export const MAX_ROTATION_OVERLAP_MS = 30 * 24 * 60 * 60 * 1000;

/** Previous secrets kept signing at most (the newest); older ones are dropped at a rotation. */
export const MAX_PREVIOUS_SECRETS = 5;

/** Longest signing secret accepted, in UTF-8 bytes. */
export const MAX_SECRET_BYTES = 1024;

/** Longest description accepted, in characters. */
export const MAX_DESCRIPTION_LENGTH = 1024;

/** An outgoing webhook as shown to users: everything but its secrets. */
export interface WebhookView {
  id: string;
  kind: "outgoing";
  url: string;
  /** `"*"`: every enabled type, now and later. */
  events: "*" | string[];
  description?: string;
  /** Whether deliveries are signed (the webhook has a secret). */
  has_secret: boolean;
  /**
   * Secrets replaced by a rotation whose overlap has not ended, newest first
   * (expiry only): each signs `webhook-signature` beside the current one, and
   * the oldest keys `X-Service-Signature` until its overlap ends.
   */
  previous_secrets: { expires_at: string }[];
  /** Set while the webhook receives no deliveries. */
  disabled?: { at: string; reason: DisabledReason; detail?: string };
  /** Its own retry delays in ms, when it has them. */
  retry_schedule_ms?: number[];
  created_at: string;
  updated_at?: string;
}

/** Options shared by the functions of this module. */
export interface EndpointOptions {
  /** Clock in epoch milliseconds (rotation expiry, `disabled.at`). @default Date.now */
  now?: () => number;
  /**
   * Checks a new URL whose host is an IP address or `localhost` (names are
   * checked when delivering): one the policy refuses is `EGRESS_DENIED`
   * before anything is stored. @default no check
   */
  egress?: EgressPolicy;
}

/** Fields of {@linkcode addWebhook}. */
export interface AddWebhookInput {
  url: string;
  /** Event types, or `"*"` (the default) for every enabled type. */
  events?: "*" | readonly string[];
  /**
   * The signing secret; left out: one is generated (`whsec_` + 32 random
   * bytes, base64) and returned once; `null`: deliveries are unsigned.
   */
  secret?: string | null;
  description?: string;
  retry_schedule_ms?: number[];
}

/** What {@linkcode addWebhook} made. */
export interface AddWebhookResult {
  webhook: WebhookView;
  /** The generated secret: shown now, never again. Absent when given or unsigned. */
  secret?: string;
}

/** Changes of {@linkcode updateWebhook}: a field left out stays; `null` or `""` clears the description. */
export interface UpdateWebhookInput {
  url?: string;
  events?: "*" | readonly string[];
  description?: string | null;
  retry_schedule_ms?: number[] | null;
}

/** Options of {@linkcode rotateWebhookSecret}. */
export interface RotateSecretOptions extends EndpointOptions {
  /**
   * The overlap, in ms: how long the replaced secret keeps signing, beside
   * the new one in `webhook-signature` and instead of it in
   * `X-Service-Signature` (0: none; both headers switch at once unless an
   * earlier rotation's overlap is still running). @default 24 h
   */
  overlapMs?: number;
  /** The new secret. @default a generated `whsec_…` */
  secret?: string;
}

/** What {@linkcode rotateWebhookSecret} made. */
export interface RotateSecretResult {
  webhook: WebhookView;
  /** The new secret: shown now, never again. */
  secret: string;
}

/**
 * A new signing secret: `whsec_` and the base64 of 32 random bytes, the
 * Standard Webhooks form (its key is those bytes).
 */
export function generateSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(GENERATED_SECRET_BYTES));
  return STANDARD_SECRET_PREFIX + Buffer.from(bytes).toString("base64");
}

/**
 * The public view of an outgoing webhook: no secret, the previous secrets
 * still active at `now` by expiry only.
 */
export function webhookView(webhook: OutgoingWebhook, now: number = Date.now()): WebhookView {
  return {
    id: webhook.id,
    kind: "outgoing",
    url: webhook.url,
    events: webhook.events,
    ...(webhook.description !== undefined ? { description: webhook.description } : {}),
    has_secret: webhook.secret !== undefined,
    previous_secrets: activePrevious(webhook, now).map(({ expires_at }) => ({ expires_at })),
    ...(webhook.disabled ? { disabled: webhook.disabled } : {}),
    ...(webhook.retry_schedule_ms ? { retry_schedule_ms: webhook.retry_schedule_ms } : {}),
    created_at: webhook.created_at,
    ...(webhook.updated_at !== undefined ? { updated_at: webhook.updated_at } : {}),
  };
}

function invalid(field: string, message: string): GatewayError {
  return new GatewayError("USAGE", `Invalid ${field}${message}`);
}

/**
 * Validates an outgoing webhook URL: http or https, no credentials.
 *
 * @param field How the caller names the field in messages (`--url`, `url`).
 * @returns The normalized URL.
 * @throws {GatewayError} `USAGE` naming the field and what is accepted.
 */
export function parseWebhookUrl(raw: string, field = "url"): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(field, ` "${raw}": not a URL; expected http://… or https://…`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid(
      field,
      ` "${raw}": scheme ${url.protocol.slice(0, -1)} is not supported; use http or https`,
    );
  }
  if (url.username || url.password) {
    throw invalid(field, ` "${raw}": credentials in the URL are not allowed; use a secret`);
  }
  return url.href;
}

/**
 * Validates a list of event types: known types only, at least one, no repeats.
 *
 * @param raw A comma-separated list, or the names.
 * @param field How the caller names the field in messages.
 * @throws {GatewayError} `USAGE` naming the unknown types and the valid ones.
 */
export function parseEventList(raw: string | readonly string[], field = "events"): string[] {
  const names = (typeof raw === "string" ? raw.split(",") : raw).map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) {
    throw invalid(
      field,
      ` "${
        typeof raw === "string" ? raw : ""
      }": empty; leave it out for all, or list some of: ${describeEventTypes()}`,
    );
  }
  const unknown = names.filter((name) => !isEventType(name));
  if (unknown.length) {
    throw invalid(
      field,
      `: unknown event type ${
        unknown.map((u) => `"${u}"`).join(", ")
      }; valid: ${describeEventTypes()}`,
    );
  }
  return [...new Set(names)];
}

/**
 * Validates a signing secret: not empty, at most 1024 bytes, and a `whsec_`
 * secret base64 after its prefix (Standard Webhooks libraries decode it).
 *
 * @throws {GatewayError} `USAGE` naming the field and the fix.
 */
export function validateSecret(secret: string, field = "secret"): string {
  if (secret.length === 0) throw invalid(field, ": empty; give a value, or leave it out");
  if (new TextEncoder().encode(secret).length > MAX_SECRET_BYTES) {
    throw invalid(field, `: longer than ${MAX_SECRET_BYTES} bytes`);
  }
  if (secret.startsWith(STANDARD_SECRET_PREFIX) && standardKeyBytes(secret) === undefined) {
    throw invalid(
      field,
      `: a ${STANDARD_SECRET_PREFIX} secret must be base64 after the prefix (Standard Webhooks ` +
        `libraries decode it); drop the prefix to sign with the string as it is, or leave the ` +
        `secret out to have one generated`,
    );
  }
  return secret;
}

function validateDescription(description: string, field: string): string {
  if (description.length > MAX_DESCRIPTION_LENGTH) {
    throw invalid(
      field,
      `: ${description.length} characters; the limit is ${MAX_DESCRIPTION_LENGTH}`,
    );
  }
  return description;
}

function validateSchedule(schedule: readonly number[], field: string): number[] {
  if (
    schedule.length < 1 || schedule.length > MAX_SCHEDULE_RETRIES ||
    !schedule.every((ms) => Number.isInteger(ms) && ms >= 1 && ms <= MAX_SCHEDULE_DELAY_MS)
  ) {
    throw invalid(
      field,
      `: expected 1 to ${MAX_SCHEDULE_RETRIES} delays of 1 ms to 7 days, in milliseconds`,
    );
  }
  return [...schedule];
}

/** Previous secrets still signing at `now`, newest first. */
function activePrevious(webhook: OutgoingWebhook, now: number) {
  return (webhook.previous_secrets ?? []).filter((p) => Date.parse(p.expires_at) > now);
}

/** The patch dropping expired previous secrets, when there are any. */
function pruneExpired(webhook: OutgoingWebhook, now: number): OutgoingWebhookPatch {
  const stored = webhook.previous_secrets ?? [];
  const active = activePrevious(webhook, now);
  if (active.length === stored.length) return {};
  return { previous_secrets: active.length ? active : null };
}

async function load(store: Store, id: string): Promise<OutgoingWebhook> {
  const webhook = id.startsWith("wh_") ? await store.webhooks.getOutgoing(id) : null;
  if (!webhook) {
    throw new GatewayError(
      "NOT_FOUND",
      `No outgoing webhook with id ${id}: see toolgate webhooks list`,
    );
  }
  return webhook;
}

async function patch(
  store: Store,
  id: string,
  changes: OutgoingWebhookPatch,
): Promise<OutgoingWebhook> {
  const updated = await store.webhooks.updateOutgoing(id, changes);
  if (!updated) {
    throw new GatewayError("NOT_FOUND", `No outgoing webhook with id ${id}: it was just removed`);
  }
  return updated;
}

/**
 * Registers an outgoing webhook. Without a secret one is generated and
 * returned once; `secret: null` registers it unsigned.
 *
 * @throws {GatewayError} `USAGE` naming a bad field.
 *
 * @example
 * ```ts
 * const { webhook, secret } = await addWebhook(store, { url: "https://example.com/hook" });
 * console.log(webhook.id, secret); // "wh_…", "whsec_…" (shown only now)
 * ```
 */
export async function addWebhook(
  store: Store,
  input: AddWebhookInput,
  options: EndpointOptions = {},
): Promise<AddWebhookResult> {
  const { now = Date.now } = options;
  const url = parseWebhookUrl(input.url);
  options.egress?.checkLiteral(new URL(url), "public");
  const events = input.events === undefined || input.events === "*"
    ? "*"
    : parseEventList(input.events);
  const generated = input.secret === undefined ? generateSecret() : undefined;
  const secret = input.secret === null
    ? undefined
    : generated ?? validateSecret(input.secret as string);
  const description = input.description
    ? validateDescription(input.description, "description")
    : undefined;
  const schedule = input.retry_schedule_ms
    ? validateSchedule(input.retry_schedule_ms, "retry_schedule_ms")
    : undefined;
  const webhook = await store.webhooks.addOutgoing({
    url,
    events,
    ...(secret !== undefined ? { secret } : {}),
    ...(description ? { description } : {}),
    ...(schedule ? { retry_schedule_ms: schedule } : {}),
  });
  return { webhook: webhookView(webhook, now()), ...(generated ? { secret: generated } : {}) };
}

/** Every outgoing webhook, oldest first, without secrets. */
export async function listWebhooks(
  store: Store,
  options: EndpointOptions = {},
): Promise<WebhookView[]> {
  const now = (options.now ?? Date.now)();
  return (await store.webhooks.listOutgoing()).map((webhook) => webhookView(webhook, now));
}

/**
 * One outgoing webhook, without secrets.
 *
 * @throws {GatewayError} `NOT_FOUND`
 */
export async function getWebhook(
  store: Store,
  id: string,
  options: EndpointOptions = {},
): Promise<WebhookView> {
  return webhookView(await load(store, id), (options.now ?? Date.now)());
}

/**
 * Changes an outgoing webhook's URL, events, description or retry schedule;
 * running servers use the change within a poll interval.
 *
 * @throws {GatewayError} `USAGE` when nothing is to change or a field is
 * bad; `NOT_FOUND`.
 */
export async function updateWebhook(
  store: Store,
  id: string,
  input: UpdateWebhookInput,
  options: EndpointOptions = {},
): Promise<WebhookView> {
  const now = (options.now ?? Date.now)();
  const changes: OutgoingWebhookPatch = {};
  if (input.url !== undefined) {
    changes.url = parseWebhookUrl(input.url);
    options.egress?.checkLiteral(new URL(changes.url), "public");
  }
  if (input.events !== undefined) {
    changes.events = input.events === "*" ? "*" : parseEventList(input.events);
  }
  if (input.description !== undefined) {
    changes.description = input.description === null || input.description === ""
      ? null
      : validateDescription(input.description, "description");
  }
  if (input.retry_schedule_ms !== undefined) {
    changes.retry_schedule_ms = input.retry_schedule_ms === null
      ? null
      : validateSchedule(input.retry_schedule_ms, "retry_schedule_ms");
  }
  if (Object.keys(changes).length === 0) {
    throw new GatewayError(
      "USAGE",
      `Nothing to update on ${id}: give a url, events, a description or a retry schedule`,
    );
  }
  const current = await load(store, id);
  return webhookView(await patch(store, id, { ...changes, ...pruneExpired(current, now) }), now);
}

/**
 * Stops deliveries to an outgoing webhook until {@linkcode enableWebhook}.
 *
 * @param detail Why, in the operator's words (shown by `webhooks list` and `show`).
 * @throws {GatewayError} `NOT_FOUND`
 */
export async function disableWebhook(
  store: Store,
  id: string,
  detail?: string,
  options: EndpointOptions = {},
): Promise<WebhookView> {
  const now = (options.now ?? Date.now)();
  await load(store, id);
  const text = detail?.trim();
  if (text && text.length > MAX_DESCRIPTION_LENGTH) {
    throw invalid("reason", `: ${text.length} characters; the limit is ${MAX_DESCRIPTION_LENGTH}`);
  }
  const disabled = {
    at: new Date(now).toISOString(),
    reason: "manual" as const,
    ...(text ? { detail: text } : {}),
  };
  return webhookView(await patch(store, id, { disabled }), now);
}

/**
 * Lets an outgoing webhook receive deliveries again, whoever disabled it
 * (by hand, a `410 Gone`, repeated dead letters); its dead-letter streak
 * starts again from 0. Enabling an enabled webhook changes nothing.
 *
 * @returns The webhook, and whether it was disabled.
 * @throws {GatewayError} `NOT_FOUND`
 */
export async function enableWebhook(
  store: Store,
  id: string,
  options: EndpointOptions = {},
): Promise<{ webhook: WebhookView; was_disabled: boolean }> {
  const now = (options.now ?? Date.now)();
  const current = await load(store, id);
  if (!current.disabled) return { webhook: webhookView(current, now), was_disabled: false };
  // The store clears the dead-letter streak with `disabled`.
  const updated = await patch(store, id, { disabled: null, ...pruneExpired(current, now) });
  return { webhook: webhookView(updated, now), was_disabled: true };
}

/**
 * Replaces an outgoing webhook's signing secret. For `overlapMs` the old
 * secret keeps signing: `webhook-signature` carries it beside the new one
 * (Standard Webhooks receivers switch at their pace), and
 * `X-Service-Signature`, which has room for one signature, stays keyed with
 * it until the overlap ends, then switches to the new one (so a receiver of
 * the spec header keeps verifying until then; give it the new secret before).
 * With overlaps still running from earlier rotations, `X-Service-Signature`
 * keeps the oldest of those secrets, then the next, then the new one: it
 * switches to the new secret when the last overlap ends (the latest
 * `previous_secrets[].expires_at` of the result). `overlapMs: 0` adds no
 * overlap: with none running, both headers switch at once. Expired previous
 * secrets are dropped, and at most the 5 newest kept.
 *
 * @returns The webhook and the new secret (shown now, never again).
 * @throws {GatewayError} `USAGE` for a bad overlap or secret; `NOT_FOUND`.
 *
 * @example
 * ```ts
 * const { secret } = await rotateWebhookSecret(store, "wh_01j…", { overlapMs: 3_600_000 });
 * ```
 */
export async function rotateWebhookSecret(
  store: Store,
  id: string,
  options: RotateSecretOptions = {},
): Promise<RotateSecretResult> {
  const { overlapMs = DEFAULT_ROTATION_OVERLAP_MS } = options;
  const now = (options.now ?? Date.now)();
  if (!Number.isInteger(overlapMs) || overlapMs < 0 || overlapMs > MAX_ROTATION_OVERLAP_MS) {
    throw invalid(
      "overlap",
      `: ${overlapMs} ms; expected 0 to ${MAX_ROTATION_OVERLAP_MS} ms (30 days)`,
    );
  }
  const secret = options.secret === undefined ? generateSecret() : validateSecret(options.secret);
  const current = await load(store, id);
  const previous = activePrevious(current, now);
  if (current.secret !== undefined && overlapMs > 0) {
    previous.unshift({
      secret: current.secret,
      expires_at: new Date(now + overlapMs).toISOString(),
    });
  }
  const kept = previous.slice(0, MAX_PREVIOUS_SECRETS);
  const updated = await patch(store, id, {
    secret,
    previous_secrets: kept.length ? kept : null,
  });
  return { webhook: webhookView(updated, now), secret };
}

/**
 * Removes an outgoing webhook; its pending deliveries are dropped.
 *
 * @throws {GatewayError} `NOT_FOUND`
 */
export async function removeWebhook(store: Store, id: string): Promise<void> {
  const removed = id.startsWith("wh_") ? await store.webhooks.remove(id) : null;
  if (removed !== "outgoing") {
    throw new GatewayError(
      "NOT_FOUND",
      `No outgoing webhook with id ${id}: see toolgate webhooks list`,
    );
  }
}
