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
  ApprovalStore,
  AuditLimits,
  AuditStore,
  ChangeFeed,
  ChangeName,
  ConsoleSessionStore,
  DeliveryStore,
  DeliveryWriter,
  IncomingStore,
  KeychainStore,
  KeyCheckStore,
  LeaseStore,
  MemoryStore,
  PinStore,
  PolicyStore,
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
export {
  DATA_KEY_BYTES,
  DataKey,
  decodeSecretKey,
  KEY_CHECK_LABEL,
  KEY_FILE,
  KEYCHAIN_AAD_PREFIX,
  keyCheckValue,
} from "./data_key.ts";
export type { DataKeyOptions, DataKeySource, KeyCheckValue } from "./data_key.ts";
export { ensureKey, keySealGuard, mismatchError, readKeyStatus } from "./key_check.ts";
export type { EnsureKeyOptions, KeyState, KeyStatus } from "./key_check.ts";
