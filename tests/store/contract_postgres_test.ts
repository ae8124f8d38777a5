/**
 * Runs the storage contract against the PostgreSQL adapter on a throwaway
 * cluster: each case gets a fresh database, made from a migrated template.
 */
import postgres from "postgres";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";
import { migrate } from "../../src/store/postgres/migrations.ts";
import type { Store } from "../../src/store/mod.ts";
import { startPostgres } from "../_postgres.ts";
import { CONTRACT } from "./contract/mod.ts";

Deno.test("postgres: the storage contract", async (t) => {
  await using pg = await startPostgres({ database: "toolgate_template" });
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const template = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      await migrate(template);
    } finally {
      await template.end();
    }
    let n = 0;
    for (const contractCase of CONTRACT) {
      await t.step(contractCase.name, async () => {
        const database = `contract_${++n}`;
        await admin.unsafe(`create database ${database} template toolgate_template`);
        const url = pg.url.replace(/\/toolgate_template$/, `/${database}`);
        const dataDir = await Deno.makeTempDir({ prefix: "toolgate-contract-" });
        const opened: Store[] = [];
        const open = async () => {
          const store = await openPostgresStore({ url, dataDir, pool: { max: 4 } });
          opened.push(store);
          return store;
        };
        try {
          await contractCase.run({ store: await open(), another: open, adapter: "postgres" });
        } finally {
          for (const store of opened) await store.close();
          await Deno.remove(dataDir, { recursive: true });
          await admin.unsafe(`drop database ${database}`);
        }
      });
    }
  } finally {
    await admin.end();
  }
});
