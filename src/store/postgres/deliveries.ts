/**
 * PostgreSQL adapter: the delivery outbox, DLQ and delivery logs. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { DeliveryStore } from "../store.ts";
import type { PgContext, Tx } from "./_context.ts";
import type { DeliveryOp } from "../records.ts";

/** Tables of this part, in migration 1. */
export const DELIVERIES_SCHEMA = ``;

/** The the delivery outbox, DLQ and delivery logs, on PostgreSQL. */
export function createDeliveryStore(_ctx: PgContext): DeliveryStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: deliveries.${String(name)}`,
      );
    },
  }) as DeliveryStore;
}

/**
 * Writes delivery ops (no `collect_event`) inside the caller's transaction,
 * stamping what they write with `stamp`: how deliveries ride in the audit
 * log's commit.
 */
export function applyDeliveryOps(
  _tx: Tx,
  _ops: readonly DeliveryOp[],
  _stamp: string,
): Promise<void> {
  throw new GatewayError("INTERNAL", "Not implemented on PostgreSQL yet: applyDeliveryOps");
}
