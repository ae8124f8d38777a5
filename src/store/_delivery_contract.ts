/**
 * What the storage contract fixes alike for both delivery adapters: the
 * claim options refused, the orders answers come in, the DLQ page limit
 * refused, and the records a log append and a DLQ replay write.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import {
  type ClaimDueOptions,
  type DeliveryLogEntry,
  type DeliveryOp,
  type DeliveryRecord,
  type DlqRecord,
  newLogEntryId,
  type OutboxEvent,
  type StoredDelivery,
} from "./records.ts";

/**
 * Refuses bad claim options, with the same messages on both adapters.
 *
 * @throws {GatewayError} `INTERNAL` on an empty owner, a limit below 1 or a time not finite.
 */
export function checkClaimOptions(options: ClaimDueOptions): void {
  const { owner, now, until, dueBefore, limit } = options;
  if (typeof owner !== "string" || owner === "") {
    throw new GatewayError("INTERNAL", "Cannot claim deliveries: the owner is empty");
  }
  if (!Number.isInteger(limit) || limit < 1) {
    throw new GatewayError("INTERNAL", `Invalid limit ${limit}: use an integer of 1 or more`);
  }
  for (const [name, value] of [["now", now], ["until", until], ["dueBefore", dueBefore]]) {
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new GatewayError("INTERNAL", `Invalid ${name} ${value}: use epoch milliseconds`);
    }
  }
}

/** Where a delivery stands in the order of a claim's answer. */
export type DuePosition = Pick<DeliveryRecord, "next_attempt_at" | "event_id" | "webhook_id">;

/** The order claimed deliveries come in: earliest due first, ties by event id, then webhook id. */
export function compareDueOrder(x: DuePosition, y: DuePosition): number {
  if (x.next_attempt_at !== y.next_attempt_at) return x.next_attempt_at - y.next_attempt_at;
  if (x.event_id !== y.event_id) return x.event_id < y.event_id ? -1 : 1;
  return x.webhook_id < y.webhook_id ? -1 : x.webhook_id > y.webhook_id ? 1 : 0;
}

/** The order pending deliveries are listed in: by event id (oldest first). */
export function byEventId(a: StoredDelivery, b: StoredDelivery): number {
  return a.record.event_id < b.record.event_id ? -1 : a.record.event_id > b.record.event_id ? 1 : 0;
}

/**
 * Refuses a DLQ page limit that is not a whole number from 0.
 *
 * @throws {GatewayError} `USAGE` naming the limit.
 */
export function checkDlqPageLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 0) {
    throw new GatewayError("USAGE", `Invalid limit ${limit}: use a whole number from 0`);
  }
}

/** The op that appends `entry` to a webhook's delivery log (its id from its time). */
export function deliveryLogOp(webhookId: string, entry: DeliveryLogEntry): DeliveryOp {
  const entry_id = newLogEntryId(Date.parse(entry.at) || Date.now());
  return { op: "log", webhook_id: webhookId, entry_id, entry };
}

/** The event a DLQ replay puts back: the record's event id and type, with its body. */
export function replayEvent(record: DlqRecord, timestamp: string, body: Uint8Array): OutboxEvent {
  return { id: record.event_id, type: record.event_type, timestamp, body };
}
