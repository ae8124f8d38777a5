/**
 * The incoming router's job queue on a real KV file: jobs beyond the
 * in-memory queue wait in the store and still run exactly once each.
 *
 * @module
 */
import { z } from "zod";
import { assertEquals } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { EventBus } from "../../src/events/mod.ts";
import { Gateway, type PluginDefinition } from "../../src/gateway/mod.ts";
import { IncomingRouter } from "../../src/webhooks/mod.ts";
import { tempStore } from "../audit/_store.ts";
import { testConfig } from "../gateway/_fixtures.ts";

/** A plugin whose `count` tool records how often each `n` was handled. */
function countingPlugin(counts: Map<number, number>): PluginDefinition {
  return {
    name: "counter",
    version: "1.0.0",
    zeroConfig: true,
    tools: [{
      name: "count",
      description: "Counts calls per n",
      input: z.object({ n: z.number().int() }),
      execute: async (args) => {
        const n = args.n as number;
        await new Promise((resolve) => setTimeout(resolve, 1));
        counts.set(n, (counts.get(n) ?? 0) + 1);
        return { n };
      },
    }],
  };
}

Deno.test("jobs past the in-memory queue wait in the store and each runs exactly once", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const config = { ...await testConfig(), dataDir: temp.dataDir };
  const bus = new EventBus();
  const audit = createAuditLog({ store, bus });
  const counts = new Map<number, number>();
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: [countingPlugin(counts)],
    audit,
    log: () => {},
  });
  await gateway.start();
  const endpoint = await store.webhooks.addIncoming({
    name: "count",
    path: "/hooks/count",
    handler: "count",
  });
  const router = new IncomingRouter({
    store,
    gateway,
    audit,
    config,
    log: () => {},
    concurrency: 2,
    maxQueuedJobs: 5,
  });
  await router.start();
  try {
    const total = 60;
    const statuses = await Promise.all(Array.from({ length: total }, async (_, n) => {
      const response = await router.handle(
        new Request("http://127.0.0.1/hooks/count", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ n }),
        }),
        endpoint,
      );
      await response.body?.cancel();
      return response.status;
    }));
    assertEquals(statuses, Array(total).fill(202));
    // Not router.idle(), which loads waiting jobs itself: the router must on its own.
    for (let i = 0; i < 500 && (await store.incoming.list()).length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assertEquals(counts.size, total, "every payload was handled");
    for (const [n, times] of counts) assertEquals(times, 1, `payload ${n} ran ${times} times`);
    assertEquals(await store.incoming.list(), []);
  } finally {
    await router.stop();
    await gateway.stop();
    await audit.close();
  }
});

Deno.test("a job completed while it was listed reads as gone, not as a broken body", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const job = await store.incoming.put({
    id: "inj_done",
    endpoint_id: "in_1",
    handler: "count",
    received_at: new Date().toISOString(),
  }, new TextEncoder().encode('{"n":1}'));
  assertEquals(await store.incoming.complete([{ job, failed: false }]), [true]);
  assertEquals(await store.incoming.readBody(job), null);
});
