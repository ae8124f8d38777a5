/**
 * The audit log as the webhook outbox's committer: a tool call's entry and
 * the deliveries of its `tool.called` and `audit.written` events share one
 * KV commit, written before the call returns.
 *
 * @module
 */
import { assert, assertEquals } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { EventBus, type EventEnvelope } from "../../src/events/mod.ts";
import { Gateway } from "../../src/gateway/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { createDispatcher } from "../../src/webhooks/mod.ts";
import { testConfig, testPlugin } from "../gateway/_fixtures.ts";

async function setup(webhooks: number) {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-outbox-" });
  const config = { ...await testConfig(), dataDir };
  const store = await openStore({ dataDir });
  for (let i = 0; i < webhooks; i++) {
    await store.webhooks.addOutgoing({ url: `http://127.0.0.1:9/hook${i}`, events: "*" });
  }
  const bus = new EventBus();
  const seen: EventEnvelope[] = [];
  bus.subscribe((event) => void seen.push(event));
  // Record mode: deliveries stay in KV for the test to read (nothing is sent).
  const dispatcher = createDispatcher({ store, bus, config, mode: "record" });
  const audit = createAuditLog({ store, bus, outbox: dispatcher });
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: [testPlugin()],
    audit,
    log: () => {},
  });
  await gateway.start();
  await dispatcher.start();
  return {
    store,
    seen,
    gateway,
    async [Symbol.asyncDispose]() {
      await gateway.stop();
      await audit.close();
      await dispatcher.stop();
      store.close();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
}

Deno.test("a tool call's entry and the deliveries of tool.called and audit.written share one commit", async () => {
  await using t = await setup(3);
  const versionBefore = await t.store.deliveries.version();
  await t.gateway.call("echo", { message: "hi" });
  const head = await t.store.audit.readHead();
  const deliveries = await t.store.deliveries.listPending();
  assertEquals(deliveries.length, 6, "3 webhooks × (tool.called, audit.written)");
  const types = deliveries.map((d) => d.record.event_type).sort();
  assertEquals(types, [...Array(3).fill("audit.written"), ...Array(3).fill("tool.called")]);
  for (const delivery of deliveries) {
    assertEquals(delivery.versionstamp, head.versionstamp, "written in the entry's commit");
    assert(
      await t.store.deliveries.readEvent(delivery.record.event_id),
      "the event body is stored",
    );
  }
  assertEquals(await t.store.deliveries.version(), versionBefore + 1n, "the server is signalled");
  // The bus carries the same envelopes, tool.called first.
  const emitted = t.seen.filter((e) => e.type === "tool.called" || e.type === "audit.written");
  assertEquals(emitted.map((e) => e.type), ["tool.called", "audit.written"]);
  assertEquals(
    new Set(deliveries.map((d) => d.record.event_id)),
    new Set(emitted.map((e) => e.id)),
  );
});

Deno.test("without webhooks a tool call still emits tool.called then audit.written", async () => {
  await using t = await setup(0);
  await t.gateway.call("echo", { message: "hi" });
  assertEquals(await t.store.deliveries.listPending(), []);
  const types = t.seen.map((e) => e.type).filter((type) => type !== "plugin.ready");
  assertEquals(types, ["tool.called", "audit.written"]);
});
