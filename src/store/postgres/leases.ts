/**
 * PostgreSQL adapter: leases. The delivery lease is one row of
 * `toolgate_leases`; it is taken or renewed by one statement, an upsert
 * whose update applies only when the lease is free, lapsed or already the
 * claimer's, so of several instances claiming at once exactly one holds it.
 * A lease held by a process of this host that no longer runs is taken over
 * too, by a second statement guarded by the exact holder that was found
 * gone (a lease renewed or taken meanwhile is left alone).
 *
 * @module
 */
import { type ClaimLeaseOptions, type DeliveryLease, DeliveryLeaseSchema } from "../records.ts";
import { leaseHolderIsGone } from "../_rules.ts";
import type { LeaseStore } from "../store.ts";
import type { PgContext } from "./_context.ts";
import type { Sql } from "./connection.ts";

/** Tables of this part, in migration 1. */
export const LEASES_SCHEMA = `
  create table toolgate_leases (
    name text primary key,
    owner text not null,
    pid integer not null,
    hostname text not null,
    expires_at bigint not null
  );
`;

/** The row of the delivery lease. */
const DELIVERY = "delivery";

/**
 * Writes `lease` when the stored one is free, lapsed at `now`, already
 * `lease.owner`'s, or exactly `gone` (a holder found gone).
 *
 * @returns Whether `lease` is stored now.
 */
async function claim(
  sql: Sql,
  lease: DeliveryLease,
  now: number,
  gone: DeliveryLease | null,
): Promise<boolean> {
  const rows = await sql`
    insert into toolgate_leases as l (name, owner, pid, hostname, expires_at)
    values (${DELIVERY}, ${lease.owner}, ${lease.pid}, ${lease.hostname}, ${lease.expires_at})
    on conflict (name) do update set
      owner = excluded.owner, pid = excluded.pid, hostname = excluded.hostname,
      expires_at = excluded.expires_at
    where l.owner = excluded.owner or l.expires_at <= ${now}::float8
      or (l.owner = ${gone?.owner ?? null} and l.pid = ${gone?.pid ?? null}
        and l.hostname = ${gone?.hostname ?? null}
        and l.expires_at = ${gone?.expires_at ?? null}::float8)
    returning 1`;
  return rows.length > 0;
}

class PgLeaseStore implements LeaseStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  claimDelivery(options: ClaimLeaseOptions): Promise<boolean> {
    const { owner, ttlMs, now = Date.now() } = options;
    const lease: DeliveryLease = {
      owner,
      pid: Deno.pid,
      hostname: Deno.hostname(),
      expires_at: Math.ceil(now + ttlMs),
    };
    return this.#ctx.run(async (sql) => {
      if (await claim(sql, lease, now, null)) return true;
      const [row] = await sql`
        select owner, pid, hostname, expires_at::float8 as expires_at
        from toolgate_leases where name = ${DELIVERY}`;
      // Gone since the claim: free now.
      if (!row) return await claim(sql, lease, now, null);
      const held = DeliveryLeaseSchema.safeParse({ ...row });
      if (!held.success || !leaseHolderIsGone(held.data)) return false;
      return await claim(sql, lease, now, held.data);
    });
  }

  async releaseDelivery(owner: string): Promise<void> {
    await this.#ctx.run((sql) =>
      sql`delete from toolgate_leases where name = ${DELIVERY} and owner = ${owner}`
    );
  }
}

/** The leases, on PostgreSQL. */
export function createLeaseStore(ctx: PgContext): LeaseStore {
  return new PgLeaseStore(ctx);
}
