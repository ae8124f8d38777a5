/**
 * PostgreSQL adapter: rate limit buckets, one row per bucket key shared by
 * every instance on the database. A take is one statement: insert a full
 * bucket less one token, or (the row locked by the conflict) refill the row
 * by the time elapsed up to the capacity and take a token if there is one,
 * the same math as `takeToken` in `rate_buckets.ts`.
 *
 * Times are the callers' clocks (ms since the epoch), so tests inject them;
 * a clock behind the row's adds nothing and never moves it back.
 *
 * @module
 */
import { TOKEN_EPSILON, tokensAnswer } from "../rate_buckets.ts";
import type { RateLimitStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const RATE_LIMITS_SCHEMA = `
  create table toolgate_rate_buckets (
    key text collate "C" primary key,
    tokens double precision not null,
    updated_ms double precision not null,
    granted boolean not null
  );
`;

/** The buckets, on PostgreSQL. */
export function createRateLimitStore(ctx: PgContext): RateLimitStore {
  return {
    async take(key, rule, now) {
      const [row] = await ctx.run((sql) =>
        sql<{ tokens: number; granted: boolean }[]>`
          with bucket as (select ${rule.capacity}::float8 as capacity,
                                 ${rule.refillPerMs}::float8 as per_ms,
                                 ${now}::float8 as now)
          insert into toolgate_rate_buckets as b (key, tokens, updated_ms, granted)
          select ${key}, bucket.capacity - 1, bucket.now, true from bucket
          on conflict (key) do update set
            tokens = (select case when r.t >= 1 - ${TOKEN_EPSILON}::float8
                                  then greatest(0, r.t - 1) else r.t end
                      from (select least(bucket.capacity,
                                         b.tokens + greatest(0, bucket.now - b.updated_ms) * bucket.per_ms)
                                   as t from bucket) r),
            granted = (select least(bucket.capacity,
                                    b.tokens + greatest(0, bucket.now - b.updated_ms) * bucket.per_ms)
                              >= 1 - ${TOKEN_EPSILON}::float8 from bucket),
            updated_ms = greatest(b.updated_ms, ${now}::float8)
          returning tokens, granted`
      );
      // Before the take the bucket held `tokens + 1` when granted, `tokens` when not.
      return tokensAnswer(row.granted ? row.tokens + 1 : row.tokens, rule);
    },
  };
}
