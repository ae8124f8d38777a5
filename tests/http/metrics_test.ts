/**
 * `GET /metrics` on the app, wired as `toolgate mcp start --transport http`
 * wires it: a real KV store, gateway, audit log, dispatcher delivering to a
 * real receiver on 127.0.0.1, and the incoming router; scraped with
 * `app.request()` and parsed with a parser of our own.
 *
 * @module
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { createApiKey } from "../../src/auth/mod.ts";
import type { Config } from "../../src/config/mod.ts";
import { EventBus } from "../../src/events/mod.ts";
import { Gateway } from "../../src/gateway/mod.ts";
import { createApp, incomingRoutes, metricsRoutes, type ToolgateApp } from "../../src/http/mod.ts";
import { ToolgateMetrics } from "../../src/metrics/mod.ts";
import type { IncomingWebhook } from "../../src/store/mod.ts";
import {
  addWebhook,
  type AddWebhookResult,
  createDispatcher,
  IncomingRouter,
} from "../../src/webhooks/mod.ts";
import { tempStore } from "../audit/_store.ts";
import { testPlugin } from "../gateway/_fixtures.ts";
import { Receiver } from "../webhooks/_receiver.ts";
import { LOOPBACK_EGRESS } from "../webhooks/_setup.ts";
import { parseScrape, sampleSum, sampleValue, type Scrape } from "../metrics/_parse.ts";
import { httpConfig } from "./_fixtures.ts";

const TOKEN = "metrics-test-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };

interface Server extends AsyncDisposable {
  app: ToolgateApp;
  config: Config;
  /** Switches the `flaky` tool's failures. */
  plugin: { failing: boolean; calls: number };
  store: Awaited<ReturnType<typeof tempStore>>["store"];
  dispatcher: ReturnType<typeof createDispatcher>;
  scrape(): Promise<Scrape>;
}

/**
 * The server's parts on a temp KV store, metrics wired as in `src/cli/mcp.ts`;
 * `prepare` registers what the parts load at start.
 */
async function metricsServer(
  file: Record<string, unknown> = {},
  prepare: (store: Server["store"]) => Promise<void> = () => Promise.resolve(),
): Promise<Server> {
  const temp = await tempStore();
  const { store } = temp;
  await prepare(store);
  const base = await httpConfig({
    tools: { circuit_threshold: 1 },
    webhooks: { retry_base_ms: 20, poll_ms: 50 },
    ...file,
  }, { TOOLGATE_API_TOKEN: TOKEN });
  const config: Config = { ...base, dataDir: temp.dataDir };
  const metrics = new ToolgateMetrics({ processMetrics: false, dlqRefreshMs: 0 });
  const observers = metrics.observers;
  const bus = new EventBus();
  const dispatcher = createDispatcher({
    store,
    bus,
    config,
    egress: LOOPBACK_EGRESS,
    onError: () => {},
    onAttempt: observers.onAttempt,
    onDeadLetter: observers.onDeadLetter,
  });
  const audit = createAuditLog({ store, bus, outbox: dispatcher, onAppend: observers.onAppend });
  const plugin = { failing: false, calls: 0 };
  const gateway = new Gateway({
    config,
    store,
    bus,
    audit,
    plugins: [testPlugin(plugin)],
    log: () => {},
    onCall: observers.onCall,
  });
  await dispatcher.start();
  await gateway.start();
  const incoming = new IncomingRouter({
    store,
    gateway,
    audit,
    config,
    log: () => {},
    onPayload: observers.onPayload,
  });
  await incoming.start();
  metrics.watch({
    gateway,
    dispatcher,
    incoming,
    deadLetters: async () => (await store.deliveries.listDlq()).length,
  });
  const app = createApp({
    gateway,
    config,
    routes: [metricsRoutes(metrics), incomingRoutes(incoming)],
    isPublicPath: (path) => incoming.match(path) !== undefined,
    keys: store.apiKeys,
    log: () => {},
  });
  return {
    app,
    config,
    plugin,
    store,
    dispatcher,
    async scrape() {
      const response = await app.request("/metrics", { headers: AUTH });
      assertEquals(response.status, 200);
      return parseScrape(await response.text());
    },
    async [Symbol.asyncDispose]() {
      await incoming.stop();
      await gateway.stop();
      await audit.close();
      await dispatcher.stop();
      await temp[Symbol.asyncDispose]();
    },
  };
}

function callTool(app: ToolgateApp, name: string, args: Record<string, unknown>) {
  return app.request(`/tools/${name}`, {
    method: "POST",
    headers: { ...AUTH, "content-type": "application/json" },
    body: JSON.stringify(args),
  });
}

Deno.test("GET /metrics counts calls, circuits, deliveries, dead letters, incoming payloads and audit appends", async () => {
  await using receiver = new Receiver((request) => request.path === "/gone" ? 410 : 200);
  let ok!: AddWebhookResult;
  let gone!: AddWebhookResult;
  let endpoint!: IncomingWebhook;
  await using server = await metricsServer({}, async (store) => {
    ok = await addWebhook(store, { url: receiver.url, events: ["tool.called"] });
    gone = await addWebhook(store, { url: `${receiver.origin}/gone`, events: ["tool.called"] });
    endpoint = await store.webhooks.addIncoming({
      name: "echo-in",
      path: "/hooks/echo",
      handler: "echo",
    });
  });
  const { app } = server;

  const before = await server.scrape();
  assertEquals(sampleValue(before, "toolgate_tool_calls_total"), undefined);
  assertEquals(sampleValue(before, "toolgate_circuit_open", { tool: "flaky", plugin: "test" }), 0);
  assertEquals(sampleValue(before, "toolgate_plugin_state", { plugin: "test", state: "ready" }), 1);

  // An incoming payload run at once (?wait=true), then one refused for its type.
  const accepted = await app.request("/hooks/echo?wait=true", {
    method: "POST",
    headers: { ...AUTH, "content-type": "application/json" },
    body: JSON.stringify({ message: "from a sender" }),
  });
  assertEquals(accepted.status, 200);
  assertEquals((await accepted.json()).status, "completed");
  const refused = await app.request("/hooks/echo", {
    method: "POST",
    headers: { "content-type": "text/plain" },
    body: "hello",
  });
  assertEquals(refused.status, 415);
  await refused.body?.cancel();

  // A call that succeeds, one that fails and opens the circuit, one the open circuit refuses.
  assertEquals((await callTool(app, "echo", { message: "hi" })).status, 200);
  server.plugin.failing = true;
  assertEquals((await callTool(app, "flaky", {})).status, 502);
  assertEquals((await callTool(app, "flaky", {})).status, 503);
  await server.dispatcher.whenIdle();

  const after = await server.scrape();
  const calls = "toolgate_tool_calls_total";
  assertEquals(
    sampleValue(after, calls, { tool: "echo", plugin: "test", transport: "rest", outcome: "ok" }),
    1,
  );
  assertEquals(sampleValue(after, calls, { tool: "echo", transport: "webhook", outcome: "ok" }), 1);
  assertEquals(sampleValue(after, calls, { tool: "flaky", outcome: "PLUGIN_REQUEST_FAILED" }), 1);
  assertEquals(sampleValue(after, calls, { tool: "flaky", outcome: "CIRCUIT_OPEN" }), 1);
  assertEquals(
    sampleValue(after, "toolgate_tool_call_duration_seconds_count", {
      tool: "flaky",
      transport: "rest",
      outcome: "error",
    }),
    2,
  );
  assertEquals(sampleValue(after, "toolgate_circuit_open", { tool: "flaky", plugin: "test" }), 1);
  assertEquals(sampleValue(after, "toolgate_circuit_open", { tool: "echo", plugin: "test" }), 0);

  // Two tool.called events: both delivered to one webhook; the other answered 410
  // Gone, was disabled and dead-lettered both (the second perhaps without an attempt).
  const attempts = "toolgate_webhook_delivery_attempts_total";
  assertEquals(sampleValue(after, attempts, { webhook_id: ok.webhook.id, outcome: "ok" }), 2);
  assertEquals(
    sampleValue(after, "toolgate_webhook_delivery_duration_seconds_count", {
      webhook_id: ok.webhook.id,
    }),
    2,
  );
  const goneAttempts = sampleValue(after, attempts, {
    webhook_id: gone.webhook.id,
    outcome: "4xx",
  });
  assert(goneAttempts === 1 || goneAttempts === 2, `4xx attempts: ${goneAttempts}`);
  assertEquals(
    sampleValue(after, "toolgate_webhook_dead_lettered_total", { webhook_id: gone.webhook.id }),
    2,
  );
  assertEquals(sampleValue(after, "toolgate_webhook_dead_letters"), 2);
  assertEquals(sampleValue(after, "toolgate_webhook_deliveries_pending"), 0);

  const payloads = "toolgate_incoming_payloads_total";
  assertEquals(
    sampleValue(after, payloads, { endpoint_id: endpoint.id, status: "accepted", code: "" }),
    1,
  );
  assertEquals(
    sampleValue(after, payloads, {
      endpoint_id: endpoint.id,
      status: "rejected",
      code: "UNSUPPORTED_MEDIA_TYPE",
    }),
    1,
  );
  assertEquals(sampleValue(after, "toolgate_incoming_waiting", { endpoint_id: endpoint.id }), 0);

  // Entries: the accepted payload, its handler's call, and the three REST calls.
  assertEquals(sampleValue(after, "toolgate_audit_appends_total", { outcome: "ok" }), 5);
  assertEquals(sampleValue(after, "toolgate_audit_append_duration_seconds_count"), 5);
  assertEquals(sampleSum(after, "toolgate_audit_appends_total", { outcome: "error" }), 0);
});

Deno.test("GET /metrics needs the API token (not a key) unless metrics.public, and is in /openapi.json", async () => {
  {
    await using server = await metricsServer();
    const denied = await server.app.request("/metrics");
    assertEquals(denied.status, 401);
    assertEquals((await denied.json()).error.code, "UNAUTHORIZED");
    const { key } = await createApiKey(server.store.apiKeys, { name: "ci" });
    const keyed = await server.app.request("/metrics", {
      headers: { authorization: `Bearer ${key}` },
    });
    assertEquals(keyed.status, 403);
    assertEquals((await keyed.json()).error.code, "FORBIDDEN");
    const allowed = await server.app.request("/metrics", { headers: AUTH });
    assertEquals(allowed.status, 200);
    assertEquals(allowed.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    assertStringIncludes(await allowed.text(), "# TYPE toolgate_tool_calls_total counter");
    const spec = await (await server.app.request("/openapi.json", { headers: AUTH })).json();
    assertEquals(spec.paths["/metrics"].get.operationId, "metrics");
    assertEquals(spec.paths["/metrics"].get.security, undefined, "the document's default: token");
  }
  {
    await using server = await metricsServer({ metrics: { public: true } });
    assertEquals(server.config.metrics.public, true);
    const open = await server.app.request("/metrics");
    assertEquals(open.status, 200);
    await open.body?.cancel();
    const tools = await server.app.request("/tools");
    assertEquals(tools.status, 401, "only /metrics opens");
    await tools.body?.cancel();
    const spec = await (await server.app.request("/openapi.json", { headers: AUTH })).json();
    assertEquals(spec.paths["/metrics"].get.security, []);
  }
});
