/**
 * Runs the storage contract against the PostgreSQL adapter on a throwaway
 * cluster: each case gets a fresh database, made from a migrated template.
 */
import { postgresStores } from "./_stores.ts";
import { CONTRACT } from "./contract/mod.ts";

Deno.test("postgres: the storage contract", async (t) => {
  await using stores = await postgresStores();
  for (const contractCase of CONTRACT) {
    await t.step(contractCase.name, async () => {
      await using env = await stores.fresh();
      await contractCase.run({ store: env.store, another: env.another, adapter: "postgres" });
    });
  }
});
