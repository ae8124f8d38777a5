/**
 * Storage: everything toolgate keeps, behind one interface
 * ({@linkcode Store}) with two adapters, Deno KV (embedded, the default) and
 * PostgreSQL. Callers open a store with {@linkcode openStore} and never learn
 * which adapter they got.
 *
 * @module
 */
export { migrateStore, openStore, storeSchemaStatus } from "./open.ts";
export type { OpenStoreOptions, StoreSchemaStatus } from "./open.ts";
export { COPY_KINDS, copyStore } from "./copy.ts";
export type { CopyCounts, CopyKind, CopyStoreOptions, CopyStoreResult } from "./copy.ts";
export type {
  ApiKeyStore,
  AuditLimits,
  AuditStore,
  ChangeFeed,
  ChangeName,
  ConsoleSessionStore,
  DeliveryStore,
  DeliveryWriter,
  IncomingStore,
  KeychainStore,
  LeaseStore,
  MemoryStore,
  RateLimitStore,
  StagedWrites,
  Store,
  StoreCost,
  UpstreamStore,
  VirtualServerStore,
  WebhookStore,
} from "./store.ts";
export * from "./records.ts";
export { MemoryRateLimitStore, takeToken, TOKEN_EPSILON, tokensAnswer } from "./rate_buckets.ts";
export type { BucketState, RateRule, RateTake } from "./rate_buckets.ts";
export { DATA_KEY_BYTES, DataKey, decodeSecretKey, KEY_FILE } from "./data_key.ts";
export type { DataKeyOptions, DataKeySource } from "./data_key.ts";
