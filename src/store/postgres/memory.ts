/**
 * PostgreSQL adapter: memory notes. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { MemoryStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const MEMORY_SCHEMA = ``;

/** The memory notes, on PostgreSQL. */
export function createMemoryStore(_ctx: PgContext): MemoryStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: memory.${String(name)}`,
      );
    },
  }) as MemoryStore;
}
