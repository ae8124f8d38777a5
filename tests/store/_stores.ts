/**
 * Fresh stores of either adapter, for tests that must hold on both (the
 * storage contract, the delivery lifecycle): a KV file in a temp dir, or a
 * database of a throwaway PostgreSQL cluster made from a migrated template
 * (one cluster per test file).
 *
 * @module
 */
import postgres from "postgres";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import { migrate } from "../../src/store/postgres/migrations.ts";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";
import type { Store } from "../../src/store/mod.ts";
import { startPostgres, type ThrowawayPostgres } from "../_postgres.ts";

/** A fresh, empty store and its data dir, removed on dispose. */
export interface FreshStore extends AsyncDisposable {
  adapter: "kv" | "postgres";
  store: Store;
  dataDir: string;
  /** The URL of its database (PostgreSQL), for child processes. */
  url?: string;
  /** Another handle on the same data, as another process would open (closed on dispose). */
  another(): Promise<Store>;
}

/** Makes fresh stores of one adapter. */
export type StoreMaker = () => Promise<FreshStore>;

/**
 * A fresh store in a new temp data dir, opened by `open` (again for each
 * `another()`); every handle is closed and the dir removed on dispose, then `cleanup` runs.
 */
async function freshStore(
  adapter: FreshStore["adapter"],
  open: (dataDir: string) => Promise<Store>,
  extra: { url?: string; cleanup?: () => Promise<unknown> } = {},
): Promise<FreshStore> {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-store-" });
  const opened: Store[] = [];
  const another = async () => {
    const store = await open(dataDir);
    opened.push(store);
    return store;
  };
  return {
    adapter,
    store: await another(),
    dataDir,
    ...(extra.url !== undefined ? { url: extra.url } : {}),
    another,
    async [Symbol.asyncDispose]() {
      for (const store of opened) await store.close();
      await Deno.remove(dataDir, { recursive: true });
      await extra.cleanup?.();
    },
  };
}

/** Fresh KV stores, each a file in a temp dir of its own. */
export function kvStores(): StoreMaker {
  return () => freshStore("kv", (dataDir) => openKvStore({ dataDir }));
}

/** A throwaway cluster whose {@linkcode PostgresStores.fresh} makes a new database each call. */
export interface PostgresStores extends AsyncDisposable {
  fresh: StoreMaker;
  pg: ThrowawayPostgres;
}

/** Starts a throwaway PostgreSQL cluster with a migrated template database. */
export async function postgresStores(): Promise<PostgresStores> {
  const pg = await startPostgres({ database: "toolgate_template" });
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    await migrate(admin);
  } catch (error) {
    await admin.end();
    await pg.stop();
    throw error;
  }
  // The template must have no session open when it is copied.
  await admin.end();
  const creator = postgres(pg.url.replace(/\/toolgate_template$/, "/postgres"), {
    max: 1,
    onnotice: () => {},
  });
  let n = 0;
  return {
    pg,
    async fresh() {
      const database = `store_${++n}`;
      await creator.unsafe(`create database ${database} template toolgate_template`);
      const url = pg.url.replace(/\/toolgate_template$/, `/${database}`);
      return await freshStore(
        "postgres",
        (dataDir) => openPostgresStore({ url, dataDir, pool: { max: 4 } }),
        { url, cleanup: () => creator.unsafe(`drop database ${database} with (force)`) },
      );
    },
    async [Symbol.asyncDispose]() {
      await creator.end();
      await pg.stop();
    },
  };
}
