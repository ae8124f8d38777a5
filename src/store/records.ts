/**
 * The records the store keeps, whatever the adapter: zod schemas of stored
 * values (every value read back is validated with its schema), the types the
 * storage interface takes and returns, and the limits every adapter enforces
 * alike.
 *
 * @module
 */
import { z } from "zod";
import { MCP_UPSTREAM_FIELDS, UPSTREAM_NAME_PATTERN } from "../config/upstream_fields.ts";
import { GatewayError } from "../errors/mod.ts";
import { newId, ulid } from "../ids.ts";

/** Bytes, as stored (a `Uint8Array`). */
export const BytesSchema = z.custom<Uint8Array>(
  (value) => value instanceof Uint8Array,
  "Expected bytes",
);

const encoder = new TextEncoder();

/** Why an outgoing webhook stopped receiving deliveries. */
export const DisabledReasonSchema = z.enum(["manual", "gone", "failing"]);

/** Why an outgoing webhook is disabled: by hand, a `410 Gone`, or N events in a row dead-lettered. */
export type DisabledReason = z.infer<typeof DisabledReasonSchema>;

/** A signing secret replaced by a rotation, still signing `webhook-signature` until `expires_at`. */
export const PreviousSecretSchema = z.strictObject({
  secret: z.string().min(1),
  expires_at: z.string(),
});

/**
 * An outgoing webhook as the core sees it. `events: "*"` means every enabled
 * type, now and later. Secrets are plain text here; adapters keep them sealed
 * at rest.
 */
export const OutgoingWebhookSchema = z.strictObject({
  id: z.string().regex(/^wh_[0-9a-z]+$/),
  url: z.url({ protocol: /^https?$/ }),
  events: z.union([z.literal("*"), z.array(z.string()).min(1)]),
  /** The current signing secret; absent: deliveries are unsigned. */
  secret: z.string().min(1).optional(),
  /** Secrets replaced by `rotate-secret --overlap`, newest first. */
  previous_secrets: z.array(PreviousSecretSchema).optional(),
  description: z.string().max(1024).optional(),
  /** Set while the endpoint receives no deliveries. */
  disabled: z.strictObject({
    at: z.string(),
    reason: DisabledReasonSchema,
    detail: z.string().optional(),
  }).optional(),
  /** The endpoint's own retry delays in ms (attempt 2 waits the first); absent: the default schedule. */
  retry_schedule_ms: z.array(z.number().int().positive()).min(1).max(30).optional(),
  created_at: z.string(),
  updated_at: z.string().optional(),
});

/** An outgoing webhook registration. */
export type OutgoingWebhook = z.infer<typeof OutgoingWebhookSchema>;

/**
 * An outgoing webhook as listed with `unreadableSecrets: "report"`: one
 * whose signing secrets this process cannot decrypt (another data key)
 * comes without them, and `secret_error` says why.
 */
export type ListedOutgoingWebhook = OutgoingWebhook & { secret_error?: string };

/** Options of {@linkcode WebhookStore.listOutgoing}. */
export interface ListOutgoingOptions {
  /**
   * `throw` (default): a secret that cannot be decrypted fails the listing
   * (`STORE_CORRUPT`). `report`: that webhook is listed without its secrets,
   * with `secret_error` (the dispatcher dead-letters its deliveries).
   */
  unreadableSecrets?: "throw" | "report";
}

/**
 * The signature schemes an incoming endpoint can verify (`webhooks create
 * --verify`), each implemented in `src/webhooks/incoming_verify.ts`.
 */
export const VerifySchemeSchema = z.enum([
  "hmac-sha256",
  "github",
  "stripe",
  "slack",
  "shopify",
  "standard-webhooks",
]);

/** A stored incoming webhook endpoint. */
export const IncomingWebhookSchema = z.strictObject({
  id: z.string().regex(/^in_[0-9a-z]+$/),
  name: z.string().min(1),
  path: z.string().startsWith("/"),
  handler: z.string().min(1),
  secret: z.string().min(1).optional(),
  signature_header: z.string().min(1).optional(),
  /**
   * How requests are verified (with `secret`): a scheme of
   * `src/webhooks/incoming_verify.ts`; absent is `hmac-sha256`.
   */
  verify: VerifySchemeSchema.optional(),
  /** Most seconds a signed timestamp may be off (schemes that sign one). @default 300 */
  tolerance_s: z.number().int().positive().optional(),
  rate_limit_per_s: z.number().positive().optional(),
  /**
   * Argument name → source (`/issue/title`, `header:X-GitHub-Event`): the
   * handler gets these arguments instead of the payload.
   */
  map: z.record(z.string(), z.string()).optional(),
  /** Conditions a payload must meet to run (`/action=opened`); others are recorded as skipped. */
  when: z.array(z.string()).optional(),
  /** The source whose value picks the handler among `routes`. */
  route_by: z.string().optional(),
  /** Value of `route_by` → handler; other values go to `handler`. */
  routes: z.record(z.string(), z.string().min(1)).optional(),
  /** Header carrying the sender's delivery id: an id seen within 24 h runs nothing again. */
  dedupe_header: z.string().min(1).optional(),
  created_at: z.string(),
});

/** An incoming webhook registration. */
export type IncomingWebhook = z.infer<typeof IncomingWebhookSchema>;

/** Counters of one incoming endpoint. */
export interface IncomingStats {
  received: number;
  rejected: number;
  failed: number;
  last_received_at?: string;
}

/** New outgoing webhook fields. */
export interface NewOutgoingWebhook {
  url: string;
  events: "*" | string[];
  secret?: string;
  description?: string;
  retry_schedule_ms?: number[];
}

/**
 * Changes to an outgoing webhook: a field left out stays as it is, `null`
 * removes an optional one.
 */
export interface OutgoingWebhookPatch {
  url?: string;
  events?: "*" | string[];
  description?: string | null;
  secret?: string | null;
  previous_secrets?: { secret: string; expires_at: string }[] | null;
  disabled?: { at: string; reason: DisabledReason; detail?: string } | null;
  retry_schedule_ms?: number[] | null;
}

/**
 * Applies `patch` to `webhook` (validated: a bad field throws a `ZodError`).
 *
 * @param now The `updated_at` time.
 */
export function patchOutgoingWebhook(
  webhook: OutgoingWebhook,
  patch: OutgoingWebhookPatch,
  now: Date = new Date(),
): OutgoingWebhook {
  const next: Record<string, unknown> = { ...webhook };
  for (const [field, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (value === null) delete next[field];
    else next[field] = value;
  }
  next.updated_at = now.toISOString();
  return OutgoingWebhookSchema.parse(next);
}

/** The final outcome of one event at one outgoing webhook. */
export type DeliveryOutcome = "delivered" | "dead_lettered";

/** New incoming endpoint fields. */
export interface NewIncomingWebhook {
  name: string;
  path: string;
  handler: string;
  secret?: string;
  signature_header?: string;
  verify?: IncomingWebhook["verify"];
  tolerance_s?: number;
  rate_limit_per_s?: number;
  map?: Record<string, string>;
  when?: string[];
  route_by?: string;
  routes?: Record<string, string>;
  dedupe_header?: string;
}

/** Entries kept in the delivery log of each webhook. */
export const DELIVERY_LOG_SIZE = 20;

/** One delivery attempt, as kept in a delivery record and a DLQ record. */
export const AttemptRecordSchema = z.strictObject({
  /** 1-based attempt number: 1 is the first try, 6 the fifth retry. */
  attempt: z.number().int().min(1),
  /** ISO-8601 time the attempt started. */
  at: z.string(),
  /** HTTP status of the response, when one arrived. */
  status: z.number().int().optional(),
  /** Why no response was accepted (timeout, connection error), when no status. */
  error: z.string().optional(),
  /** Milliseconds from request to response (or failure). */
  duration_ms: z.number().int().min(0),
});

/** One delivery attempt. */
export type AttemptRecord = z.infer<typeof AttemptRecordSchema>;

/** A pending delivery of one event to one outgoing webhook. */
export const DeliveryRecordSchema = z.strictObject({
  event_id: z.string(),
  event_type: z.string(),
  webhook_id: z.string(),
  /** Attempts made so far. */
  attempt_count: z.number().int().min(0),
  /** Epoch milliseconds of the next attempt. */
  next_attempt_at: z.number(),
  created_at: z.string(),
  attempts: z.array(AttemptRecordSchema),
  /** Set when the delivery replays a DLQ record (removed once delivered). */
  dlq_id: z.string().optional(),
});

/** A pending delivery. */
export type DeliveryRecord = z.infer<typeof DeliveryRecordSchema>;

/**
 * The webhooks an event still owes its first attempt to: each is a pending
 * delivery with no attempt yet, due at `next_attempt_at`.
 */
export const FanoutRecordSchema = z.strictObject({
  event_type: z.string(),
  created_at: z.string(),
  /** Epoch milliseconds of the first attempts. */
  next_attempt_at: z.number(),
  webhook_ids: z.array(z.string()).min(1),
});

/** An event's fan-out record. */
export type FanoutRecord = z.infer<typeof FanoutRecordSchema>;

/** An event in the outbox: envelope id, type, timestamp and its serialized bytes. */
export interface OutboxEvent {
  id: string;
  type: string;
  timestamp: string;
  /** The envelope serialized once; signed and sent as is on every attempt. */
  body: Uint8Array;
  /**
   * The span of the call that caused the event (W3C `traceparent`), when
   * tracing was on: each delivery attempt's span is its child.
   */
  traceparent?: string;
  /**
   * Every webhook the event was ever queued for (its fan-out, and a
   * dead-letter replay adds its webhook): a delivery record of the event is
   * only ever stored under one of them. Absent on events stored before it was
   * kept.
   */
  webhook_ids?: readonly string[];
}

/** The pending deliveries an event's fan-out record stands for. */
export function fanoutDeliveries(eventId: string, fanout: FanoutRecord): DeliveryRecord[] {
  return fanout.webhook_ids.map((webhook_id) => ({
    event_id: eventId,
    event_type: fanout.event_type,
    webhook_id,
    attempt_count: 0,
    next_attempt_at: fanout.next_attempt_at,
    created_at: fanout.created_at,
    attempts: [],
  }));
}

/** A dead-letter queue record as stored (the body is read with {@linkcode readDlqBody}). */
export const DlqRecordSchema = z.strictObject({
  dlq_id: z.string(),
  webhook_id: z.string(),
  url: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  attempts: z.array(AttemptRecordSchema),
  /** Why it went to the DLQ when not (only) for its attempts: a disabled webhook, a 410 Gone. */
  reason: z.string().optional(),
  failed_at: z.string(),
  size: z.number().int().min(0),
  body: BytesSchema.optional(),
  /**
   * The event's body was lost before it could be sent (a store that deleted
   * it while the delivery was pending): the record keeps what is known (ids,
   * type, attempts, reason), its size is 0, and it cannot be replayed.
   */
  body_lost: z.literal(true).optional(),
});

/** A stored dead-letter queue record. */
export type DlqRecord = z.infer<typeof DlqRecordSchema>;

/** A position in the dead-letter queue's order: oldest failure first, then by id. */
export interface DlqPosition {
  /** The `failed_at` of the record at that position. */
  failed_at: string;
  /** Its `dlq_id`. */
  dlq_id: string;
}

/** Options of {@linkcode DeliveryStore.listDlq}. */
export interface ListDlqPageOptions {
  /** Only this webhook's records. @default every webhook */
  webhook?: string;
  /** Only records after this position (the last record of the previous page). @default from the oldest */
  after?: DlqPosition;
  /** At most this many records. @default all */
  limit?: number;
}

/** Whether `record` comes after `position` in the dead-letter queue's order. */
export function dlqAfter(record: DlqPosition, position: DlqPosition): boolean {
  return record.failed_at > position.failed_at ||
    (record.failed_at === position.failed_at && record.dlq_id > position.dlq_id);
}

/** Sorts records oldest failure first, then by id, in place. */
export function sortDlq<T extends DlqPosition>(records: T[]): T[] {
  return records.sort((a, b) =>
    a.failed_at < b.failed_at ? -1 : a.failed_at > b.failed_at ? 1 : a.dlq_id < b.dlq_id ? -1 : 1
  );
}

/** One entry of a webhook's delivery log. */
export const DeliveryLogEntrySchema = z.strictObject({
  at: z.string(),
  attempt: z.number().int().min(1),
  ok: z.boolean(),
  status: z.number().int().optional(),
  error: z.string().optional(),
  latency_ms: z.number().int().min(0),
  event_id: z.string(),
  event_type: z.string(),
});

/** One entry of a webhook's delivery log. */
export type DeliveryLogEntry = z.infer<typeof DeliveryLogEntrySchema>;

/** A write understood by {@linkcode DeliveryWriter}. */
export type DeliveryOp =
  | { op: "put_event"; event: OutboxEvent }
  /** Writes a delivery record; a claim on it stays as it was. */
  | { op: "put_delivery"; delivery: DeliveryRecord }
  /** Deletes a delivery record (and its claim); `next_attempt_at`, when known, helps the due index. */
  | { op: "delete_delivery"; event_id: string; webhook_id: string; next_attempt_at?: number }
  /**
   * Writes (or, with an empty `webhook_ids`, deletes) an event's fan-out
   * record; with `claim`, the deliveries it adds are claimed by that owner
   * (the process that will send them, when the store shares work).
   */
  | { op: "put_fanout"; event_id: string; fanout: FanoutRecord; claim?: DeliveryClaim }
  | { op: "log"; webhook_id: string; entry_id: string; entry: DeliveryLogEntry }
  | { op: "delete_log"; webhook_id: string; entry_id: string }
  | { op: "put_dlq"; record: Omit<DlqRecord, "size" | "body">; body: Uint8Array }
  | { op: "delete_dlq"; dlq_id: string; size: number }
  /**
   * Deletes the event (record and body) if its stored version is still
   * `versionstamp` and, once the rest of the commit applied, no pending
   * delivery of it is stored, as a fan-out entry or a delivery record of its
   * own. The store decides that from what it holds: the rule of the storage
   * contract is that an event's body lives as long as any delivery of it is
   * pending or waiting, whatever the requester knows. `webhook_ids`: the
   * event's {@linkcode OutboxEvent.webhook_ids} as read with `versionstamp`,
   * which lets a store check where its delivery records could be instead of
   * looking for them.
   */
  | {
    op: "collect_event";
    event_id: string;
    versionstamp: string;
    size: number;
    webhook_ids?: readonly string[];
  };

/** Result of {@linkcode DeliveryWriter.write}. */
export interface WriteResult {
  /** Versionstamp of the commit that wrote each op's main record, by op index. */
  versionstamps: string[];
  /**
   * Whether every `collect_event` op deleted its event (false: the event
   * changed meanwhile, is gone, or a pending delivery still refers to it;
   * the caller may look again with `collectEventIfUnreferenced`).
   */
  collected: boolean;
  /**
   * When `collected` is false, the event ids of the `collect_event` ops that
   * did not delete their event (absent: take it as every one of them).
   */
  uncollected?: readonly string[];
}

/** Who holds a claim on pending deliveries, and until when (epoch ms). */
export interface DeliveryClaim {
  /** The claiming process's owner id. */
  owner: string;
  /** When the claim lapses unless renewed (epoch ms). */
  until: number;
}

/** Options of `DeliveryStore.claimDue`. */
export interface ClaimDueOptions extends DeliveryClaim {
  /** The clock, epoch ms: claims that lapsed before it are free. */
  now: number;
  /** Only deliveries due before this (epoch ms). */
  dueBefore: number;
  /** At most this many deliveries. */
  limit: number;
  /** Leave the deliveries of these webhooks alone (their sender is saturated). @default [] */
  excludeWebhooks?: readonly string[];
}

/** A pending delivery and the versionstamp of its stored state. */
export interface StoredDelivery {
  record: DeliveryRecord;
  /** Versionstamp of its delivery record, or of its event's fan-out record. */
  versionstamp: string;
  /** Whether it is stored in its event's fan-out record (no attempt made yet). */
  fanout: boolean;
}

/** A new dead-letter record id, `dlq_<ulid>`. */
export function newDlqId(): string {
  return newId("dlq");
}

/** A new delivery log entry id: time-ordered, so the log lists oldest first. */
export function newLogEntryId(at: number = Date.now()): string {
  return ulid(at);
}

/** One failed handler call of an incoming job. */
export const IncomingAttemptSchema = z.strictObject({
  /** When it failed (ISO time). */
  at: z.string(),
  /** Its error code (`TOOL_INPUT_INVALID`, `TOOL_NOT_FOUND`, ...). */
  code: z.string(),
  message: z.string(),
  /** The argument fields a `TOOL_INPUT_INVALID` named. */
  fields: z.array(z.string()).optional(),
});

/** One failed handler call of an incoming job. */
export type IncomingAttempt = z.infer<typeof IncomingAttemptSchema>;

/** An incoming job: pending (maybe waiting for a retry) or failed. */
export const IncomingJobSchema = z.strictObject({
  id: z.string(),
  endpoint_id: z.string(),
  handler: z.string(),
  received_at: z.string(),
  body_bytes: z.number().int().min(0),
  chunks: z.number().int().min(0),
  /** Seq of the payload's audit entry; no longer written (the entry's session_id is the job id). */
  audit_seq: z.number().int().optional(),
  /** The failed handler calls so far, oldest first (absent: none). */
  attempts: z.array(IncomingAttemptSchema).optional(),
  /** When the next handler call is due (epoch ms); claims skip the job until then. */
  next_attempt_at: z.number().int().optional(),
  /** When the job became a failed job (kept, never claimed, until replayed or purged). */
  failed_at: z.string().optional(),
  /** The span of the payload's arrival (W3C `traceparent`), when tracing was on: its handler call's parent. */
  traceparent: z.string().optional(),
});

/** A failed handler call to record with `IncomingStore.fail`. */
export interface IncomingFailure {
  job: IncomingJob;
  /**
   * The failed call, appended to the job's attempts. Absent: the call was
   * put off, not failed (its handler's rate limit): nothing is appended, the
   * job only waits for `retry_at`, which is then required.
   */
  attempt?: IncomingAttempt;
  /** When to call the handler again (epoch ms); absent: the job becomes a failed job. */
  retry_at?: number;
}

/**
 * Checks an {@linkcode IncomingFailure}: one without `attempt` must say when
 * to call again (a put-off job never becomes a failed job).
 *
 * @throws {GatewayError} `INTERNAL` when it has neither.
 */
export function checkIncomingFailure(failure: IncomingFailure): void {
  if (failure.attempt === undefined && failure.retry_at === undefined) {
    throw new GatewayError(
      "INTERNAL",
      `Cannot put off incoming job ${failure.job.id}: a put-off job needs retry_at`,
    );
  }
}

/** Entries kept in an incoming endpoint's payload log. */
export const INCOMING_LOG_SIZE = 20;

/** One payload in an incoming endpoint's log, with its latest outcome. */
export const IncomingLogEntrySchema = z.strictObject({
  /** The payload's job id (a duplicate's own id); entries sort by it, oldest first. */
  id: z.string(),
  endpoint_id: z.string(),
  received_at: z.string(),
  /** When the outcome was recorded (ISO time). */
  updated_at: z.string(),
  status: z.enum(["accepted", "ok", "retrying", "failed", "skipped", "duplicate"]),
  handler: z.string().optional(),
  /** A duplicate's first job. */
  job_id: z.string().optional(),
  /** Why it was skipped. */
  reason: z.string().optional(),
  /** Handler calls made so far. */
  attempts: z.number().int().min(0).optional(),
  code: z.string().optional(),
  message: z.string().optional(),
  fields: z.array(z.string()).optional(),
  /** When the next handler call is due (ISO time), while retrying. */
  next_attempt_at: z.string().optional(),
});

/** One payload in an incoming endpoint's log. */
export type IncomingLogEntry = z.infer<typeof IncomingLogEntrySchema>;

/** A pending incoming job (its body is stored separately). */
export type IncomingJob = z.infer<typeof IncomingJobSchema>;

/** Options of `IncomingStore.reserveDedupeKey`. */
export interface ReserveDedupeOptions {
  endpoint_id: string;
  /** The sender's delivery id (e.g. `X-GitHub-Delivery`, `webhook-id`). */
  delivery_id: string;
  /** The job the payload is being accepted as. */
  job_id: string;
  /** Epoch ms. */
  now: number;
  /** How long the id is remembered, in ms. */
  ttl_ms: number;
  /** After how long an unconfirmed reservation (an accept that failed or died) may be taken again, in ms. */
  stale_ms: number;
}

/** Whether a delivery id was free, or which job already holds it. */
export type DedupeReservation =
  | { status: "reserved" }
  | {
    status: "duplicate";
    /** The first payload's job. */
    job_id: string;
    /** Whether that payload's accept is durable (false: it is still being accepted). */
    confirmed: boolean;
  };

/** Who holds a claim on a pending incoming job, and until when (epoch ms). */
export interface IncomingClaim {
  /** The claiming process's owner id. */
  owner: string;
  /** When the claim lapses unless renewed (epoch ms). */
  until: number;
}

/** Options of `IncomingStore.claim`. */
export interface ClaimIncomingOptions extends IncomingClaim {
  /** The clock, epoch ms: claims that lapsed by then are free. */
  now: number;
  /** At most this many jobs. */
  limit: number;
}

/** The store's record of the key its secrets are sealed with (never the key). */
export const KeyCheckRecordSchema = z.strictObject({
  /** base64 of HMAC-SHA256(key, `toolgate key check v1`). */
  check: z.string().min(1),
  /** Its first 16 hex digits. */
  fingerprint: z.string().regex(/^[0-9a-f]{16}$/),
  /** When it was recorded. */
  created_at: z.string(),
});

/** The store's record of the key its secrets are sealed with. */
export type KeyCheckRecord = z.infer<typeof KeyCheckRecordSchema>;

/** A keychain entry as stored. */
export const KeychainRecordSchema = z.discriminatedUnion("backend", [
  z.strictObject({
    /** Encrypted in this record (AES-256-GCM). */
    backend: z.literal("file"),
    /** The 96-bit AES-GCM nonce. */
    iv: z.instanceof(Uint8Array),
    /** Ciphertext with the GCM tag. */
    data: z.instanceof(Uint8Array),
    updated_at: z.string(),
  }),
  z.strictObject({
    /** Held by an OS keychain; only the name is recorded here. */
    backend: z.enum(["secret-tool", "security"]),
    updated_at: z.string(),
  }),
]);

/** A keychain entry as stored. */
export type KeychainRecord = z.infer<typeof KeychainRecordSchema>;

/**
 * An API key as stored: never the key itself, only the SHA-256 of it
 * (hex) and a short prefix to show.
 */
export const ApiKeyRecordSchema = z.strictObject({
  /** `key_` and a ULID. */
  id: z.string().regex(/^key_[0-9A-Za-z]+$/),
  /** Unique name (`ci`, `agent-a`). */
  name: z.string().min(1).max(64),
  /** The key's first characters (`tg_` and 6 more), for lists and logs. */
  prefix: z.string().min(1).max(16),
  /** Lowercase hex SHA-256 of the whole key. */
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  /** Glob patterns of the tools it may call; `null`: every tool. */
  tools: z.array(z.string().min(1)).nullable(),
  /** The virtual server it is bound to (it may use `/mcp/<server>` and that server's tools only). */
  server: z.string().nullable(),
  /** Its rate limit as given (`10/s`; not enforced yet). */
  rate: z.string().nullable(),
  /** When it stops working (ISO 8601 UTC); `null`: never. */
  expires_at: z.string().nullable(),
  /** When it was made (ISO 8601 UTC). */
  created_at: z.string(),
  /** When it last authenticated a request, to the minute or so; `null`: never. */
  last_used_at: z.string().nullable(),
});

/** An API key as stored (see {@linkcode ApiKeyRecordSchema}). */
export type ApiKeyRecord = z.infer<typeof ApiKeyRecordSchema>;

/** A virtual server's name: letters, digits, `_` and `-` (it is a URL path segment, `/mcp/<name>`). */
export const VIRTUAL_SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** A virtual server defined with `toolgate servers create`: a named subset of the tools. */
export const VirtualServerRecordSchema = z.strictObject({
  /** Unique name, served at `/mcp/<name>`. */
  name: z.string().regex(VIRTUAL_SERVER_NAME),
  /** Glob patterns of its tools (`memory_*`, `github__*`). */
  tools: z.array(z.string().min(1).max(128)).min(1),
  /** What it is for; `null`: nothing said. */
  description: z.string().max(1024).nullable(),
  /** When it was made (ISO 8601 UTC). */
  created_at: z.string(),
  /** When it last changed (ISO 8601 UTC). */
  updated_at: z.string(),
});

/** A virtual server as stored (see {@linkcode VirtualServerRecordSchema}). */
export type VirtualServerRecord = z.infer<typeof VirtualServerRecordSchema>;

/** What `toolgate servers update` may change. */
export interface VirtualServerUpdate {
  /** New tool patterns. */
  tools?: string[];
  /** New description; `null` clears it. */
  description?: string | null;
}

/** What a pin is of: an upstream's tool, prompt or resource template. */
export const PIN_KINDS = ["tool", "prompt", "resource_template"] as const;

/** One of {@linkcode PIN_KINDS}. */
export type PinKind = (typeof PIN_KINDS)[number];

/** A definition as pinned: the SHA-256 (hex) of its canonical JSON, and the definition. */
export const PinnedDefinitionSchema = z.strictObject({
  /** SHA-256 of the canonical JSON of `definition`, lowercase hex. */
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  /** The fields pinned (name, title, description, schemas, annotations, …) as the upstream gave them. */
  definition: z.record(z.string(), z.unknown()),
  /** When the upstream offered it first (ISO 8601 UTC). */
  seen_at: z.string(),
});

/** A definition as pinned (see {@linkcode PinnedDefinitionSchema}). */
export type PinnedDefinition = z.infer<typeof PinnedDefinitionSchema>;

/**
 * The pin of one upstream definition, shared by every instance on a store.
 * `status`: `pinned` (trusted: `pinned` is what is listed), `changed` (the
 * upstream offers `pending`, which differs from `pinned`: quarantined until
 * approved or rejected), `new` (first seen under `pinning: "approve"`: held
 * until approved), `rejected` (`pending` was rejected: the tool stays out
 * while the upstream offers it).
 */
export const ToolPinRecordSchema = z.strictObject({
  /** The upstream (plugin) name. */
  plugin: z.string().min(1),
  kind: z.enum(PIN_KINDS),
  /** The upstream's own name of it (a resource template: its `uriTemplate`). */
  name: z.string().min(1),
  /** The name clients see (`<plugin>__<tool>`), as of the last time it was offered. */
  exposed: z.string().min(1).optional(),
  status: z.enum(["pinned", "changed", "new", "rejected"]),
  /** The trusted definition; `null` while none was approved (`new`, or `rejected` of a new one). */
  pinned: PinnedDefinitionSchema.nullable(),
  /** The definition waiting for a decision, or the one rejected; `null` when none. */
  pending: PinnedDefinitionSchema.nullable(),
  /** Who decided last (`admin`, `key:<id>`, …), `null`: pinned at first sight. */
  decided_by: z.string().nullable(),
  /** When it last changed (ISO 8601 UTC). */
  updated_at: z.string(),
});

/** A pin as stored (see {@linkcode ToolPinRecordSchema}). */
export type ToolPinRecord = z.infer<typeof ToolPinRecordSchema>;

/** A policy rule's name: letters, digits, `_`, `-` and `.`. */
export const POLICY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/**
 * A policy rule added with `toolgate policies add` (config `policies` are
 * not stored). `rule` is the rule as config would hold it, checked by
 * src/policies before it is stored; the store keeps it as given.
 */
export const PolicyRecordSchema = z.strictObject({
  /** Unique name (also across config's rules). */
  name: z.string().regex(POLICY_NAME),
  /** The rule (`{name, tools?, …, effect}`), JSON as given. */
  rule: z.record(z.string(), z.unknown()),
  /** Where it goes among the stored rules: lower first; ties by name. */
  position: z.number().int(),
  /** When it was added (ISO 8601 UTC). */
  created_at: z.string(),
  /** When it last changed (ISO 8601 UTC). */
  updated_at: z.string(),
});

/** A stored policy rule (see {@linkcode PolicyRecordSchema}). */
export type PolicyRecord = z.infer<typeof PolicyRecordSchema>;

/** How a held call ended once approved (its output, or the error it failed with). */
export const ApprovalRunSchema = z.strictObject({
  /** When it finished (ISO 8601 UTC). */
  at: z.string(),
  ok: z.boolean(),
  /** The tool's output (`ok`). */
  output: z.record(z.string(), z.unknown()).optional(),
  /** `{code, message}` of the failure (not `ok`). */
  error: z.strictObject({ code: z.string(), message: z.string() }).optional(),
});

/**
 * A call a policy holds for a person's approval (`require_approval`),
 * shared by every instance on one store: bound to the caller, the tool, the
 * SHA-256 of the canonical arguments, the policy's version and an expiry;
 * one approval runs one call. `status` moves `pending` → `approved` |
 * `denied` | `expired`; an approved one is `running` while its call runs,
 * then carries `ran`.
 */
export const ApprovalRecordSchema = z.strictObject({
  /** `apr_…`. */
  id: z.string().regex(/^apr_[0-9A-Za-z]{10,64}$/),
  status: z.enum(["pending", "approved", "denied", "expired"]),
  tool: z.string().min(1),
  plugin: z.string(),
  /** The caller as the audit log records it (`{kind, id?, name?}`). */
  caller: z.record(z.string(), z.unknown()),
  /** The caller as a selector (`key:<id>`, `oauth:<subject>`, `admin`, `local`): who it is bound to. */
  caller_ref: z.string().min(1),
  /** The arguments the call runs with once approved. */
  args: z.record(z.string(), z.unknown()),
  /** SHA-256 (hex) of the canonical JSON of `args`. */
  args_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** The rule that asked, and its version (SHA-256 of its canonical JSON). */
  policy: z.string().min(1),
  policy_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** Who may decide: `caller`, or caller selectors. */
  approvers: z.array(z.string().min(1)).min(1),
  /** The rule's reason, shown to whoever decides. */
  reason: z.string().nullable(),
  /** How the call came (`rest`, `mcp-http`, …). */
  transport: z.string(),
  /** The virtual server it came through; `null`: none. */
  server: z.string().nullable(),
  created_at: z.string(),
  /** When a pending approval expires (ISO 8601 UTC). */
  expires_at: z.string(),
  /** Who decided (`admin`, `key:<id>`, `slack:<user>`, `caller`); `null` while pending or expired. */
  decided_by: z.string().nullable(),
  decided_at: z.string().nullable(),
  /** The decider's reason; `null`: none given. */
  decision_reason: z.string().nullable(),
  /** Set while the approved call runs: which process runs it. */
  running: z.strictObject({ by: z.string(), since: z.string() }).nullable(),
  /** How the approved call ended; `null` until it ran. */
  ran: ApprovalRunSchema.nullable(),
});

/** An approval as stored (see {@linkcode ApprovalRecordSchema}). */
export type ApprovalRecord = z.infer<typeof ApprovalRecordSchema>;

/** Longest key, in characters. */
export const MEMORY_KEY_MAX_CHARS = 512;

/** Longest key, in UTF-8 bytes (Deno KV keys are limited to 2 KiB). */
export const MEMORY_KEY_MAX_BYTES = 1024;

/** Largest value, in bytes of its JSON text (Deno KV values are limited to 64 KiB). */
export const MEMORY_VALUE_MAX_BYTES = 60 * 1024;

/** One notebook entry. */
export interface MemoryEntry {
  /** The key. */
  key: string;
  /** The stored JSON value. */
  value: unknown;
  /** When it was last written (ISO 8601 UTC). */
  updated_at: string;
  /** Size of the value's JSON text in bytes. */
  size_bytes: number;
}

/** Outcome of {@linkcode setMemory}. */
export interface SetMemoryResult {
  /** Whether the key was new. */
  created: boolean;
  /** When the value was written (ISO 8601 UTC). */
  updated_at: string;
  /** Size of the value's JSON text in bytes. */
  size_bytes: number;
}

/** Options of {@linkcode listMemory}. */
export interface ListMemoryOptions {
  /** Only keys starting with this text. @default "" */
  prefix?: string;
  /** At most this many entries. @default 100 */
  limit?: number;
}

/** Outcome of {@linkcode listMemory}. */
export interface ListMemoryResult {
  /** Matching entries in key order. */
  entries: MemoryEntry[];
  /** Whether more entries matched than `limit`. */
  truncated: boolean;
}

/**
 * Checks a notebook key: non-empty, at most 512 characters (code points) and
 * 1024 UTF-8 bytes.
 *
 * @returns A reason when the key is not acceptable, else `undefined`.
 */
export function memoryKeyProblem(key: string): string | undefined {
  if (key.length === 0) return "the key is empty";
  // A UTF-16 unit is at most one code point and at most 3 UTF-8 bytes.
  if (key.length <= MEMORY_KEY_MAX_CHARS && key.length * 3 <= MEMORY_KEY_MAX_BYTES) {
    return undefined;
  }
  const chars = [...key].length;
  if (chars > MEMORY_KEY_MAX_CHARS) {
    return `the key has ${chars} characters; the limit is ${MEMORY_KEY_MAX_CHARS}`;
  }
  const bytes = encoder.encode(key).length;
  if (bytes > MEMORY_KEY_MAX_BYTES) {
    return `the key has ${bytes} bytes in UTF-8; the limit is ${MEMORY_KEY_MAX_BYTES}`;
  }
  return undefined;
}

/** A stored MCP upstream plugin: a stdio `command` or a Streamable HTTP `url`. */
export const UpstreamRecordSchema = z.strictObject({
  name: z.string().regex(UPSTREAM_NAME_PATTERN),
  ...MCP_UPSTREAM_FIELDS,
  enabled: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** A stored MCP upstream plugin. */
export type UpstreamRecord = z.infer<typeof UpstreamRecordSchema>;

/** Fields of a new upstream. */
export type NewUpstream = Omit<UpstreamRecord, "kind" | "created_at" | "updated_at">;

/** The plugin states a running server published. */
export const ServerStatusSchema = z.strictObject({
  server_id: z.string(),
  pid: z.number().int(),
  transport: z.string(),
  /** The HTTP server's base URL (`--transport http`), for CLI commands to call it. */
  url: z.string().optional(),
  /** The host it runs on (a URL on 127.0.0.1 is reachable from that host only). */
  hostname: z.string().optional(),
  started_at: z.string(),
  updated_at: z.string(),
  plugins: z.array(z.record(z.string(), z.unknown())),
});

/** The plugin states a running server published. */
export type ServerStatus = z.infer<typeof ServerStatusSchema>;

/** The stored delivery lease. */
export const DeliveryLeaseSchema = z.object({
  owner: z.string(),
  pid: z.number().int(),
  hostname: z.string(),
  expires_at: z.number(),
});

/** Who holds the lease, and until when (epoch ms). */
export type DeliveryLease = z.infer<typeof DeliveryLeaseSchema>;

/** Options of {@linkcode claimDeliveryLease}. */
export interface ClaimLeaseOptions {
  /** This process's owner id. */
  owner: string;
  /** How long the lease lasts without renewal, in ms. */
  ttlMs: number;
  /** Clock, epoch ms. @default Date.now */
  now?: number;
}

/** The stored head of the chain. */
export const AuditHeadSchema = z.strictObject({
  seq: z.number().int().min(1),
  hash: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  timestamp: z.string(),
  /**
   * Leaves of the Merkle tree the stored tiles hold: `seq` once the tree is
   * built (absent in a log written before the tree, which is built from
   * the entries on the next append).
   */
  tree: z.number().int().min(0).optional(),
});

/** The stored head: seq, hash and timestamp of the last entry, and the tree's size. */
export type AuditHead = z.infer<typeof AuditHeadSchema>;

/** The stored bytes of one entry. */
export interface AuditRecord {
  /** Seq from the key. */
  seq: number;
  /** The parts joined; `null` when a part is missing or is not bytes. */
  bytes: Uint8Array | null;
  /** Versionstamp of each part, in part order. */
  versionstamps: string[];
}

/** What an appender must know before it commits. */
export interface AuditChainState {
  /** The head, or `null` for an empty log. */
  head: AuditHead | null;
  /** Versionstamp of the head key (`null` when absent). */
  headVersionstamp: string | null;
  /** The stored entry at the head's seq, or `null` (empty log, or missing). */
  tail: AuditRecord | null;
}

/** The expected state an append commit checks. */
export interface AuditCommitGuard {
  /** Versionstamp of the head key as read (`null`: no head yet). */
  headVersionstamp: string | null;
  /** Seq of the entry the head points at (0 for an empty log). */
  tailSeq: number;
  /** Versionstamps of that entry's parts (empty: expect it absent). */
  tailVersionstamps: readonly string[];
}

/** Delivery records written in the same commit as a batch of entries. */
export interface AuditCommitOutbox {
  /** Plain delivery ops (events and their pending deliveries). */
  ops: readonly DeliveryOp[];
  /** Whether to bump the deliveries version (a recording process signals the server). */
  bumpVersion: boolean;
}

/** Where a tile of the audit log's Merkle tree sits (see `src/audit/tiles.ts`). */
export interface AuditTileRef {
  /** Level: the tile holds node hashes of height `level × 5`. */
  level: number;
  /** Index along the level. */
  index: number;
}

/** A tile to write: its hashes one after another, 32 bytes each (at most 32). */
export interface AuditTileWrite extends AuditTileRef {
  hashes: Uint8Array;
}

/** The audit log's signing key, as stored (the seed sealed with the data key). */
export const AuditLogKeySchema = z.strictObject({
  /** Key id: 8 hex digits (the signed-note key hash). */
  id: z.string().regex(/^[0-9a-f]{8}$/),
  /** Key name: the log's origin when it was made. */
  name: z.string().min(1),
  /** The Ed25519 public key, base64. */
  public_key: z.string().min(1),
  /** The 32-byte seed, base64, sealed with the data key. */
  sealed_seed: z.string().min(1),
  created_at: z.string(),
  /** When a newer key took over (it then only verifies). */
  retired_at: z.string().optional(),
});

/** The audit log's signing key, as stored. */
export type AuditLogKey = z.infer<typeof AuditLogKeySchema>;

/** How far old entries were pruned: their bodies are gone, the tree keeps their leaves. */
export const AuditPrunedSchema = z.strictObject({
  /** Entries 1 to this seq may be gone. */
  through: z.number().int().min(1),
  /** `entry_hash` of entry `through`: entry `through + 1`'s `previous_hash`. */
  hash: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  /** When it was pruned. */
  at: z.string(),
});

/** How far old entries were pruned. */
export type AuditPruned = z.infer<typeof AuditPrunedSchema>;

/** The latest signed checkpoint, as stored. */
export const AuditCheckpointSchema = z.strictObject({
  /** Tree size it commits to. */
  size: z.number().int().min(0),
  /** The signed note, as published. */
  note: z.string().min(1),
});

/** The latest signed checkpoint, as stored. */
export type AuditCheckpoint = z.infer<typeof AuditCheckpointSchema>;

/** One entry to write. */
export interface AuditEntryWrite {
  seq: number;
  bytes: Uint8Array;
}

/** Options of {@linkcode readAuditRecordPages}. */
export interface ReadAuditRecordPagesOptions {
  /** Start after this seq. @default 0 */
  after?: number;
  /** Stop before this seq (exclusive). @default no bound */
  before?: number;
  /** Parts read per KV round trip (at least 16). @default 1000 */
  pageSize?: number;
  /**
   * A hint that entries whose bytes begin with `prefix` but lack one of
   * `needles` (UTF-8) are not wanted: an adapter may leave them out (the
   * PostgreSQL store does, in the database), or return them anyway (Deno
   * KV): the reader checks every entry it gets. Entries not beginning with
   * `prefix` are always returned. @default every entry
   */
  skip?: AuditBytesFilter;
}

/** See {@linkcode ReadAuditRecordPagesOptions.skip}. */
export interface AuditBytesFilter {
  /** Only entries whose bytes begin with this may be left out. */
  prefix: string;
  /** Such an entry may be left out when its bytes lack one of these. */
  needles: readonly string[];
}
