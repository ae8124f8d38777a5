import { assert, assertEquals } from "../_asserts.ts";
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
