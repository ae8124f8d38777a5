import { assert, assertEquals, assertThrows } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import { tempHome } from "../../_helpers.ts";
import type { DeliveryRecord } from "../../../src/store/mod.ts";
import { openKvStore as openStore } from "../../../src/store/kv/kv_store.ts";

function delivery(eventId: string, webhookId: string): DeliveryRecord {
  return {
    event_id: eventId,
    event_type: "tool.called",
    webhook_id: webhookId,
    attempt_count: 0,
    next_attempt_at: 0,
    created_at: new Date(0).toISOString(),
    attempts: [],
  };
}

function event(id: string, size = 100) {
  return {
    id,
    type: "tool.called",
    timestamp: new Date(0).toISOString(),
    body: new Uint8Array(size).fill(7),
  };
}

Deno.test("DeliveryWriter group-commits concurrent writes into far fewer commits", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    const results = await Promise.all(
      Array.from(
        { length: 2500 },
        (_, i) => writer.write([{ op: "put_delivery", delivery: delivery(`evt_${i}`, "wh_a") }]),
      ),
    );
    const commits = new Set(results.map((r) => r.versionstamps[0]));
    assert(commits.size < 100, `${commits.size} commits for 2500 writes`);
    assertEquals((await store.deliveries.listPending()).length, 2500);
  } finally {
    store.close();
  }
});

Deno.test("DeliveryWriter splits a write larger than one KV commit, chunking big bodies", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    const big = event("evt_big", 1_000_000);
    big.body.forEach((_, i) => big.body[i] = i % 251);
    const ops = [
      { op: "put_event" as const, event: big },
      ...Array.from({ length: 1500 }, (_, i) => ({
        op: "put_delivery" as const,
        delivery: delivery("evt_big", `wh_${i}`),
      })),
    ];
    const result = await writer.write(ops);
    assert(result.versionstamps.every((v) => v.length > 0));
    assertEquals((await store.deliveries.listPending()).length, 1500);
    const stored = await store.deliveries.readEvent("evt_big");
    assertEquals(stored!.event.body, big.body);
    assertEquals(stored!.versionstamp, result.versionstamps[0]);
  } finally {
    store.close();
  }
});

Deno.test("a collect_event whose event changed meanwhile is skipped, the rest of the batch applies", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    const first = await writer.write([{ op: "put_event", event: event("evt_1") }]);
    await writer.write([{ op: "put_event", event: event("evt_1") }]); // rewritten (a replay)
    const result = await writer.write([
      { op: "collect_event", event_id: "evt_1", versionstamp: first.versionstamps[0], size: 100 },
      { op: "put_delivery", delivery: delivery("evt_2", "wh_a") },
    ]);
    assertEquals(result.collected, false);
    assert(await store.deliveries.readEvent("evt_1"));
    assertEquals((await store.deliveries.listPending()).length, 1);
    // The slow path collects it once nothing refers to it.
    assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), true);
    assertEquals(await store.deliveries.readEvent("evt_1"), null);
    await writer.write([{ op: "put_event", event: event("evt_2") }]);
    assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_2"), false);
  } finally {
    store.close();
  }
});

Deno.test("the delivery log keeps the newest 20 entries per webhook", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    for (let i = 0; i < 25; i++) {
      await store.deliveries.appendLog("wh_a", {
        at: new Date(1_700_000_000_000 + i).toISOString(),
        attempt: 1,
        ok: true,
        status: 200,
        latency_ms: i,
        event_id: `evt_${i}`,
        event_type: "tool.called",
      });
    }
    const log = await store.deliveries.readLog("wh_a", 100);
    assertEquals(log.length, 20);
    assertEquals(log[0].event_id, "evt_24");
    assertEquals(log[19].event_id, "evt_5");
    assertEquals(await store.deliveries.readLog("wh_b"), []);
  } finally {
    store.close();
  }
});

Deno.test("a fan-out record stands for a pending delivery per webhook until rewritten without them", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    const fanout = {
      event_type: "tool.called",
      created_at: new Date(5).toISOString(),
      next_attempt_at: 5,
      webhook_ids: ["wh_a", "wh_b", "wh_c"],
    };
    await writer.write([
      { op: "put_event", event: event("evt_1") },
      { op: "put_fanout", event_id: "evt_1", fanout },
    ]);
    const listed = await store.deliveries.listPending();
    assertEquals(listed.map((d) => [d.record.webhook_id, d.fanout]), [
      ["wh_a", true],
      ["wh_b", true],
      ["wh_c", true],
    ]);
    assertEquals(listed[0].record, {
      ...delivery("evt_1", "wh_a"),
      next_attempt_at: 5,
      created_at: fanout.created_at,
    });
    // wh_b needs a retry: its own record now, and the fan-out no longer lists it.
    await writer.write([
      { op: "put_delivery", delivery: { ...delivery("evt_1", "wh_b"), attempt_count: 1 } },
      { op: "put_fanout", event_id: "evt_1", fanout: { ...fanout, webhook_ids: ["wh_a", "wh_c"] } },
    ]);
    assertEquals(
      (await store.deliveries.listPending()).map((
        d,
      ) => [d.record.webhook_id, d.fanout, d.record.attempt_count]),
      [["wh_b", false, 1], ["wh_a", true, 0], ["wh_c", true, 0]],
    );
    assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), false);
    await writer.write([
      { op: "put_fanout", event_id: "evt_1", fanout: { ...fanout, webhook_ids: [] } },
      // Its due time lets the commit delete its due index entry too.
      { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_b", next_attempt_at: 0 },
    ]);
    assertEquals(await store.deliveries.listPending(), []);
    const keys = [];
    for await (const entry of store.kv.list({ prefix: ["outbox"] })) keys.push(entry.key);
    assertEquals(keys, [["outbox", "event", "evt_1"]]);
    assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), true);
  } finally {
    store.close();
  }
});

Deno.test("a KV store written before the DLQ index is indexed by its first page or count", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    await Promise.all(Array.from({ length: 300 }, (_, i) =>
      writer.write([{
        op: "put_dlq",
        record: {
          dlq_id: `dlq_${String(i).padStart(3, "0")}`,
          webhook_id: i % 3 ? "wh_a" : "wh_b",
          url: "https://example.com/hook",
          event_id: `evt_${i}`,
          event_type: "tool.called",
          attempts: [],
          failed_at: new Date(1000 * (300 - i)).toISOString(),
        },
        body: new TextEncoder().encode(`{"id":"evt_${i}"}`),
      }])));
    // As an older release left it: records only, and a stray entry of a build cut short.
    const kv = store.kv;
    for (const prefix of [["dlq", "order"], ["dlq", "by_webhook"]]) {
      for await (const entry of kv.list({ prefix })) await kv.delete(entry.key);
    }
    await kv.delete(["dlq", "count"]);
    await kv.delete(["dlq", "indexed"]);
    await kv.set(["dlq", "order", "1970-01-01T00:00:00.000Z", "dlq_gone"], "wh_a");
    const other = await openStore({ dataDir: tmp.home });
    try {
      // A write before the build only bumps the version.
      await other.deliveries.writer().write([{ op: "delete_dlq", dlq_id: "dlq_299", size: 0 }]);
      assertEquals(await other.deliveries.countDlq(), 299);
      const page = await other.deliveries.listDlq({ limit: 3 });
      assertEquals(page.map((r) => r.dlq_id), ["dlq_298", "dlq_297", "dlq_296"]);
      const hook = await other.deliveries.listDlq({ webhook: "wh_b", limit: 2 });
      assertEquals(hook.map((r) => r.dlq_id), ["dlq_297", "dlq_294"]);
      // Deleting them all, many per commit, keeps the count.
      await other.deliveries.deleteDlq(await other.deliveries.listDlq());
      assertEquals(await store.deliveries.countDlq(), 0);
      assertEquals(await store.deliveries.listDlq({ limit: 5 }), []);
      let left = 0;
      for await (const _ of kv.list({ prefix: ["dlq", "order"] })) left++;
      assertEquals(left, 0);
    } finally {
      other.close();
    }
  } finally {
    store.close();
  }
});

Deno.test("DLQ ops are refused inside another commit: only the writer keeps the DLQ index", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const error = assertThrows(
      () => store.deliveries.opsCost([{ op: "delete_dlq", dlq_id: "dlq_1", size: 0 }]),
      "DLQ op",
    );
    assert(error instanceof GatewayError);
    assertEquals(error.code, "INTERNAL");
  } finally {
    store.close();
  }
});
