/**
 * PostgreSQL adapter: keychain fallback entries. (Placeholder until implemented.)
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { KeychainStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const KEYCHAIN_SCHEMA = ``;

/** The keychain fallback entries, on PostgreSQL. */
export function createKeychainStore(_ctx: PgContext): KeychainStore {
  return new Proxy({}, {
    get(_target, name) {
      throw new GatewayError(
        "INTERNAL",
        `Not implemented on PostgreSQL yet: keychain.${String(name)}`,
      );
    },
  }) as KeychainStore;
}
