/**
 * Opens the store a configuration names: the embedded Deno KV file of the
 * data directory by default, or a PostgreSQL database. The PostgreSQL
 * adapter and its driver load only when a database is named (a stdio
 * server on KV never loads them).
 *
 * @module
 */
import { openKvStore, SCHEMA_VERSION } from "./kv/kv_store.ts";
import { DataKey } from "./data_key.ts";
import { type KeyStatus, readKeyStatus } from "./key_check.ts";
import type { Store } from "./store.ts";

/** Options of {@linkcode openStore}. */
export interface OpenStoreOptions {
  /**
   * Data directory; created with mode 0700 when missing, made private again
   * (0700, its files 0600) when it exists.
   */
  dataDir: string;
  /** Open an in-memory KV database instead of the file (unit tests). @default false */
  memory?: boolean;
  /** A `postgres://` URL: keep everything in that PostgreSQL database instead. */
  url?: string;
  /** PostgreSQL pool settings (with `url`). */
  pool?: { max?: number; statementTimeoutMs?: number; connectTimeoutMs?: number };
  /**
   * The key sealing secrets at rest (`TOOLGATE_SECRET_KEY`, 32 bytes).
   * @default the data directory's `keychain.key` (created when first needed)
   */
  secretKey?: Uint8Array;
}

/**
 * Opens the store of a data directory: its Deno KV file, or the PostgreSQL
 * database `url` names (migrated to this release's schema on open).
 *
 * @throws {GatewayError} `STORE_CORRUPT` when the data cannot be read, or
 * was written by a newer release (nothing is repaired or overwritten);
 * `STORE_UNAVAILABLE` when the database cannot be reached.
 */
export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const { dataDir, url, pool, secretKey } = options;
  if (!url) return await openKvStore(options);
  const { openPostgresStore } = await import("./postgres/postgres_store.ts");
  return await openPostgresStore({ url, dataDir, pool, secretKey });
}

function postgresModules() {
  return Promise.all([
    import("./postgres/connection.ts"),
    import("./postgres/migrations.ts"),
    import("./postgres/postgres_store.ts"),
  ]);
}

/** Where a store's schema stands: see {@linkcode storeSchemaStatus}. */
export interface StoreSchemaStatus {
  /** Which adapter holds the data. */
  kind: "kv" | "postgres";
  /** The KV file, or the database URL without its password. */
  location: string;
  /** The schema version the data has (0: never migrated). */
  current: number;
  /** The schema version this release writes. */
  latest: number;
  /** Applied migrations, oldest first (PostgreSQL; empty for KV). */
  applied: { version: number; name: string; applied_at: string }[];
  /** Migrations this release would apply, in order. */
  pending: { version: number; name: string }[];
  /** This process's secret key beside the store's record (absent while the schema is not this release's). */
  key?: KeyStatus;
}

/**
 * Reports the schema of the store `options` name, changing nothing.
 *
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be reached.
 */
export async function storeSchemaStatus(options: OpenStoreOptions): Promise<StoreSchemaStatus> {
  const { dataDir, url, pool, secretKey } = options;
  if (!url) {
    const store = await openKvStore({ dataDir, secretKey });
    try {
      const current = await store.schemaVersion();
      return {
        kind: "kv",
        location: store.location,
        current,
        latest: SCHEMA_VERSION,
        applied: [],
        pending: [],
        key: await readKeyStatus(store),
      };
    } finally {
      await store.close();
    }
  }
  const [{ describeDatabase, openPostgres }, { migrationStatus }, { PostgresStore }] =
    await postgresModules();
  const sql = openPostgres(url, { ...pool, max: 1 });
  try {
    const status = await migrationStatus(sql);
    // Reads only: a store on this pool, never migrated nor sealed through.
    const key = status.current === status.latest
      ? await readKeyStatus(
        new PostgresStore(sql, dataDir, new DataKey({ dataDir, key: secretKey })),
      )
      : undefined;
    return {
      kind: "postgres",
      location: describeDatabase(sql),
      current: status.current,
      latest: status.latest,
      applied: status.applied.map(({ version, name, applied_at }) => ({
        version,
        name,
        applied_at: applied_at.toISOString(),
      })),
      pending: status.pending,
      ...(key ? { key } : {}),
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * Brings the store's schema up to this release, and says which migrations
 * ran (none for KV, whose file is versioned as it opens).
 *
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be
 * reached; `STORE_CORRUPT` when it was migrated by a newer toolgate or a
 * migration failed (it is rolled back whole).
 */
export async function migrateStore(
  options: OpenStoreOptions,
): Promise<{ applied: number[]; status: StoreSchemaStatus }> {
  const { url, pool } = options;
  let applied: number[] = [];
  if (url) {
    const [{ openPostgres }, { migrate }] = await postgresModules();
    const sql = openPostgres(url, { ...pool, max: 1, statementTimeoutMs: 0 });
    try {
      applied = await migrate(sql);
    } finally {
      await sql.end({ timeout: 5 });
    }
  } else {
    await (await openKvStore(options)).close();
  }
  return { applied, status: await storeSchemaStatus(options) };
}
