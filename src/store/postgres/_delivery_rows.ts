/**
 * Rows of the PostgreSQL delivery tables read back as the storage contract's
 * records, validated.
 *
 * @module
 */
import { z } from "zod";
import { parseRecord } from "../_records.ts";
import {
  BytesSchema,
  DeliveryRecordSchema,
  type DlqRecord,
  DlqRecordSchema,
  type StoredDelivery,
} from "../records.ts";

export interface DeliveryRow {
  event_id: string;
  webhook_id: string;
  fanout: boolean;
  event_type: string;
  attempt_count: number;
  next_attempt_at: number;
  created_at: string;
  attempts: unknown;
  dlq_id: string | null;
  version: string;
}

/** A row of `toolgate_deliveries` as a stored delivery, validated. */
export function storedDelivery(row: DeliveryRow): StoredDelivery {
  const record = parseRecord(
    DeliveryRecordSchema,
    {
      event_id: row.event_id,
      event_type: row.event_type,
      webhook_id: row.webhook_id,
      attempt_count: row.fanout ? 0 : row.attempt_count,
      next_attempt_at: row.next_attempt_at,
      created_at: row.created_at,
      attempts: row.fanout ? [] : row.attempts,
      ...(!row.fanout && row.dlq_id !== null ? { dlq_id: row.dlq_id } : {}),
    },
    row.fanout
      ? `fan-out of ${row.event_id} (${row.webhook_id})`
      : `delivery ${row.event_id}/${row.webhook_id}`,
  );
  return { record, versionstamp: row.version, fanout: row.fanout };
}

export const StoredEventRowSchema = z.object({
  event_id: z.string(),
  event_type: z.string(),
  event_timestamp: z.string(),
  body: BytesSchema,
  traceparent: z.string().nullable(),
  version: z.string(),
});

/** A plain `Uint8Array` copy of the driver's `Buffer`. */
export function plainBytes(value: unknown): unknown {
  return value instanceof Uint8Array ? new Uint8Array(value) : value;
}

export function dlqRecord(row: { dlq_id: string; record: unknown; size: number }): DlqRecord {
  const stored = row.record !== null && typeof row.record === "object" ? row.record : {};
  return parseRecord(
    DlqRecordSchema,
    { ...stored, size: Number(row.size) },
    `DLQ record ${row.dlq_id}`,
  );
}
