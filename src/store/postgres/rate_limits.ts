/**
 * PostgreSQL adapter: rate limit buckets, one row per bucket key shared by
 * every instance on the database. A take is one statement: insert a full
 * bucket less one token, or (the row locked by the conflict) refill the row
 * by the time elapsed up to the capacity and take a token if there is one,
 * the same math as `takeToken` in `rate_buckets.ts`. The statement also
 * records when the bucket will be full again (`full_ms`); rows full by then
 * are the same as missing ones (a missing bucket starts full), and each
 * handle deletes them at most once per sweep interval, so the table holds
 * the buckets still refilling rather than every key ever seen.
 *
 * Times are the callers' clocks (ms since the epoch), so tests inject them;
 * a clock behind the row's adds nothing and never moves it back.
 *
 * @module
 */
import { TOKEN_EPSILON, tokensAnswer } from "../rate_buckets.ts";
import type { RateLimitStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/**
 * Tables of this part, in migration 1. No index on `full_ms`: every take
 * changes it, and an index would cost each take an index write (no HOT
 * update) to spare a sweep a minute its sequential scan (at 200 000 rows
 * about 7 ms when none is deleted, 43 ms deleting 100 000, on a laptop-class
 * test server).
 */
export const RATE_LIMITS_SCHEMA = `
  create table toolgate_rate_buckets (
    key text collate "C" primary key,
    tokens double precision not null,
    updated_ms double precision not null,
    granted boolean not null,
    full_ms double precision not null
  );
`;

/** How often a handle deletes the rows of refilled buckets, at most (ms of the callers' clock). */
export const RATE_SWEEP_MS = 60_000;

/**
 * The buckets, on PostgreSQL.
 *
 * @param ctx The adapter's handle.
 * @param sweepMs How often takes delete refilled rows, at most, by the callers' `now`.
 */
export function createRateLimitStore(ctx: PgContext, sweepMs = RATE_SWEEP_MS): RateLimitStore {
  let sweptAt = -Infinity;
  const sweep = async (now: number) => {
    sweptAt = now;
    const rows = await ctx.run((sql) =>
      sql`delete from toolgate_rate_buckets where full_ms <= ${now}::float8`
    );
    return rows.count;
  };
  return {
    async take(key, rule, now) {
      if (now - sweptAt >= sweepMs) await sweep(now);
      const [row] = await ctx.run((sql) =>
        sql<{ tokens: number; granted: boolean }[]>`
          with bucket as (select ${rule.capacity}::float8 as capacity,
                                 ${rule.refillPerMs}::float8 as per_ms,
                                 ${now}::float8 as now)
          insert into toolgate_rate_buckets as b (key, tokens, updated_ms, granted, full_ms)
          select ${key}, bucket.capacity - 1, bucket.now, true, bucket.now + 1 / bucket.per_ms
          from bucket
          on conflict (key) do update set (tokens, granted, updated_ms, full_ms) = (
            select n.tokens, r.granted, n.updated_ms,
                   n.updated_ms + (bucket.capacity - n.tokens) / bucket.per_ms
            from bucket,
                 lateral (select least(bucket.capacity,
                                       b.tokens + greatest(0, bucket.now - b.updated_ms) * bucket.per_ms)
                                 as t) refilled,
                 lateral (select refilled.t >= 1 - ${TOKEN_EPSILON}::float8 as granted) r,
                 lateral (select case when r.granted then greatest(0, refilled.t - 1)
                                      else refilled.t end as tokens,
                                 greatest(b.updated_ms, bucket.now) as updated_ms) n)
          returning tokens, granted`
      );
      // Before the take the bucket held `tokens + 1` when granted, `tokens` when not.
      return tokensAnswer(row.granted ? row.tokens + 1 : row.tokens, rule);
    },
    sweep,
  };
}
