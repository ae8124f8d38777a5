import { assert, assertEquals } from "../../_asserts.ts";
import { tempHome } from "../../_helpers.ts";
import type { DeliveryRecord, FanoutRecord } from "../../../src/store/mod.ts";
import { KV_FILE, openKvStore, SCHEMA_VERSION } from "../../../src/store/kv/kv_store.ts";
import type { KvStore } from "../../../src/store/kv/kv_store.ts";
import { CLAIM_SCAN_SLACK, DeliveryClaims } from "../../../src/store/kv/deliveries.ts";

const CREATED_AT = "2026-01-01T00:00:00.000Z";

function record(eventId: string, webhookId: string, due: number, attempts = 1): DeliveryRecord {
  return {
    event_id: eventId,
    event_type: "tool.called",
    webhook_id: webhookId,
    attempt_count: attempts,
    next_attempt_at: due,
    created_at: CREATED_AT,
    attempts: [],
  };
}

function fanout(webhookIds: string[], due: number): FanoutRecord {
  return {
    event_type: "tool.called",
    created_at: CREATED_AT,
    next_attempt_at: due,
    webhook_ids: webhookIds,
  };
}

/** The due index as stored: `[due, event_id, webhook_id | true]` per entry. */
async function dueIndex(store: KvStore): Promise<unknown[][]> {
  const out: unknown[][] = [];
  for await (const entry of store.kv.list({ prefix: ["outbox", "due"] })) {
    out.push(entry.key.slice(2));
  }
  return out;
}

function claimAt(owner: string, now: number, dueBefore = 1_000_000) {
  return { owner, now, until: now + 1000, dueBefore, limit: 100 };
}

Deno.test("the due index follows the records in their commits; a claimed retry moves its entry", async () => {
  await using tmp = await tempHome();
  const store = await openKvStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    await writer.write([
      { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_a", "wh_b"], 10) },
      { op: "put_delivery", delivery: record("evt_2", "wh_a", 20) },
    ]);
    assertEquals(await dueIndex(store), [[10, "evt_1", true], [20, "evt_2", "wh_a"]]);
    assertEquals((await store.deliveries.claimDue(claimAt("owner", 0))).length, 3);
    // Claimed: the store knows where each retry was indexed, and moves its entry.
    await writer.write([
      { op: "put_delivery", delivery: record("evt_1", "wh_a", 30) },
      { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_b"], 10) },
      { op: "put_delivery", delivery: record("evt_2", "wh_a", 40, 2) },
    ]);
    assertEquals(await dueIndex(store), [
      [10, "evt_1", true],
      [30, "evt_1", "wh_a"],
      [40, "evt_2", "wh_a"],
    ]);
    await writer.write([
      { op: "put_delivery", delivery: record("evt_1", "wh_a", 50, 2) },
      { op: "delete_delivery", event_id: "evt_2", webhook_id: "wh_a" },
      { op: "put_fanout", event_id: "evt_1", fanout: fanout([], 10) },
    ]);
    assertEquals(await dueIndex(store), [[50, "evt_1", "wh_a"]]);
  } finally {
    await store.close();
  }
});

Deno.test("claimDue() skips stale due index entries and deletes them", async () => {
  await using tmp = await tempHome();
  const store = await openKvStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    // Written unclaimed, the old due times of rewritten records stay in the index.
    await writer.write([{ op: "put_delivery", delivery: record("evt_1", "wh_a", 10) }]);
    await writer.write([{ op: "put_delivery", delivery: record("evt_1", "wh_a", 500, 2) }]);
    await writer.write([{ op: "put_delivery", delivery: record("evt_2", "wh_a", 20) }]);
    await writer.write([{ op: "delete_delivery", event_id: "evt_2", webhook_id: "wh_a" }]);
    await writer.write([{ op: "put_fanout", event_id: "evt_3", fanout: fanout(["wh_a"], 30) }]);
    await writer.write([{ op: "put_fanout", event_id: "evt_3", fanout: fanout(["wh_a"], 600) }]);
    await store.kv.set(["outbox", "due", 40, "evt_4"], null); // Not an index key at all.
    assertEquals(await dueIndex(store), [
      [10, "evt_1", "wh_a"],
      [20, "evt_2", "wh_a"],
      [30, "evt_3", true],
      [40, "evt_4"],
      [500, "evt_1", "wh_a"],
      [600, "evt_3", true],
    ]);
    assertEquals(await store.deliveries.claimDue(claimAt("owner", 0, 100)), []);
    assertEquals(await dueIndex(store), [[500, "evt_1", "wh_a"], [600, "evt_3", true]]);
    const claimed = await store.deliveries.claimDue(claimAt("owner", 0));
    assertEquals(claimed.map((d) => [d.record.next_attempt_at, d.fanout]), [
      [500, false],
      [600, true],
    ]);
  } finally {
    await store.close();
  }
});

Deno.test("claimDue() reads a bounded part of the index: a backlog it must skip is not walked whole", async () => {
  await using tmp = await tempHome();
  const store = await openKvStore({ dataDir: tmp.home });
  try {
    const writer = store.deliveries.writer();
    const backlog = CLAIM_SCAN_SLACK + 400;
    await Promise.all(
      Array.from(
        { length: backlog },
        (_, i) =>
          writer.write([{ op: "put_delivery", delivery: record(`evt_${i}`, "wh_slow", i) }]),
      ),
    );
    await writer.write([{ op: "put_delivery", delivery: record("evt_late", "wh_ok", backlog) }]);
    // wh_slow is excluded: the claim gives up after limit + claims + slack entries.
    const options = { ...claimAt("owner", 0), limit: 10, excludeWebhooks: ["wh_slow"] };
    assertEquals(await store.deliveries.claimDue(options), []);
    // Claims held widen the window by as many entries: 400 claimed reach evt_late.
    const held = await store.deliveries.claimDue({ ...claimAt("owner", 0), limit: 400 });
    assertEquals(held.length, 400);
    const late = await store.deliveries.claimDue(options);
    assertEquals(late.map((d) => d.record.event_id), ["evt_late"]);
  } finally {
    await store.close();
  }
});

Deno.test("claimDue() returns an event's own delivery record, not its fan-out entry of the same webhook", async () => {
  await using tmp = await tempHome();
  const store = await openKvStore({ dataDir: tmp.home });
  try {
    // Left by a write split across commits and cut short: both forms of evt_1/wh_a.
    await store.deliveries.writer().write([
      { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_a", "wh_b"], 10) },
      { op: "put_delivery", delivery: record("evt_1", "wh_a", 20) },
    ]);
    const claimed = await store.deliveries.claimDue(claimAt("owner", 0));
    assertEquals(claimed.map((d) => [d.record.webhook_id, d.fanout]), [
      ["wh_b", true],
      ["wh_a", false],
    ]);
  } finally {
    await store.close();
  }
});

Deno.test("a claim staged with an audit commit that loses its race is taken back", async () => {
  await using tmp = await tempHome();
  const store = await openKvStore({ dataDir: tmp.home });
  try {
    const guard = { headVersionstamp: null, tailSeq: 0, tailVersionstamps: [] };
    const head = { seq: 1, hash: `sha256:${"1".padStart(64, "0")}`, timestamp: CREATED_AT };
    const entries = [{ seq: 1, bytes: new TextEncoder().encode("{}") }];
    const outbox = (eventId: string) => ({
      ops: [{
        op: "put_fanout" as const,
        event_id: eventId,
        fanout: fanout(["wh_a"], 10),
        claim: { owner: "owner", until: 1000 },
      }],
      bumpVersion: false,
    });
    assert(await store.audit.commit(guard, entries, head, outbox("evt_1")));
    assertEquals(await store.audit.commit(guard, entries, head, outbox("evt_2")), null);
    assertEquals(await store.deliveries.renewClaims("owner", 1000), 1);
    assertEquals(store.claims.get("evt_2", "wh_a"), undefined);
  } finally {
    await store.close();
  }
});

Deno.test("DeliveryClaims: a delivery deleted while a scan read is not returned by that scan", () => {
  const claims = new DeliveryClaims();
  claims.set("evt_1", "wh_a", { owner: "owner", until: 1000, fanout: false, at: 10 });
  const before = claims.beginScan();
  claims.stage([{ op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_a" }]).committed();
  const after = claims.beginScan();
  assertEquals(claims.get("evt_1", "wh_a"), undefined);
  assertEquals(claims.deletedDuring(before, "evt_1", "wh_a"), true);
  assertEquals(claims.deletedDuring(after, "evt_1", "wh_a"), false);
  claims.endScan(before);
  claims.endScan(after);
  assertEquals(claims.deletedDuring(claims.beginScan(), "evt_1", "wh_a"), false);
});

Deno.test("a schema 1 file gets its due index on open, then records schema 2", async () => {
  await using tmp = await tempHome();
  const path = `${tmp.home}/${KV_FILE}`;
  // The layout schema 1 wrote: records, no due index.
  const kv = await Deno.openKv(path);
  const count = 1200;
  for (let i = 0; i < count; i += 100) {
    const atomic = kv.atomic();
    for (let j = i; j < i + 100; j++) {
      const eventId = `evt_${String(j).padStart(5, "0")}`;
      atomic.set(["outbox", "event", eventId], {
        id: eventId,
        type: "tool.called",
        timestamp: CREATED_AT,
        size: 2,
        body: new TextEncoder().encode("{}"),
      });
      if (j % 2) atomic.set(["outbox", "delivery", eventId, "wh_a"], record(eventId, "wh_a", j));
      else atomic.set(["outbox", "fanout", eventId], fanout(["wh_a", "wh_b"], j));
    }
    await atomic.commit();
  }
  await kv.set(["meta", "schema_version"], 1);
  // Killed midway through a build before: part of the index is there.
  await kv.set(["outbox", "due", 1, "evt_00001", "wh_a"], null);
  kv.close();

  const store = await openKvStore({ dataDir: tmp.home });
  try {
    assertEquals(SCHEMA_VERSION, 2);
    assertEquals(await store.schemaVersion(), 2);
    assertEquals((await dueIndex(store)).length, count);
    const claimed = await store.deliveries.claimDue({ ...claimAt("owner", 0), limit: 1000 });
    // Three deliveries per two events; the fan-out that passes 1000 is claimed whole.
    assertEquals(claimed.length, 1001);
    assertEquals(claimed[0].record.event_id, "evt_00000");
    assertEquals(claimed.slice(0, 3).map((d) => [d.record.webhook_id, d.fanout]), [
      ["wh_a", true],
      ["wh_b", true],
      ["wh_a", false],
    ]);
  } finally {
    await store.close();
  }
  // Opened again: nothing to build.
  const again = await openKvStore({ dataDir: tmp.home });
  try {
    assertEquals((await dueIndex(again)).length, count);
  } finally {
    await again.close();
  }
});
