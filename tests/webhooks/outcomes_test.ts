import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { OutcomeBatch } from "../../src/webhooks/_outcomes.ts";
import type {
  DeliveryOp,
  DeliveryWriter,
  FanoutRecord,
  OutboxEvent,
  WriteResult,
} from "../../src/store/mod.ts";
import { setup } from "./_setup.ts";

/** A real KV writer that also records the op lists it was given. */
function recording(writer: DeliveryWriter): DeliveryWriter & { writes: DeliveryOp[][] } {
  const writes: DeliveryOp[][] = [];
  return {
    writes,
    get queued() {
      return writer.queued;
    },
    write(ops) {
      writes.push([...ops]);
      return writer.write(ops);
    },
    flush: () => writer.flush(),
  };
}

function fanout(webhookIds: string[]): FanoutRecord {
  return {
    event_type: "tool.called",
    created_at: new Date(0).toISOString(),
    next_attempt_at: 0,
    webhook_ids: webhookIds,
  };
}

function event(id: string): OutboxEvent {
  const body = new TextEncoder().encode(`{"id":"${id}"}`);
  return { id, type: "tool.called", timestamp: new Date(0).toISOString(), body };
}

function logOp(webhookId: string, entryId: string): DeliveryOp {
  return {
    op: "log",
    webhook_id: webhookId,
    entry_id: entryId,
    entry: {
      at: new Date(0).toISOString(),
      attempt: 1,
      ok: true,
      status: 200,
      latency_ms: 1,
      event_id: "evt_a",
      event_type: "tool.called",
    },
  };
}

Deno.test("outcomes of one burst are one write; an event's fan-out record is written once, with the last list", async () => {
  await using env = await setup();
  const ids = ["wh_1", "wh_2", "wh_3"];
  const stored = await env.store.deliveries.writer().write([
    { op: "put_event", event: event("evt_a") },
    { op: "put_fanout", event_id: "evt_a", fanout: fanout(ids) },
  ]);
  const writer = recording(env.store.deliveries.writer());
  // Three attempts run; each waits here once it queued its outcome.
  const batch = new OutcomeBatch({ writer, running: () => 3, lingerMs: 60_000 });
  const first = batch.write([logOp("wh_1", "l1"), {
    op: "put_fanout",
    event_id: "evt_a",
    fanout: fanout(["wh_2", "wh_3"]),
  }]);
  const second = batch.write([logOp("wh_2", "l2"), {
    op: "put_fanout",
    event_id: "evt_a",
    fanout: fanout(["wh_3"]),
  }]);
  assertEquals(writer.writes.length, 0); // the third attempt still runs: nothing written yet
  const third = batch.write([
    logOp("wh_3", "l3"),
    { op: "put_fanout", event_id: "evt_a", fanout: fanout([]) },
    {
      op: "collect_event",
      event_id: "evt_a",
      versionstamp: stored.versionstamps[0],
      size: event("evt_a").body.byteLength,
    },
  ]);
  const results: WriteResult[] = await Promise.all([first, second, third]);
  assertEquals(writer.writes.length, 1);
  assertEquals(writer.writes[0].map((op) => op.op), [
    "log",
    "log",
    "log",
    "put_fanout",
    "collect_event",
  ]);
  // Every op of every outcome has the stamp of the commit that wrote it (or superseded it).
  for (const result of results) {
    assert(result.versionstamps.every((stamp) => typeof stamp === "string" && stamp.length > 0));
  }
  assertEquals(results.map((r) => r.collected), [true, true, true]);
  assertEquals(await env.store.deliveries.listPending(), []);
  assertEquals(await env.store.deliveries.readEvent("evt_a"), null);
  assertEquals((await env.store.deliveries.readLog("wh_2")).length, 1);
});

Deno.test("while attempts run, outcomes wait at most lingerMs; a dead letter is written on its own", async () => {
  await using env = await setup();
  const writer = recording(env.store.deliveries.writer());
  const batch = new OutcomeBatch({ writer, running: () => 10, lingerMs: 5 });
  const dead: DeliveryOp = {
    op: "put_dlq",
    record: {
      dlq_id: "dlq_1",
      webhook_id: "wh_1",
      url: "http://127.0.0.1:9/hook",
      event_id: "evt_a",
      event_type: "tool.called",
      attempts: [],
      failed_at: new Date(0).toISOString(),
    },
    body: event("evt_a").body,
  };
  await Promise.all([
    batch.write([logOp("wh_1", "l1")]),
    batch.write([dead]),
    batch.write([logOp("wh_1", "l2")]),
    batch.write([logOp("wh_1", "l3")]),
  ]);
  assertEquals(writer.writes.map((ops) => ops.map((op) => op.op)), [
    ["log"],
    ["put_dlq"],
    ["log", "log"],
  ]);
  assertEquals((await env.store.deliveries.listDlq()).map((r) => r.dlq_id), ["dlq_1"]);
});

Deno.test("a failed merged write fails every outcome in it; flush() writes what waits", async () => {
  await using env = await setup();
  const failing: DeliveryWriter = {
    queued: 0,
    write: () => Promise.reject(new Error("store down")),
    flush: () => Promise.resolve(),
  };
  const batch = new OutcomeBatch({ writer: failing, running: () => 5, lingerMs: 60_000 });
  const a = batch.write([logOp("wh_1", "l1")]);
  const b = batch.write([logOp("wh_1", "l2")]);
  await batch.flush();
  await assertRejects(() => a, Error, "store down");
  await assertRejects(() => b, Error, "store down");
  const writer = recording(env.store.deliveries.writer());
  const ok = new OutcomeBatch({ writer, running: () => 5, lingerMs: 60_000 });
  const c = ok.write([logOp("wh_1", "l3")]);
  await ok.flush();
  await c;
  assertEquals(writer.writes.length, 1);
});

Deno.test("OutcomeBatch rejects bad options", () => {
  const writer: DeliveryWriter = {
    queued: 0,
    write: () => Promise.reject(new Error("unused")),
    flush: () => Promise.resolve(),
  };
  let threw = 0;
  for (const options of [{ lingerMs: -1 }, { maxUnits: 0 }, { maxUnits: 1.5 }]) {
    try {
      new OutcomeBatch({ writer, running: () => 0, ...options });
    } catch (error) {
      if (error instanceof RangeError) threw++;
    }
  }
  assertEquals(threw, 3);
});
