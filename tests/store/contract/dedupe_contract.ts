/**
 * Contract: incoming delivery ids (de-duplication). Of several payloads with
 * one id, exactly one reserves it, on any number of handles; the others see
 * the first job; a confirmed id is remembered for its TTL, an unconfirmed
 * one only until it goes stale; a release frees it for the sender's retry.
 *
 * @module
 */
import { assertEquals } from "../../_asserts.ts";
import type { ContractCase } from "./_contract.ts";

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const T0 = Date.parse("2026-11-27T10:00:00Z");

function reserve(
  store: Parameters<ContractCase["run"]>[0]["store"],
  delivery_id: string,
  job_id: string,
  now = T0,
  endpoint_id = "in_a",
) {
  return store.incoming.reserveDedupeKey({
    endpoint_id,
    delivery_id,
    job_id,
    now,
    ttl_ms: DAY,
    stale_ms: MINUTE,
  });
}

/** Cases of `reserveDedupeKey`, `confirmDedupeKey`, `releaseDedupeKey` and `pendingCounts`. */
export const DEDUPE_CONTRACT: readonly ContractCase[] = [
  {
    name: "dedupe: the first payload reserves an id, later ones see its job until the TTL ends",
    async run({ store }) {
      assertEquals(await reserve(store, "d-1", "inj_1"), { status: "reserved" });
      assertEquals(await reserve(store, "d-1", "inj_2", T0 + 1000), {
        status: "duplicate",
        job_id: "inj_1",
        confirmed: false,
      });
      await store.incoming.confirmDedupeKey("in_a", "d-1", "inj_1");
      assertEquals(await reserve(store, "d-1", "inj_3", T0 + DAY - 1), {
        status: "duplicate",
        job_id: "inj_1",
        confirmed: true,
      });
      assertEquals(await reserve(store, "d-1", "inj_4", T0 + DAY), { status: "reserved" });
      // Ids are per endpoint.
      assertEquals(await reserve(store, "d-1", "inj_5", T0, "in_b"), { status: "reserved" });
    },
  },
  {
    name: "dedupe: an unconfirmed reservation goes stale; a released one is free at once",
    async run({ store }) {
      await reserve(store, "d-2", "inj_1");
      assertEquals((await reserve(store, "d-2", "inj_2", T0 + MINUTE - 1)).status, "duplicate");
      assertEquals(await reserve(store, "d-2", "inj_2", T0 + MINUTE), { status: "reserved" });
      // The stale holder's late confirm or release changes nothing.
      await store.incoming.confirmDedupeKey("in_a", "d-2", "inj_1");
      await store.incoming.releaseDedupeKey("in_a", "d-2", "inj_1");
      assertEquals(await reserve(store, "d-2", "inj_3", T0 + MINUTE + 1), {
        status: "duplicate",
        job_id: "inj_2",
        confirmed: false,
      });
      await store.incoming.releaseDedupeKey("in_a", "d-2", "inj_2");
      assertEquals(await reserve(store, "d-2", "inj_4", T0 + MINUTE + 2), { status: "reserved" });
    },
  },
  {
    name: "dedupe: of 20 payloads with one id on two handles at once, exactly one reserves it",
    async run({ store, another }) {
      const other = await another();
      const results = await Promise.all(
        Array.from(
          { length: 20 },
          (_, i) => reserve(i % 2 ? store : other, "d-3", `inj_${i}`),
        ),
      );
      const winners = results.flatMap((r, i) => r.status === "reserved" ? [`inj_${i}`] : []);
      assertEquals(winners.length, 1);
      for (const result of results) {
        if (result.status === "duplicate") assertEquals(result.job_id, winners[0]);
      }
    },
  },
  {
    name: "incoming: pendingCounts() counts waiting jobs per endpoint; completed ones leave",
    async run({ store, another }) {
      assertEquals(await store.incoming.pendingCounts(), {});
      const put = (id: string, endpoint_id: string) =>
        store.incoming.put(
          { id, endpoint_id, handler: "h", received_at: new Date(T0).toISOString() },
          new TextEncoder().encode("{}"),
        );
      const a1 = await put("inj_a1", "in_a");
      await put("inj_a2", "in_a");
      await put("inj_b1", "in_b");
      assertEquals(await (await another()).incoming.pendingCounts(), { in_a: 2, in_b: 1 });
      await store.incoming.complete([{ job: a1, failed: false }]);
      assertEquals(await store.incoming.pendingCounts(), { in_a: 1, in_b: 1 });
    },
  },
];
