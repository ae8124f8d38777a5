/**
 * Contract: the delivery outbox (events, fan-out entries and delivery
 * records), the dead-letter queue and the delivery logs, as the webhook
 * dispatcher, the DLQ commands and the delivery log use them.
 *
 * @module
 */
import { assert, assertEquals, assertThrows } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import {
  DELIVERY_LOG_SIZE,
  type DeliveryLogEntry,
  type DeliveryOp,
  type DeliveryRecord,
  type DlqRecord,
  DlqRecordSchema,
  type FanoutRecord,
  type OutboxEvent,
} from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

const encoder = new TextEncoder();
const CREATED_AT = "2026-01-01T00:00:00.000Z";
const DUE = Date.parse(CREATED_AT);
const LOG_ID_A = "01J0000000000000000000000A";
const LOG_ID_B = "01J0000000000000000000000B";

function outboxEvent(id: string, text = `{"id":"${id}"}`): OutboxEvent {
  return { id, type: "tool.called", timestamp: CREATED_AT, body: encoder.encode(text) };
}

function fanout(webhookIds: string[], due = DUE): FanoutRecord {
  return {
    event_type: "tool.called",
    created_at: CREATED_AT,
    next_attempt_at: due,
    webhook_ids: webhookIds,
  };
}

/** The pending delivery a fan-out entry stands for. */
function firstAttempt(eventId: string, webhookId: string, due = DUE): DeliveryRecord {
  return {
    event_id: eventId,
    event_type: "tool.called",
    webhook_id: webhookId,
    attempt_count: 0,
    next_attempt_at: due,
    created_at: CREATED_AT,
    attempts: [],
  };
}

/** A delivery record after `attempts` failed attempts. */
function retry(eventId: string, webhookId: string, attempts = 1): DeliveryRecord {
  return {
    ...firstAttempt(eventId, webhookId, DUE + 1000 * attempts),
    attempt_count: attempts,
    attempts: Array.from({ length: attempts }, (_, i) => ({
      attempt: i + 1,
      at: new Date(DUE + i).toISOString(),
      status: 500,
      duration_ms: 12,
    })),
  };
}

function logEntry(i: number): DeliveryLogEntry {
  return {
    at: new Date(DUE + i).toISOString(),
    attempt: 1,
    ok: i % 2 === 0,
    ...(i % 2 === 0 ? { status: 200 } : { error: "timeout" }),
    latency_ms: i,
    event_id: `evt_${String(i).padStart(4, "0")}`,
    event_type: "tool.called",
  };
}

function dlqRecord(dlqId: string, eventId: string, webhookId = "wh_a"): DlqRecord {
  return {
    dlq_id: dlqId,
    webhook_id: webhookId,
    url: "https://example.com/hook",
    event_id: eventId,
    event_type: "tool.called",
    attempts: retry(eventId, webhookId, 6).attempts,
    failed_at: new Date(DUE + 60_000).toISOString(),
    size: 0,
  };
}

function putDlq(record: DlqRecord, body: Uint8Array): DeliveryOp {
  const { size: _size, body: _body, ...rest } = record;
  return { op: "put_dlq", record: rest, body };
}

/** The bytes of `text`. */
function bodyOf(text: string): Uint8Array {
  return encoder.encode(text);
}

/** `length` bytes of a pattern that holds every byte value, zeros included. */
function patternBytes(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 7 + (i >> 8)) & 0xff;
  return bytes;
}

/** `[event_id, webhook_id, fanout]` of each pending delivery, as listed. */
async function pendingKeys(
  store: { deliveries: { listPending(): Promise<{ record: DeliveryRecord; fanout: boolean }[]> } },
): Promise<[string, string, boolean][]> {
  return (await store.deliveries.listPending()).map((d) => [
    d.record.event_id,
    d.record.webhook_id,
    d.fanout,
  ]);
}

/** Cases of the delivery outbox, DLQ and delivery logs. */
export const DELIVERIES_CONTRACT: readonly ContractCase[] = [
  {
    name: "deliveries: an event and its fan-out read back exactly, with the stamp of their commit",
    async run({ store, another }) {
      const body = patternBytes(5000);
      // With the span of the call that caused it (tracing on): its deliveries' parent.
      const event = {
        ...outboxEvent("evt_1"),
        body,
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      };
      const result = await store.deliveries.writer().write([
        { op: "put_event", event },
        { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_a", "wh_b"]) },
      ]);
      assertEquals(result.collected, true);
      assertEquals(result.versionstamps.length, 2);
      assert(result.versionstamps.every((v) => typeof v === "string" && v.length > 0));
      const other = await another();
      const read = await other.deliveries.readEvent("evt_1");
      assert(read);
      assertEquals(read.event, event);
      assert(read.event.body instanceof Uint8Array);
      assertEquals(read.versionstamp, result.versionstamps[0]);
      assertEquals(await other.deliveries.listPending(), [
        {
          record: firstAttempt("evt_1", "wh_a"),
          versionstamp: result.versionstamps[1],
          fanout: true,
        },
        {
          record: firstAttempt("evt_1", "wh_b"),
          versionstamp: result.versionstamps[1],
          fanout: true,
        },
      ]);
      assertEquals(await other.deliveries.readEvent("evt_missing"), null);
      // Re-putting the event (a replay) gives it a new stamp.
      const again = await store.deliveries.writer().write([{ op: "put_event", event }]);
      assert(again.versionstamps[0] !== result.versionstamps[0]);
      assertEquals(
        (await other.deliveries.readEvent("evt_1"))?.versionstamp,
        again.versionstamps[0],
      );
    },
  },
  {
    name:
      "deliveries: listPending() lists both forms by event id, a delivery record winning over a fan-out entry",
    async run({ store, another }) {
      const writer = store.deliveries.writer();
      const first = await writer.write([
        { op: "put_event", event: outboxEvent("evt_2") },
        { op: "put_fanout", event_id: "evt_2", fanout: fanout(["wh_c", "wh_a", "wh_b"]) },
      ]);
      const own = await writer.write([{ op: "put_delivery", delivery: retry("evt_1", "wh_z", 2) }]);
      // wh_a has a record of its own while the fan-out still names it: the record wins.
      const moved = await writer.write([
        { op: "put_delivery", delivery: retry("evt_2", "wh_a") },
      ]);
      // A fan-out written after a record of the same webhook does not hide it either.
      await writer.write([
        { op: "put_delivery", delivery: retry("evt_3", "wh_x") },
        { op: "put_fanout", event_id: "evt_3", fanout: fanout(["wh_x", "wh_y"], DUE + 5) },
      ]);
      const other = await another();
      const listed = await other.deliveries.listPending();
      assertEquals(listed.map((d) => [d.record.event_id, d.record.webhook_id, d.fanout]), [
        ["evt_1", "wh_z", false],
        ["evt_2", "wh_a", false],
        ["evt_2", "wh_c", true],
        ["evt_2", "wh_b", true],
        ["evt_3", "wh_x", false],
        ["evt_3", "wh_y", true],
      ]);
      assertEquals(listed[0], {
        record: retry("evt_1", "wh_z", 2),
        versionstamp: own.versionstamps[0],
        fanout: false,
      });
      assertEquals(listed[1].versionstamp, moved.versionstamps[0]);
      assertEquals(listed[2].versionstamp, first.versionstamps[1]);
      assertEquals(listed[5].record, firstAttempt("evt_3", "wh_y", DUE + 5));
      // The outcome commit rewrites the fan-out without wh_a: its entries get the new stamp.
      const rewritten = await writer.write([
        { op: "put_fanout", event_id: "evt_2", fanout: fanout(["wh_c", "wh_b"]) },
      ]);
      const after = (await store.deliveries.listPending()).filter((d) =>
        d.record.event_id === "evt_2"
      );
      assertEquals(after.map((d) => [d.record.webhook_id, d.fanout, d.versionstamp]), [
        ["wh_a", false, moved.versionstamps[0]],
        ["wh_c", true, rewritten.versionstamps[0]],
        ["wh_b", true, rewritten.versionstamps[0]],
      ]);
      // delete_delivery removes a record of its own, never a fan-out entry.
      await writer.write([
        { op: "delete_delivery", event_id: "evt_2", webhook_id: "wh_a" },
        { op: "delete_delivery", event_id: "evt_2", webhook_id: "wh_c" },
      ]);
      assertEquals(
        (await pendingKeys(store)).filter(([eventId]) => eventId === "evt_2"),
        [["evt_2", "wh_c", true], ["evt_2", "wh_b", true]],
      );
      // An empty fan-out deletes the record; an unknown record deletes nothing.
      await writer.write([
        { op: "put_fanout", event_id: "evt_2", fanout: fanout([]) },
        { op: "put_fanout", event_id: "evt_3", fanout: fanout([]) },
        { op: "delete_delivery", event_id: "evt_9", webhook_id: "wh_a" },
      ]);
      assertEquals(await pendingKeys(other), [["evt_1", "wh_z", false], ["evt_3", "wh_x", false]]);
    },
  },
  {
    name:
      "deliveries: concurrent writes share commits, each write whole, and flush() waits for them",
    async run({ store }) {
      const writer = store.deliveries.writer({ lingerMs: 5 });
      const writes = Array.from({ length: 200 }, (_, i) => {
        const id = `evt_${String(i).padStart(3, "0")}`;
        return writer.write([
          { op: "put_event", event: outboxEvent(id) },
          { op: "put_fanout", event_id: id, fanout: fanout(["wh_a", "wh_b"]) },
        ]);
      });
      assertEquals(writer.queued, 200);
      await writer.flush();
      assertEquals(writer.queued, 0);
      const results = await Promise.all(writes);
      const stamps = new Set(results.flatMap((r) => r.versionstamps));
      assertEquals(stamps.size, 1, "200 lingering writes should share one commit");
      assertEquals((await store.deliveries.listPending()).length, 400);

      // Without linger, writes made while a commit runs join the next one.
      const eager = store.deliveries.writer();
      const more = await Promise.all(
        Array.from(
          { length: 300 },
          (_, i) =>
            eager.write([{ op: "put_delivery", delivery: retry(`evt_${1000 + i}`, "wh_c") }]),
        ),
      );
      const commits = new Set(more.map((r) => r.versionstamps[0]));
      assert(commits.size < 30, `${commits.size} commits for 300 concurrent writes`);
      const listed = await store.deliveries.listPending();
      assertEquals(listed.length, 700);
      for (const [i, result] of more.entries()) {
        const stored = listed.find((d) => d.record.event_id === `evt_${1000 + i}`);
        assertEquals(stored?.versionstamp, result.versionstamps[0]);
      }
      // A write of nothing commits nothing and still answers.
      assertEquals(await eager.write([]), { versionstamps: [], collected: true });
    },
  },
  {
    name: "deliveries: writes committed together apply in the order they were made",
    async run({ store, another }) {
      const writer = store.deliveries.writer({ lingerMs: 5 });
      const body = (text: string) => encoder.encode(text);
      const writes = [
        [
          { op: "put_event", event: outboxEvent("evt_1") },
          { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_a", "wh_b", "wh_c"]) },
        ],
        [
          { op: "put_delivery", delivery: retry("evt_1", "wh_a", 1) },
          { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_b", "wh_c"]) },
        ],
        [{ op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_c"]) }],
        [{ op: "put_delivery", delivery: retry("evt_1", "wh_a", 2) }],
        [{ op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_c" }],
        [
          { op: "log", webhook_id: "wh_a", entry_id: LOG_ID_A, entry: logEntry(1) },
          { op: "log", webhook_id: "wh_a", entry_id: LOG_ID_B, entry: logEntry(2) },
        ],
        [{ op: "delete_log", webhook_id: "wh_a", entry_id: LOG_ID_A }],
        [putDlq(dlqRecord("dlq_01", "evt_1"), body("first"))],
        [{ op: "delete_dlq", dlq_id: "dlq_01", size: 5 }],
        [putDlq(dlqRecord("dlq_02", "evt_1"), body("second"))],
        [putDlq(dlqRecord("dlq_02", "evt_1"), body("third!"))],
        [{ op: "put_event", event: outboxEvent("evt_1", "replaced") }],
      ] satisfies DeliveryOp[][];
      const results = await Promise.all(writes.map((ops) => writer.write(ops)));
      assertEquals(new Set(results.flatMap((r) => r.versionstamps)).size, 1);
      const other = await another();
      assertEquals(await pendingKeys(other), [["evt_1", "wh_a", false], ["evt_1", "wh_c", true]]);
      assertEquals((await other.deliveries.listPending())[0].record, retry("evt_1", "wh_a", 2));
      assertEquals(await other.deliveries.listLogIds("wh_a"), [LOG_ID_B]);
      const dlq = await other.deliveries.listDlq();
      assertEquals(dlq.map((r) => [r.dlq_id, r.size]), [["dlq_02", 6]]);
      assertEquals(await other.deliveries.readDlqBody(dlq[0]), body("third!"));
      assertEquals((await other.deliveries.readEvent("evt_1"))?.event.body, body("replaced"));
    },
  },
  {
    name:
      "deliveries: collect_event deletes an unchanged event; after a DLQ replay re-put it, the event stays and the rest of the write lands",
    async run({ store, another }) {
      const writer = store.deliveries.writer();
      const body = encoder.encode('{"id":"evt_1","type":"tool.called"}');
      // With the span of the call that caused it (tracing on): its deliveries' parent.
      const event = {
        ...outboxEvent("evt_1"),
        body,
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      };
      await writer.write([
        { op: "put_event", event },
        { op: "put_delivery", delivery: retry("evt_1", "wh_a", 6) },
      ]);
      const read = await store.deliveries.readEvent("evt_1");
      assert(read);
      // The delivery dies: dead letter written, delivery deleted, event collected.
      const record = dlqRecord("dlq_01", "evt_1");
      const dead = await writer.write([
        putDlq(record, body),
        { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_a" },
        { op: "collect_event", event_id: "evt_1", versionstamp: read.versionstamp, size: 35 },
      ]);
      assertEquals(dead.collected, true);
      assertEquals(await store.deliveries.readEvent("evt_1"), null);

      // Replayed from another instance: the event is back, with a delivery of its own.
      await writer.write([{ op: "put_event", event }]);
      const before = await store.deliveries.readEvent("evt_1");
      assert(before);
      const other = await another();
      const stored = await other.deliveries.getDlq("dlq_01");
      assert(stored);
      const version = await store.deliveries.version();
      assertEquals(
        await other.deliveries.requeueDlq(stored, body, CREATED_AT, DUE + 5),
        "queued",
      );
      assert(await store.deliveries.version() > version);
      assertEquals(
        await other.deliveries.requeueDlq(stored, body, CREATED_AT, DUE + 6),
        "already_queued",
      );
      const requeued = await store.deliveries.listPending();
      assertEquals(requeued.map(({ record, fanout }) => ({ record, fanout })), [{
        record: {
          ...firstAttempt("evt_1", "wh_a", DUE + 5),
          created_at: new Date(DUE + 5).toISOString(),
          dlq_id: "dlq_01",
        },
        fanout: false,
      }]);
      // A collection guarded by the stamp read before the replay loses its race.
      const late = await writer.write([
        { op: "collect_event", event_id: "evt_1", versionstamp: before.versionstamp, size: 35 },
        {
          op: "log",
          webhook_id: "wh_a",
          entry_id: "01J0000000000000000000000A",
          entry: logEntry(1),
        },
      ]);
      assertEquals(late.collected, false);
      const replayed = await store.deliveries.readEvent("evt_1");
      assert(replayed);
      assertEquals(replayed.event.body, body);
      assert(replayed.versionstamp !== before.versionstamp);
      assertEquals(await store.deliveries.readLog("wh_a"), [logEntry(1)]);
      // The slow path keeps it while the replay's delivery refers to it…
      assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), false);
      // …and the replay's success collects it with the current stamp.
      const done = await writer.write([
        { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_a" },
        { op: "delete_dlq", dlq_id: "dlq_01", size: body.byteLength },
        {
          op: "collect_event",
          event_id: "evt_1",
          versionstamp: replayed.versionstamp,
          size: body.byteLength,
        },
      ]);
      assertEquals(done.collected, true);
      assertEquals(await other.deliveries.readEvent("evt_1"), null);
      assertEquals(await other.deliveries.listDlq(), []);
      // A collection of an event already gone reports false, harmlessly.
      const gone = await writer.write([
        { op: "collect_event", event_id: "evt_1", versionstamp: replayed.versionstamp, size: 35 },
      ]);
      assertEquals(gone.collected, false);
    },
  },
  {
    name:
      "deliveries: collect_event keeps an event while a delivery record or fan-out entry of it is stored, whatever the writer knew",
    async run({ store, another }) {
      const writer = store.deliveries.writer();
      await writer.write([
        { op: "put_event", event: outboxEvent("evt_1") },
        { op: "put_delivery", delivery: retry("evt_1", "wh_a", 3) },
        { op: "put_delivery", delivery: retry("evt_1", "wh_b", 2) },
      ]);
      const read = await store.deliveries.readEvent("evt_1");
      assert(read);
      const collect: DeliveryOp = {
        op: "collect_event",
        event_id: "evt_1",
        versionstamp: read.versionstamp,
        size: read.event.body.byteLength,
      };
      // wh_b is delivered on a retry while wh_a's record waits in the store
      // (a dispatcher that evicted it believes nothing else refers to the event).
      const first = await writer.write([
        { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_b" },
        collect,
      ]);
      assertEquals(first.collected, false);
      const other = await another();
      assertEquals((await other.deliveries.readEvent("evt_1"))?.event.body, read.event.body);
      assertEquals(await pendingKeys(other), [["evt_1", "wh_a", false]]);
      // A record the same commit writes counts too.
      const rewritten = await writer.write([
        { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_a" },
        { op: "put_delivery", delivery: retry("evt_1", "wh_c", 1) },
        collect,
      ]);
      assertEquals(rewritten.collected, false);
      assert(await other.deliveries.readEvent("evt_1"));
      // So does a fan-out entry left, written by another unit of the same group commit.
      await writer.write([{ op: "put_event", event: outboxEvent("evt_2") }]);
      const second = await store.deliveries.readEvent("evt_2");
      assert(second);
      const lingering = store.deliveries.writer({ lingerMs: 50 });
      const [withFanout, fanoutWrite] = await Promise.all([
        lingering.write([{
          op: "collect_event",
          event_id: "evt_2",
          versionstamp: second.versionstamp,
          size: second.event.body.byteLength,
        }]),
        lingering.write([{ op: "put_fanout", event_id: "evt_2", fanout: fanout(["wh_a"]) }]),
      ]);
      assertEquals(withFanout.collected, false);
      // One group commit (what the case is about).
      assertEquals(fanoutWrite.versionstamps, withFanout.versionstamps);
      assert(await other.deliveries.readEvent("evt_2"));
      // The last reference goes with the collection in one commit: the event goes too.
      const last = await writer.write([
        { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_c" },
        collect,
      ]);
      assertEquals(last.collected, true);
      assertEquals(await other.deliveries.readEvent("evt_1"), null);
      assertEquals(await pendingKeys(other), [["evt_2", "wh_a", true]]);
    },
  },
  {
    name:
      "deliveries: collect_event with the event's webhook list keeps it while a record is stored; 80 collections in one write each get their answer",
    async run({ store, another }) {
      const writer = store.deliveries.writer();
      const listed = { ...outboxEvent("evt_l"), webhook_ids: ["wh_a", "wh_b"] };
      await writer.write([
        { op: "put_event", event: listed },
        { op: "put_fanout", event_id: "evt_l", fanout: fanout(["wh_a", "wh_b"]) },
      ]);
      const read = await store.deliveries.readEvent("evt_l");
      assert(read);
      const collect: DeliveryOp = {
        op: "collect_event",
        event_id: "evt_l",
        versionstamp: read.versionstamp,
        size: read.event.body.byteLength,
        webhook_ids: ["wh_a", "wh_b"],
      };
      // wh_a fails its first attempt (a record of its own), then wh_b succeeds.
      await writer.write([
        { op: "put_delivery", delivery: retry("evt_l", "wh_a", 1) },
        { op: "put_fanout", event_id: "evt_l", fanout: fanout(["wh_b"]) },
      ]);
      const early = await writer.write([
        { op: "put_fanout", event_id: "evt_l", fanout: fanout([]) },
        collect,
      ]);
      assertEquals(early.collected, false);
      assertEquals(early.uncollected ?? ["evt_l"], ["evt_l"]);
      const other = await another();
      assert(await other.deliveries.readEvent("evt_l"));
      assertEquals(await pendingKeys(other), [["evt_l", "wh_a", false]]);
      const late = await writer.write([
        { op: "delete_delivery", event_id: "evt_l", webhook_id: "wh_a" },
        collect,
      ]);
      assertEquals(late.collected, true);
      assertEquals(await other.deliveries.readEvent("evt_l"), null);

      // Many collections in one unit (as merged outcomes are), one of them still referenced.
      const ids = Array.from({ length: 80 }, (_, i) => `evt_m${String(i).padStart(2, "0")}`);
      const made: DeliveryOp[] = ids.flatMap((id) =>
        [
          { op: "put_event", event: { ...outboxEvent(id), webhook_ids: ["wh_a"] } },
          { op: "put_fanout", event_id: id, fanout: fanout(["wh_a"]) },
        ] as DeliveryOp[]
      );
      await writer.write(made);
      const stamps = await Promise.all(ids.map((id) => store.deliveries.readEvent(id)));
      const ending: DeliveryOp[] = ids.flatMap((id, i) =>
        [
          i === 7
            ? { op: "put_delivery", delivery: retry(id, "wh_a", 1) }
            : { op: "put_fanout", event_id: id, fanout: fanout([]) },
          ...(i === 7 ? [{ op: "put_fanout", event_id: id, fanout: fanout([]) }] : []),
          {
            op: "collect_event",
            event_id: id,
            versionstamp: stamps[i]!.versionstamp,
            size: stamps[i]!.event.body.byteLength,
            webhook_ids: ["wh_a"],
          },
        ] as DeliveryOp[]
      );
      const result = await writer.write(ending);
      assertEquals(result.collected, false);
      assertEquals(result.uncollected, [ids[7]]);
      for (const [i, id] of ids.entries()) {
        assertEquals(await other.deliveries.readEvent(id) !== null, i === 7, id);
      }
      assertEquals(await pendingKeys(other), [[ids[7], "wh_a", false]]);
    },
  },
  {
    name:
      "deliveries: collectEventIfUnreferenced() keeps an event a fan-out entry or a delivery record refers to",
    async run({ store }) {
      const writer = store.deliveries.writer();
      await writer.write([
        { op: "put_event", event: outboxEvent("evt_1") },
        { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_a"]) },
        { op: "put_event", event: outboxEvent("evt_2") },
      ]);
      assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), false);
      await writer.write([
        { op: "put_delivery", delivery: retry("evt_1", "wh_b") },
        { op: "put_fanout", event_id: "evt_1", fanout: fanout([]) },
      ]);
      assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), false);
      assert(await store.deliveries.readEvent("evt_1"));
      await writer.write([{ op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_b" }]);
      assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), true);
      assertEquals(await store.deliveries.readEvent("evt_1"), null);
      // Gone already, or never there: gone.
      assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_1"), true);
      assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_none"), true);
      // Nothing refers to evt_2: collected, and the other event is untouched.
      assertEquals(await store.deliveries.collectEventIfUnreferenced("evt_2"), true);
    },
  },
  {
    name:
      "deliveries: a dead letter with a 1 MB body round-trips byte for byte, listed oldest first",
    async run({ store, another }) {
      const big = patternBytes(1_000_000);
      const small = encoder.encode('{"id":"evt_2"}');
      const writer = store.deliveries.writer();
      // Written out of order: listed by id (time-ordered ids), oldest first.
      await writer.write([putDlq(dlqRecord("dlq_02", "evt_2", "wh_b"), small)]);
      await writer.write([putDlq(dlqRecord("dlq_01", "evt_1"), big)]);
      const other = await another();
      const listed = await other.deliveries.listDlq();
      assertEquals(listed.map((r) => [r.dlq_id, r.size]), [["dlq_01", 1_000_000], [
        "dlq_02",
        small.byteLength,
      ]]);
      for (const record of listed) {
        assert(DlqRecordSchema.safeParse(record).success);
        const { body: _body, ...rest } = record;
        assertEquals(rest, {
          ...dlqRecord(record.dlq_id, record.event_id, record.webhook_id),
          size: record.size,
        });
      }
      const stored = await other.deliveries.getDlq("dlq_01");
      assert(stored);
      assertEquals(stored.size, big.byteLength);
      const body = await other.deliveries.readDlqBody(stored);
      assert(body instanceof Uint8Array);
      assertEquals(body.byteLength, big.byteLength);
      assert(body.every((byte, i) => byte === big[i]), "the body differs from the bytes written");
      assertEquals(await store.deliveries.readDlqBody(listed[1]), small);
      assertEquals(await other.deliveries.getDlq("dlq_none"), null);
      // The replay re-puts the event with exactly those bytes.
      assertEquals(await other.deliveries.requeueDlq(stored, body, CREATED_AT, DUE), "queued");
      const event = await store.deliveries.readEvent("evt_1");
      assert(event);
      assert(event.event.body.every((byte, i) => byte === big[i]));
      assertEquals(event.event.body.byteLength, big.byteLength);
      // Rewriting a dead letter (a replay that died again) replaces it.
      await writer.write([
        putDlq({ ...dlqRecord("dlq_02", "evt_2", "wh_b"), failed_at: CREATED_AT }, small),
      ]);
      assertEquals((await store.deliveries.getDlq("dlq_02"))?.failed_at, CREATED_AT);
      await store.deliveries.deleteDlq(listed);
      assertEquals(await other.deliveries.listDlq(), []);
      assertEquals(await other.deliveries.getDlq("dlq_01"), null);
      await store.deliveries.deleteDlq([]);
    },
  },
  {
    name: "deliveries: the delivery log keeps the newest 20 entries per webhook, newest first",
    async run({ store, another }) {
      for (let i = 0; i < 25; i++) await store.deliveries.appendLog("wh_a", logEntry(i));
      await store.deliveries.appendLog("wh_b", logEntry(100));
      const other = await another();
      const log = await other.deliveries.readLog("wh_a");
      assertEquals(log.length, DELIVERY_LOG_SIZE);
      assertEquals(log[0], logEntry(24));
      assertEquals(log[19], logEntry(5));
      assertEquals(await other.deliveries.readLog("wh_a", 3), [
        logEntry(24),
        logEntry(23),
        logEntry(22),
      ]);
      assertEquals(await other.deliveries.readLog("wh_b"), [logEntry(100)]);
      assertEquals(await other.deliveries.readLog("wh_none"), []);
      const ids = await other.deliveries.listLogIds("wh_a");
      assertEquals(ids.length, DELIVERY_LOG_SIZE);
      assertEquals([...ids].sort(), ids);
      // The dispatcher's ops: append one, drop the oldest.
      await store.deliveries.writer().write([
        {
          op: "log",
          webhook_id: "wh_a",
          entry_id: "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
          entry: logEntry(99),
        },
        { op: "delete_log", webhook_id: "wh_a", entry_id: ids[0] },
      ]);
      const next = await other.deliveries.listLogIds("wh_a");
      assertEquals(next, [...ids.slice(1), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"]);
      assertEquals((await other.deliveries.readLog("wh_a", 1))[0], logEntry(99));
      assertEquals(await store.deliveries.trimLog("wh_a", 5), 15);
      assertEquals(await store.deliveries.listLogIds("wh_a"), next.slice(15));
      assertEquals(await store.deliveries.trimLog("wh_a", 5), 0);
      await store.deliveries.deleteLog("wh_a");
      assertEquals(await other.deliveries.readLog("wh_a"), []);
      assertEquals(await other.deliveries.listLogIds("wh_a"), []);
      assertEquals((await other.deliveries.readLog("wh_b")).length, 1);
    },
  },
  {
    name: "deliveries: version() grows with bumpVersion(), seen by another handle",
    async run({ store, another }) {
      const other = await another();
      const before = await other.deliveries.version();
      assertEquals(typeof before, "bigint");
      await store.deliveries.bumpVersion();
      const after = await other.deliveries.version();
      assert(after > before, `version ${after} did not grow from ${before}`);
      await store.deliveries.bumpVersion();
      assert(await other.deliveries.version() > after);
    },
  },
  {
    name: "deliveries: opsCost() counts what ops add to another commit and refuses collect_event",
    async run({ store }) {
      const small = store.deliveries.opsCost([{ op: "put_event", event: outboxEvent("evt_1") }]);
      assert(small.mutations >= 1);
      const big = store.deliveries.opsCost([
        { op: "put_event", event: { ...outboxEvent("evt_1"), body: new Uint8Array(100_000) } },
        { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_a", "wh_b", "wh_c"]) },
      ]);
      assert(big.bytes >= 100_000, `${big.bytes} bytes for a 100 kB body`);
      assert(big.mutations > small.mutations);
      assert(big.keyBytes > 0 && big.keyBytes <= big.bytes);
      assertEquals(store.deliveries.opsCost([]).mutations, 0);
      const error = assertThrows(() =>
        store.deliveries.opsCost([
          { op: "put_event", event: outboxEvent("evt_1") },
          { op: "collect_event", event_id: "evt_1", versionstamp: "1", size: 1 },
        ])
      );
      assert(error instanceof GatewayError);
      assertEquals(error.code, "INTERNAL");
      // Nothing was written by asking.
      assertEquals(await store.deliveries.readEvent("evt_1"), null);
    },
  },
  {
    name:
      "dlq: listDlq pages oldest failure first (then by id), per webhook and after a position; countDlq counts",
    async run({ store, another }) {
      const writer = store.deliveries.writer();
      // Ids out of failure order, two webhooks, two records failing in the same millisecond.
      const times = [5, 1, 3, 3, 9, 2, 7];
      await Promise.all(times.map((minute, i) =>
        writer.write([putDlq(
          {
            ...dlqRecord(`dlq_0${i}`, `evt_${i}`, i % 2 ? "wh_b" : "wh_a"),
            failed_at: new Date(DUE + minute * 60_000).toISOString(),
          },
          bodyOf(`body ${i}`),
        )])
      ));
      const other = await another();
      const ids = (records: DlqRecord[]) => records.map((r) => r.dlq_id);
      const all = ["dlq_01", "dlq_05", "dlq_02", "dlq_03", "dlq_00", "dlq_06", "dlq_04"];
      assertEquals(ids(await other.deliveries.listDlq()), all);
      assertEquals(await other.deliveries.countDlq(), 7);
      const first = await other.deliveries.listDlq({ limit: 3 });
      assertEquals(ids(first), all.slice(0, 3));
      const at = (r: DlqRecord) => ({ failed_at: r.failed_at, dlq_id: r.dlq_id });
      const second = await other.deliveries.listDlq({ limit: 3, after: at(first[2]) });
      assertEquals(ids(second), all.slice(3, 6));
      assertEquals(ids(await other.deliveries.listDlq({ limit: 3, after: at(second[2]) })), [
        "dlq_04",
      ]);
      assertEquals(ids(await other.deliveries.listDlq({ after: at(second[2]) })), ["dlq_04"]);
      assertEquals(ids(await other.deliveries.listDlq({ webhook: "wh_b" })), [
        "dlq_01",
        "dlq_05",
        "dlq_03",
      ]);
      const hookPage = await other.deliveries.listDlq({ webhook: "wh_a", limit: 2 });
      assertEquals(ids(hookPage), ["dlq_02", "dlq_00"]);
      assertEquals(
        ids(await other.deliveries.listDlq({ webhook: "wh_a", limit: 5, after: at(hookPage[1]) })),
        ["dlq_06", "dlq_04"],
      );
      assertEquals(await other.deliveries.listDlq({ webhook: "wh_none", limit: 5 }), []);
      assertEquals(await other.deliveries.listDlq({ limit: 0 }), []);
      // Paged records are whole: their bodies read back.
      assertEquals(await other.deliveries.readDlqBody(first[0]), bodyOf("body 1"));
    },
  },
  {
    name:
      "dlq: a record failing again moves to its new place and keeps the count; deleting one lowers it",
    async run({ store, another }) {
      const writer = store.deliveries.writer();
      const at = (minute: number) => new Date(DUE + minute * 60_000).toISOString();
      await writer.write([
        putDlq({ ...dlqRecord("dlq_a", "evt_a"), failed_at: at(1) }, bodyOf("a")),
      ]);
      await writer.write([
        putDlq({ ...dlqRecord("dlq_b", "evt_b"), failed_at: at(2) }, bodyOf("b")),
      ]);
      await writer.write([
        putDlq({ ...dlqRecord("dlq_c", "evt_c"), failed_at: at(3) }, bodyOf("c")),
      ]);
      const other = await another();
      assertEquals(await other.deliveries.countDlq(), 3);
      // dlq_a is replayed and fails again later, for another webhook's URL change.
      await writer.write([
        putDlq({ ...dlqRecord("dlq_a", "evt_a", "wh_b"), failed_at: at(9) }, bodyOf("a2")),
      ]);
      const ids = (records: DlqRecord[]) => records.map((r) => r.dlq_id);
      assertEquals(ids(await other.deliveries.listDlq({ limit: 10 })), ["dlq_b", "dlq_c", "dlq_a"]);
      assertEquals(ids(await other.deliveries.listDlq({ webhook: "wh_a", limit: 10 })), [
        "dlq_b",
        "dlq_c",
      ]);
      assertEquals(ids(await other.deliveries.listDlq({ webhook: "wh_b", limit: 10 })), ["dlq_a"]);
      assertEquals(await other.deliveries.countDlq(), 3);
      // One write that adds a record and deletes another, and one that adds then deletes.
      await writer.write([
        putDlq({ ...dlqRecord("dlq_d", "evt_d"), failed_at: at(4) }, bodyOf("d")),
        { op: "delete_dlq", dlq_id: "dlq_b", size: 1 },
      ]);
      await writer.write([
        putDlq({ ...dlqRecord("dlq_e", "evt_e"), failed_at: at(5) }, bodyOf("e")),
        { op: "delete_dlq", dlq_id: "dlq_e", size: 1 },
      ]);
      // Deleting a record that is not there changes nothing.
      await writer.write([{ op: "delete_dlq", dlq_id: "dlq_none", size: 0 }]);
      assertEquals(ids(await other.deliveries.listDlq({ limit: 10 })), ["dlq_c", "dlq_d", "dlq_a"]);
      assertEquals(await other.deliveries.countDlq(), 3);
      await other.deliveries.deleteDlq([{ dlq_id: "dlq_c", size: 1 }]);
      assertEquals(await store.deliveries.countDlq(), 2);
      assertEquals(ids(await store.deliveries.listDlq({ limit: 10 })), ["dlq_d", "dlq_a"]);
      await store.deliveries.deleteDlq(await store.deliveries.listDlq());
      assertEquals(await other.deliveries.countDlq(), 0);
      assertEquals(await other.deliveries.listDlq({ limit: 10 }), []);
    },
  },
];
