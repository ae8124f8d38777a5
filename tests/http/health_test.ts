import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import type { HealthReason } from "../../src/http/health.ts";
import { Readiness } from "../../src/http/readiness.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import type { PluginDefinition } from "../../src/gateway/mod.ts";
import { VERSION } from "../../src/version.ts";
import { testPlugin } from "../gateway/_fixtures.ts";
import { testApp } from "./_fixtures.ts";

const unconfigured: PluginDefinition = {
  name: "needs_token",
  version: "2.0.0",
  zeroConfig: false,
  isConfigured: () => false,
  tools: [],
};

Deno.test("GET /health reports status, version, uptime, plugin states and open circuits", async () => {
  await using t = await testApp({ plugins: [testPlugin(), unconfigured] });
  const response = await t.app.request("/health");
  assertEquals(response.status, 200);
  const body = await response.json();
  assertEquals(body.status, "ok");
  assertEquals(body.version, VERSION);
  assert(Number.isInteger(body.uptime_ms) && body.uptime_ms >= 0);
  assertEquals(body.tool_count, 5);
  assertEquals(body.mcp_sessions, 0);
  assertEquals(body.open_circuits, []);
  assertEquals(
    body.plugins.map((p: { name: string; state: string }) => [p.name, p.state]),
    [["test", "ready"], ["needs_token", "not_configured"]],
  );
  assertEquals(body.plugins[1].error_code, "PLUGIN_NOT_CONFIGURED");
});

Deno.test("GET /health answers 503 with status draining once shutdown began", async () => {
  await using t = await testApp();
  t.lifecycle.beginDrain();
  const response = await t.app.request("/health");
  assertEquals(response.status, 503);
  assertEquals((await response.json()).status, "draining");
});

Deno.test("route mounts receive the gateway, config and lifecycle", async () => {
  let seen: unknown;
  await using t = await testApp({
    routes: [(app, context) => {
      seen = context;
      app.get("/draining", (c) => c.json({ draining: context.lifecycle.signal.aborted }));
    }],
  });
  assertEquals(seen, { gateway: t.gateway, config: t.config, lifecycle: t.lifecycle });
  t.lifecycle.beginDrain();
  assertEquals(await (await t.app.request("/draining")).json(), { draining: true });
});

Deno.test("GET /health/live answers 200 and GET /health/ready 200 while the store answers, without a token", async () => {
  const dataDir = await Deno.makeTempDir();
  const store = await openKvStore({ dataDir, memory: true });
  const readiness = new Readiness({ store });
  await using t = await testApp({ env: { TOOLGATE_API_TOKEN: "t0ken" }, readiness });
  await using _cleanup = {
    async [Symbol.asyncDispose]() {
      await store.close();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
  const live = await t.app.request("/health/live");
  assertEquals(live.status, 200);
  assertEquals((await live.json()).status, "live");
  const ready = await t.app.request("/health/ready");
  assertEquals([ready.status, await ready.json()], [200, { status: "ready" }]);
  assertEquals(readiness.ready, true);
  t.lifecycle.beginDrain();
  const draining = await t.app.request("/health/ready");
  assertEquals(draining.status, 503);
  assertEquals((await draining.json()).reasons.map((r: { code: string }) => r.code), ["DRAINING"]);
});

Deno.test("GET /health/ready answers 503 naming the store when it fails or hangs, and a blocker; /health says degraded", async () => {
  let answer: () => Promise<bigint> = () =>
    Promise.reject(new Error("connect ECONNREFUSED 10.0.0.5:5432"));
  let blockers: HealthReason[] = [];
  const readiness = new Readiness({
    store: { registrationsVersion: () => answer() },
    blockers: () => blockers,
    timeoutMs: 30,
    cacheMs: 0,
  });
  await using t = await testApp({ readiness, healthReasons: () => blockers });
  const failed = await t.app.request("/health/ready");
  assertEquals(failed.status, 503);
  const body = await failed.json();
  assertEquals(body.status, "not_ready");
  assertEquals(body.reasons.map((r: HealthReason) => [r.component, r.code]), [
    ["store", "STORE_UNAVAILABLE"],
  ]);
  // No driver text (addresses) in a reply that needs no token.
  assert(!JSON.stringify(body).includes("10.0.0.5"), JSON.stringify(body));
  const since = body.reasons[0].since;
  answer = () => new Promise(() => {}); // Hangs: the probe gives up after timeoutMs.
  const hung = await (await t.app.request("/health/ready")).json();
  assertMatch(hung.reasons[0].message, /did not answer within 30 ms/);
  assertEquals(hung.reasons[0].since, since); // The same outage.
  const health = await t.app.request("/health");
  assertEquals(health.status, 200);
  assertEquals((await health.json()).status, "degraded");
  answer = () => Promise.resolve(1n);
  blockers = [{
    component: "store",
    code: "WEBHOOK_SECRET_UNREADABLE",
    message: "1 deliveries were moved to the dead-letter queue",
    count: 1,
    since,
  }];
  const blocked = await (await t.app.request("/health/ready")).json();
  assertEquals(blocked.reasons.map((r: HealthReason) => r.code), ["WEBHOOK_SECRET_UNREADABLE"]);
  // Named once in /health although both the readiness check and the reasons have it.
  const degraded = await (await t.app.request("/health")).json();
  assertEquals(degraded.reasons.map((r: HealthReason) => r.code), ["WEBHOOK_SECRET_UNREADABLE"]);
  blockers = [];
  assertEquals(await (await t.app.request("/health/ready")).json(), { status: "ready" });
});
