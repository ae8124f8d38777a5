/**
 * Opens the store a configuration names: the embedded Deno KV file of the
 * data directory by default, or a PostgreSQL database.
 *
 * @module
 */
import { openKvStore } from "./kv/kv_store.ts";
import type { Store } from "./store.ts";

/** Options of {@linkcode openStore}. */
export interface OpenStoreOptions {
  /** Data directory; created with mode 0700 when missing. */
  dataDir: string;
  /** Open an in-memory KV database instead of the file (unit tests). @default false */
  memory?: boolean;
}

/**
 * Opens the store of a data directory.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when the data cannot be read, or
 * was written by a newer release. Nothing is repaired or overwritten.
 */
export function openStore(options: OpenStoreOptions): Promise<Store> {
  return openKvStore(options);
}
