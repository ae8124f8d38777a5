/**
 * ToolgateMetrics on its own: what each observer adds, the scrape-time
 * gauges, the dead-letter count's cache, and servers that share nothing.
 *
 * @module
 */
import { assert, assertEquals } from "../_asserts.ts";
import { ToolgateMetrics } from "../../src/metrics/mod.ts";
import { parseScrape, sampleValue } from "./_parse.ts";

Deno.test("observers feed counters and histograms with bounded labels", async () => {
  const metrics = new ToolgateMetrics({ processMetrics: false });
  const { onCall, onAttempt, onDeadLetter, onAppend, onPayload } = metrics.observers;
  onCall({ tool: "echo", plugin: "test", source: "rest", durationMs: 4 });
  onCall({ tool: "echo", plugin: "test", source: "rest", durationMs: 2000 });
  onCall({
    tool: "flaky",
    plugin: "test",
    source: "mcp-http",
    errorCode: "TOOL_TIMEOUT",
    durationMs: 30,
  });
  onAttempt({ webhookId: "wh_1", ok: true, status: 200, durationMs: 12 });
  onAttempt({ webhookId: "wh_1", ok: false, status: 503, durationMs: 5 });
  onAttempt({ webhookId: "wh_1", ok: false, durationMs: 1000 });
  onDeadLetter("wh_1");
  onAppend({ ok: true, durationMs: 1 });
  onAppend({ ok: false, durationMs: 1 });
  onPayload({ endpointId: "in_1", status: "accepted" });
  onPayload({ endpointId: "in_1", status: "rejected", code: "SIGNATURE_INVALID" });
  const scrape = parseScrape(await metrics.scrape());
  const calls = "toolgate_tool_calls_total";
  assertEquals(sampleValue(scrape, calls, { tool: "echo", transport: "rest", outcome: "ok" }), 2);
  assertEquals(sampleValue(scrape, calls, { tool: "flaky", outcome: "TOOL_TIMEOUT" }), 1);
  assertEquals(scrape.types.get("toolgate_tool_call_duration_seconds"), "histogram");
  const echo = { tool: "echo", transport: "rest", outcome: "ok" };
  assertEquals(sampleValue(scrape, "toolgate_tool_call_duration_seconds_count", echo), 2);
  assertEquals(
    sampleValue(scrape, "toolgate_tool_call_duration_seconds_bucket", { ...echo, le: "0.005" }),
    1,
  );
  assertEquals(sampleValue(scrape, "toolgate_tool_call_duration_seconds_sum", echo), 2.004);
  const attempts = "toolgate_webhook_delivery_attempts_total";
  for (const outcome of ["ok", "5xx", "error"]) {
    assertEquals(sampleValue(scrape, attempts, { webhook_id: "wh_1", outcome }), 1, outcome);
  }
  assertEquals(
    sampleValue(scrape, "toolgate_webhook_delivery_duration_seconds_count", { webhook_id: "wh_1" }),
    3,
  );
  assertEquals(
    sampleValue(scrape, "toolgate_webhook_dead_lettered_total", { webhook_id: "wh_1" }),
    1,
  );
  assertEquals(sampleValue(scrape, "toolgate_audit_appends_total", { outcome: "ok" }), 1);
  assertEquals(sampleValue(scrape, "toolgate_audit_appends_total", { outcome: "error" }), 1);
  assertEquals(sampleValue(scrape, "toolgate_audit_append_duration_seconds_count"), 1);
  const payloads = "toolgate_incoming_payloads_total";
  assertEquals(sampleValue(scrape, payloads, { status: "accepted", code: "" }), 1);
  assertEquals(sampleValue(scrape, payloads, { status: "rejected", code: "SIGNATURE_INVALID" }), 1);
  // Without sources the scrape-time gauges are empty or zero, not errors.
  assertEquals(sampleValue(scrape, "toolgate_webhook_deliveries_pending"), 0);
  assertEquals(sampleValue(scrape, "toolgate_circuit_open"), undefined);
});

Deno.test("scrape-time gauges read circuits, plugin and upstream states, pending and waiting", async () => {
  const metrics = new ToolgateMetrics({ processMetrics: false });
  metrics.watch({
    gateway: {
      listTools: () => [{ name: "a", plugin: "p" }, { name: "b", plugin: "p" }],
      openCircuits: () => [{ tool_name: "b" }],
      listPlugins: () => [
        { name: "p", state: "ready" },
        {
          name: "everything",
          state: "reconnecting",
          upstream: { transport: "stdio", connection: "reconnecting", restarts: 3 },
        },
      ],
    },
    dispatcher: { pending: 7 },
    incoming: {
      endpoints: () => [{ id: "in_1" }, { id: "in_2" }],
      waiting: (id) => id === "in_1" ? 4 : 0,
    },
  });
  const scrape = parseScrape(await metrics.scrape());
  assertEquals(sampleValue(scrape, "toolgate_circuit_open", { tool: "a" }), 0);
  assertEquals(sampleValue(scrape, "toolgate_circuit_open", { tool: "b", plugin: "p" }), 1);
  assertEquals(sampleValue(scrape, "toolgate_plugin_state", { plugin: "p", state: "ready" }), 1);
  assertEquals(sampleValue(scrape, "toolgate_plugin_state", { plugin: "p", state: "error" }), 0);
  assertEquals(
    sampleValue(scrape, "toolgate_upstream_connection", {
      plugin: "everything",
      transport: "stdio",
      connection: "reconnecting",
    }),
    1,
  );
  assertEquals(sampleValue(scrape, "toolgate_upstream_connection", { plugin: "p" }), undefined);
  assertEquals(sampleValue(scrape, "toolgate_upstream_restarts", { plugin: "everything" }), 3);
  assertEquals(sampleValue(scrape, "toolgate_webhook_deliveries_pending"), 7);
  assertEquals(sampleValue(scrape, "toolgate_incoming_waiting", { endpoint_id: "in_1" }), 4);
  assertEquals(sampleValue(scrape, "toolgate_incoming_waiting", { endpoint_id: "in_2" }), 0);
});

Deno.test("the dead-letter count is read once per refresh interval, not per scrape", async () => {
  let now = 0;
  let counts = 0;
  const metrics = new ToolgateMetrics({
    processMetrics: false,
    dlqRefreshMs: 1000,
    now: () => now,
  });
  metrics.watch({ deadLetters: () => Promise.resolve(++counts * 10) });
  const value = async () =>
    sampleValue(parseScrape(await metrics.scrape()), "toolgate_webhook_dead_letters");
  assertEquals(await value(), 10);
  now = 999;
  assertEquals(await value(), 10);
  assertEquals(counts, 1);
  now = 1000;
  assertEquals(await value(), 20);
  assertEquals(counts, 2);
  now = 2000;
  const [a, b] = await Promise.all([value(), value()]);
  assertEquals([a, b, counts], [30, 30, 3], "concurrent scrapes share one count");
});

Deno.test("process figures come from prom-client's default metrics under Deno, per registry", async () => {
  const first = new ToolgateMetrics();
  const second = new ToolgateMetrics();
  first.observers.onCall({ tool: "echo", plugin: "test", source: "rest", durationMs: 1 });
  const scrape = parseScrape(await first.scrape());
  for (
    const name of [
      "toolgate_process_resident_memory_bytes",
      "toolgate_process_cpu_seconds_total",
      "toolgate_nodejs_heap_size_used_bytes",
      "toolgate_nodejs_eventloop_lag_seconds",
    ]
  ) {
    const value = sampleValue(scrape, name);
    assert(value !== undefined && value >= 0, `${name}: ${value}`);
  }
  const other = parseScrape(await second.scrape());
  assertEquals(sampleValue(other, "toolgate_tool_calls_total"), undefined, "nothing shared");
  assert(sampleValue(other, "toolgate_process_resident_memory_bytes")! > 0);
  assertEquals(first.contentType, "text/plain; version=0.0.4; charset=utf-8");
});
