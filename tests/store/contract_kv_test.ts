/**
 * Runs the storage contract against the Deno KV adapter, each case on a
 * fresh KV file in a temp dir.
 */
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import type { Store } from "../../src/store/mod.ts";
import { CONTRACT } from "./contract/mod.ts";

for (const contractCase of CONTRACT) {
  Deno.test(`kv: ${contractCase.name}`, async () => {
    const dataDir = await Deno.makeTempDir({ prefix: "toolgate-contract-" });
    const opened: Store[] = [];
    const open = async () => {
      const store = await openKvStore({ dataDir });
      opened.push(store);
      return store;
    };
    try {
      await contractCase.run({ store: await open(), another: open, adapter: "kv" });
    } finally {
      for (const store of opened) await store.close();
      await Deno.remove(dataDir, { recursive: true });
    }
  });
}
