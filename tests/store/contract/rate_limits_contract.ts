/**
 * Contract: rate limit buckets. A bucket starts full, gives one token per
 * take, refuses with the wait for the next token, refills by the time
 * elapsed (the callers' clock; a clock behind adds nothing) up to its
 * capacity; buckets are separate by key; concurrent takes never grant more
 * than the bucket holds. On PostgreSQL two handles share a bucket (on Deno
 * KV buckets are one server's memory). A sweep drops exactly the buckets
 * that have refilled to their capacity, which then behave as full; a bucket
 * still refilling (a `1/d` one hours after its take) is never dropped.
 *
 * @module
 */
import { assert, assertEquals } from "../../_asserts.ts";
import type { RateRule } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

/** 3 per second, a burst of 3. */
const THREE_PER_S: RateRule = { capacity: 3, refillPerMs: 3 / 1000, rate: "3/s" };
const T0 = Date.UTC(2026, 0, 1);

/** Cases of the rate limit buckets. */
export const RATE_LIMITS_CONTRACT: readonly ContractCase[] = [
  {
    name:
      "rate limits: a bucket starts full, refuses with the wait for a token, refills by the time elapsed up to its capacity",
    async run({ store }) {
      const take = (now: number) => store.rateLimits.take("caller:key:a", THREE_PER_S, now);
      assertEquals(await take(T0), { ok: true, remaining: 2, retryAfterMs: 0 });
      assertEquals(await take(T0), { ok: true, remaining: 1, retryAfterMs: 0 });
      assertEquals(await take(T0), { ok: true, remaining: 0, retryAfterMs: 0 });
      // One token takes 333.3 ms.
      assertEquals(await take(T0), { ok: false, remaining: 0, retryAfterMs: 334 });
      assertEquals(await take(T0 + 100), { ok: false, remaining: 0, retryAfterMs: 234 });
      // A clock behind the bucket's adds nothing and does not move it back.
      assertEquals(await take(T0 - 5_000), { ok: false, remaining: 0, retryAfterMs: 234 });
      assertEquals(await take(T0 + 334), { ok: true, remaining: 0, retryAfterMs: 0 });
      // A long pause refills to the capacity, no more.
      assertEquals(await take(T0 + 60_000), { ok: true, remaining: 2, retryAfterMs: 0 });
      assertEquals(await take(T0 + 60_000), { ok: true, remaining: 1, retryAfterMs: 0 });
      assertEquals(await take(T0 + 60_000), { ok: true, remaining: 0, retryAfterMs: 0 });
      assertEquals((await take(T0 + 60_000)).ok, false);
    },
  },
  {
    name: "rate limits: buckets are separate by key, and a rule's capacity bounds a refill",
    async run({ store }) {
      const one: RateRule = { capacity: 1, refillPerMs: 1 / 60_000, rate: "1/m" };
      assertEquals((await store.rateLimits.take("caller:key:a", one, T0)).ok, true);
      assertEquals(await store.rateLimits.take("caller:key:a", one, T0), {
        ok: false,
        remaining: 0,
        retryAfterMs: 60_000,
      });
      assertEquals((await store.rateLimits.take("caller:key:b", one, T0)).ok, true);
      assertEquals((await store.rateLimits.take("tool:echo", one, T0)).ok, true);
      // A larger burst configured later starts from what the bucket holds.
      const burst: RateRule = { capacity: 5, refillPerMs: 1 / 60_000, rate: "1/m" };
      assertEquals((await store.rateLimits.take("caller:key:a", burst, T0 + 30_000)).ok, false);
    },
  },
  {
    name: "rate limits: concurrent takes never grant more tokens than the bucket holds",
    async run({ store }) {
      const five: RateRule = { capacity: 5, refillPerMs: 5 / 3_600_000, rate: "5/h" };
      const takes = await Promise.all(
        Array.from({ length: 20 }, () => store.rateLimits.take("tool:busy", five, T0)),
      );
      assertEquals(takes.filter((take) => take.ok).length, 5);
      assertEquals(
        takes.filter((take) => take.ok).map((take) => take.remaining).sort(),
        [0, 1, 2, 3, 4],
      );
    },
  },
  {
    name:
      "rate limits: on PostgreSQL two handles share a bucket (on Deno KV each server has its own)",
    async run({ store, another, adapter }) {
      const other = await another();
      const two: RateRule = { capacity: 2, refillPerMs: 2 / 1000, rate: "2/s" };
      assertEquals((await store.rateLimits.take("caller:key:ci", two, T0)).ok, true);
      assertEquals((await other.rateLimits.take("caller:key:ci", two, T0)).ok, true);
      const third = await store.rateLimits.take("caller:key:ci", two, T0);
      const fourth = await other.rateLimits.take("caller:key:ci", two, T0);
      if (adapter === "postgres") {
        assertEquals(third, { ok: false, remaining: 0, retryAfterMs: 500 });
        assertEquals(fourth, { ok: false, remaining: 0, retryAfterMs: 500 });
        // The refill one handle sees is the other's too.
        assertEquals((await other.rateLimits.take("caller:key:ci", two, T0 + 500)).ok, true);
        assertEquals((await store.rateLimits.take("caller:key:ci", two, T0 + 500)).ok, false);
      } else {
        assertEquals(third.ok, true);
        assertEquals(fourth.ok, true);
      }
    },
  },
  {
    name:
      "rate limits: a sweep drops exactly the buckets refilled to their capacity; a dropped one starts full, a kept one still refuses",
    async run({ store }) {
      const perMinute: RateRule = { capacity: 2, refillPerMs: 2 / 60_000, rate: "2/m" };
      const perDay: RateRule = { capacity: 1, refillPerMs: 1 / 86_400_000, rate: "1/d" };
      const take = (key: string, rule: RateRule, now: number) =>
        store.rateLimits.take(key, rule, now);
      assertEquals((await take("caller:key:minute", perMinute, T0)).ok, true);
      assertEquals((await take("caller:key:minute", perMinute, T0)).ok, true);
      assertEquals((await take("caller:key:day", perDay, T0)).ok, true);
      // Nothing has refilled yet: nothing is dropped.
      assertEquals(await store.rateLimits.sweep(T0 + 59_999), 0);
      // The minute bucket is full 60 s after its last take; the day bucket is not, hours later.
      assertEquals(await store.rateLimits.sweep(T0 + 3 * 3_600_000), 1);
      assertEquals(await store.rateLimits.sweep(T0 + 3 * 3_600_000), 0);
      assertEquals(await take("caller:key:minute", perMinute, T0 + 3 * 3_600_000), {
        ok: true,
        remaining: 1,
        retryAfterMs: 0,
      });
      assertEquals(await take("caller:key:day", perDay, T0 + 3 * 3_600_000), {
        ok: false,
        remaining: 0,
        retryAfterMs: 21 * 3_600_000,
      });
      // A refused take does not move when the day bucket is full: a day after the first take
      // (the minute bucket, taken again, is full 30 s after).
      assertEquals(await store.rateLimits.sweep(T0 + 86_400_000 - 1), 1);
      assertEquals(await store.rateLimits.sweep(T0 + 86_400_000), 1);
      assertEquals(await take("caller:key:day", perDay, T0 + 86_400_000), {
        ok: true,
        remaining: 0,
        retryAfterMs: 0,
      });
    },
  },
  {
    name:
      "rate limits: a 1/d bucket hours after its take still refuses with the wait for its token, however the store tidies up",
    async run({ store }) {
      const perDay: RateRule = { capacity: 1, refillPerMs: 1 / 86_400_000, rate: "1/d" };
      assertEquals((await store.rateLimits.take("tool:daily", perDay, T0)).ok, true);
      // Many other buckets come and go meanwhile (each takes once, refilled a minute later).
      const perMinute: RateRule = { capacity: 1, refillPerMs: 1 / 60_000, rate: "1/m" };
      for (let hour = 1; hour <= 12; hour++) {
        const now = T0 + hour * 3_600_000;
        await Promise.all(
          Array.from(
            { length: 20 },
            (_, i) => store.rateLimits.take(`caller:key:${hour}-${i}`, perMinute, now),
          ),
        );
        await store.rateLimits.sweep(now);
        const refused = await store.rateLimits.take("tool:daily", perDay, now);
        assertEquals({ ...refused, retryAfterMs: 0 }, { ok: false, remaining: 0, retryAfterMs: 0 });
        // The wait for the token, to the ms (rounded up from a float).
        const wait = 86_400_000 - hour * 3_600_000;
        assert(
          refused.retryAfterMs - wait >= 0 && refused.retryAfterMs - wait <= 1,
          `${refused.retryAfterMs}`,
        );
      }
    },
  },
];
