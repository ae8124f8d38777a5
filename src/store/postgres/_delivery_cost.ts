/**
 * What delivery ops cost a PostgreSQL commit: rows written or deleted, and
 * their rough bytes (what bounds a group commit and the audit log's).
 *
 * @module
 */
import type { DeliveryOp } from "../records.ts";
import type { StoreCost } from "../store.ts";

/** Bytes counted per row beside its keys and values. */
export const ROW_OVERHEAD_BYTES = 40;

/** A rough size of a value as stored (JSON text), without serializing it. */
function approxBytes(value: unknown): number {
  switch (typeof value) {
    case "string":
      return value.length + 2;
    case "number":
    case "bigint":
      return 8;
    case "boolean":
      return 5;
    case "object": {
      if (value === null) return 4;
      if (value instanceof Uint8Array) return value.byteLength;
      let size = 2;
      if (Array.isArray(value)) {
        for (const item of value) size += approxBytes(item) + 1;
      } else {
        const record = value as Record<string, unknown>;
        for (const key in record) size += key.length + 4 + approxBytes(record[key]);
      }
      return size;
    }
    default:
      return 0;
  }
}

/** Rows written or deleted by `op`, and their rough bytes. */
function opCost(op: DeliveryOp): StoreCost {
  let mutations = 1;
  let keyBytes: number;
  let valueBytes = 0;
  switch (op.op) {
    case "put_event":
      keyBytes = op.event.id.length;
      valueBytes = op.event.type.length + op.event.timestamp.length + op.event.body.byteLength +
        (op.event.traceparent?.length ?? 0);
      break;
    case "put_delivery":
      keyBytes = op.delivery.event_id.length + op.delivery.webhook_id.length;
      valueBytes = approxBytes(op.delivery);
      break;
    case "delete_delivery":
      keyBytes = op.event_id.length + op.webhook_id.length;
      break;
    case "put_fanout": {
      // One delete of the entries it drops, one row per entry it names.
      const ids = op.fanout.webhook_ids;
      mutations += ids.length;
      keyBytes = op.event_id.length * (ids.length + 1);
      for (const id of ids) keyBytes += id.length;
      valueBytes = ids.length *
        (op.fanout.event_type.length + op.fanout.created_at.length + ROW_OVERHEAD_BYTES);
      break;
    }
    case "log":
      keyBytes = op.webhook_id.length + op.entry_id.length;
      valueBytes = approxBytes(op.entry);
      break;
    case "delete_log":
      keyBytes = op.webhook_id.length + op.entry_id.length;
      break;
    case "put_dlq":
      keyBytes = op.record.dlq_id.length;
      valueBytes = approxBytes(op.record) + op.body.byteLength;
      break;
    case "delete_dlq":
      keyBytes = op.dlq_id.length;
      break;
    case "collect_event":
      keyBytes = op.event_id.length + op.versionstamp.length;
      break;
  }
  return { mutations, keyBytes, bytes: keyBytes + valueBytes + ROW_OVERHEAD_BYTES * mutations };
}

export function opsCost(ops: readonly DeliveryOp[]): StoreCost {
  const total: StoreCost = { mutations: 0, keyBytes: 0, bytes: 0 };
  for (const op of ops) {
    const cost = opCost(op);
    total.mutations += cost.mutations;
    total.keyBytes += cost.keyBytes;
    total.bytes += cost.bytes;
  }
  return total;
}
