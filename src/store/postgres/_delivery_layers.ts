/**
 * The planning of delivery ops for PostgreSQL: layers of ops that touch
 * distinct rows, each written by kind in one statement, rows in key order.
 *
 * @module
 */
import type { DeliveryOp } from "../records.ts";

/**
 * Splits ops into layers, in order: an op goes one layer past the last op
 * before it that touches the same rows, so the ops of one layer touch
 * distinct rows and commute, and each layer can be written with one
 * statement per kind of op. The `collect_event` ops form the last layer:
 * whether an event is still referenced is decided on what the commit leaves.
 */
export function layers(ops: readonly DeliveryOp[]): number[][] {
  const out: number[][] = [];
  const last = new Map<string, number>();
  // Per event: the last layer of any op on its deliveries, and of put_fanout.
  const anyDelivery = new Map<string, number>();
  const fanout = new Map<string, number>();
  const place = (index: number, layer: number) => {
    (out[layer] ??= []).push(index);
    return layer;
  };
  const collections: number[] = [];
  for (const [index, op] of ops.entries()) {
    switch (op.op) {
      case "collect_event":
        // Decided on what the whole commit leaves: after every other op.
        collections.push(index);
        break;
      case "put_delivery":
      case "delete_delivery": {
        const eventId = op.op === "put_delivery" ? op.delivery.event_id : op.event_id;
        const webhookId = op.op === "put_delivery" ? op.delivery.webhook_id : op.webhook_id;
        const key = `d\0${eventId}\0${webhookId}`;
        const layer = place(
          index,
          1 + Math.max(last.get(key) ?? -1, fanout.get(eventId) ?? -1),
        );
        last.set(key, layer);
        anyDelivery.set(eventId, Math.max(anyDelivery.get(eventId) ?? -1, layer));
        break;
      }
      case "put_fanout": {
        const layer = place(index, 1 + (anyDelivery.get(op.event_id) ?? -1));
        fanout.set(op.event_id, layer);
        anyDelivery.set(op.event_id, layer);
        break;
      }
      default: {
        const key = rowKey(op);
        const layer = place(index, 1 + (last.get(key) ?? -1));
        last.set(key, layer);
      }
    }
  }
  if (collections.length) out.push(collections);
  return out;
}

function rowKey(
  op: Exclude<DeliveryOp, { op: "put_delivery" | "delete_delivery" | "put_fanout" }>,
): string {
  switch (op.op) {
    case "put_event":
      return `e\0${op.event.id}`;
    case "collect_event":
      return `e\0${op.event_id}`;
    case "log":
    case "delete_log":
      return `l\0${op.webhook_id}\0${op.entry_id}`;
    case "put_dlq":
      return `q\0${op.record.dlq_id}`;
    case "delete_dlq":
      return `q\0${op.dlq_id}`;
  }
}

/** Ops of one layer, by kind. */
export type ByKind = {
  [K in DeliveryOp["op"]]: { index: number; op: Extract<DeliveryOp, { op: K }> }[];
};

export function byKind(ops: readonly DeliveryOp[], indexes: readonly number[]): ByKind {
  const out: ByKind = {
    put_event: [],
    put_delivery: [],
    delete_delivery: [],
    put_fanout: [],
    log: [],
    delete_log: [],
    put_dlq: [],
    delete_dlq: [],
    collect_event: [],
  };
  for (const index of indexes) {
    const op = ops[index];
    (out[op.op] as { index: number; op: DeliveryOp }[]).push({ index, op });
  }
  // Rows in key order: transactions of several instances lock them in the same order.
  for (const list of Object.values(out) as { op: DeliveryOp }[][]) {
    if (list.length > 1) list.sort((a, b) => compareText(sortKey(a.op), sortKey(b.op)));
  }
  return out;
}

function sortKey(op: DeliveryOp): string {
  switch (op.op) {
    case "put_delivery":
      return `${op.delivery.event_id}\0${op.delivery.webhook_id}`;
    case "delete_delivery":
      return `${op.event_id}\0${op.webhook_id}`;
    case "put_fanout":
      return op.event_id;
    default:
      return rowKey(op);
  }
}

export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
