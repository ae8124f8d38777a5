/**
 * PostgreSQL adapter: leases. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { LeaseStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const LEASES_SCHEMA = ``;

/** The leases, on PostgreSQL. */
export function createLeaseStore(_ctx: PgContext): LeaseStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: leases.${String(name)}`,
      );
    },
  }) as LeaseStore;
}
