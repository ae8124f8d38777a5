/**
 * PostgreSQL adapter: outgoing webhooks, incoming endpoints and the
 * endpoints' counters.
 *
 * A registration is one row holding its record as `jsonb` (validated with
 * its schema whenever it is read back). An incoming endpoint's name and path
 * are also columns with a unique constraint each, so of two instances
 * registering the same name or path at once exactly one succeeds. Every
 * registration change bumps the `registrations` counter in its own
 * transaction, so running servers see it as soon as it is committed. The
 * counters of an endpoint are one row, incremented in place by one
 * statement (`on conflict … do update set n = n + delta`): concurrent
 * increments from several instances all count.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { newId } from "../../ids.ts";
import { parseRecord } from "../_records.ts";
import type { DataKey } from "../data_key.ts";
import {
  hasPlaintextSecret,
  openIncoming,
  openOutgoing,
  openOutgoingReporting,
  sealIncoming,
  sealOutgoing,
  sealStored,
  StoredIncomingWebhookSchema,
} from "../_sealed_secrets.ts";
import {
  type DeliveryOutcome,
  type IncomingStats,
  type IncomingWebhook,
  IncomingWebhookSchema,
  type ListedOutgoingWebhook,
  type ListOutgoingOptions,
  type NewIncomingWebhook,
  type NewOutgoingWebhook,
  type OutgoingWebhook,
  type OutgoingWebhookPatch,
  OutgoingWebhookSchema,
  patchOutgoingWebhook,
} from "../records.ts";
import type { WebhookStore } from "../store.ts";
import { bumpCounter, type PgContext, type Tx } from "./_context.ts";
import type { Sql } from "./connection.ts";

/** Tables of this part, in migration 1. */
export const WEBHOOKS_SCHEMA = `
  create table toolgate_outgoing_webhooks (
    id text collate "C" primary key,
    record jsonb not null,
    dead_letter_streak integer not null default 0
  );
  create table toolgate_incoming_webhooks (
    id text collate "C" primary key,
    name text not null constraint toolgate_incoming_webhooks_name_key unique,
    path text not null constraint toolgate_incoming_webhooks_path_key unique,
    record jsonb not null
  );
  create table toolgate_incoming_stats (
    endpoint_id text primary key,
    received bigint not null default 0,
    rejected bigint not null default 0,
    failed bigint not null default 0,
    last_received_at text
  );
`;

/** How often an incoming registration is tried again when a concurrent one took its name or path and was then removed. */
const ADD_INCOMING_ATTEMPTS = 5;

/** Increments of an endpoint's counters. */
export interface IncomingStatsDeltas {
  received?: number;
  rejected?: number;
  failed?: number;
}

/**
 * Adds to the counters of an incoming endpoint, in the caller's transaction
 * or on the pool (one statement; deltas of 0 or less are ignored, as on KV).
 * The incoming queue counts failed jobs with it in the transaction that
 * completes them.
 */
export async function addIncomingStatsIn(
  sql: Tx | Sql,
  id: string,
  deltas: IncomingStatsDeltas,
  lastReceivedAt?: string,
): Promise<void> {
  const add = (delta: number | undefined) => (delta !== undefined && delta > 0 ? delta : 0);
  const received = add(deltas.received);
  const rejected = add(deltas.rejected);
  const failed = add(deltas.failed);
  if (!received && !rejected && !failed && !lastReceivedAt) return;
  await sql`
    insert into toolgate_incoming_stats as s
      (endpoint_id, received, rejected, failed, last_received_at)
    values (${id}, ${received}, ${rejected}, ${failed}, ${lastReceivedAt || null})
    on conflict (endpoint_id) do update set
      received = s.received + excluded.received,
      rejected = s.rejected + excluded.rejected,
      failed = s.failed + excluded.failed,
      last_received_at = coalesce(excluded.last_received_at, s.last_received_at)`;
}

/** The endpoint holding `path` or `name`, whichever is taken (path first, as on KV). */
async function takenBy(
  tx: Tx,
  record: IncomingWebhook,
): Promise<GatewayError | undefined> {
  const rows = await tx<{ id: string; name: string; path: string }[]>`
    select id, name, path from toolgate_incoming_webhooks
    where path = ${record.path} or name = ${record.name}`;
  const byPath = rows.find((row) => row.path === record.path);
  if (byPath) {
    return new GatewayError(
      "CONFLICT",
      `Invalid --url: path ${record.path} is already used by ${byPath.id}`,
    );
  }
  const byName = rows.find((row) => row.name === record.name);
  if (byName) {
    return new GatewayError(
      "CONFLICT",
      `Invalid --name: "${record.name}" is already used by ${byName.id}`,
    );
  }
  return undefined;
}

class PgWebhookStore implements WebhookStore {
  #ctx: PgContext;
  #key: DataKey;

  constructor(ctx: PgContext, key: DataKey) {
    this.#ctx = ctx;
    this.#key = key;
  }

  async addOutgoing(input: NewOutgoingWebhook): Promise<OutgoingWebhook> {
    const record = OutgoingWebhookSchema.parse({
      id: newId("wh"),
      url: input.url,
      events: input.events,
      ...(input.secret ? { secret: input.secret } : {}),
      ...(input.description ? { description: input.description } : {}),
      ...(input.retry_schedule_ms ? { retry_schedule_ms: input.retry_schedule_ms } : {}),
      created_at: new Date().toISOString(),
    });
    const sealed = await sealOutgoing(this.#key, record);
    const stored = await this.#ctx.transaction(async (tx) => {
      const [row] = await tx<{ record: unknown }[]>`
        insert into toolgate_outgoing_webhooks (id, record)
        values (${record.id}, ${tx.json(sealed)})
        on conflict (id) do nothing
        returning record`;
      if (!row) throw new GatewayError("CONFLICT", `Webhook id ${record.id} already exists`);
      await bumpCounter(tx, "registrations");
      return row.record;
    });
    return await openOutgoing(this.#key, stored, record.id);
  }

  async listOutgoing(options: ListOutgoingOptions = {}): Promise<ListedOutgoingWebhook[]> {
    const open = options.unreadableSecrets === "report" ? openOutgoingReporting : openOutgoing;
    // Ids are time-ordered (ULIDs): id order is oldest first, as on KV.
    const rows = await this.#ctx.run((sql) =>
      sql<{ id: string; record: unknown }[]>`
        select id, record from toolgate_outgoing_webhooks order by id`
    );
    return await Promise.all(
      rows.map(({ id, record }) => open(this.#key, record, `webhook ${id}`)),
    );
  }

  async getOutgoing(id: string): Promise<OutgoingWebhook | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ record: unknown }[]>`select record from toolgate_outgoing_webhooks where id = ${id}`
    );
    return row ? await openOutgoing(this.#key, row.record, id) : null;
  }

  updateOutgoing(id: string, patch: OutgoingWebhookPatch): Promise<OutgoingWebhook | null> {
    return this.#ctx.transaction(async (tx) => {
      const [row] = await tx<{ record: unknown }[]>`
        select record from toolgate_outgoing_webhooks where id = ${id} for update`;
      if (!row) return null;
      const next = patchOutgoingWebhook(await openOutgoing(this.#key, row.record, id), patch);
      const sealed = await sealOutgoing(this.#key, next);
      // Enabled again: the dead letters that disabled it no longer count.
      await tx`
        update toolgate_outgoing_webhooks set record = ${tx.json(sealed)},
          dead_letter_streak = case when ${patch.disabled === null} then 0
            else dead_letter_streak end
        where id = ${id}`;
      await bumpCounter(tx, "registrations");
      return next;
    });
  }

  async recordOutcome(id: string, outcome: DeliveryOutcome): Promise<number> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ streak: number }[]>`
        update toolgate_outgoing_webhooks
        set dead_letter_streak = case when ${outcome === "delivered"} then 0
          else dead_letter_streak + 1 end
        where id = ${id}
        returning dead_letter_streak as streak`
    );
    return row ? Number(row.streak) : 0;
  }

  async addIncoming(input: NewIncomingWebhook): Promise<IncomingWebhook> {
    const record = IncomingWebhookSchema.parse({
      id: newId("in"),
      ...input,
      created_at: new Date().toISOString(),
    });
    const sealed = await sealIncoming(this.#key, record);
    for (let attempt = 1; attempt <= ADD_INCOMING_ATTEMPTS; attempt++) {
      const stored = await this.#ctx.transaction(async (tx) => {
        const taken = await takenBy(tx, record);
        if (taken) throw taken;
        // Another instance may register the same name or path meanwhile: the
        // unique constraints decide (this insert waits for its commit).
        const [row] = await tx<{ record: unknown }[]>`
          insert into toolgate_incoming_webhooks (id, name, path, record)
          values (${record.id}, ${record.name}, ${record.path}, ${tx.json(sealed)})
          on conflict do nothing
          returning record`;
        if (!row) {
          // Each statement sees what was committed before it started: the winner's row.
          const lost = await takenBy(tx, record);
          if (lost) throw lost;
          return undefined; // Removed again meanwhile: try once more.
        }
        await bumpCounter(tx, "registrations");
        return row.record;
      });
      if (stored !== undefined) return await openIncoming(this.#key, stored, record.id);
    }
    throw new GatewayError(
      "CONFLICT",
      `Invalid --url or --name: registered concurrently by another process`,
    );
  }

  async listIncoming(): Promise<IncomingWebhook[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ id: string; record: unknown }[]>`
        select id, record from toolgate_incoming_webhooks order by id`
    );
    return await Promise.all(
      rows.map(({ id, record }) => openIncoming(this.#key, record, `endpoint ${id}`)),
    );
  }

  async getIncoming(id: string): Promise<IncomingWebhook | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ record: unknown }[]>`select record from toolgate_incoming_webhooks where id = ${id}`
    );
    return row ? await openIncoming(this.#key, row.record, id) : null;
  }

  remove(id: string): Promise<"outgoing" | "incoming" | null> {
    if (id.startsWith("wh_")) {
      return this.#ctx.transaction(async (tx) => {
        const rows = await tx`delete from toolgate_outgoing_webhooks where id = ${id} returning id`;
        if (!rows.length) return null;
        await bumpCounter(tx, "registrations");
        return "outgoing";
      });
    }
    if (id.startsWith("in_")) {
      return this.#ctx.transaction(async (tx) => {
        const [row] = await tx<{ record: unknown }[]>`
          delete from toolgate_incoming_webhooks where id = ${id} returning record`;
        if (!row) return null;
        // A record that does not parse is reported and stays (the transaction rolls back), as on KV.
        parseRecord(StoredIncomingWebhookSchema, row.record, id);
        await tx`delete from toolgate_incoming_stats where endpoint_id = ${id}`;
        await tx`delete from toolgate_incoming_log where endpoint_id = ${id}`;
        await bumpCounter(tx, "registrations");
        return "incoming";
      });
    }
    return Promise.resolve(null);
  }

  async incomingStats(id: string): Promise<IncomingStats> {
    const [row] = await this.#ctx.run((sql) =>
      sql<
        { received: number; rejected: number; failed: number; last_received_at: string | null }[]
      >`
        select received::float8 as received, rejected::float8 as rejected,
          failed::float8 as failed, last_received_at
        from toolgate_incoming_stats where endpoint_id = ${id}`
    );
    const stats: IncomingStats = { received: 0, rejected: 0, failed: 0 };
    if (!row) return stats;
    stats.received = row.received;
    stats.rejected = row.rejected;
    stats.failed = row.failed;
    if (row.last_received_at !== null) stats.last_received_at = row.last_received_at;
    return stats;
  }

  async addIncomingStats(
    id: string,
    deltas: IncomingStatsDeltas,
    lastReceivedAt?: string,
  ): Promise<void> {
    await this.#ctx.run((sql) => addIncomingStatsIn(sql, id, deltas, lastReceivedAt));
  }
}

/** The outgoing and incoming webhook registrations, incoming stats, on PostgreSQL. */
export function createWebhookStore(ctx: PgContext, key: DataKey): WebhookStore {
  return new PgWebhookStore(ctx, key);
}

/**
 * Seals the webhook secrets an earlier release stored in plain text (run
 * as the store opens; a row changed meanwhile is left to the next open).
 *
 * @returns How many registrations were rewritten.
 */
export async function sealPlaintextSecrets(ctx: PgContext, key: DataKey): Promise<number> {
  let sealed = 0;
  for (const table of ["toolgate_outgoing_webhooks", "toolgate_incoming_webhooks"]) {
    const rows = await ctx.run((sql) =>
      sql<{ id: string; record: unknown }[]>`
        select id, record from ${sql(table)}
        where jsonb_typeof(record -> 'secret') = 'string'
          or jsonb_path_exists(record, '$.previous_secrets[*].secret ? (@.type() == "string")')`
    );
    for (const { id, record } of rows) {
      if (!hasPlaintextSecret(record)) continue;
      const value = await sealStored(key, record);
      const updated = await ctx.run((sql) =>
        sql`update ${sql(table)} set record = ${sql.json(value as never)}
          where id = ${id} and record = ${sql.json(record as never)} returning id`
      );
      sealed += updated.length;
    }
  }
  return sealed;
}
