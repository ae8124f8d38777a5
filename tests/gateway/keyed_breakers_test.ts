/**
 * Circuit breakers kept per destination: {@linkcode KeyedBreakers} on its
 * own (counts per key, bounded, idle ones dropped), and the gateway's use of
 * a tool's `breakerKey` (other tools, and calls without a key, keep the
 * tool's own breaker).
 */
import { z } from "zod";
import { assert, assertEquals, assertMatch, assertThrows } from "../_asserts.ts";
import { EventBus, type EventEnvelope } from "../../src/events/mod.ts";
import { ALL_EVENT_DATA_SCHEMAS, type EventType } from "../../src/events/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import {
  Gateway,
  type PluginContext,
  type PluginDefinition,
  type ToolDefinition,
} from "../../src/gateway/mod.ts";
import { KeyedBreakers } from "../../src/gateway/keyed_breakers.ts";
import { openStore } from "../../src/store/mod.ts";
import { expectCode } from "../plugins/_gateway.ts";
import { testConfig } from "./_fixtures.ts";

Deno.test("KeyedBreakers counts failures per key and drops a key's breaker on success", () => {
  const opened: string[] = [];
  const breakers = new KeyedBreakers({
    threshold: 2,
    resetAfterMs: 60_000,
    onOpen: (key) => opened.push(key),
  });
  breakers.recordFailure("a");
  breakers.recordFailure("b");
  assertEquals(breakers.size, 2);
  breakers.recordSuccess("b");
  assertEquals(breakers.size, 1, "a success leaves nothing to remember");
  breakers.recordSuccess("never-failed");
  breakers.recordFailure("b");
  assertEquals([breakers.state("a"), breakers.state("b")], ["closed", "closed"]);
  breakers.recordFailure("a");
  assertEquals([breakers.state("a"), breakers.state("b")], ["open", "closed"]);
  assertEquals(opened, ["a"]);
  // A success that started before it opened does not close it.
  breakers.recordSuccess("a");
  assertEquals(breakers.state("a"), "open");
  assertEquals(breakers.open().map((o) => o.key), ["a"]);
  assert(breakers.closesAt("a")! > Date.now());
  assertEquals(breakers.closesAt("b"), undefined);
  breakers.dispose();
});

Deno.test("KeyedBreakers closes a key after resetAfterMs and forgets it", async () => {
  const closed = Promise.withResolvers<{ key: string; downtimeMs: number }>();
  const breakers = new KeyedBreakers({
    threshold: 1,
    resetAfterMs: 30,
    onClose: (key, { downtimeMs }) => closed.resolve({ key, downtimeMs }),
  });
  breakers.recordFailure("x");
  assertEquals(breakers.state("x"), "open");
  const { key, downtimeMs } = await closed.promise;
  assertEquals(key, "x");
  assert(downtimeMs >= 25, `${downtimeMs}`);
  assertEquals([breakers.state("x"), breakers.size, breakers.open()], ["closed", 0, []]);
});

Deno.test("KeyedBreakers holds at most maxKeys: the least recently failed closed key goes first", () => {
  const breakers = new KeyedBreakers({ threshold: 3, resetAfterMs: 60_000, maxKeys: 2 });
  breakers.recordFailure("a");
  breakers.recordFailure("b");
  breakers.recordFailure("c"); // a goes
  assertEquals(breakers.size, 2);
  breakers.recordFailure("b"); // b is now the most recent
  breakers.recordFailure("d"); // c goes
  breakers.recordFailure("b"); // b's third: open
  assertEquals(breakers.state("b"), "open");
  breakers.recordFailure("a"); // d goes (b is open), a starts again from one
  breakers.recordFailure("a");
  assertEquals(breakers.state("a"), "closed", "a's count started again after it was dropped");
  assertEquals(breakers.size, 2);
  breakers.dispose();
});

Deno.test("KeyedBreakers full of open circuits tracks no new key (once told) until one closes", async () => {
  const full: string[] = [];
  const closed = Promise.withResolvers<void>();
  const breakers = new KeyedBreakers({
    threshold: 1,
    resetAfterMs: 40,
    maxKeys: 2,
    onFull: (key) => full.push(key),
    onClose: () => closed.resolve(),
  });
  breakers.recordFailure("a");
  breakers.recordFailure("b");
  breakers.recordFailure("c");
  breakers.recordFailure("d");
  assertEquals([breakers.state("c"), breakers.state("d"), breakers.size], ["closed", "closed", 2]);
  assertEquals(full, ["c"]);
  await closed.promise;
  breakers.recordFailure("c");
  assertEquals(breakers.state("c"), "open");
  breakers.dispose();
});

Deno.test("KeyedBreakers rejects a bound that is not a positive integer", () => {
  const bound = assertThrows(() => new KeyedBreakers({ maxKeys: 0 }), "Invalid circuit key bound");
  assert(bound instanceof RangeError);
  assertThrows(() => new KeyedBreakers({ threshold: 0 }), "Invalid circuit threshold");
});

/** Calls of `net_call` that fail while their host is in `down`. */
function netPlugin(down: Set<string>, contexts: PluginContext[] = []): PluginDefinition {
  const tools: ToolDefinition[] = [
    {
      name: "net_call",
      description: "Calls a host",
      input: z.object({ host: z.string() }),
      idempotent: true,
      breakerKey: (args) => {
        if (args.host === "broken-key") throw new Error("no key for you");
        return args.host === "" ? undefined : `h://${args.host}`;
      },
      execute: (args) =>
        down.has(args.host as string)
          ? Promise.reject(new GatewayError("PLUGIN_REQUEST_FAILED", `Request to ${args.host}`))
          : Promise.resolve({ host: args.host }),
    },
    {
      name: "plain",
      description: "No breaker key",
      input: z.object({}),
      execute: () => down.has("plain") ? Promise.reject(new Error("down")) : Promise.resolve({}),
    },
  ];
  return {
    name: "net",
    version: "1.0.0",
    zeroConfig: true,
    initialize: (context) => void contexts.push(context),
    tools,
  };
}

async function netGateway(
  file: Record<string, unknown>,
  plugin: PluginDefinition,
  maxBreakerKeys?: number,
) {
  const config = await testConfig(file);
  const store = await openStore({ dataDir: config.dataDir, memory: true });
  const bus = new EventBus();
  const events: EventEnvelope[] = [];
  const logs: string[] = [];
  bus.subscribe((event) => void events.push(event));
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: [plugin],
    log: (message) => logs.push(message),
    ...(maxBreakerKeys ? { maxBreakerKeys } : {}),
  });
  await gateway.start();
  return {
    gateway,
    events,
    logs,
    [Symbol.asyncDispose]: async () => {
      await gateway.stop();
      store.close();
    },
  };
}

Deno.test("a tool's breakerKey opens one destination's circuit; its other destinations and tools go on", async () => {
  const down = new Set(["a", "plain"]);
  await using t = await netGateway(
    { tools: { circuit_threshold: 2, circuit_reset_ms: 60_000 } },
    netPlugin(down),
  );
  const call = (host: string) => t.gateway.call("net_call", { host });
  await expectCode(() => call("a"), "PLUGIN_REQUEST_FAILED");
  assertEquals((await call("b")).output, { host: "b" });
  await expectCode(() => call("a"), "PLUGIN_REQUEST_FAILED");
  const refused = await expectCode(() => call("a"), "CIRCUIT_OPEN");
  assertEquals((refused.details as Record<string, unknown>).destination, "h://a");
  assertEquals((await call("b")).output, { host: "b" });
  // The tool's own circuit is closed: a call without a key still runs.
  assertEquals((await call("")).output, { host: "" });
  // Another tool keeps its own breaker.
  await expectCode(() => t.gateway.call("plain", {}), "TOOL_EXECUTION_FAILED");
  await expectCode(() => t.gateway.call("plain", {}), "TOOL_EXECUTION_FAILED");
  await expectCode(() => t.gateway.call("plain", {}), "CIRCUIT_OPEN");
  assertEquals(
    t.gateway.openCircuits().map(({ closes_at: _, ...c }) => c),
    [
      { tool_name: "net_call", plugin: "net", destination: "h://a" },
      { tool_name: "plain", plugin: "net" },
    ],
  );
  const opened = t.events.filter((e) => e.type === "circuit.opened").map((e) => e.data);
  assertEquals(opened.map((d) => d.tool_name), ["net_call", "plain"]);
  for (const event of t.events) {
    ALL_EVENT_DATA_SCHEMAS[event.type as EventType].strict().parse(event.data);
  }
});

Deno.test("calls without a key (or whose breakerKey throws) count towards the tool's own breaker", async () => {
  const down = new Set(["", "broken-key"]);
  await using t = await netGateway(
    { tools: { circuit_threshold: 2, circuit_reset_ms: 60_000 } },
    netPlugin(down),
  );
  await expectCode(() => t.gateway.call("net_call", { host: "" }), "PLUGIN_REQUEST_FAILED");
  await expectCode(
    () => t.gateway.call("net_call", { host: "broken-key" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assert(t.logs.some((line) => /breakerKey failed.*no key for you/.test(line)), t.logs.join("\n"));
  const refused = await expectCode(() => t.gateway.call("net_call", { host: "" }), "CIRCUIT_OPEN");
  assertEquals((refused.details as Record<string, unknown>).destination, undefined);
  assertMatch(refused.message, /^Tool net_call is unavailable: its circuit is open/);
  // Keyed calls consult their destination's breaker only.
  assertEquals((await t.gateway.call("net_call", { host: "b" })).output, { host: "b" });
  assertEquals(t.gateway.openCircuits().map((c) => c.destination), [undefined]);
});

Deno.test("retries of an idempotent tool stop once the destination's circuit opens", async () => {
  await using t = await netGateway(
    {
      tools: {
        circuit_threshold: 2,
        circuit_reset_ms: 60_000,
        overrides: { net_call: { retries: 3 } },
      },
    },
    netPlugin(new Set(["a"])),
  );
  await expectCode(() => t.gateway.call("net_call", { host: "a" }), "PLUGIN_REQUEST_FAILED");
  assertEquals(
    t.events.filter((e) => e.type === "tool.failed").map((
      e,
    ) => [e.data.attempt, e.data.circuit_state]),
    [[1, "closed"], [2, "open"]],
  );
});

Deno.test("maxBreakerKeys bounds the destinations held; an open destination survives setTools()", async () => {
  const contexts: PluginContext[] = [];
  const plugin = netPlugin(new Set(["a", "b"]), contexts);
  await using t = await netGateway(
    { tools: { circuit_threshold: 1, circuit_reset_ms: 60_000 } },
    plugin,
    1,
  );
  await expectCode(() => t.gateway.call("net_call", { host: "a" }), "PLUGIN_REQUEST_FAILED");
  // Full of open circuits: b is not tracked, so it is never refused fast.
  await expectCode(() => t.gateway.call("net_call", { host: "b" }), "PLUGIN_REQUEST_FAILED");
  await expectCode(() => t.gateway.call("net_call", { host: "b" }), "PLUGIN_REQUEST_FAILED");
  assert(t.logs.some((line) => line.includes("circuit breakers of net_call full")), t.logs.join());
  contexts[0].setTools(plugin.tools);
  await expectCode(() => t.gateway.call("net_call", { host: "a" }), "CIRCUIT_OPEN");
  assertEquals(t.gateway.openCircuits().map((c) => c.destination), ["h://a"]);
});
