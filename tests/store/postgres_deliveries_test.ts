/**
 * What the PostgreSQL delivery outbox does beyond the storage contract
 * (tests/store/contract/deliveries_contract.ts), against a real throwaway
 * server: claims of due deliveries shared by several instances, ops refused
 * before they are written, a failing unit that does not sink the units
 * committed with it, and instances writing the same rows at once.
 */
import postgres from "postgres";
import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { startPostgres } from "../_postgres.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import type { DeliveryOp, DeliveryRecord, DlqRecord, FanoutRecord } from "../../src/store/mod.ts";
import { PgContext } from "../../src/store/postgres/_context.ts";
import {
  applyDeliveryOps,
  type PostgresDeliveryStore,
} from "../../src/store/postgres/deliveries.ts";
import { migrate } from "../../src/store/postgres/migrations.ts";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres/postgres_store.ts";

const T = Date.parse("2026-01-01T00:00:00.000Z");
const CREATED_AT = new Date(T).toISOString();
const encoder = new TextEncoder();

function fanout(webhookIds: string[], due = T): FanoutRecord {
  return {
    event_type: "tool.called",
    created_at: CREATED_AT,
    next_attempt_at: due,
    webhook_ids: webhookIds,
  };
}

function record(eventId: string, webhookId: string, due: number, attempts = 1): DeliveryRecord {
  return {
    event_id: eventId,
    event_type: "tool.called",
    webhook_id: webhookId,
    attempt_count: attempts,
    next_attempt_at: due,
    created_at: CREATED_AT,
    attempts: Array.from({ length: attempts }, (_, i) => ({
      attempt: i + 1,
      at: CREATED_AT,
      status: 503,
      duration_ms: 3,
    })),
  };
}

function deliveries(store: PostgresStore): PostgresDeliveryStore {
  return store.deliveries as PostgresDeliveryStore;
}

/** `event_id/webhook_id` of each delivery. */
function keys(list: readonly { record: DeliveryRecord }[]): string[] {
  return list.map(({ record }) => `${record.event_id}/${record.webhook_id}`);
}

Deno.test("the PostgreSQL delivery outbox", async (t) => {
  await using pg = await startPostgres({ database: "deliveries_template" });
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  const opened: PostgresStore[] = [];
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-pg-deliveries-" });
  let databases = 0;
  /** A fresh migrated database, and a function opening instances on it. */
  const fresh = async () => {
    const name = `deliveries_${++databases}`;
    await admin.unsafe(`create database ${name} template deliveries_template`);
    const url = pg.url.replace(/\/[^/]+$/, `/${name}`);
    return async () => {
      const store = await openPostgresStore({ url, dataDir, pool: { max: 4 } });
      opened.push(store);
      return store;
    };
  };
  try {
    const template = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      await migrate(template);
    } finally {
      await template.end();
    }

    await t.step(
      "claimDue() claims due deliveries earliest first, each for one owner",
      async () => {
        const open = await fresh();
        const a = deliveries(await open());
        const b = deliveries(await open());
        await a.writer().write([
          { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_c", "wh_a", "wh_b"], T) },
          { op: "put_delivery", delivery: record("evt_2", "wh_x", T + 10) },
          { op: "put_delivery", delivery: record("evt_3", "wh_y", T + 20) },
          { op: "put_delivery", delivery: record("evt_4", "wh_z", T + 5000) },
        ]);
        const claim = { now: T, dueBefore: T + 100, until: T + 30_000 };
        // The fan-out comes whole, past the limit.
        const first = await a.claimDue({ ...claim, owner: "srv_a", limit: 2 });
        assertEquals(keys(first), ["evt_1/wh_a", "evt_1/wh_b", "evt_1/wh_c"]);
        assert(first.every((d) => d.fanout));
        const second = await b.claimDue({ ...claim, owner: "srv_b", limit: 10 });
        assertEquals(keys(second), ["evt_2/wh_x", "evt_3/wh_y"]);
        assertEquals(second[0].record, record("evt_2", "wh_x", T + 10));
        assertEquals(await b.claimDue({ ...claim, owner: "srv_b", limit: 10 }), []);
        // Lapsed claims are free again; renewed ones are not.
        assertEquals(await b.renewClaims("srv_b", T + 60_000), 2);
        const later = { now: T + 30_000, dueBefore: T + 30_000, until: T + 90_000 };
        assertEquals(
          keys(
            await b.claimDue({ ...later, owner: "srv_b", limit: 10, excludeWebhooks: ["wh_z"] }),
          ),
          ["evt_1/wh_a", "evt_1/wh_b", "evt_1/wh_c"],
        );
        assertEquals(keys(await a.claimDue({ ...later, owner: "srv_a", limit: 10 })), [
          "evt_4/wh_z",
        ]);
        // Released claims are free at once.
        await b.releaseClaims("srv_b", [{ event_id: "evt_2", webhook_id: "wh_x" }]);
        assertEquals(keys(await a.claimDue({ ...later, owner: "srv_a", limit: 10 })), [
          "evt_2/wh_x",
        ]);
        await b.releaseClaims("srv_b");
        assertEquals(await b.renewClaims("srv_b", T + 90_000), 0);
        assertEquals(await a.renewClaims("srv_a", T + 90_000), 2);
        await assertRejects(
          () => a.claimDue({ ...later, owner: "srv_a", limit: 0 }),
          GatewayError,
          "Invalid limit 0",
        );
      },
    );

    await t.step(
      "writes keep claims; put_fanout with a claim claims the entries it lists",
      async () => {
        const open = await fresh();
        const a = deliveries(await open());
        const writer = a.writer();
        await writer.write([{
          op: "put_fanout",
          event_id: "evt_1",
          fanout: fanout(["wh_a", "wh_b"]),
        }]);
        const claim = { now: T, dueBefore: T + 100_000, until: T + 30_000, limit: 100 };
        assertEquals((await a.claimDue({ ...claim, owner: "srv_a" })).length, 2);
        // wh_a's first attempt failed: a record of its own, still claimed by srv_a.
        await writer.write([
          { op: "put_delivery", delivery: record("evt_1", "wh_a", T + 1000) },
          { op: "put_fanout", event_id: "evt_1", fanout: fanout(["wh_b"]) },
        ]);
        // A new event written by srv_b, for itself.
        await writer.write([{
          op: "put_fanout",
          event_id: "evt_2",
          fanout: fanout(["wh_a", "wh_b"]),
          claim: { owner: "srv_b", until: T + 30_000 },
        } as DeliveryOp]);
        assertEquals(await a.claimDue({ ...claim, owner: "srv_c" }), []);
        assertEquals(await a.renewClaims("srv_a", T + 40_000), 2);
        assertEquals(await a.renewClaims("srv_b", T + 40_000), 2);
        // Rewritten with a claim, every entry it lists is the claimer's.
        await writer.write([{
          op: "put_fanout",
          event_id: "evt_2",
          fanout: fanout(["wh_b", "wh_c"]),
          claim: { owner: "srv_d", until: T + 30_000 },
        } as DeliveryOp]);
        assertEquals(await a.renewClaims("srv_b", T + 40_000), 0);
        assertEquals(await a.renewClaims("srv_d", T + 40_000), 2);
        await writer.write([
          { op: "delete_delivery", event_id: "evt_1", webhook_id: "wh_a" },
          { op: "put_fanout", event_id: "evt_1", fanout: fanout([]) },
        ]);
        assertEquals(await a.renewClaims("srv_a", T + 40_000), 0);
      },
    );

    await t.step(
      "two instances claiming at once never share a delivery nor split a fan-out",
      async () => {
        const open = await fresh();
        const a = deliveries(await open());
        const b = deliveries(await open());
        const writer = a.writer();
        await Promise.all(Array.from({ length: 60 }, (_, i) =>
          writer.write([{
            op: "put_fanout",
            event_id: `evt_${String(i).padStart(3, "0")}`,
            fanout: fanout(["wh_a", "wh_b", "wh_c"], T + i),
          }])));
        const claimAll = async (store: PostgresDeliveryStore, owner: string) => {
          const mine: string[] = [];
          for (;;) {
            const page = await store.claimDue({
              owner,
              now: T,
              dueBefore: T + 1000,
              until: T + 30_000,
              limit: 7,
            });
            if (!page.length) return mine;
            mine.push(...keys(page));
          }
        };
        const [mineA, mineB] = await Promise.all([claimAll(a, "srv_a"), claimAll(b, "srv_b")]);
        assertEquals(mineA.length + mineB.length, 180);
        assertEquals(new Set([...mineA, ...mineB]).size, 180);
        const eventsA = new Set(mineA.map((k) => k.split("/")[0]));
        for (const key of mineB) assert(!eventsA.has(key.split("/")[0]), `${key} split`);
      },
    );

    await t.step("an op that does not parse is refused before anything is written", async () => {
      const open = await fresh();
      const a = deliveries(await open());
      const bad = { ...record("evt_1", "wh_a", T), attempt_count: -1 };
      const error = await assertRejects(
        () => a.writer().write([{ op: "put_delivery", delivery: bad }]),
        GatewayError,
        "op 0 (put_delivery) is invalid",
      );
      assertEquals(error.code, "INTERNAL");
      assertEquals(await a.listPending(), []);
      // Inside the audit log's commit, a collect_event is refused too.
      const ctx = new PgContext((await open()).sql);
      await assertRejects(
        () =>
          ctx.transaction((tx) =>
            applyDeliveryOps(tx, [
              { op: "put_delivery", delivery: record("evt_1", "wh_a", T) },
              { op: "collect_event", event_id: "evt_1", versionstamp: "1", size: 0 },
            ], "00000000000000000001")
          ),
        GatewayError,
        "collect_event",
      );
      assertEquals(await a.listPending(), []);
    });

    await t.step(
      "a unit the database refuses fails alone; the units batched with it commit",
      async () => {
        const open = await fresh();
        const a = deliveries(await open());
        const writer = a.writer({ lingerMs: 5 });
        const writes = [
          writer.write([{ op: "put_delivery", delivery: record("evt_1", "wh_a", T) }]),
          // PostgreSQL text cannot hold NUL.
          writer.write([
            { op: "put_delivery", delivery: record("evt_2", "wh_a", T) },
            { op: "put_delivery", delivery: record("evt_2", "wh_\u0000", T) },
          ]),
          writer.write([{ op: "put_delivery", delivery: record("evt_3", "wh_a", T) }]),
        ];
        const settled = await Promise.allSettled(writes);
        assertEquals(settled.map((s) => s.status), ["fulfilled", "rejected", "fulfilled"]);
        assertEquals(keys(await a.listPending()), ["evt_1/wh_a", "evt_3/wh_a"]);
      },
    );

    await t.step(
      "instances writing the same rows at once all commit, the last write winning",
      async () => {
        const open = await fresh();
        const a = deliveries(await open());
        const b = deliveries(await open());
        const events = Array.from({ length: 20 }, (_, i) => `evt_${String(i).padStart(2, "0")}`);
        const round = (store: PostgresDeliveryStore, order: string[], attempts: number) =>
          Promise.all(order.map((eventId) =>
            store.writer().write([
              { op: "put_delivery", delivery: record(eventId, "wh_a", T, attempts) },
              { op: "put_fanout", event_id: eventId, fanout: fanout(["wh_b", "wh_c"]) },
            ])
          ));
        for (let i = 0; i < 5; i++) {
          await Promise.all([round(a, events, 1), round(b, [...events].reverse(), 2)]);
        }
        const listed = await a.listPending();
        assertEquals(listed.length, 60);
        assert(
          listed.filter((d) => !d.fanout).every((d) => [1, 2].includes(d.record.attempt_count)),
        );
      },
    );

    await t.step("requeueDlq() from two instances at once queues one delivery", async () => {
      const open = await fresh();
      const a = deliveries(await open());
      const b = deliveries(await open());
      const body = encoder.encode('{"id":"evt_1"}');
      const dlq: DlqRecord = {
        dlq_id: "dlq_01",
        webhook_id: "wh_a",
        url: "https://example.com/hook",
        event_id: "evt_1",
        event_type: "tool.called",
        attempts: record("evt_1", "wh_a", T, 6).attempts,
        failed_at: CREATED_AT,
        size: body.byteLength,
      };
      const outcomes = await Promise.all([
        a.requeueDlq(dlq, body, CREATED_AT, T),
        b.requeueDlq(dlq, body, CREATED_AT, T),
      ]);
      assertEquals(outcomes.sort(), ["already_queued", "queued"]);
      assertEquals(keys(await a.listPending()), ["evt_1/wh_a"]);
      assertEquals((await b.readEvent("evt_1"))?.event.body, body);
    });
  } finally {
    for (const store of opened) await store.close();
    await admin.end();
    await Deno.remove(dataDir, { recursive: true });
  }
});
