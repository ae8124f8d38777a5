/**
 * Contract: claiming due deliveries (`claimDue`, `renewClaims`,
 * `releaseClaims`). Pending deliveries are claimed from the store in due-time
 * pages, in either form (an entry of its event's fan-out record, or its own
 * record once an attempt failed); a delivery claimed by a live claim is
 * nobody else's until the claim lapses, is released, or the delivery is
 * deleted. Claims are seen across handles only where the store shares them
 * (`deliveries.sharedClaims`).
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type {
  ClaimDueOptions,
  DeliveryOp,
  DeliveryRecord,
  DlqRecord,
  FanoutRecord,
  OutboxEvent,
  Store,
  StoredDelivery,
} from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

const encoder = new TextEncoder();
const CREATED_AT = "2026-01-01T00:00:00.000Z";
/** Due times are small numbers: the store compares them, it never reads a clock. */
const FAR = 1_000_000;

function outboxEvent(id: string): OutboxEvent {
  return {
    id,
    type: "tool.called",
    timestamp: CREATED_AT,
    body: encoder.encode(`{"id":"${id}"}`),
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

/** The pending delivery a fan-out entry stands for. */
function firstAttempt(eventId: string, webhookId: string, due: number): DeliveryRecord {
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

/** A delivery record after `attempts` failed attempts, due at `due`. */
function retry(eventId: string, webhookId: string, due: number, attempts = 1): DeliveryRecord {
  return {
    ...firstAttempt(eventId, webhookId, due),
    attempt_count: attempts,
    attempts: Array.from({ length: attempts }, (_, i) => ({
      attempt: i + 1,
      at: new Date(Date.parse(CREATED_AT) + i).toISOString(),
      status: 500,
      duration_ms: 12,
    })),
  };
}

/** Writes an event with its fan-out record; returns the fan-out's version stamp. */
async function putFanout(
  store: Store,
  eventId: string,
  webhookIds: string[],
  due: number,
  claim?: { owner: string; until: number },
): Promise<string> {
  const result = await store.deliveries.writer().write([
    { op: "put_event", event: outboxEvent(eventId) },
    {
      op: "put_fanout",
      event_id: eventId,
      fanout: fanout(webhookIds, due),
      ...(claim ? { claim } : {}),
    },
  ]);
  return result.versionstamps[1];
}

/** Writes an event (once) and a delivery record of it; returns the record's version stamp. */
async function putRecord(store: Store, record: DeliveryRecord): Promise<string> {
  const ops: DeliveryOp[] = [{ op: "put_delivery", delivery: record }];
  if (!await store.deliveries.readEvent(record.event_id)) {
    ops.unshift({ op: "put_event", event: outboxEvent(record.event_id) });
  }
  const result = await store.deliveries.writer().write(ops);
  return result.versionstamps[ops.length - 1];
}

/** Claim options: owner `owner` at `now`, for 1000 ms, of everything due before FAR. */
function claimAt(owner: string, now: number, more: Partial<ClaimDueOptions> = {}): ClaimDueOptions {
  return { owner, now, until: now + 1000, dueBefore: FAR, limit: 100, ...more };
}

/** `event_id/webhook_id` of each claimed delivery, in the order returned. */
function keysOf(claimed: readonly StoredDelivery[]): string[] {
  return claimed.map(({ record }) => `${record.event_id}/${record.webhook_id}`);
}

/** Cases of claiming due deliveries. */
export const CLAIMS_CONTRACT: readonly ContractCase[] = [
  {
    name: "claims: claimDue() returns due deliveries of both forms, earliest first, as stored",
    async run({ store }) {
      const fanoutStamp = await putFanout(store, "evt_1", ["wh_a", "wh_b"], 200);
      const retryRecord = retry("evt_2", "wh_a", 100);
      const retryStamp = await putRecord(store, retryRecord);
      const late = retry("evt_3", "wh_c", 300, 2);
      const lateStamp = await putRecord(store, late);
      const claimed = await store.deliveries.claimDue(claimAt("owner_a", 0));
      assertEquals(claimed, [
        { record: retryRecord, versionstamp: retryStamp, fanout: false },
        { record: firstAttempt("evt_1", "wh_a", 200), versionstamp: fanoutStamp, fanout: true },
        { record: firstAttempt("evt_1", "wh_b", 200), versionstamp: fanoutStamp, fanout: true },
        { record: late, versionstamp: lateStamp, fanout: false },
      ]);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_b", 0)), []);
    },
  },
  {
    name: "claims: claimDue() stops at limit, and the next claim goes on from there",
    async run({ store }) {
      for (let i = 1; i <= 5; i++) {
        await putRecord(store, retry(`evt_${i}`, "wh_a", 10 * (6 - i)));
      }
      const first = await store.deliveries.claimDue(claimAt("owner_a", 0, { limit: 2 }));
      assertEquals(keysOf(first), ["evt_5/wh_a", "evt_4/wh_a"]);
      const second = await store.deliveries.claimDue(claimAt("owner_a", 0, { limit: 2 }));
      assertEquals(keysOf(second), ["evt_3/wh_a", "evt_2/wh_a"]);
      const rest = await store.deliveries.claimDue(claimAt("owner_b", 0, { limit: 2 }));
      assertEquals(keysOf(rest), ["evt_1/wh_a"]);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_b", 0)), []);
    },
  },
  {
    name: "claims: dueBefore bounds what is claimed",
    async run({ store }) {
      await putRecord(store, retry("evt_1", "wh_a", 100));
      await putFanout(store, "evt_2", ["wh_b"], 200);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_a", 0, { dueBefore: 50 })), []);
      const early = await store.deliveries.claimDue(claimAt("owner_a", 0, { dueBefore: 150 }));
      assertEquals(keysOf(early), ["evt_1/wh_a"]);
      const later = await store.deliveries.claimDue(claimAt("owner_a", 0, { dueBefore: 250 }));
      assertEquals(keysOf(later), ["evt_2/wh_b"]);
    },
  },
  {
    name:
      "claims: a delivery under a live claim is not returned, until the claim lapses or is released",
    async run({ store }) {
      await putRecord(store, retry("evt_1", "wh_a", 10));
      await putFanout(store, "evt_2", ["wh_b"], 20);
      const claimed = await store.deliveries.claimDue(claimAt("owner_a", 0));
      assertEquals(keysOf(claimed), ["evt_1/wh_a", "evt_2/wh_b"]);
      // Claimed until 1000: not for another owner, nor again for the same one.
      assertEquals(await store.deliveries.claimDue(claimAt("owner_b", 999)), []);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_a", 500)), []);
      // Lapsed at 1000: anyone's again.
      const taken = await store.deliveries.claimDue(claimAt("owner_b", 1000));
      assertEquals(keysOf(taken), ["evt_1/wh_a", "evt_2/wh_b"]);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_a", 1500)), []);
      // Released (one, then the rest): claimable at once.
      await store.deliveries.releaseClaims("owner_b", [{ event_id: "evt_2", webhook_id: "wh_b" }]);
      assertEquals(keysOf(await store.deliveries.claimDue(claimAt("owner_a", 1500))), [
        "evt_2/wh_b",
      ]);
      // Another owner's release gives back nothing of owner_a's.
      await store.deliveries.releaseClaims("owner_b", [{ event_id: "evt_2", webhook_id: "wh_b" }]);
      await store.deliveries.releaseClaims("owner_b");
      assertEquals(keysOf(await store.deliveries.claimDue(claimAt("owner_c", 1500))), [
        "evt_1/wh_a",
      ]);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_c", 1500)), []);
    },
  },
  {
    name: "claims: excludeWebhooks leaves those webhooks' deliveries alone",
    async run({ store }) {
      await putRecord(store, retry("evt_1", "wh_x", 10));
      await putRecord(store, retry("evt_2", "wh_y", 20));
      await putFanout(store, "evt_3", ["wh_x"], 30);
      await putFanout(store, "evt_4", ["wh_y"], 40);
      const claimed = await store.deliveries.claimDue(
        claimAt("owner_a", 0, { excludeWebhooks: ["wh_x"] }),
      );
      assertEquals(keysOf(claimed), ["evt_2/wh_y", "evt_4/wh_y"]);
      const rest = await store.deliveries.claimDue(claimAt("owner_a", 0, { excludeWebhooks: [] }));
      assertEquals(keysOf(rest), ["evt_1/wh_x", "evt_3/wh_x"]);
    },
  },
  {
    name:
      "claims: a fan-out record is claimed whole, past limit and with its excluded webhooks' entries",
    async run({ store }) {
      await putRecord(store, retry("evt_0", "wh_a", 5));
      const ids = ["wh_a", "wh_b", "wh_c", "wh_d"];
      const stamp = await putFanout(store, "evt_1", ids, 10);
      await putFanout(store, "evt_2", ["wh_a"], 20);
      const claimed = await store.deliveries.claimDue(
        claimAt("owner_a", 0, { limit: 2, excludeWebhooks: ["wh_d"] }),
      );
      // Whoever sends the entries rewrites the fan-out record: it needs all of them.
      assertEquals(keysOf(claimed), ["evt_0/wh_a", ...ids.map((id) => `evt_1/${id}`)]);
      assert(claimed.slice(1).every((d) => d.fanout && d.versionstamp === stamp));
      assertEquals(keysOf(await store.deliveries.claimDue(claimAt("owner_a", 0))), ["evt_2/wh_a"]);
    },
  },
  {
    name: "claims: a put_fanout op with claim writes its deliveries claimed by that owner",
    async run({ store }) {
      await putFanout(store, "evt_1", ["wh_a", "wh_b"], 10, { owner: "owner_a", until: 1000 });
      await putFanout(store, "evt_2", ["wh_a"], 20);
      const free = await store.deliveries.claimDue(claimAt("owner_b", 0, { until: FAR }));
      assertEquals(keysOf(free), ["evt_2/wh_a"]);
      assertEquals(await store.deliveries.renewClaims("owner_a", 2000), 2);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_b", 1500)), []);
      const lapsed = await store.deliveries.claimDue(claimAt("owner_b", 2000));
      assertEquals(keysOf(lapsed), ["evt_1/wh_a", "evt_1/wh_b"]);
    },
  },
  {
    name: "claims: a put_fanout op with claim riding in an audit commit claims its deliveries",
    async run({ store }) {
      const stamp = await store.audit.commit(
        { headVersionstamp: null, tailSeq: 0, tailVersionstamps: [] },
        [{ seq: 1, bytes: encoder.encode('{"seq":1}') }],
        { seq: 1, hash: `sha256:${"1".padStart(64, "0")}`, timestamp: CREATED_AT },
        {
          ops: [
            { op: "put_event", event: outboxEvent("evt_1") },
            {
              op: "put_fanout",
              event_id: "evt_1",
              fanout: fanout(["wh_a"], 10),
              claim: { owner: "owner_a", until: 1000 },
            },
          ],
          bumpVersion: false,
        },
      );
      assert(stamp !== null);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_b", 0)), []);
      assertEquals(await store.deliveries.renewClaims("owner_a", 1000), 1);
      const lapsed = await store.deliveries.claimDue(claimAt("owner_b", 1000));
      assertEquals(lapsed, [
        { record: firstAttempt("evt_1", "wh_a", 10), versionstamp: stamp, fanout: true },
      ]);
    },
  },
  {
    name: "claims: a delivered delivery is never returned, and its claim is gone",
    async run({ store }) {
      await putRecord(store, retry("evt_1", "wh_a", 10));
      await putFanout(store, "evt_2", ["wh_a", "wh_b"], 20);
      const claimed = await store.deliveries.claimDue(claimAt("owner_a", 0));
      assertEquals(claimed.length, 3);
      assertEquals(await store.deliveries.renewClaims("owner_a", 1000), 3);
      // evt_1/wh_a and evt_2/wh_a delivered: deleted, and the fan-out rewritten without it.
      await store.deliveries.writer().write([
        { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_a", next_attempt_at: 10 },
        { op: "put_fanout", event_id: "evt_2", fanout: fanout(["wh_b"], 20) },
      ]);
      assertEquals(await store.deliveries.renewClaims("owner_a", 1000), 1);
      await store.deliveries.releaseClaims("owner_a");
      assertEquals(keysOf(await store.deliveries.claimDue(claimAt("owner_b", 0))), ["evt_2/wh_b"]);
      await store.deliveries.writer().write([
        { op: "put_fanout", event_id: "evt_2", fanout: fanout([], 20) },
      ]);
      assertEquals(await store.deliveries.renewClaims("owner_b", 1000), 0);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_c", 5000)), []);
      // Deleted without its due time: gone all the same.
      await putRecord(store, retry("evt_3", "wh_a", 30));
      await store.deliveries.writer().write([
        { op: "delete_delivery", event_id: "evt_3", webhook_id: "wh_a" },
      ]);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_c", 5000)), []);
    },
  },
  {
    name: "claims: a retry written with put_delivery keeps its claim; released, it is due anew",
    async run({ store }) {
      await putFanout(store, "evt_1", ["wh_a", "wh_b"], 10);
      await putRecord(store, retry("evt_2", "wh_a", 20));
      assertEquals((await store.deliveries.claimDue(claimAt("owner_a", 0))).length, 3);
      // Both attempts failed: a first retry of the fan-out entry, a second of the record.
      const first = retry("evt_1", "wh_a", 5000);
      const second = retry("evt_2", "wh_a", 6000, 2);
      await store.deliveries.writer().write([
        { op: "put_delivery", delivery: first },
        { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_b"], 10) },
      ]);
      await store.deliveries.writer().write([{ op: "put_delivery", delivery: second }]);
      assertEquals(await store.deliveries.claimDue(claimAt("owner_b", 100)), []);
      assertEquals(await store.deliveries.renewClaims("owner_a", 1000), 3);
      await store.deliveries.releaseClaims("owner_a");
      // Not at their old due times; at their new ones.
      const now = await store.deliveries.claimDue(claimAt("owner_b", 100, { dueBefore: 1000 }));
      assertEquals(keysOf(now), ["evt_1/wh_b"]);
      const later = await store.deliveries.claimDue(claimAt("owner_b", 100));
      assertEquals(later.map((d) => [d.record, d.fanout]), [[first, false], [second, false]]);
    },
  },
  {
    name: "claims: renewClaims() extends one owner's claims and says how many it holds",
    async run({ store }) {
      for (let i = 1; i <= 3; i++) await putRecord(store, retry(`evt_${i}`, "wh_a", i));
      assertEquals(await store.deliveries.renewClaims("owner_a", 5000), 0);
      const claimed = await store.deliveries.claimDue(claimAt("owner_a", 0, { until: 100 }));
      assertEquals(claimed.length, 3);
      assertEquals(await store.deliveries.renewClaims("owner_b", 5000), 0);
      assertEquals(await store.deliveries.renewClaims("owner_a", 5000), 3);
      // Past the first until, before the new one: still owner_a's.
      assertEquals(await store.deliveries.claimDue(claimAt("owner_b", 4999)), []);
      await store.deliveries.releaseClaims("owner_a", [{ event_id: "evt_2", webhook_id: "wh_a" }]);
      assertEquals(await store.deliveries.renewClaims("owner_a", 5000), 2);
      assertEquals(keysOf(await store.deliveries.claimDue(claimAt("owner_b", 0))), ["evt_2/wh_a"]);
    },
  },
  {
    name: "claims: a replayed dead letter is claimable at once",
    async run({ store }) {
      const record: DlqRecord = {
        dlq_id: "dlq_1",
        webhook_id: "wh_a",
        url: "https://example.com/hook",
        event_id: "evt_1",
        event_type: "tool.called",
        attempts: retry("evt_1", "wh_a", 0, 6).attempts,
        failed_at: CREATED_AT,
        size: 0,
      };
      const body = encoder.encode('{"id":"evt_1"}');
      assertEquals(await store.deliveries.requeueDlq(record, body, CREATED_AT, 50), "queued");
      const claimed = await store.deliveries.claimDue(claimAt("owner_a", 0, { dueBefore: 51 }));
      assertEquals(claimed.map((d) => [d.record.event_id, d.record.dlq_id, d.fanout]), [
        ["evt_1", "dlq_1", false],
      ]);
      assertEquals(claimed[0].record.next_attempt_at, 50);
    },
  },
  {
    name: "claims: claimDue() refuses a limit below 1",
    async run({ store }) {
      const error = await assertRejects(
        () => store.deliveries.claimDue(claimAt("owner_a", 0, { limit: 0 })),
        GatewayError,
      );
      assertEquals((error as GatewayError).code, "INTERNAL");
    },
  },
  {
    name: "claims: claims made at once never share a delivery (across handles when shared)",
    async run({ store, another }) {
      const writer = store.deliveries.writer();
      const ops: DeliveryOp[] = [];
      for (let i = 0; i < 60; i++) {
        const eventId = `evt_${String(i).padStart(3, "0")}`;
        ops.push({ op: "put_event", event: outboxEvent(eventId) });
        if (i % 3 === 0) {
          ops.push({ op: "put_fanout", event_id: eventId, fanout: fanout(["wh_a", "wh_b"], i) });
        } else {
          ops.push({ op: "put_delivery", delivery: retry(eventId, "wh_a", i) });
        }
      }
      await writer.write(ops);
      // Where claims are shared, two handles (two instances) claim; else one does.
      const other = store.deliveries.sharedClaims ? await another() : store;
      const handles = [store, other, store, other];
      const seen = new Map<string, string>();
      for (let round = 0; round < 10; round++) {
        const results = await Promise.all(
          handles.map((handle, i) =>
            handle.deliveries.claimDue(claimAt(`owner_${i}`, 0, { limit: 7 }))
          ),
        );
        let got = 0;
        results.forEach((claimed, i) => {
          for (const key of keysOf(claimed)) {
            assert(!seen.has(key), `${key} claimed by owner_${i} and ${seen.get(key)}`);
            seen.set(key, `owner_${i}`);
            got++;
          }
        });
        if (!got) break;
      }
      assertEquals(seen.size, 80, "every delivery claimed once");
      if (store.deliveries.sharedClaims) {
        // A claim made on one handle holds on the other.
        assertEquals(await other.deliveries.claimDue(claimAt("owner_x", 999)), []);
        assertEquals(
          await other.deliveries.renewClaims("owner_0", 2000),
          [...seen.values()]
            .filter((owner) => owner === "owner_0").length,
        );
      }
    },
  },
];
