/**
 * The dead-letter queue over HTTP (issue 20 item 6): `app.request()` on the
 * real app with a real KV store, records made by the real dispatcher.
 */
import { assert, assertEquals } from "../_asserts.ts";
import { dlqRoutes } from "../../src/http/mod.ts";
import { listDlq } from "../../src/webhooks/mod.ts";
import { type Env, setup, toolCalled } from "../webhooks/_setup.ts";
import { postJson, testApp } from "./_fixtures.ts";

/** Dead-letters `tools.length` events of a disabled webhook (nothing is sent). */
async function deadLetters(env: Env, tools: string[]): Promise<string> {
  const hook = await env.store.webhooks.addOutgoing({ url: "https://example.com/h", events: "*" });
  await env.store.webhooks.updateOutgoing(hook.id, {
    disabled: { at: new Date().toISOString(), reason: "manual" },
  });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  for (const tool of tools) await env.bus.emit("tool.called", toolCalled(tool));
  await dispatcher.whenIdle();
  await dispatcher.stop();
  return hook.id;
}

Deno.test("GET /dlq pages records oldest first, filters by webhook; GET /dlq/{id} shows one", async () => {
  await using env = await setup();
  const first = await deadLetters(env, ["a", "b", "c"]);
  const second = await deadLetters(env, ["d"]);
  await using t = await testApp({ routes: [dlqRoutes(env.store)] });
  const all = await (await t.app.request("/dlq")).json();
  assertEquals(
    all.records.map((r: { event: { data: { tool_name: string } } }) => r.event.data.tool_name)
      .sort(),
    ["a", "b", "c", "d", "d"], // the first webhook (every event type) gets d too
  );
  assertEquals(all.next, null);
  const failedAt = all.records.map((r: { failed_at: string }) => r.failed_at);
  assertEquals(failedAt, [...failedAt].sort(), "oldest failure first");
  const paged: string[] = [];
  const sizes: number[] = [];
  let after = "";
  for (let pages = 0; pages < 10; pages++) {
    const page = await (await t.app.request(`/dlq?limit=2${after}`)).json();
    paged.push(...page.records.map((r: { dlq_id: string }) => r.dlq_id));
    sizes.push(page.records.length);
    if (page.next === null) break;
    assertEquals(page.next, page.records.at(-1).dlq_id);
    after = `&after=${page.next}`;
  }
  assertEquals(sizes, [2, 2, 1]);
  assertEquals(paged, all.records.map((r: { dlq_id: string }) => r.dlq_id));
  const mine = await (await t.app.request(`/dlq?webhook=${second}`)).json();
  assertEquals(mine.records.map((r: { webhook_id: string }) => r.webhook_id), [second]);
  const firsts = all.records.filter((r: { webhook_id: string }) => r.webhook_id === first);
  const one = await t.app.request(`/dlq/${firsts[0].dlq_id}`);
  assertEquals(one.status, 200);
  const shown = await one.json();
  assertEquals(shown, firsts[0]);
  assertEquals(shown.attempts, []);
  assert(shown.reason.startsWith("Not sent: the webhook was disabled by hand"));
  const missing = await t.app.request("/dlq/dlq_nope");
  assertEquals(missing.status, 404);
  assertEquals((await missing.json()).error.code, "NOT_FOUND");
  const bad = await t.app.request("/dlq?limit=0");
  assertEquals(bad.status, 400);
  const error = (await bad.json()).error;
  assertEquals(error.code, "USAGE");
  assertEquals(error.details.fields[0].path, "limit");
});

Deno.test("GET /dlq after a record that left the queue goes on from it, skipping nothing", async () => {
  await using env = await setup();
  await deadLetters(env, ["a", "b", "c", "d", "e"]);
  await using t = await testApp({ routes: [dlqRoutes(env.store)] });
  const ids = (page: { records: { dlq_id: string }[] }) => page.records.map((r) => r.dlq_id);
  const all = ids(await (await t.app.request("/dlq")).json());
  const first = await (await t.app.request("/dlq?limit=2")).json();
  assertEquals(ids(first), all.slice(0, 2));
  // The page's last record is deleted before the next page is asked for.
  assertEquals((await t.app.request(`/dlq/${first.next}`, { method: "DELETE" })).status, 204);
  const next = await (await t.app.request(`/dlq?limit=10&after=${first.next}`)).json();
  for (const id of all.slice(2)) assert(ids(next).includes(id), `${id} was skipped`);
  assert(!ids(next).includes(first.next));
});

Deno.test("POST /dlq/.../replay refuses a disabled webhook's records, queues them once it is enabled", async () => {
  await using env = await setup();
  const hook = await deadLetters(env, ["a", "b"]);
  await using t = await testApp({ routes: [dlqRoutes(env.store)] });
  const [first] = await listDlq(env.store);
  const refused = await t.app.request(`/dlq/${first.dlq_id}/replay`, { method: "POST" });
  assertEquals(refused.status, 409);
  assertEquals((await refused.json()).error.code, "CONFLICT");
  const all = await (await postJson(t.app, "/dlq/replay", { all: true })).json();
  assertEquals(all.queued, []);
  assertEquals(all.skipped.length, 2);
  await env.store.webhooks.updateOutgoing(hook, { disabled: null });
  const one = await (await t.app.request(`/dlq/${first.dlq_id}/replay`, { method: "POST" })).json();
  assertEquals(one, { queued: [first.dlq_id], already_queued: [], skipped: [] });
  const caughtUp = await postJson(t.app, "/dlq/replay", { webhook: hook, since: first.failed_at });
  assertEquals(caughtUp.status, 200);
  const result = await caughtUp.json();
  assertEquals(result.already_queued, [first.dlq_id]);
  assertEquals(result.queued.length, 1);
  const wrong = await postJson(t.app, "/dlq/replay", { webhook: hook, since: "yesterday" });
  assertEquals(wrong.status, 400);
  assertEquals((await wrong.json()).error.details.fields[0].path, "since");
  const neither = await postJson(t.app, "/dlq/replay", {});
  assertEquals(neither.status, 400);
  const unknown = await postJson(t.app, "/dlq/replay", { webhook: "wh_nope" });
  assertEquals(unknown.status, 404);
});

Deno.test("DELETE /dlq/{id} and POST /dlq/purge delete records and keep dlq.json in step", async () => {
  await using env = await setup();
  await deadLetters(env, ["a", "b", "c"]);
  await using t = await testApp({ routes: [dlqRoutes(env.store)] });
  const [a, b] = await listDlq(env.store);
  const deleted = await t.app.request(`/dlq/${a.dlq_id}`, { method: "DELETE" });
  assertEquals(deleted.status, 204);
  assertEquals((await t.app.request(`/dlq/${a.dlq_id}`, { method: "DELETE" })).status, 404);
  const mirror = JSON.parse(await Deno.readTextFile(`${env.dir}/dlq.json`));
  assertEquals(mirror.length, 2);
  const none = await (await postJson(t.app, "/dlq/purge", { before: b.failed_at })).json();
  assertEquals(none, { purged: 0 });
  const rest = await t.app.request("/dlq/purge", { method: "POST" });
  assertEquals(await rest.json(), { purged: 2 });
  assertEquals(await listDlq(env.store), []);
  assertEquals(JSON.parse(await Deno.readTextFile(`${env.dir}/dlq.json`)), []);
});

Deno.test("the /dlq routes need the API token when one is set, and are in /openapi.json", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [dlqRoutes(env.store)],
    env: { TOOLGATE_API_TOKEN: "s3cret-token" },
  });
  assertEquals((await t.app.request("/dlq")).status, 401);
  const ok = await t.app.request("/dlq", { headers: { authorization: "Bearer s3cret-token" } });
  assertEquals(ok.status, 200);
  const doc = await (await t.app.request("/openapi.json", {
    headers: { authorization: "Bearer s3cret-token" },
  })).json();
  for (
    const path of ["/dlq", "/dlq/{dlq_id}", "/dlq/{dlq_id}/replay", "/dlq/replay", "/dlq/purge"]
  ) {
    assert(doc.paths[path], `${path} is documented`);
  }
});
