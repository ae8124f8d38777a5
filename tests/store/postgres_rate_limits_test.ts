/**
 * What the PostgreSQL rate limit buckets do beyond the storage contract
 * (tests/store/contract/rate_limits_contract.ts), against a real throwaway
 * server: each row records when its bucket is full again, and takes delete
 * the rows of refilled buckets at most once per sweep interval of the
 * callers' clock, on every instance, keeping the buckets still refilling.
 */
import postgres from "postgres";
import { assertEquals } from "../_asserts.ts";
import { startPostgres } from "../_postgres.ts";
import { type RateRule, takeToken } from "../../src/store/mod.ts";
import { PgContext } from "../../src/store/postgres/_context.ts";
import { migrate } from "../../src/store/postgres/migrations.ts";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";
import { createRateLimitStore, RATE_SWEEP_MS } from "../../src/store/postgres/rate_limits.ts";

const T0 = Date.UTC(2026, 0, 1);
const PER_SECOND: RateRule = { capacity: 10, refillPerMs: 10 / 1000, rate: "10/s" };
const PER_MINUTE: RateRule = { capacity: 1, refillPerMs: 1 / 60_000, rate: "1/m" };
const PER_DAY: RateRule = { capacity: 5000, refillPerMs: 5000 / 86_400_000, rate: "5000/d" };

Deno.test("postgres rate limits: takes sweep the rows of refilled buckets once per interval, and only those", async () => {
  await using pg = await startPostgres({ database: "rate_limits" });
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-pg-rate-limits-" });
  const a = await (async () => {
    await migrate(admin);
    return await openPostgresStore({ url: pg.url, dataDir, pool: { max: 2 } });
  })();
  const b = await openPostgresStore({ url: pg.url, dataDir, pool: { max: 2 } });
  const rows = async () =>
    (await admin<{ key: string; full_ms: number }[]>`
      select key, full_ms from toolgate_rate_buckets order by key`)
      .map(({ key, full_ms }) => ({ key, full_ms }));
  try {
    // The first take of a handle sweeps (an empty table here); the rest of the interval does not.
    for (let i = 0; i < 10; i++) await a.rateLimits.take("caller:key:day", PER_DAY, T0);
    await a.rateLimits.take("caller:key:minute", PER_MINUTE, T0);
    await a.rateLimits.take("tool:second", PER_SECOND, T0);
    await a.rateLimits.take("caller:key:late", PER_MINUTE, T0 + 30_000);
    // Each row says when its bucket is full again, as the in-memory math does.
    let day = takeToken(undefined, PER_DAY, T0).state;
    for (let i = 0; i < 9; i++) day = takeToken(day, PER_DAY, T0).state;
    assertEquals(day.fullMs, T0 + 10 * 86_400_000 / 5000);
    assertEquals(await rows(), [
      { key: "caller:key:day", full_ms: day.fullMs },
      { key: "caller:key:late", full_ms: T0 + 90_000 },
      { key: "caller:key:minute", full_ms: T0 + 60_000 },
      { key: "tool:second", full_ms: T0 + 100 },
    ]);
    // Within the interval no row goes, full or not.
    await a.rateLimits.take("caller:key:late", PER_MINUTE, T0 + RATE_SWEEP_MS - 1);
    assertEquals((await rows()).length, 4);
    // Once it has passed, the next take deletes the full ones: the 10/s bucket (full 100 ms
    // after its take) and the 1/m one (full at the sweep's time); the 5000/d bucket ten
    // tokens short and the 1/m bucket refused 30 s ago stay.
    const refused = await a.rateLimits.take("caller:key:late", PER_MINUTE, T0 + RATE_SWEEP_MS);
    assertEquals(refused, { ok: false, remaining: 0, retryAfterMs: 30_000 });
    assertEquals((await rows()).map(({ key }) => key), ["caller:key:day", "caller:key:late"]);
    // Another instance sweeps on its own interval (its first take here).
    await b.rateLimits.take("tool:second", PER_SECOND, T0 + 90_000);
    assertEquals((await rows()).map(({ key }) => key), ["caller:key:day", "tool:second"]);
    // The day bucket goes once it has refilled, not before.
    await b.rateLimits.take("tool:second", PER_SECOND, day.fullMs - 1);
    assertEquals((await rows()).map(({ key }) => key), ["caller:key:day", "tool:second"]);
    assertEquals(await a.rateLimits.sweep(day.fullMs + 100), 2);
    assertEquals(await rows(), []);
    // A dropped bucket starts full.
    assertEquals(await a.rateLimits.take("caller:key:day", PER_DAY, day.fullMs + 100), {
      ok: true,
      remaining: 4999,
      retryAfterMs: 0,
    });
    // The interval can be given: the clock is still the callers'.
    const often = createRateLimitStore(new PgContext(a.sql), 1_000);
    await often.take("tool:other", PER_SECOND, day.fullMs + 100);
    assertEquals((await rows()).length, 2);
    await often.take("caller:key:day", PER_DAY, day.fullMs + 1_099);
    assertEquals((await rows()).length, 2);
    await often.take("caller:key:day", PER_DAY, day.fullMs + 1_100);
    assertEquals((await rows()).map(({ key }) => key), ["caller:key:day"]);
  } finally {
    await a.close();
    await b.close();
    await admin.end();
    await Deno.remove(dataDir, { recursive: true });
  }
});
