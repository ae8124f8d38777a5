/**
 * An open `http_request` destination as the HTTP surface shows it: the REST
 * `CIRCUIT_OPEN` (503, `Retry-After`, `details.destination`), `/health`'s
 * `open_circuits`, the `toolgate_circuit_open` gauge's `destination` label
 * and the console's overview; calls to other destinations go on.
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { consoleRoutes, metricsRoutes } from "../../src/http/mod.ts";
import { ToolgateMetrics } from "../../src/metrics/mod.ts";
import { httpPlugin } from "../../src/plugins/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { parseScrape, sampleValue } from "../metrics/_parse.ts";
import { closedPort } from "../plugins/_gateway.ts";
import { testPlugin } from "../gateway/_fixtures.ts";
import { postJson, testApp } from "./_fixtures.ts";

Deno.test("an open http_request destination shows in CIRCUIT_OPEN, /health, /metrics and the console", async () => {
  const live = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    return Response.json({ ok: true });
  });
  await using _live = { [Symbol.asyncDispose]: () => live.shutdown() };
  const deadPort = closedPort();
  const dead = `http://127.0.0.1:${deadPort}`;
  const liveUrl = `http://127.0.0.1:${live.addr.port}/ok`;
  const metrics = new ToolgateMetrics({ processMetrics: false });
  const store = await openStore({ dataDir: "/nonexistent/toolgate-test", memory: true });
  const audit = createAuditLog({ store });
  await using t = await testApp({
    plugins: [httpPlugin(), testPlugin()],
    file: {
      egress: { allow: ["127.0.0.1/32"] },
      tools: { circuit_threshold: 1, circuit_reset_ms: 60_000 },
    },
    routes: [metricsRoutes(metrics), consoleRoutes({ store, audit })],
  });
  await using _store = {
    [Symbol.asyncDispose]: async () => {
      await audit.close();
      store.close();
    },
  };
  metrics.watch({ gateway: t.gateway });
  const call = (url: string) => postJson(t.app, "/tools/http_request", { url });

  const failed = await call(`${dead}/x`);
  assertEquals(failed.status, 502);
  await failed.body?.cancel();
  const refused = await call(`${dead}/y`);
  assertEquals(refused.status, 503);
  const retryAfter = Number(refused.headers.get("retry-after"));
  assert(retryAfter >= 59 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  const body = await refused.json();
  assertEquals(body.error.code, "CIRCUIT_OPEN");
  assertEquals(body.error.details.destination, dead);
  assertEquals(body.error.details.tool, "http_request");
  assertStringIncludes(body.error.message, dead);
  const ok = await call(liveUrl);
  assertEquals(ok.status, 200);
  assertEquals((await ok.json()).content.length > 0, true);

  const health = await (await t.app.request("/health")).json();
  assertEquals(health.open_circuits.length, 1);
  const [circuit] = health.open_circuits;
  assertEquals(
    { ...circuit, closes_at: undefined },
    { tool_name: "http_request", plugin: "http", destination: dead, closes_at: undefined },
  );
  assert(Date.parse(circuit.closes_at) > Date.now());

  const scrape = parseScrape(await (await t.app.request("/metrics")).text());
  const gauge = scrape.samples.filter((s) => s.name === "toolgate_circuit_open");
  assertEquals(
    gauge.filter((s) => s.labels.tool === "http_request").map((s) => [s.labels, s.value]),
    [
      [{ tool: "http_request", plugin: "http" }, 0],
      [{ tool: "http_request", plugin: "http", destination: dead }, 1],
    ],
  );
  assertEquals(sampleValue(scrape, "toolgate_circuit_open", { tool: "echo", plugin: "test" }), 0);
  assert(
    gauge.every((s) => s.labels.tool === "http_request" || s.labels.destination === undefined),
    "only http_request has a destination label",
  );

  const page = await (await t.app.request("/ui")).text();
  assertStringIncludes(page, '<th scope="col">Destination</th>');
  assertStringIncludes(page, `<td data-label="Destination">${dead}</td>`);
});
