/**
 * Outgoing webhooks over HTTP (issue 20 item 6): `app.request()` on the real
 * app with a real KV store and, for `test`, a real receiver on 127.0.0.1
 * (allowed explicitly: the egress policy refuses loopback by default).
 */
import { Webhook } from "standardwebhooks";
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { webhookRoutes } from "../../src/http/mod.ts";
import { Receiver } from "../webhooks/_receiver.ts";
import { LOOPBACK_EGRESS, setup } from "../webhooks/_setup.ts";
import { postJson, testApp } from "./_fixtures.ts";

const TOKEN = "s3cret-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };

function request(
  app: { request: (path: string, init?: RequestInit) => Response | Promise<Response> },
  method: string,
  path: string,
  body?: unknown,
): Promise<Response> {
  return Promise.resolve(app.request(path, {
    method,
    headers: { ...AUTH, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  }));
}

Deno.test("POST /webhooks generates a whsec_ secret shown once; GET never shows a secret", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [webhookRoutes(env.store, { egress: LOOPBACK_EGRESS })],
    env: { TOOLGATE_API_TOKEN: TOKEN },
  });
  assertEquals((await postJson(t.app, "/webhooks", { url: "https://example.com/h" })).status, 401);
  const created = await request(t.app, "POST", "/webhooks", {
    url: "https://example.com/h",
    events: ["tool.called"],
    description: "ops alerts",
    retry_schedule: "5s,5m,2h",
  });
  assertEquals(created.status, 201);
  const { webhook, secret } = await created.json();
  assertMatch(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assertMatch(webhook.id, /^wh_/);
  assertEquals(webhook.events, ["tool.called"]);
  assertEquals(webhook.description, "ops alerts");
  assertEquals(webhook.has_secret, true);
  assertEquals(webhook.retry_schedule_ms, [5000, 300_000, 7_200_000]);
  const listed = await (await request(t.app, "GET", "/webhooks")).text();
  assert(!listed.includes(secret), "the list never shows the secret");
  assertEquals(JSON.parse(listed).webhooks.map((w: { id: string }) => w.id), [webhook.id]);
  const shown = await (await request(t.app, "GET", `/webhooks/${webhook.id}`)).json();
  assertEquals(shown, webhook);
  const unsigned = await (await request(t.app, "POST", "/webhooks", {
    url: "https://example.com/u",
    secret: null,
  })).json();
  assertEquals(unsigned.secret, undefined);
  assertEquals(unsigned.webhook.has_secret, false);
});

Deno.test("bad webhook bodies are 400 USAGE naming the field; unknown ids are 404", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [webhookRoutes(env.store, { egress: LOOPBACK_EGRESS })],
  });
  const cases: [unknown, RegExp][] = [
    [{ url: "ftp://example.com/h" }, /url/],
    [{ url: "https://example.com/h", events: ["tool.nope"] }, /tool\.nope/],
    [{ url: "https://example.com/h", retry_schedule: "5s,9d" }, /retry_schedule delay "9d"/],
    [{ url: "https://example.com/h", retry_schedule: "5s", retry_schedule_ms: [5000] }, /not both/],
    [{ url: "https://example.com/h", colour: "blue" }, /colour/],
  ];
  for (const [body, message] of cases) {
    const response = await postJson(t.app, "/webhooks", body);
    assertEquals(response.status, 400, JSON.stringify(body));
    const { error } = await response.json();
    assertEquals(error.code, "USAGE", JSON.stringify(body));
    assertMatch(error.message, message);
  }
  assertEquals((await t.app.request("/webhooks")).status, 200);
  assertEquals((await (await t.app.request("/webhooks")).json()).webhooks, [], "nothing stored");
  for (
    const [method, path] of [
      ["GET", "/webhooks/wh_nope"],
      ["PATCH", "/webhooks/wh_nope"],
      ["DELETE", "/webhooks/wh_nope"],
      ["POST", "/webhooks/wh_nope/enable"],
      ["POST", "/webhooks/wh_nope/test"],
      ["GET", "/webhooks/wh_nope/attempts"],
    ]
  ) {
    const response = await t.app.request(path, {
      method,
      headers: { "content-type": "application/json" },
      body: method === "PATCH" ? '{"description":"x"}' : undefined,
    });
    assertEquals(response.status, 404, `${method} ${path}`);
    assertEquals((await response.json()).error.code, "NOT_FOUND");
  }
});

Deno.test("PATCH, disable, enable, rotate-secret and DELETE change what the store holds", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [webhookRoutes(env.store, { egress: LOOPBACK_EGRESS })],
  });
  const { webhook, secret } = await (await postJson(t.app, "/webhooks", {
    url: "https://example.com/h",
  })).json();
  const patched = await (await t.app.request(`/webhooks/${webhook.id}`, {
    method: "PATCH",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      url: "https://example.com/v2",
      events: ["tool.failed"],
      retry_schedule_ms: [1000, 60_000],
    }),
  })).json();
  assertEquals(patched.url, "https://example.com/v2");
  assertEquals(patched.events, ["tool.failed"]);
  assertEquals(patched.retry_schedule_ms, [1000, 60_000]);
  const cleared = await (await t.app.request(`/webhooks/${webhook.id}`, {
    method: "PATCH",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ retry_schedule: null }),
  })).json();
  assertEquals(cleared.retry_schedule_ms, undefined);

  const disabled = await (await postJson(t.app, `/webhooks/${webhook.id}/disable`, {
    detail: "receiver migrating",
  })).json();
  assertEquals(disabled.disabled.reason, "manual");
  assertEquals(disabled.disabled.detail, "receiver migrating");
  assertEquals((await env.store.webhooks.getOutgoing(webhook.id))?.disabled?.reason, "manual");
  const enabled = await (await t.app.request(`/webhooks/${webhook.id}/enable`, {
    method: "POST",
  })).json();
  assertEquals(enabled.was_disabled, true);
  assertEquals(enabled.webhook.disabled, undefined);

  const rotated = await postJson(t.app, `/webhooks/${webhook.id}/rotate-secret`, {
    overlap: "1h",
  });
  assertEquals(rotated.status, 200);
  const { secret: next, webhook: after } = await rotated.json();
  assertMatch(next, /^whsec_/);
  assert(next !== secret);
  assertEquals(after.previous_secrets.length, 1);
  const stored = await env.store.webhooks.getOutgoing(webhook.id);
  assertEquals(stored?.secret, next);
  assertEquals(stored?.previous_secrets?.[0].secret, secret);
  const badOverlap = await postJson(t.app, `/webhooks/${webhook.id}/rotate-secret`, {
    overlap: "soon",
  });
  assertEquals(badOverlap.status, 400);
  assertMatch((await badOverlap.json()).error.message, /Invalid overlap "soon"/);

  assertEquals((await t.app.request(`/webhooks/${webhook.id}`, { method: "DELETE" })).status, 204);
  assertEquals(await env.store.webhooks.getOutgoing(webhook.id), null);
});

Deno.test("POST /webhooks/{id}/test signs a webhook.test for a real receiver; attempts lists it", async () => {
  await using env = await setup();
  await using receiver = new Receiver((_, i) => (i === 0 ? 202 : 500));
  await using t = await testApp({
    routes: [webhookRoutes(env.store, { egress: LOOPBACK_EGRESS })],
    file: { egress: { allow: ["127.0.0.1/32"] } },
  });
  const { webhook, secret } = await (await postJson(t.app, "/webhooks", {
    url: receiver.url,
  })).json();
  const ok = await (await t.app.request(`/webhooks/${webhook.id}/test`, { method: "POST" })).json();
  assertEquals(ok.ok, true, JSON.stringify(ok));
  assertEquals(ok.status, 202);
  const [sent] = receiver.requests;
  const headers = Object.fromEntries(sent.headers);
  const verified = new Webhook(secret).verify(new TextDecoder().decode(sent.body), headers) as {
    type: string;
  };
  assertEquals(verified.type, "webhook.test");
  const failed = await (await t.app.request(`/webhooks/${webhook.id}/test`, { method: "POST" }))
    .json();
  assertEquals([failed.ok, failed.status], [false, 500], "a failed test is still a 200 answer");
  const { attempts } = await (await t.app.request(`/webhooks/${webhook.id}/attempts`)).json();
  assertEquals(attempts.map((a: { ok: boolean; status: number }) => [a.ok, a.status]), [
    [false, 500],
    [true, 202],
  ]);
});

Deno.test("every /webhooks route is in /openapi.json", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [webhookRoutes(env.store, { egress: LOOPBACK_EGRESS })],
  });
  const doc = await (await t.app.request("/openapi.json")).json();
  const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
    .filter(([path]) => path.startsWith("/webhooks"))
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
  assertEquals(operations, [
    "DELETE /webhooks/{id}",
    "GET /webhooks",
    "GET /webhooks/{id}",
    "GET /webhooks/{id}/attempts",
    "PATCH /webhooks/{id}",
    "POST /webhooks",
    "POST /webhooks/{id}/disable",
    "POST /webhooks/{id}/enable",
    "POST /webhooks/{id}/rotate-secret",
    "POST /webhooks/{id}/test",
  ]);
});

Deno.test("POST /webhooks and PATCH refuse a metadata or loopback address with 403 EGRESS_DENIED; test reports a refusal", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [webhookRoutes(env.store)],
    env: { TOOLGATE_API_TOKEN: TOKEN },
  });
  const refused = await request(t.app, "POST", "/webhooks", {
    url: "http://169.254.169.254/latest/meta-data",
  });
  assertEquals(refused.status, 403);
  const body = await refused.json();
  assertEquals(body.error.code, "EGRESS_DENIED");
  assertMatch(body.error.message, /"169\.254\.169\.254\/32" to egress\.allow/);
  assertEquals(await env.store.webhooks.listOutgoing(), []);
  const created = await request(t.app, "POST", "/webhooks", { url: "https://example.com/h" });
  const { webhook } = await created.json();
  const moved = await request(t.app, "PATCH", `/webhooks/${webhook.id}`, {
    url: "http://127.0.0.1:9/h",
  });
  assertEquals(moved.status, 403);
  assertEquals((await moved.json()).error.code, "EGRESS_DENIED");
  // Registered behind the check's back (a name, or an older release): test reports the refusal.
  const stored = await env.store.webhooks.addOutgoing({ url: "http://127.0.0.1:9/h", events: "*" });
  const tested = await request(t.app, "POST", `/webhooks/${stored.id}/test`);
  assertEquals(tested.status, 200);
  const result = await tested.json();
  assertEquals([result.ok, result.egress_denied], [false, true]);
  assertMatch(result.error, /^EGRESS_DENIED: Refused to connect to 127\.0\.0\.1/);
});
