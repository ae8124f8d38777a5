/**
 * Whether any API key exists, as a running server keeps it: read once, read
 * again on `refresh()` (when the registrations counter moved), the last
 * answer kept while the store cannot answer; and authentication asks it,
 * not the store, on every request.
 *
 * @module
 */
import { Hono } from "hono";
import { assertEquals, assertRejects } from "../_asserts.ts";
import { ApiKeyPresence, createApiKey } from "../../src/auth/mod.ts";
import { authenticate } from "../../src/http/auth.ts";
import { errorHandler } from "../../src/http/errors.ts";
import type { AppEnv } from "../../src/http/types.ts";
import { type ApiKeyStore, openStore } from "../../src/store/mod.ts";

/** The store's API keys, counting `any()` and failing it while `down`. */
function watched(keys: ApiKeyStore) {
  const seen = { any: 0, down: false };
  const store: ApiKeyStore = Object.create(keys);
  store.any = () => {
    seen.any++;
    return seen.down ? Promise.reject(new Error("connection refused")) : keys.any();
  };
  return { store, seen };
}

async function settled(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
  await new Promise((resolve) => setTimeout(resolve, 0));
}

Deno.test("ApiKeyPresence reads once, again on refresh, and keeps its last answer while the store is down", async () => {
  const dataDir = await Deno.makeTempDir();
  const store = await openStore({ dataDir, memory: true });
  try {
    const { store: keys, seen } = watched(store.apiKeys);
    const presence = new ApiKeyPresence(keys);
    assertEquals(await presence.exists(), false);
    assertEquals(await presence.exists(), false);
    assertEquals(seen.any, 1);
    await createApiKey(store.apiKeys, { name: "ci" });
    assertEquals(await presence.exists(), false, "not read again before refresh");
    presence.refresh();
    await settled();
    assertEquals(await presence.exists(), true);
    seen.down = true;
    presence.refresh();
    await settled();
    assertEquals(await presence.exists(), true, "the last answer stays");
    // Never answered: the error, and the next call asks again.
    const fresh = new ApiKeyPresence(keys);
    await assertRejects(() => fresh.exists(), Error, "connection refused");
    seen.down = false;
    assertEquals(await fresh.exists(), true);
  } finally {
    await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("authenticate() asks keysExist, not the store, whether keys exist", async () => {
  const dataDir = await Deno.makeTempDir();
  const store = await openStore({ dataDir, memory: true });
  try {
    const { store: keys, seen } = watched(store.apiKeys);
    const presence = new ApiKeyPresence(keys);
    const app = new Hono<AppEnv>();
    app.onError(errorHandler({ log: () => {} }));
    app.use(authenticate({ keys, keysExist: () => presence.exists() }));
    app.get("/tools", (c) => c.text(c.get("caller")?.kind ?? "none"));
    for (let i = 0; i < 20; i++) {
      const response = await app.request("/tools");
      assertEquals([response.status, await response.text()], [200, "local"]);
    }
    assertEquals(seen.any, 1, "one read for twenty requests");
    await createApiKey(store.apiKeys, { name: "ci" });
    presence.refresh();
    await settled();
    const refused = await app.request("/tools");
    assertEquals(refused.status, 401);
    await refused.body?.cancel();
    assertEquals(seen.any, 2);
  } finally {
    await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
