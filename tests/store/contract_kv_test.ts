/**
 * Runs the storage contract against the Deno KV adapter, each case on a
 * fresh KV file in a temp dir.
 */
import { kvStores } from "./_stores.ts";
import { CONTRACT } from "./contract/mod.ts";

const fresh = kvStores();
for (const contractCase of CONTRACT) {
  Deno.test(`kv: ${contractCase.name}`, async () => {
    await using env = await fresh();
    await contractCase.run({ store: env.store, another: env.another, adapter: "kv" });
  });
}
