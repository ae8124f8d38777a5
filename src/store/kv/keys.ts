/**
 * The KV key layout. Every key is built here, never inline.
 *
 * @module
 */
import type { PinKind } from "../records.ts";

/** Stored schema version. */
export function schemaVersionKey(): Deno.KvKey {
  return ["meta", "schema_version"];
}

/** Counter bumped on every registration change; running servers poll it. */
export function registrationsVersionKey(): Deno.KvKey {
  return ["meta", "registrations_version"];
}

/** This deployment's id (the loop marker of outgoing requests). */
export function deploymentIdKey(): Deno.KvKey {
  return ["meta", "deployment_id"];
}

/** The id of this KV file's store, also in the data directory's marker file. */
export function storeIdKey(): Deno.KvKey {
  return ["meta", "store_id"];
}

/** The key check value of the key the secrets are sealed with. */
export function keyCheckKey(): Deno.KvKey {
  return ["meta", "key_check"];
}

/** An outgoing webhook registration. */
export function outgoingWebhookKey(id: string): Deno.KvKey {
  return ["webhooks", "out", id];
}

/** Prefix of all outgoing webhook registrations. */
export function outgoingWebhooksPrefix(): Deno.KvKey {
  return ["webhooks", "out"];
}

/** How many events in a row an outgoing webhook has dead-lettered (a `Deno.KvU64`). */
export function deadLetterStreakKey(id: string): Deno.KvKey {
  return ["webhooks", "out_streak", id];
}

/** An incoming webhook endpoint registration. */
export function incomingWebhookKey(id: string): Deno.KvKey {
  return ["webhooks", "in", id];
}

/** Prefix of all incoming webhook registrations. */
export function incomingWebhooksPrefix(): Deno.KvKey {
  return ["webhooks", "in"];
}

/** Unique index: incoming path → id. */
export function incomingPathIndexKey(path: string): Deno.KvKey {
  return ["webhooks", "in_path", path];
}

/** Unique index: incoming name → id. */
export function incomingNameIndexKey(name: string): Deno.KvKey {
  return ["webhooks", "in_name", name];
}

/** Per-endpoint counters of an incoming webhook. */
export function incomingStatsKey(id: string, counter: string): Deno.KvKey {
  return ["webhooks", "in_stats", id, counter];
}

/** Prefix of the counters of one incoming webhook. */
export function incomingStatsPrefix(id: string): Deno.KvKey {
  return ["webhooks", "in_stats", id];
}

/** A value of the memory plugin's notebook. */
export function memoryKey(key: string): Deno.KvKey {
  return ["plugin", "memory", key];
}

/** Prefix of the memory plugin's notebook. */
export function memoryPrefix(): Deno.KvKey {
  return ["plugin", "memory"];
}

/** An encrypted keychain entry (file fallback backend). */
export function keychainKey(name: string): Deno.KvKey {
  return ["keychain", name];
}

/** Prefix of the keychain entries. */
export function keychainPrefix(): Deno.KvKey {
  return ["keychain"];
}

/** Counter bumped when deliveries are queued outside the dispatcher (DLQ replay). */
export function deliveriesVersionKey(): Deno.KvKey {
  return ["meta", "deliveries_version"];
}

/** An outbox event: envelope metadata and (small) body bytes. */
export function outboxEventKey(eventId: string): Deno.KvKey {
  return ["outbox", "event", eventId];
}

/** One chunk of a large outbox event body. */
export function outboxBodyKey(eventId: string, chunk: number): Deno.KvKey {
  return ["outbox", "body", eventId, chunk];
}

/**
 * The webhooks an event still owes its first attempt to (one record per
 * event, instead of a delivery record per webhook).
 */
export function outboxFanoutKey(eventId: string): Deno.KvKey {
  return ["outbox", "fanout", eventId];
}

/** Prefix of every event's fan-out record. */
export function outboxFanoutPrefix(): Deno.KvKey {
  return ["outbox", "fanout"];
}

/**
 * Due index of pending deliveries, ordered by due time: an own delivery
 * record's entry. The index key of a record's earlier due time may outlive
 * it (stale); readers check each entry against the record.
 */
export function outboxDueKey(at: number, eventId: string, webhookId: string): Deno.KvKey {
  return ["outbox", "due", at, eventId, webhookId];
}

/**
 * Due index entry of an event's fan-out record: `true` where an own
 * record's entry has its webhook id, so the two never collide.
 */
export function outboxFanoutDueKey(at: number, eventId: string): Deno.KvKey {
  return ["outbox", "due", at, eventId, true];
}

/** Prefix of the due index. */
export function outboxDuePrefix(): Deno.KvKey {
  return ["outbox", "due"];
}

/** Bound of the due index before `at`: every entry due earlier sorts before it. */
export function outboxDueBound(at: number): Deno.KvKey {
  return ["outbox", "due", at];
}

/** A pending delivery of one event to one outgoing webhook, once it needs a retry. */
export function deliveryKey(eventId: string, webhookId: string): Deno.KvKey {
  return ["outbox", "delivery", eventId, webhookId];
}

/** Prefix of all pending deliveries. */
export function deliveriesPrefix(): Deno.KvKey {
  return ["outbox", "delivery"];
}

/** Prefix of the pending deliveries of one event. */
export function eventDeliveriesPrefix(eventId: string): Deno.KvKey {
  return ["outbox", "delivery", eventId];
}

/** One entry of the delivery log of an outgoing webhook. */
export function deliveryLogKey(webhookId: string, entryId: string): Deno.KvKey {
  return ["outbox", "log", webhookId, entryId];
}

/** Prefix of the delivery log of one outgoing webhook. */
export function deliveryLogPrefix(webhookId: string): Deno.KvKey {
  return ["outbox", "log", webhookId];
}

/** A dead-letter queue record. */
export function dlqKey(dlqId: string): Deno.KvKey {
  return ["dlq", "entry", dlqId];
}

/** Prefix of all dead-letter queue records. */
export function dlqPrefix(): Deno.KvKey {
  return ["dlq", "entry"];
}

/** The DLQ's order index: a record's place, oldest failure first (value: its webhook id). */
export function dlqOrderKey(failedAt: string, dlqId: string): Deno.KvKey {
  return ["dlq", "order", failedAt, dlqId];
}

/** Prefix of the DLQ's order index. */
export function dlqOrderPrefix(): Deno.KvKey {
  return ["dlq", "order"];
}

/** The DLQ's order index of one webhook's records (value: `null`). */
export function dlqWebhookOrderKey(webhookId: string, failedAt: string, dlqId: string): Deno.KvKey {
  return ["dlq", "by_webhook", webhookId, failedAt, dlqId];
}

/** Prefix of the DLQ's order index of one webhook (of every webhook without `webhookId`). */
export function dlqWebhookOrderPrefix(webhookId?: string): Deno.KvKey {
  return webhookId === undefined ? ["dlq", "by_webhook"] : ["dlq", "by_webhook", webhookId];
}

/** Number of DLQ records (`Deno.KvU64`), kept with the indexes. */
export function dlqCountKey(): Deno.KvKey {
  return ["dlq", "count"];
}

/**
 * Present once the DLQ's indexes and count are built (stores written before
 * them are indexed on first use); absent, writers bump {@linkcode dlqVersionKey}.
 */
export function dlqIndexedKey(): Deno.KvKey {
  return ["dlq", "indexed"];
}

/** Bumped by DLQ writes while the indexes are not built, so that building them sees the race. */
export function dlqVersionKey(): Deno.KvKey {
  return ["dlq", "version"];
}

/** One chunk of a large dead-lettered event body. */
export function dlqBodyKey(dlqId: string, chunk: number): Deno.KvKey {
  return ["dlq", "body", dlqId, chunk];
}

/** Head of the audit chain: `{seq, hash, timestamp}` of the last entry. */
export function auditHeadKey(): Deno.KvKey {
  return ["audit", "head"];
}

/** Prefix of all audit entries, ordered by seq then part. */
export function auditEntriesPrefix(): Deno.KvKey {
  return ["audit", "entry"];
}

/** Prefix of the parts of one audit entry (also the list bound before `seq`). */
export function auditEntryKey(seq: number): Deno.KvKey {
  return ["audit", "entry", seq];
}

/** One part of the canonical JSON bytes of an audit entry. */
export function auditEntryPartKey(seq: number, part: number): Deno.KvKey {
  return ["audit", "entry", seq, part];
}

/** One tile of the audit log's Merkle tree. */
export function auditTileKey(level: number, index: number): Deno.KvKey {
  return ["audit", "tile", level, index];
}

/** One signing key of the audit log, by key id. */
export function auditLogKeyKey(id: string): Deno.KvKey {
  return ["audit", "key", id];
}

/** Prefix of the audit log's signing keys. */
export function auditLogKeysPrefix(): Deno.KvKey {
  return ["audit", "key"];
}

/** Which signing key is current (its id): checked by an instance adding a key. */
export function auditCurrentKeyKey(): Deno.KvKey {
  return ["audit", "current_key"];
}

/** How far old audit entries were pruned. */
export function auditPrunedKey(): Deno.KvKey {
  return ["audit", "pruned"];
}

/** The latest signed checkpoint of the audit log. */
export function auditCheckpointKey(): Deno.KvKey {
  return ["audit", "checkpoint"];
}

/** A pending handler call of an accepted incoming payload. */
export function incomingJobKey(jobId: string): Deno.KvKey {
  return ["incoming", "job", jobId];
}

/** Prefix of all pending incoming jobs. */
export function incomingJobsPrefix(): Deno.KvKey {
  return ["incoming", "job"];
}

/** A sender's delivery id seen at an incoming endpoint (de-duplication). */
export function incomingDedupeKey(endpointId: string, deliveryId: string): Deno.KvKey {
  return ["incoming", "dedupe", endpointId, deliveryId];
}

/** One chunk of the raw body of a pending incoming job. */
export function incomingJobBodyKey(jobId: string, chunk: number): Deno.KvKey {
  return ["incoming", "body", jobId, chunk];
}

/** Prefix of the body chunks of one incoming job. */
export function incomingJobBodyPrefix(jobId: string): Deno.KvKey {
  return ["incoming", "body", jobId];
}

/** Prefix of all incoming job body chunks (orphan sweep). */
export function incomingBodiesPrefix(): Deno.KvKey {
  return ["incoming", "body"];
}

/** An MCP upstream plugin added with `toolgate plugins add`. */
export function upstreamKey(name: string): Deno.KvKey {
  return ["plugins", "upstream", name];
}

/** Prefix of all MCP upstream plugins added with the CLI. */
export function upstreamsPrefix(): Deno.KvKey {
  return ["plugins", "upstream"];
}

/** Live plugin state published by a running server (read by `plugins list`). */
export function serverStatusKey(serverId: string): Deno.KvKey {
  return ["servers", "status", serverId];
}

/** Prefix of the live states of running servers. */
export function serverStatusPrefix(): Deno.KvKey {
  return ["servers", "status"];
}

/** The lease naming the one process that sends webhook deliveries. */
export function deliveryLeaseKey(): Deno.KvKey {
  return ["meta", "delivery_lease"];
}

/** A failed incoming job (kept after its last retry; its body stays under its id). */
export function incomingFailedKey(jobId: string): Deno.KvKey {
  return ["incoming", "failed", jobId];
}

/** Prefix of all failed incoming jobs. */
export function incomingFailedPrefix(): Deno.KvKey {
  return ["incoming", "failed"];
}

/** One payload in an incoming endpoint's log. */
export function incomingLogKey(endpointId: string, entryId: string): Deno.KvKey {
  return ["incoming", "log", endpointId, entryId];
}

/** Prefix of one incoming endpoint's payload log. */
export function incomingLogPrefix(endpointId: string): Deno.KvKey {
  return ["incoming", "log", endpointId];
}

/** An API key record (hash, never the key). */
export function apiKeyKey(id: string): Deno.KvKey {
  return ["api_keys", "id", id];
}

/** Prefix of the API key records. */
export function apiKeysPrefix(): Deno.KvKey {
  return ["api_keys", "id"];
}

/** Unique index: API key name → id. */
export function apiKeyNameIndexKey(name: string): Deno.KvKey {
  return ["api_keys", "name", name];
}

/** Unique index: SHA-256 (hex) of an API key → id. */
export function apiKeyHashIndexKey(hash: string): Deno.KvKey {
  return ["api_keys", "hash", hash];
}

/** A virtual server's record. */
export function virtualServerKey(name: string): Deno.KvKey {
  return ["virtual_servers", name];
}

/** Prefix of the virtual server records. */
export function virtualServersPrefix(): Deno.KvKey {
  return ["virtual_servers"];
}

/** The pin of one upstream definition. */
export function pinKey(plugin: string, kind: PinKind, name: string): Deno.KvKey {
  return ["pins", plugin, kind, name];
}

/** Prefix of every pin, ordered by plugin, kind, name. */
export function pinsPrefix(): Deno.KvKey {
  return ["pins"];
}

/** A stored policy rule's record. */
export function policyKey(name: string): Deno.KvKey {
  return ["policies", name];
}

/** Prefix of the stored policy rules, ordered by name. */
export function policiesPrefix(): Deno.KvKey {
  return ["policies"];
}

/** A web console session, by the SHA-256 (hex) of its id; the value is its expiry (ms). */
export function consoleSessionKey(idHash: string): Deno.KvKey {
  return ["console", "session", idHash];
}

/** An approval's record. */
export function approvalKey(id: string): Deno.KvKey {
  return ["approvals", id];
}

/** Prefix of the approval records, ordered by id. */
export function approvalsPrefix(): Deno.KvKey {
  return ["approvals"];
}
