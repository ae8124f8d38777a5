/**
 * Storage: the only module that touches Deno KV. One database file per data
 * directory (`toolgate.kv`), a typed key layout, zod-validated records.
 *
 * @module
 */
export { KV_FILE, openStore, SCHEMA_VERSION, Store, withLockRetry } from "./store.ts";
export type { OpenStoreOptions } from "./store.ts";
export * from "./webhooks.ts";
export * from "./deliveries.ts";
export * from "./memory.ts";
export * from "./keychain.ts";
export * from "./incoming.ts";
export * from "./audit.ts";
export * from "./upstreams.ts";
export * from "./lease.ts";
export type { StagedWrites } from "./_staged.ts";
