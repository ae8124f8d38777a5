/**
 * `GET /metrics` of the real server process: tool calls over REST, a
 * delivery to a real receiver on 127.0.0.1, the API token, and the process
 * figures prom-client gathers under Deno.
 *
 * @module
 */
import { assert, assertEquals } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { parseScrape, sampleValue, type Scrape } from "../metrics/_parse.ts";
import { Receiver } from "../webhooks/_receiver.ts";
import { startHttpServer } from "./_http_server.ts";

const TOKEN = "e2e-metrics-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };

Deno.test("the server's /metrics counts REST calls and deliveries, and needs the token", async () => {
  await using tmp = await tempHome();
  await using receiver = new Receiver();
  const added = await runCli(
    ["webhooks", "add", "--url", receiver.url, "--events", "tool.called", "--json"],
    { home: tmp.home },
  );
  const webhookId = JSON.parse(added.stdout).id as string;
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: TOKEN },
  });
  const scrape = async (): Promise<Scrape> => {
    const response = await fetch(`${server.url}/metrics`, { headers: AUTH });
    assertEquals(response.status, 200);
    assertEquals(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    return parseScrape(await response.text());
  };
  const denied = await fetch(`${server.url}/metrics`);
  assertEquals(denied.status, 401);
  await denied.body?.cancel();

  const call = (tool: string, args: unknown) =>
    fetch(`${server.url}/tools/${tool}`, {
      method: "POST",
      headers: { ...AUTH, "content-type": "application/json" },
      body: JSON.stringify(args),
    });
  const ok = await call("memory_set", { key: "k", value: 1 });
  assertEquals(ok.status, 200);
  await ok.body?.cancel();
  const bad = await call("memory_set", { value: 1 });
  assertEquals(bad.status, 400);
  await bad.body?.cancel();
  await receiver.waitFor(1);
  const attempts = "toolgate_webhook_delivery_attempts_total";
  let metrics = await scrape();
  // The attempt is counted once its reply is in: a moment after the receiver saw it.
  await until(async () => {
    metrics = await scrape();
    return sampleValue(metrics, attempts, { webhook_id: webhookId, outcome: "ok" }) === 1;
  }, "the delivery attempt counted");

  const calls = "toolgate_tool_calls_total";
  const memorySet = { tool: "memory_set", plugin: "memory", transport: "rest" };
  assertEquals(sampleValue(metrics, calls, { ...memorySet, outcome: "ok" }), 1);
  assertEquals(sampleValue(metrics, calls, { ...memorySet, outcome: "TOOL_INPUT_INVALID" }), 1);
  assertEquals(
    sampleValue(metrics, "toolgate_plugin_state", { plugin: "memory", state: "ready" }),
    1,
  );
  assertEquals(sampleValue(metrics, "toolgate_circuit_open", { tool: "memory_set" }), 0);
  assertEquals(sampleValue(metrics, "toolgate_audit_appends_total", { outcome: "ok" }), 2);
  assertEquals(sampleValue(metrics, "toolgate_webhook_dead_letters"), 0);
  assertEquals(sampleValue(metrics, "toolgate_ready"), 1);
  for (
    const name of [
      "toolgate_process_resident_memory_bytes",
      "toolgate_process_open_fds",
      "toolgate_nodejs_heap_size_used_bytes",
      "toolgate_nodejs_eventloop_lag_seconds",
    ]
  ) {
    const value = sampleValue(metrics, name);
    assert(value !== undefined && value >= 0, `${name}: ${value}`);
  }
  const { code } = await server.stop();
  assertEquals(code, 0);
});

Deno.test("with metrics.enabled false the server keeps no metrics: /metrics is 404, calls still answer", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({
    home: tmp.home,
    config: { metrics: { enabled: false } },
  });
  const call = await fetch(`${server.url}/tools/memory_set`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key: "k", value: 1 }),
  });
  assertEquals(call.status, 200);
  await call.body?.cancel();
  const metrics = await fetch(`${server.url}/metrics`);
  assertEquals(metrics.status, 404);
  await metrics.body?.cancel();
});
