/**
 * `http_request`'s circuit breakers, kept per destination, with the real
 * plugin and real local servers: a dead destination opens its own circuit
 * while calls to a live one go on; the open one answers `CIRCUIT_OPEN`
 * naming it, and closes after `circuit_reset_ms` (from config).
 */
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { CircuitClosedDataSchema, CircuitOpenedDataSchema } from "../../src/events/mod.ts";
import { httpPlugin } from "../../src/plugins/mod.ts";
import { destinationOf } from "../../src/plugins/http/mod.ts";
import { closedPort, expectCode, pluginGateway } from "./_gateway.ts";

/** The test servers listen on 127.0.0.1: the egress policy must allow it. */
const LOOPBACK = { egress: { allow: ["127.0.0.1/32"] } };

/** A server on 127.0.0.1, port 0, answering every request with 200. */
function liveServer(): { url: string; port: number; hits: number } & AsyncDisposable {
  const state = { hits: 0 };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    state.hits++;
    return Response.json({ ok: true });
  });
  const { port } = server.addr;
  return {
    url: `http://127.0.0.1:${port}/ok`,
    port,
    get hits() {
      return state.hits;
    },
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

/** A server that answered once, then closed: its port refuses connections. */
async function deadServer(): Promise<{ url: string; port: number }> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    return new Response("bye");
  });
  const { port } = server.addr;
  await server.shutdown();
  return { url: `http://127.0.0.1:${port}/gone`, port };
}

Deno.test("destinationOf() is scheme, lower-case host and port, default port filled in", () => {
  const of = (raw: string) => destinationOf(new URL(raw));
  assertEquals(of("HTTPS://User:pw@API.Example.com/v1?q=1#f"), "https://api.example.com:443");
  assertEquals(of("http://api.example.com"), "http://api.example.com:80");
  assertEquals(of("http://api.example.com:80/x"), "http://api.example.com:80");
  assertEquals(of("https://api.example.com:8443"), "https://api.example.com:8443");
  assertEquals(of("https://api.example.com./"), "https://api.example.com:443");
  assertEquals(of("http://[::1]:8080/"), "http://[::1]:8080");
  assertEquals(of("http://bücher.example/"), "http://xn--bcher-kva.example:80");
  // Same host, other scheme or port: another destination.
  assertEquals(of("http://127.0.0.1:443"), "http://127.0.0.1:443");
});

Deno.test("a dead destination opens its own circuit; calls to a live one go on, then it closes after circuit_reset_ms", async () => {
  await using live = liveServer();
  const dead = await deadServer();
  const deadDestination = `http://127.0.0.1:${dead.port}`;
  await using gw = await pluginGateway([httpPlugin()], {
    file: { ...LOOPBACK, tools: { circuit_threshold: 2, circuit_reset_ms: 200 } },
  });
  const { gateway, events } = gw;
  const call = (url: string) => gateway.call("http_request", { url });

  // Interleaved: a success elsewhere does not reset the dead destination's count.
  await expectCode(() => call(dead.url), "PLUGIN_REQUEST_FAILED");
  assertEquals((await call(live.url)).output.status, 200);
  await expectCode(() => call(dead.url), "PLUGIN_REQUEST_FAILED");
  const opened = events.filter((e) => e.type === "circuit.opened");
  assertEquals(opened.map((e) => e.data), [{
    tool_name: "http_request",
    plugin: "http",
    failure_count: 2,
    threshold: 2,
    reset_after_ms: 200,
  }]);
  CircuitOpenedDataSchema.strict().parse(opened[0].data);
  assertEquals(
    events.filter((e) => e.type === "tool.failed").map((e) => e.data.circuit_state),
    ["closed", "open"],
  );
  assert(
    gw.logs.some((line) => line.includes(`circuit opened for http_request to ${deadDestination}`)),
    gw.logs.join("\n"),
  );

  // The dead destination is refused fast, whatever its path or case; the live one still runs.
  for (const url of [dead.url, `HTTP://127.0.0.1:${dead.port}/other?q=1`]) {
    const refused = await expectCode(() => call(url), "CIRCUIT_OPEN");
    assertMatch(refused.message, new RegExp(`unavailable for ${deadDestination}`));
    const details = refused.details as Record<string, unknown>;
    assertEquals(details.tool, "http_request");
    assertEquals(details.destination, deadDestination);
    const retryAfter = details.retry_after_ms as number;
    assert(Number.isInteger(retryAfter) && retryAfter >= 0 && retryAfter <= 200, `${retryAfter}`);
  }
  const hitsBefore = live.hits;
  for (let i = 0; i < 3; i++) assertEquals((await call(live.url)).output.status, 200);
  assertEquals(live.hits, hitsBefore + 3);
  const circuits = gateway.openCircuits();
  assertEquals(circuits.map(({ closes_at: _, ...c }) => c), [
    { tool_name: "http_request", plugin: "http", destination: deadDestination },
  ]);
  assert(Date.parse(circuits[0].closes_at) > Date.now() - 10);

  // After circuit_reset_ms it closes: one event with the spec's fields only.
  const closed = Promise.withResolvers<void>();
  const off = gateway.bus.subscribe((event) => {
    if (event.type === "circuit.closed") closed.resolve();
  });
  await closed.promise;
  off();
  const closedEvents = events.filter((e) => e.type === "circuit.closed");
  assertEquals(closedEvents.length, 1);
  CircuitClosedDataSchema.strict().parse(closedEvents[0].data);
  assertEquals(Object.keys(closedEvents[0].data).sort(), ["downtime_ms", "plugin", "tool_name"]);
  assertEquals(closedEvents[0].data.tool_name, "http_request");
  assertEquals(closedEvents[0].data.plugin, "http");
  assert((closedEvents[0].data.downtime_ms as number) >= 150);
  assertEquals(gateway.openCircuits(), []);

  // Closed again, with a fresh count: the call runs (and fails) without reopening it.
  events.length = 0;
  await expectCode(() => call(dead.url), "PLUGIN_REQUEST_FAILED");
  assertEquals(events.map((e) => [e.type, e.data.circuit_state]), [["tool.failed", "closed"]]);
});

Deno.test("each destination (host and port) has its own circuit, with the tool's override", async () => {
  const first = await deadServer();
  const second = await deadServer();
  await using gw = await pluginGateway([httpPlugin()], {
    file: {
      ...LOOPBACK,
      tools: { overrides: { http_request: { circuit_threshold: 1, circuit_reset_ms: 60_000 } } },
    },
  });
  const call = (url: string) => gw.gateway.call("http_request", { url });
  await expectCode(() => call(first.url), "PLUGIN_REQUEST_FAILED");
  await expectCode(() => call(first.url), "CIRCUIT_OPEN");
  // Another port on the same host is another destination: it runs and opens its own.
  await expectCode(() => call(second.url), "PLUGIN_REQUEST_FAILED");
  await expectCode(() => call(second.url), "CIRCUIT_OPEN");
  // Nothing listens on this one either; its first call still runs.
  const third = `http://127.0.0.1:${closedPort()}/`;
  await expectCode(() => call(third), "PLUGIN_REQUEST_FAILED");
  assertEquals(
    gw.gateway.openCircuits().map((c) => c.destination),
    [first.port, second.port, new URL(third).port].map((port) => `http://127.0.0.1:${port}`),
  );
  assertEquals(gw.events.filter((e) => e.type === "circuit.opened").length, 3);
});
