/**
 * PostgreSQL adapter: upstream registrations and server states. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { UpstreamStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const UPSTREAMS_SCHEMA = ``;

/** The upstream registrations and server states, on PostgreSQL. */
export function createUpstreamStore(_ctx: PgContext): UpstreamStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: upstreams.${String(name)}`,
      );
    },
  }) as UpstreamStore;
}
