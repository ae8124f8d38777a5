/**
 * Failed incoming jobs over HTTP (issue 21 item 4): `app.request()` on the
 * real app with a real KV store holding failed jobs written by the store's
 * own operations.
 */
import { assert, assertEquals } from "../_asserts.ts";
import { incomingFailedRoutes } from "../../src/http/mod.ts";
import type { KvStore } from "../../src/store/kv/kv_store.ts";
import { tempStore } from "../audit/_store.ts";
import { postJson, testApp } from "./_fixtures.ts";

/** Puts `n` jobs for the endpoint and fails them for good; returns their ids. */
async function failedJobs(store: KvStore, endpointId: string, n: number, at: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const job = await store.incoming.put({
      id: `inj_${endpointId}_${i}`,
      endpoint_id: endpointId,
      handler: "memory_set",
      received_at: new Date(at).toISOString(),
    }, new TextEncoder().encode(JSON.stringify({ key: `k${i}` })));
    ids.push(job.id);
  }
  const claimed = await store.incoming.claim({ owner: "t", until: at + 1e6, now: at, limit: n });
  await store.incoming.fail(claimed.map((job, i) => ({
    job,
    attempt: {
      at: new Date(at + i).toISOString(),
      code: "TOOL_INPUT_INVALID",
      message: "Invalid arguments for memory_set: value: Required",
      fields: ["value"],
    },
  })));
  return ids;
}

Deno.test("GET /incoming/failed lists and shows failed jobs; replay queues them again; DELETE and purge remove them", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const a = await store.webhooks.addIncoming({
    name: "a",
    path: "/hooks/a",
    handler: "memory_set",
  });
  const b = await store.webhooks.addIncoming({
    name: "b",
    path: "/hooks/b",
    handler: "memory_set",
  });
  const at = Date.UTC(2026, 10, 1);
  const ofA = await failedJobs(store, a.id, 2, at);
  const ofB = await failedJobs(store, b.id, 2, at + 60_000);
  let woken = 0;
  await using t = await testApp({ routes: [incomingFailedRoutes(store, () => woken++)] });
  const all = await (await t.app.request("/incoming/failed")).json();
  assertEquals(all.jobs.map((j: { id: string }) => j.id), [...ofA, ...ofB]);
  assertEquals(all.jobs[0].endpoint_path, "/hooks/a");
  assertEquals(all.jobs[0].attempts[0].fields, ["value"]);
  const mine = await (await t.app.request(`/incoming/failed?endpoint=${b.id}`)).json();
  assertEquals(mine.jobs.map((j: { id: string }) => j.id), ofB);
  const unknown = await t.app.request("/incoming/failed?endpoint=in_nope");
  assertEquals(unknown.status, 404);
  assertEquals((await unknown.json()).error.code, "NOT_FOUND");
  const one = await (await t.app.request(`/incoming/failed/${ofA[1]}`)).json();
  assertEquals(one.arguments, { key: "k1" });
  assertEquals(one.handler, "memory_set");
  assertEquals((await t.app.request("/incoming/failed/inj_missing")).status, 404);
  // Replay one: pending again, same id; a second replay finds no failed job.
  const replayed = await t.app.request(`/incoming/failed/${ofA[0]}/replay`, { method: "POST" });
  assertEquals(await replayed.json(), { replayed: [ofA[0]] });
  assertEquals(woken, 1);
  const again = await t.app.request(`/incoming/failed/${ofA[0]}/replay`, { method: "POST" });
  assertEquals(again.status, 404);
  assert((await again.json()).error.message.includes("still queued"));
  assertEquals((await store.incoming.list()).map((j) => j.id), [ofA[0]]);
  // Replay by endpoint; a bad body is a 400.
  assertEquals((await postJson(t.app, "/incoming/failed/replay", { endpoint: 1 })).status, 400);
  const byEndpoint = await postJson(t.app, "/incoming/failed/replay", { endpoint: b.id });
  assertEquals(await byEndpoint.json(), { replayed: ofB });
  // Delete one; purge before a time.
  assertEquals(
    (await t.app.request(`/incoming/failed/${ofA[1]}`, { method: "DELETE" })).status,
    204,
  );
  assertEquals(
    (await t.app.request(`/incoming/failed/${ofA[1]}`, { method: "DELETE" })).status,
    404,
  );
  await failedJobs(store, a.id, 1, at + 120_000);
  const none = await postJson(t.app, "/incoming/failed/purge", {
    before: new Date(at).toISOString(),
  });
  assertEquals(await none.json(), { purged: 0 });
  const rest = await t.app.request("/incoming/failed/purge", { method: "POST" });
  assertEquals(await rest.json(), { purged: 1 });
  assertEquals(await store.incoming.listFailed(), []);
});

Deno.test("the /incoming/failed routes need the API token when one is set, and are in /openapi.json", async () => {
  await using temp = await tempStore();
  await using t = await testApp({
    routes: [incomingFailedRoutes(temp.store)],
    env: { TOOLGATE_API_TOKEN: "s3cret-token" },
  });
  assertEquals((await t.app.request("/incoming/failed")).status, 401);
  const ok = await t.app.request("/incoming/failed", {
    headers: { authorization: "Bearer s3cret-token" },
  });
  assertEquals(ok.status, 200);
  assertEquals(await ok.json(), { jobs: [] });
  const doc = await (await t.app.request("/openapi.json", {
    headers: { authorization: "Bearer s3cret-token" },
  })).json();
  for (
    const path of [
      "/incoming/failed",
      "/incoming/failed/{id}",
      "/incoming/failed/{id}/replay",
      "/incoming/failed/replay",
      "/incoming/failed/purge",
    ]
  ) {
    assert(doc.paths[path], `${path} is documented`);
  }
  assert(doc.paths["/incoming/failed/{id}"].delete, "DELETE is documented");
});
