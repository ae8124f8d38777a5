/**
 * Durable outgoing-webhook delivery storage: the outbox (events and their
 * pending deliveries), the per-webhook delivery log and the dead-letter queue.
 *
 * A pending delivery is stored in one of two forms. Until its first attempt
 * has failed, it is a webhook id in its event's fan-out record (one record
 * per event, however many webhooks it goes to, so queuing an event costs two
 * small writes). A delivery that needs a retry, or replays a DLQ record, has
 * a delivery record of its own with its attempts. The commit that records an
 * outcome rewrites the fan-out record without that webhook.
 *
 * Writes from the dispatcher go through a {@linkcode DeliveryWriter}, which
 * group-commits many small writes into one KV atomic operation (within the KV
 * limits of 1000 mutations, 100 checks and about 800 KiB per commit) to go past
 * the commit ceiling of Deno KV.
 *
 * Pending deliveries are found by due time through a due index
 * (`outboxDueKey`, `outboxFanoutDueKey`), kept in the commits that write the
 * records. The entry of a record's earlier due time may be left behind when
 * the writer does not know it; {@linkcode claimDueDeliveries} checks every
 * entry it uses against the record and deletes stale ones as it meets them.
 * Claims live in the memory of the {@linkcode KvStore} ({@linkcode DeliveryClaims}):
 * one process per KV file sends deliveries, the holder of the delivery lease.
 *
 * The jobs live apart: the planning of ops into atomic units within the KV
 * limits (`_delivery_plan.ts`), the writer (`_delivery_writer.ts`) with its
 * collections (`_delivery_collections.ts`), the dead-letter queue's index
 * (`_dlq_index.ts`) and records (`_dlq_records.ts`), the outbox reads
 * (`_outbox_reads.ts`), the delivery log (`_delivery_log.ts`), the claims
 * (`_delivery_claims.ts`), claiming due deliveries (`_claim_due.ts`) and the
 * due index build (`_outbox_due_index.ts`). What both adapters do alike is in
 * `../_delivery_contract.ts` and `../_delivery_units.ts`.
 *
 * @module
 */
export {
  applyDeliveryOps,
  BODY_CHUNK_BYTES,
  deliveryOpsCost,
  MAX_CHECKED_WEBHOOKS,
} from "./_delivery_plan.ts";
export { DeliveryWriter } from "./_delivery_writer.ts";
export { ensureDlqIndex } from "./_dlq_index.ts";
export {
  bumpDeliveriesVersion,
  collectEventIfUnreferenced,
  deliveriesVersion,
  listOrphanDeliveries,
  listPendingDeliveries,
  readOutboxEvent,
} from "./_outbox_reads.ts";
export {
  countDlqRecords,
  deleteDlqRecords,
  findDlqBody,
  getDlqRecord,
  listDlqRecords,
  readDlqBody,
  requeueDlqRecord,
} from "./_dlq_records.ts";
export {
  appendDeliveryLog,
  deleteDeliveryLog,
  listDeliveryLogIds,
  readDeliveryLog,
  trimDeliveryLog,
} from "./_delivery_log.ts";
export { type ClaimEffects, DeliveryClaims } from "./_delivery_claims.ts";
export { CLAIM_SCAN_SLACK, claimDueDeliveries } from "./_claim_due.ts";
export { buildDueIndex } from "./_outbox_due_index.ts";
