/**
 * Claims of due deliveries on PostgreSQL, shared by every instance: taken
 * under one advisory lock with `for update skip locked`, renewed and given
 * back row by row in key order.
 *
 * @module
 */
import type { StoredDelivery } from "../records.ts";
import { checkClaimOptions, compareDueOrder } from "../_delivery_contract.ts";
import type { PgContext } from "./_context.ts";
import { dueMs, retrying } from "./_delivery_apply.ts";
import { type DeliveryRow, storedDelivery } from "./_delivery_rows.ts";

/**
 * The advisory lock every {@linkcode DeliveryStore.claimDue} transaction
 * holds, so that two instances never split one fan-out between them:
 * "tgclaim" in ASCII.
 */
export const CLAIM_LOCK_KEY = 0x7467636c61696dn;

/** Options of {@linkcode DeliveryStore.claimDue}. */
export interface ClaimDueDeliveriesOptions {
  /** The claiming process's owner id. */
  owner: string;
  /** When the claims lapse unless renewed (epoch ms). */
  until: number;
  /** The clock, epoch ms: claims that lapsed by then are free. */
  now: number;
  /** Only deliveries due before this (epoch ms). */
  dueBefore: number;
  /** At most this many deliveries (a fan-out's other entries come on top). */
  limit: number;
  /** Leave the deliveries of these webhooks alone. @default [] */
  excludeWebhooks?: readonly string[];
}

/**
 * Claims pending deliveries due before `dueBefore`, earliest first: those
 * nobody holds (or whose claim lapsed by `now`), leaving rows another
 * transaction is writing (`for update skip locked`) and excluded webhooks
 * alone. A fan-out is claimed whole: with one of its entries, every free
 * entry of that event's fan-out comes too, past `limit` if need be. Claims
 * run one at a time across instances (an advisory lock), so no two instances
 * split a fan-out.
 *
 * @returns The claimed deliveries, earliest due first.
 * @throws {GatewayError} `INTERNAL` on bad options (empty owner, limit below 1, times not finite).
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be reached.
 * @example
 * ```ts
 * const now = Date.now();
 * const mine = await claimDueDeliveries(ctx, {
 *   owner: "srv_1", until: now + 30_000, now, dueBefore: now + 1000, limit: 100,
 * });
 * ```
 */
export async function claimDueDeliveries(
  ctx: PgContext,
  options: ClaimDueDeliveriesOptions,
): Promise<StoredDelivery[]> {
  checkClaimOptions(options);
  const { owner, until, dueBefore, limit, excludeWebhooks = [] } = options;
  // Stored times are whole ms: a claim lapsed by a fractional `now` lapsed by its floor.
  const now = Math.floor(options.now);
  const rows = await retrying(ctx, async (tx) => {
    await tx`select pg_advisory_xact_lock(${CLAIM_LOCK_KEY.toString()}::bigint)`;
    return await tx<DeliveryRow[]>`
      with picked as (
        select event_id, webhook_id, fanout from toolgate_deliveries
        where next_attempt_at < ${dueMs(dueBefore)}
          and (claimed_by is null or claim_expires_at <= ${now})
          and webhook_id <> all(${[...excludeWebhooks]}::text[])
        order by next_attempt_at, event_id, webhook_id
        limit ${limit}
        for update skip locked
      ), rest as (
        select t.event_id, t.webhook_id from toolgate_deliveries t
        where t.fanout and t.event_id in (select event_id from picked where fanout)
          and (t.claimed_by is null or t.claim_expires_at <= ${now})
        for update
      ), claimed as (
        select event_id, webhook_id from picked union select event_id, webhook_id from rest
      )
      update toolgate_deliveries t set claimed_by = ${owner}, claim_expires_at = ${dueMs(until)}
      from claimed c
      where t.event_id = c.event_id and t.webhook_id = c.webhook_id
      returning t.event_id, t.webhook_id, t.fanout, t.event_type,
        t.attempt_count, t.next_attempt_at::float8 as next_attempt_at, t.created_at,
        t.attempts, t.dlq_id, t.version`;
  });
  return [...rows].sort(compareDueOrder).map(storedDelivery);
}

/**
 * Sets the claim expiry of `owner`'s claims (all, or those of `keys`) to
 * `until`, or gives them back (`null`). Rows are locked in key order, as the
 * writer's transactions lock them: an update in scan order could deadlock
 * with a commit of the same rows.
 *
 * @returns How many claims it changed.
 */
export async function updateClaims(
  ctx: PgContext,
  owner: string,
  change: { until: number | null; keys?: readonly { event_id: string; webhook_id: string }[] },
): Promise<number> {
  const { until, keys } = change;
  const result = await retrying(ctx, (tx) =>
    tx`
      update toolgate_deliveries t set
        claimed_by = case when ${until === null} then null else t.claimed_by end,
        claim_expires_at = ${until === null ? null : dueMs(until)}
      from (
        select d.event_id, d.webhook_id from toolgate_deliveries d
        where d.claimed_by = ${owner}
          and (${keys === undefined}
            or (d.event_id, d.webhook_id) in (
              select * from unnest(${(keys ?? []).map((k) => k.event_id)}::text[],
                ${(keys ?? []).map((k) => k.webhook_id)}::text[])))
        order by d.event_id, d.webhook_id
        for update
      ) l
      where t.event_id = l.event_id and t.webhook_id = l.webhook_id`);
  return result.count;
}
