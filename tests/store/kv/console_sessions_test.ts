/**
 * What the Deno KV console sessions do beyond the storage contract
 * (tests/store/contract/console_sessions_contract.ts): the record is named by
 * the SHA-256 of the session id, and nothing in the file holds the id.
 */
import { createHash } from "node:crypto";
import { assert, assertEquals } from "../../_asserts.ts";
import { openKvStore } from "../../../src/store/kv/kv_store.ts";
import { consoleSessionKey } from "../../../src/store/kv/keys.ts";

Deno.test("kv console sessions: stored under the SHA-256 of the id, never the id", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-kv-console-" });
  const store = await openKvStore({ dataDir });
  try {
    const id = "session-id-that-must-not-be-stored";
    const expiresAt = Date.now() + 60_000;
    await store.consoleSessions.create(id, expiresAt);
    const hash = createHash("sha256").update(id).digest("hex");
    assertEquals((await store.kv.get(consoleSessionKey(hash))).value, { expires_at: expiresAt });
    for await (const entry of store.kv.list({ prefix: [] })) {
      assert(!JSON.stringify(entry.key).includes(id), "no key holds the id");
      assert(!JSON.stringify(entry.value ?? null).includes(id), "no value holds the id");
    }
  } finally {
    await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
