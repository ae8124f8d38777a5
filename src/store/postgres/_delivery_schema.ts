/**
 * The PostgreSQL tables of the delivery outbox, the dead-letter queue and
 * the delivery logs, as migration 1 creates them.
 *
 * @module
 */

/** Tables of this part, in migration 1. */
export const DELIVERIES_SCHEMA = `
  create table toolgate_outbox_events (
    event_id text collate "C" primary key,
    event_type text not null,
    event_timestamp text not null,
    body bytea not null,
    traceparent text,
    version text not null
  );
  create table toolgate_deliveries (
    event_id text collate "C" not null,
    webhook_id text collate "C" not null,
    fanout boolean not null,
    fanout_index integer not null default 0,
    event_type text not null,
    attempt_count integer not null default 0,
    next_attempt_at bigint not null,
    created_at text not null,
    attempts jsonb not null default '[]',
    dlq_id text,
    version text not null,
    claimed_by text,
    claim_expires_at bigint,
    primary key (event_id, webhook_id)
  );
  create index toolgate_deliveries_due on toolgate_deliveries (next_attempt_at);
  create index toolgate_deliveries_claimed on toolgate_deliveries (claimed_by)
    where claimed_by is not null;
  create table toolgate_dlq (
    dlq_id text collate "C" primary key,
    record jsonb not null,
    body bytea not null
  );
  create index toolgate_dlq_order on toolgate_dlq (((record->>'failed_at') collate "C"), dlq_id);
  create index toolgate_dlq_webhook_order on toolgate_dlq (
    ((record->>'webhook_id') collate "C"), ((record->>'failed_at') collate "C"), dlq_id);
  create table toolgate_delivery_log (
    webhook_id text collate "C" not null,
    entry_id text collate "C" not null,
    entry jsonb not null,
    primary key (webhook_id, entry_id)
  );
`;
