/**
 * PostgreSQL adapter: incoming jobs. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { IncomingStore, StagedWrites } from "../store.ts";
import type { PgContext, Tx } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const INCOMING_SCHEMA = ``;

/** The incoming jobs, on PostgreSQL. */
export function createIncomingStore(_ctx: PgContext): IncomingStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: incoming.${String(name)}`,
      );
    },
  }) as IncomingStore;
}

/** Writes staged incoming jobs inside the caller's transaction (the audit entry's). */
export function applyStagedWrites(_tx: Tx, _writes: readonly StagedWrites[]): Promise<void> {
  throw new GatewayError("INTERNAL", "Not implemented on PostgreSQL yet: applyStagedWrites");
}
