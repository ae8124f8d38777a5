/**
 * The PostgreSQL {@linkcode DeliveryStore}: the contract's calls on the
 * outbox, the dead-letter queue and the delivery logs, each a statement or a
 * transaction over the parts beside it.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import {
  DELIVERY_LOG_SIZE,
  type DeliveryLogEntry,
  DeliveryLogEntrySchema,
  type DeliveryOp,
  type DlqRecord,
  type ListDlqPageOptions,
  type OutboxEvent,
  type StoredDelivery,
} from "../records.ts";
import type { DeliveryStore, DeliveryWriter, StoreCost } from "../store.ts";
import { byEventId, checkDlqPageLimit, deliveryLogOp, replayEvent } from "../_delivery_contract.ts";
import { bumpCounter, nextStamp, type PgContext, readCounter, type Tx } from "./_context.ts";
import type { Sql } from "./connection.ts";
import { checkOps, refuseCollect } from "./_delivery_check.ts";
import { opsCost } from "./_delivery_cost.ts";
import { applyOps, dueMs, retrying } from "./_delivery_apply.ts";
import { PostgresDeliveryWriter } from "./_delivery_writer.ts";
import { claimDueDeliveries, type ClaimDueDeliveriesOptions, updateClaims } from "./_claim_due.ts";
import {
  type DeliveryRow,
  dlqRecord,
  plainBytes,
  storedDelivery,
  StoredEventRowSchema,
} from "./_delivery_rows.ts";

/** The delivery outbox, DLQ and delivery logs, on PostgreSQL. */
export class PostgresDeliveryStore implements DeliveryStore {
  /** Several instances send at once, each what it claimed. */
  readonly sharedClaims = true;
  #ctx: PgContext;

  /** @param ctx The store's context. */
  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  /** A group-committing writer. */
  writer(options?: { lingerMs?: number }): DeliveryWriter {
    return new PostgresDeliveryWriter(this.#ctx, options);
  }

  /**
   * What `ops` add to another commit: rows written or deleted, and rough bytes.
   *
   * @throws {GatewayError} `INTERNAL` when `ops` holds a `collect_event` op.
   */
  opsCost(ops: readonly DeliveryOp[]): StoreCost {
    refuseCollect(ops);
    return opsCost(ops);
  }

  /** Signals new pending deliveries to the process that delivers them. */
  async bumpVersion(): Promise<void> {
    await this.#ctx.run((sql) => bumpCounter(sql, "deliveries"));
  }

  /** The counter bumped whenever deliveries are queued by another path (replay, CLI). */
  version(): Promise<bigint> {
    return this.#ctx.run((sql) => readCounter(sql, "deliveries"));
  }

  /** See {@linkcode claimDueDeliveries}. */
  claimDue(options: ClaimDueDeliveriesOptions): Promise<StoredDelivery[]> {
    return claimDueDeliveries(this.#ctx, options);
  }

  /** Extends every claim `owner` holds to `until`; returns how many it holds. */
  renewClaims(owner: string, until: number): Promise<number> {
    return updateClaims(this.#ctx, owner, { until });
  }

  /** Gives back the claims `owner` holds: all of them, or those of `keys`. */
  async releaseClaims(
    owner: string,
    keys?: readonly { event_id: string; webhook_id: string }[],
  ): Promise<void> {
    if (keys && !keys.length) return;
    await updateClaims(this.#ctx, owner, { until: null, keys });
  }

  /**
   * Every pending delivery in either form, by event id (oldest first): per
   * event, the delivery records by webhook id, then the fan-out entries in
   * the order of their record.
   */
  async listPending(): Promise<StoredDelivery[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<DeliveryRow[]>`
        select event_id, webhook_id, fanout, event_type, attempt_count,
          next_attempt_at::float8 as next_attempt_at, created_at, attempts, dlq_id, version
        from toolgate_deliveries
        order by event_id, fanout, fanout_index, webhook_id`
    );
    return rows.map(storedDelivery).sort(byEventId);
  }

  /**
   * Pending deliveries whose event row is missing (what a store that lost an
   * event's body while a delivery of it waited leaves), at most `limit`, by
   * event id (every delivery of the last event listed, even past `limit`).
   */
  async listOrphans(limit: number): Promise<StoredDelivery[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<DeliveryRow[]>`
        select event_id, webhook_id, fanout, event_type, attempt_count,
          next_attempt_at::float8 as next_attempt_at, created_at, attempts, dlq_id, version
        from toolgate_deliveries d
        where d.event_id in (
          -- Whole events: a fan-out is dead-lettered whole.
          select distinct o.event_id from toolgate_deliveries o
          where not exists (select from toolgate_outbox_events e where e.event_id = o.event_id)
          order by o.event_id limit ${limit})
        order by event_id, webhook_id`
    );
    return rows.map(storedDelivery);
  }

  /** The exact body of an event as a dead-letter record of it keeps it, or `null`. */
  async findDlqBody(eventId: string): Promise<Uint8Array | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ body: Uint8Array }[]>`
        select body from toolgate_dlq
        where record->>'event_id' = ${eventId} and not coalesce((record->>'body_lost')::boolean, false)
        limit 1`
    );
    return row ? new Uint8Array(row.body) : null;
  }

  /** An outbox event and the version stamp of its stored row, or `null`. */
  async readEvent(eventId: string): Promise<{ event: OutboxEvent; versionstamp: string } | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql`
        select event_id, event_type, event_timestamp, body, traceparent, version
        from toolgate_outbox_events where event_id = ${eventId}`
    );
    if (!row) return null;
    const stored = parseRecord(
      StoredEventRowSchema,
      { ...row, body: plainBytes(row.body) },
      `event ${eventId}`,
    );
    return {
      event: {
        id: stored.event_id,
        type: stored.event_type,
        timestamp: stored.event_timestamp,
        body: stored.body,
        ...(stored.traceparent !== null ? { traceparent: stored.traceparent } : {}),
      },
      versionstamp: stored.version,
    };
  }

  /** Deletes an outbox event no pending delivery refers to; says whether it is gone. */
  async collectEventIfUnreferenced(eventId: string): Promise<boolean> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ deleted: boolean; present: boolean }[]>`
        with gone as (
          delete from toolgate_outbox_events e
          where e.event_id = ${eventId}
            and not exists (select from toolgate_deliveries d where d.event_id = ${eventId})
          returning 1
        )
        select exists (select from gone) as deleted,
          exists (select from toolgate_outbox_events where event_id = ${eventId}) as present`
    );
    return row.deleted || !row.present;
  }

  /**
   * Dead-letter records, oldest failure first, then by id (without their
   * bodies: see {@linkcode readDlqBody}); a page with `limit`, read through
   * the `toolgate_dlq_order` indexes.
   */
  async listDlq(options: ListDlqPageOptions = {}): Promise<DlqRecord[]> {
    const { webhook, after, limit } = options;
    if (limit !== undefined) checkDlqPageLimit(limit);
    const rows = await this.#ctx.run((sql) => {
      const byHook = webhook === undefined
        ? sql``
        : sql`and (record->>'webhook_id') collate "C" = ${webhook}`;
      const from = after === undefined ? sql`` : sql`
        and ((record->>'failed_at') collate "C", dlq_id) >
          (${after.failed_at}::text collate "C", ${after.dlq_id}::text collate "C")`;
      return sql<{ dlq_id: string; record: unknown; size: number }[]>`
        select dlq_id, record, octet_length(body) as size from toolgate_dlq
        where true ${byHook} ${from}
        order by (record->>'failed_at') collate "C", dlq_id
        ${limit === undefined ? sql`` : sql`limit ${limit}`}`;
    });
    return rows.map(dlqRecord);
  }

  /** How many dead-letter records there are. */
  async countDlq(): Promise<number> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ count: number }[]>`select count(*)::int as count from toolgate_dlq`
    );
    return row.count;
  }

  /** One dead-letter record (without its body), or `null`. */
  async getDlq(dlqId: string): Promise<DlqRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ dlq_id: string; record: unknown; size: number }[]>`
        select dlq_id, record, octet_length(body) as size from toolgate_dlq
        where dlq_id = ${dlqId}`
    );
    return row ? dlqRecord(row) : null;
  }

  /**
   * The exact body bytes of a dead-lettered event.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the record is gone or its
   * body is not `record.size` bytes.
   */
  async readDlqBody(record: DlqRecord): Promise<Uint8Array> {
    if (record.body) return record.body;
    const [row] = await this.#ctx.run((sql) =>
      sql<{ body: Uint8Array }[]>`select body from toolgate_dlq where dlq_id = ${record.dlq_id}`
    );
    if (!row) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored DLQ record ${record.dlq_id} is unreadable: its body is missing`,
      );
    }
    const body = new Uint8Array(row.body);
    if (body.byteLength !== record.size) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored DLQ record ${record.dlq_id} is unreadable: wrong size`,
      );
    }
    return body;
  }

  /**
   * Queues a fresh delivery for a dead-letter record (same event id and body,
   * fresh schedule), re-puts its event and bumps the deliveries version, in
   * one transaction. The record stays until the delivery succeeds.
   *
   * @returns `"already_queued"` when a delivery record of that event to that
   * webhook is pending (nothing is written then).
   */
  requeueDlq(
    record: DlqRecord,
    body: Uint8Array,
    timestamp: string,
    now: number = Date.now(),
  ): Promise<"queued" | "already_queued"> {
    return retrying(this.#ctx, async (tx) => {
      const stamp = await nextStamp(tx);
      // A fan-out entry of the same webhook gives way to the record; a record does not.
      const inserted = await tx`
        insert into toolgate_deliveries (
          event_id, webhook_id, fanout, fanout_index, event_type, attempt_count,
          next_attempt_at, created_at, attempts, dlq_id, version)
        values (${record.event_id}, ${record.webhook_id}, false, 0, ${record.event_type}, 0,
          ${dueMs(now)}, ${new Date(now).toISOString()}, '[]', ${record.dlq_id}, ${stamp})
        on conflict (event_id, webhook_id) do update set
          fanout = false, fanout_index = 0, event_type = excluded.event_type,
          attempt_count = 0, next_attempt_at = excluded.next_attempt_at,
          created_at = excluded.created_at, attempts = excluded.attempts,
          dlq_id = excluded.dlq_id, version = excluded.version
        where toolgate_deliveries.fanout
        returning 1`;
      if (!inserted.length) return "already_queued";
      await applyOps(tx, [{ op: "put_event", event: replayEvent(record, timestamp, body) }], stamp);
      await bumpCounter(tx, "deliveries");
      return "queued";
    });
  }

  /** Deletes dead-letter records and their bodies. */
  async deleteDlq(records: readonly Pick<DlqRecord, "dlq_id" | "size">[]): Promise<void> {
    if (!records.length) return;
    await this.#ctx.run((sql) =>
      sql`delete from toolgate_dlq where dlq_id = any(${records.map((r) => r.dlq_id)}::text[])`
    );
  }

  /** The newest entries of a webhook's delivery log, newest first. */
  async readLog(webhookId: string, limit: number = DELIVERY_LOG_SIZE): Promise<DeliveryLogEntry[]> {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new TypeError(`Invalid limit: ${limit} is not a positive integer`);
    }
    const rows = await this.#ctx.run((sql) =>
      sql<{ entry: unknown }[]>`
        select entry from toolgate_delivery_log where webhook_id = ${webhookId}
        order by entry_id desc limit ${limit}`
    );
    return rows.map(({ entry }) =>
      parseRecord(DeliveryLogEntrySchema, entry, `log of ${webhookId}`)
    );
  }

  /** Appends one entry to a webhook's delivery log and trims it, in one transaction. */
  async appendLog(webhookId: string, entry: DeliveryLogEntry): Promise<void> {
    const ops: DeliveryOp[] = [deliveryLogOp(webhookId, entry)];
    checkOps(ops);
    await retrying(this.#ctx, async (tx) => {
      await applyOps(tx, ops, await nextStamp(tx));
      await trim(tx, webhookId, DELIVERY_LOG_SIZE);
    });
  }

  /** Deletes all but the newest `keep` entries of a webhook's log; returns how many went. */
  trimLog(webhookId: string, keep: number = DELIVERY_LOG_SIZE): Promise<number> {
    return this.#ctx.run((sql) => trim(sql, webhookId, keep));
  }

  /** The entry ids of a webhook's delivery log, oldest first. */
  async listLogIds(webhookId: string): Promise<string[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ entry_id: string }[]>`
        select entry_id from toolgate_delivery_log where webhook_id = ${webhookId}
        order by entry_id`
    );
    return rows.map((row) => row.entry_id);
  }

  /** Deletes a webhook's whole delivery log. */
  async deleteLog(webhookId: string): Promise<void> {
    await this.trimLog(webhookId, 0);
  }
}

async function trim(sql: Sql | Tx, webhookId: string, keep: number): Promise<number> {
  const result = await sql`
    delete from toolgate_delivery_log
    where webhook_id = ${webhookId} and entry_id in (
      select entry_id from toolgate_delivery_log where webhook_id = ${webhookId}
      order by entry_id desc offset ${Math.max(0, Math.floor(keep))})`;
  return result.count;
}
