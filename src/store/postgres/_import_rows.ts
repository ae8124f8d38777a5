/**
 * What a PostgreSQL import writes, kind by kind: the kinds of record it
 * counts and, for each, the one statement that writes a batch of its rows.
 *
 * @module
 */
import type { StoredIncomingWebhook, StoredOutgoingWebhook } from "../_sealed_secrets.ts";
import type {
  ApiKeyRecord,
  ApprovalRecord,
  AuditEntryWrite,
  AuditTileWrite,
  DeliveryLogEntry,
  DlqRecord,
  IncomingJob,
  KeychainRecord,
  OutboxEvent,
  PolicyRecord,
  StoredDelivery,
  ToolPinRecord,
  UpstreamRecord,
  VirtualServerRecord,
} from "../records.ts";
import type { Tx } from "./_context.ts";
import { createdAtColumn } from "./approvals.ts";

/** What an import counts, by kind of record. */
export interface ImportCounts {
  /** Outgoing webhooks. */
  outgoing_webhooks: number;
  /** Incoming endpoints. */
  incoming_webhooks: number;
  /** Incoming endpoints' counters. */
  incoming_stats: number;
  /** MCP upstreams added at run time. */
  upstreams: number;
  /** Keychain entries. */
  keychain: number;
  /** API keys (their hashes). */
  api_keys: number;
  /** Virtual servers defined with `toolgate servers create`. */
  virtual_servers: number;
  /** Pins of upstream tools, prompts and resource templates. */
  tool_pins: number;
  /** Policy rules added with `toolgate policies add`. */
  policies: number;
  /** Calls held for approval, whatever their status. */
  approvals: number;
  /** Memory notes. */
  memory: number;
  /** Outbox events (the bodies of pending deliveries). */
  events: number;
  /** Pending deliveries: fan-out entries and delivery records. */
  deliveries: number;
  /** Dead-letter records with their bodies. */
  dlq: number;
  /** Delivery log entries. */
  delivery_log: number;
  /** Audit entries. */
  audit_entries: number;
  /** Tiles of the audit log's Merkle tree. */
  audit_tiles: number;
  /** Incoming jobs with their bodies. */
  incoming_jobs: number;
}

/** A kind of imported record. */
export type ImportKind = keyof ImportCounts;

/** Every kind, in the order an import reports them. */
export const IMPORT_KINDS: readonly ImportKind[] = Object.freeze([
  "outgoing_webhooks",
  "incoming_webhooks",
  "incoming_stats",
  "upstreams",
  "keychain",
  "api_keys",
  "virtual_servers",
  "tool_pins",
  "policies",
  "approvals",
  "memory",
  "events",
  "deliveries",
  "dlq",
  "delivery_log",
  "audit_entries",
  "audit_tiles",
  "incoming_jobs",
]);

/** Type oid of `bytea`, for arrays of bytes. */
const BYTEA_OID = 17;

/** A JSON text per record, for `unnest(…::text[])` then `::jsonb`. */
function jsonTexts(records: readonly unknown[]): string[] {
  return records.map((record) => JSON.stringify(record));
}

/** One statement per kind: the rows as arrays, unnested. Rows must not exist yet. */
export const IMPORT_WRITERS: {
  [K in ImportKind]: (tx: Tx, rows: never[], stamp: string) => Promise<void>;
} = {
  async outgoing_webhooks(tx, rows: StoredOutgoingWebhook[]) {
    await tx`
      insert into toolgate_outgoing_webhooks (id, record)
      select u.id, u.record::jsonb
      from unnest(${rows.map((r) => r.id)}::text[], ${jsonTexts(rows)}::text[]) as u(id, record)`;
  },
  async incoming_webhooks(tx, rows: StoredIncomingWebhook[]) {
    await tx`
      insert into toolgate_incoming_webhooks (id, name, path, record)
      select u.id, u.name, u.path, u.record::jsonb
      from unnest(${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.name)}::text[],
        ${rows.map((r) => r.path)}::text[], ${jsonTexts(rows)}::text[])
        as u(id, name, path, record)`;
  },
  async incoming_stats(
    tx,
    rows: {
      endpoint_id: string;
      received: number;
      rejected: number;
      failed: number;
      last_received_at?: string;
    }[],
  ) {
    await tx`
      insert into toolgate_incoming_stats
        (endpoint_id, received, rejected, failed, last_received_at)
      select * from unnest(${rows.map((r) => r.endpoint_id)}::text[],
        ${rows.map((r) => r.received)}::bigint[], ${rows.map((r) => r.rejected)}::bigint[],
        ${rows.map((r) => r.failed)}::bigint[],
        ${rows.map((r) => r.last_received_at ?? null)}::text[])`;
  },
  async upstreams(tx, rows: UpstreamRecord[]) {
    await tx`
      insert into toolgate_upstreams (name, record)
      select u.name, u.record::jsonb
      from unnest(${rows.map((r) => r.name)}::text[], ${jsonTexts(rows)}::text[])
        as u(name, record)`;
  },
  async keychain(tx, rows: { name: string; record: KeychainRecord }[]) {
    const bytes = (pick: (r: Extract<KeychainRecord, { backend: "file" }>) => Uint8Array) =>
      tx.array(
        rows.map(({ record }) => record.backend === "file" ? pick(record) : null),
        BYTEA_OID,
      );
    await tx`
      insert into toolgate_keychain (name, backend, iv, data, updated_at)
      select * from unnest(${rows.map((r) => r.name)}::text[],
        ${rows.map((r) => r.record.backend)}::text[], ${bytes((r) => r.iv)}::bytea[],
        ${bytes((r) => r.data)}::bytea[], ${rows.map((r) => r.record.updated_at)}::text[])`;
  },
  async api_keys(tx, rows: ApiKeyRecord[]) {
    await tx`
      insert into toolgate_api_keys (id, name, hash, record)
      select u.id, u.name, u.hash, u.record::jsonb
      from unnest(${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.name)}::text[],
        ${rows.map((r) => r.hash)}::text[], ${jsonTexts(rows)}::text[])
        as u(id, name, hash, record)`;
  },
  async virtual_servers(tx, rows: VirtualServerRecord[]) {
    await tx`
      insert into toolgate_virtual_servers (name, record)
      select u.name, u.record::jsonb
      from unnest(${rows.map((r) => r.name)}::text[], ${jsonTexts(rows)}::text[])
        as u(name, record)`;
  },
  async tool_pins(tx, rows: ToolPinRecord[]) {
    await tx`
      insert into toolgate_tool_pins (plugin, kind, name, record)
      select u.plugin, u.kind, u.name, u.record::jsonb
      from unnest(${rows.map((r) => r.plugin)}::text[], ${rows.map((r) => r.kind)}::text[],
        ${rows.map((r) => r.name)}::text[], ${jsonTexts(rows)}::text[])
        as u(plugin, kind, name, record)`;
  },
  async policies(tx, rows: PolicyRecord[]) {
    await tx`
      insert into toolgate_policies (name, record)
      select u.name, u.record::jsonb
      from unnest(${rows.map((r) => r.name)}::text[], ${jsonTexts(rows)}::text[])
        as u(name, record)`;
  },
  async approvals(tx, rows: ApprovalRecord[]) {
    await tx`
      insert into toolgate_approvals (id, status, created_at, record)
      select u.id, u.status, u.created_at::timestamptz, u.record::jsonb
      from unnest(${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.status)}::text[],
        ${rows.map(createdAtColumn)}::text[], ${jsonTexts(rows)}::text[])
        as u(id, status, created_at, record)`;
  },
  async memory(tx, rows: { key: Uint8Array; json: string; updated_at: string }[]) {
    await tx`
      insert into toolgate_memory (key, json, updated_at)
      select * from unnest(${tx.array(rows.map((r) => r.key), BYTEA_OID)}::bytea[],
        ${rows.map((r) => r.json)}::text[], ${rows.map((r) => r.updated_at)}::text[])`;
  },
  async events(tx, rows: OutboxEvent[], stamp) {
    await tx`
      insert into toolgate_outbox_events
        (event_id, event_type, event_timestamp, body, traceparent, version)
      select u.event_id, u.event_type, u.event_timestamp, u.body, u.traceparent, ${stamp}
      from unnest(${rows.map((e) => e.id)}::text[], ${rows.map((e) => e.type)}::text[],
        ${rows.map((e) => e.timestamp)}::text[],
        ${tx.array(rows.map((e) => e.body), BYTEA_OID)}::bytea[],
        ${rows.map((e) => e.traceparent ?? null)}::text[])
        as u(event_id, event_type, event_timestamp, body, traceparent)`;
  },
  async deliveries(
    tx,
    rows: { record: StoredDelivery["record"]; fanout: boolean; index: number }[],
    stamp,
  ) {
    const column = <T>(pick: (row: (typeof rows)[number]) => T) => rows.map(pick);
    await tx`
      insert into toolgate_deliveries (
        event_id, webhook_id, fanout, fanout_index, event_type, attempt_count,
        next_attempt_at, created_at, attempts, dlq_id, version)
      select u.event_id, u.webhook_id, u.fanout::boolean, u.fanout_index, u.event_type, u.attempt_count,
        u.next_attempt_at, u.created_at, u.attempts::jsonb, u.dlq_id, ${stamp}
      from unnest(
        ${column((r) => r.record.event_id)}::text[], ${column((r) => r.record.webhook_id)}::text[],
        ${column((r) => String(r.fanout))}::text[], ${column((r) => r.fanout ? r.index : 0)}::int[],
        ${column((r) => r.record.event_type)}::text[],
        ${column((r) => r.fanout ? 0 : r.record.attempt_count)}::int[],
        ${column((r) => Math.ceil(r.record.next_attempt_at))}::bigint[],
        ${column((r) => r.record.created_at)}::text[],
        ${column((r) => JSON.stringify(r.fanout ? [] : r.record.attempts))}::text[],
        ${column((r) => r.fanout ? null : r.record.dlq_id ?? null)}::text[]
      ) as u(event_id, webhook_id, fanout, fanout_index, event_type, attempt_count,
        next_attempt_at, created_at, attempts, dlq_id)`;
  },
  async dlq(tx, rows: { record: Omit<DlqRecord, "size" | "body">; body: Uint8Array }[]) {
    await tx`
      insert into toolgate_dlq (dlq_id, record, body)
      select u.dlq_id, u.record::jsonb, u.body
      from unnest(${rows.map((r) => r.record.dlq_id)}::text[],
        ${jsonTexts(rows.map((r) => r.record))}::text[],
        ${tx.array(rows.map((r) => r.body), BYTEA_OID)}::bytea[]) as u(dlq_id, record, body)`;
  },
  async delivery_log(
    tx,
    rows: { webhook_id: string; entry_id: string; entry: DeliveryLogEntry }[],
  ) {
    await tx`
      insert into toolgate_delivery_log (webhook_id, entry_id, entry)
      select u.webhook_id, u.entry_id, u.entry::jsonb
      from unnest(${rows.map((r) => r.webhook_id)}::text[], ${rows.map((r) => r.entry_id)}::text[],
        ${jsonTexts(rows.map((r) => r.entry))}::text[]) as u(webhook_id, entry_id, entry)`;
  },
  async audit_entries(tx, rows: AuditEntryWrite[], stamp) {
    await tx`
      insert into toolgate_audit_entries (seq, bytes, version)
      select u.seq, u.bytes, ${stamp}
      from unnest(${rows.map((r) => r.seq)}::bigint[],
        ${tx.array(rows.map((r) => r.bytes), BYTEA_OID)}::bytea[]) as u(seq, bytes)`;
  },
  async audit_tiles(tx, rows: AuditTileWrite[]) {
    await tx`
      insert into toolgate_audit_tiles (level, idx, hashes)
      select u.level, u.idx, u.hashes
      from unnest(${rows.map((r) => r.level)}::smallint[], ${rows.map((r) => r.index)}::bigint[],
        ${tx.array(rows.map((r) => r.hashes), BYTEA_OID)}::bytea[]) as u(level, idx, hashes)`;
  },
  async incoming_jobs(tx, rows: { job: IncomingJob; body: Uint8Array }[]) {
    await tx`
      insert into toolgate_incoming_jobs
        (id, endpoint_id, handler, received_at, audit_seq, body, attempts, next_attempt_at,
          failed_at, traceparent)
      select u.id, u.endpoint_id, u.handler, u.received_at, u.audit_seq, u.body,
        u.attempts::jsonb, u.next_attempt_at, u.failed_at, u.traceparent
      from unnest(${rows.map((r) => r.job.id)}::text[],
        ${rows.map((r) => r.job.endpoint_id)}::text[], ${rows.map((r) => r.job.handler)}::text[],
        ${rows.map((r) => r.job.received_at)}::text[],
        ${rows.map((r) => r.job.audit_seq ?? null)}::bigint[],
        ${tx.array(rows.map((r) => r.body), BYTEA_OID)}::bytea[],
        ${rows.map((r) => r.job.attempts ? JSON.stringify(r.job.attempts) : null)}::text[],
        ${rows.map((r) => r.job.next_attempt_at ?? null)}::bigint[],
        ${rows.map((r) => r.job.failed_at ?? null)}::text[],
        ${rows.map((r) => r.job.traceparent ?? null)}::text[])
        as u(id, endpoint_id, handler, received_at, audit_seq, body, attempts, next_attempt_at,
          failed_at, traceparent)`;
  },
};
