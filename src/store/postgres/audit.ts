/**
 * PostgreSQL adapter: the audit chain. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { AuditStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const AUDIT_SCHEMA = ``;

/** The the audit chain, on PostgreSQL. */
export function createAuditStore(_ctx: PgContext): AuditStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: audit.${String(name)}`,
      );
    },
  }) as AuditStore;
}
