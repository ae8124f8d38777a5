/**
 * PostgreSQL adapter: the delivery outbox (events and their pending
 * deliveries), the dead-letter queue and the per-webhook delivery logs.
 *
 * A pending delivery is one row of `toolgate_deliveries`, keyed by event and
 * webhook, in one of two forms, as in the Deno KV adapter: an entry of its
 * event's fan-out record (`fanout`: owed its first attempt; the entries of
 * one event share its type, creation time and due time) or a delivery record
 * of its own (a retry, or a DLQ replay). A delivery record wins over a fan-out
 * entry of the same webhook: `put_delivery` turns the row into a record of
 * its own, and `put_fanout` (which writes an event's whole fan-out list,
 * deleting the entries it no longer names) leaves such rows alone.
 *
 * Every row keeps the version stamp of the transaction that last wrote it
 * ({@linkcode nextStamp}); reads hand it out and `collect_event` deletes an
 * event only while its stamp is unchanged and no row of `toolgate_deliveries`
 * refers to it (the storage contract's rule: an event lives as long as any
 * delivery of it is pending, whatever the requester believes). Writes go through a
 * group-committing {@linkcode DeliveryWriter}: concurrent units share one
 * transaction (each unit stays atomic), applied in few set-based statements,
 * pipelined on one connection.
 *
 * Several instances share the tables: writes are upserts keyed by primary
 * key, a collection is a conditional delete, a DLQ replay an insert guarded
 * by the primary key, and claims of due deliveries take `for update skip
 * locked` rows under one transaction-level advisory lock, so a fan-out is
 * claimed whole by one instance.
 *
 * The jobs live apart: the schema (`_delivery_schema.ts`), the ops refused
 * (`_delivery_check.ts`) and costed (`_delivery_cost.ts`), their layering
 * (`_delivery_layers.ts`) and application in a transaction
 * (`_delivery_apply.ts`), the writer (`_delivery_writer.ts`), claiming due
 * deliveries (`_claim_due.ts`), rows read back (`_delivery_rows.ts`) and the
 * store class (`_delivery_store.ts`). What both adapters do alike is in
 * `../_delivery_contract.ts` and `../_delivery_units.ts`.
 *
 * @module
 */
import type { DeliveryStore } from "../store.ts";
import type { PgContext } from "./_context.ts";
import { PostgresDeliveryStore } from "./_delivery_store.ts";

export { DELIVERIES_SCHEMA } from "./_delivery_schema.ts";
export { applyDeliveryOps } from "./_delivery_apply.ts";
export { PostgresDeliveryWriter } from "./_delivery_writer.ts";
export {
  CLAIM_LOCK_KEY,
  claimDueDeliveries,
  type ClaimDueDeliveriesOptions,
} from "./_claim_due.ts";
export { PostgresDeliveryStore } from "./_delivery_store.ts";

/** The delivery outbox, DLQ and delivery logs, on PostgreSQL. */
export function createDeliveryStore(ctx: PgContext): DeliveryStore {
  return new PostgresDeliveryStore(ctx);
}
