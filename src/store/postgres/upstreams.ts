/**
 * PostgreSQL adapter: MCP upstreams added at run time, and the plugin states
 * running servers publish.
 *
 * An upstream is one row keyed by name, its record as `jsonb`; adding one
 * is an insert guarded by the primary key (of two instances adding the same
 * name, exactly one succeeds), and every change bumps the `registrations`
 * counter in the same transaction. A published server status is one row
 * with the time it expires (`now + ttl`, epoch ms): expired rows are never
 * listed, and are deleted lazily by the next publisher.
 *
 * @module
 */
import type postgres from "postgres";
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import {
  type NewUpstream,
  type ServerStatus,
  ServerStatusSchema,
  type UpstreamRecord,
  UpstreamRecordSchema,
} from "../records.ts";
import type { UpstreamStore } from "../store.ts";
import { bumpCounter, type PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const UPSTREAMS_SCHEMA = `
  create table toolgate_upstreams (
    name text collate "C" primary key,
    record jsonb not null
  );
  create table toolgate_server_statuses (
    server_id text primary key,
    record jsonb not null,
    expires_at bigint not null
  );
`;

function parseUpstream(value: unknown, name: string): UpstreamRecord {
  return parseRecord(UpstreamRecordSchema, value, `upstream ${name}`);
}

class PgUpstreamStore implements UpstreamStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async add(input: NewUpstream): Promise<UpstreamRecord> {
    const now = new Date().toISOString();
    const record = UpstreamRecordSchema.parse({
      ...input,
      kind: "mcp",
      created_at: now,
      updated_at: now,
    });
    const stored = await this.#ctx.transaction(async (tx) => {
      const [row] = await tx<{ record: unknown }[]>`
        insert into toolgate_upstreams (name, record)
        values (${record.name}, ${tx.json(record)})
        on conflict (name) do nothing
        returning record`;
      if (!row) {
        throw new GatewayError(
          "CONFLICT",
          `Cannot add plugin ${record.name}: a plugin of that name exists; remove it first`,
        );
      }
      await bumpCounter(tx, "registrations");
      return row.record;
    });
    return parseUpstream(stored, record.name);
  }

  async list(): Promise<UpstreamRecord[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ name: string; record: unknown }[]>`
        select name, record from toolgate_upstreams order by name`
    );
    return rows.map(({ name, record }) => parseUpstream(record, name));
  }

  remove(name: string): Promise<boolean> {
    return this.#ctx.transaction(async (tx) => {
      const rows = await tx`delete from toolgate_upstreams where name = ${name} returning name`;
      if (!rows.length) return false;
      await bumpCounter(tx, "registrations");
      return true;
    });
  }

  setEnabled(name: string, enabled: boolean): Promise<UpstreamRecord | null> {
    // Always touches updated_at, so enabling an enabled upstream makes
    // running servers restart it (a retry after a failed start).
    const updatedAt = new Date().toISOString();
    return this.#ctx.transaction(async (tx) => {
      const [row] = await tx<{ record: unknown }[]>`
        update toolgate_upstreams
        set record = record || jsonb_build_object(
          'enabled', ${enabled}::boolean, 'updated_at', ${updatedAt}::text)
        where name = ${name}
        returning record`;
      if (!row) return null;
      // A record that does not parse is reported and left as it was (rolled back).
      const record = parseUpstream(row.record, name);
      await bumpCounter(tx, "registrations");
      return record;
    });
  }

  async putServerStatus(status: ServerStatus, ttlMs: number): Promise<void> {
    const record = ServerStatusSchema.parse(status);
    const now = Date.now();
    const expiresAt = Math.ceil(now + ttlMs);
    await this.#ctx.run(async (sql) => {
      await sql`
        insert into toolgate_server_statuses (server_id, record, expires_at)
        values (${record.server_id}, ${
        sql.json(record as unknown as postgres.JSONValue)
      }, ${expiresAt})
        on conflict (server_id) do update set
          record = excluded.record, expires_at = excluded.expires_at`;
      // Servers that died without withdrawing: their rows go with the next publication.
      await sql`delete from toolgate_server_statuses where expires_at <= ${now}`;
    });
  }

  async deleteServerStatus(serverId: string): Promise<void> {
    await this.#ctx.run((sql) =>
      sql`delete from toolgate_server_statuses where server_id = ${serverId}`
    );
  }

  async listServerStatuses(maxAgeMs: number, now: number = Date.now()): Promise<ServerStatus[]> {
    // Expiry is the store's clock (as KV's expireIn), the age is the caller's.
    const rows = await this.#ctx.run((sql) =>
      sql<{ record: unknown }[]>`
        select record from toolgate_server_statuses where expires_at > ${Date.now()}`
    );
    const out: ServerStatus[] = [];
    for (const { record } of rows) {
      // A status that does not parse is left out, as on KV (it expires by itself).
      const parsed = ServerStatusSchema.safeParse(record);
      if (!parsed.success) continue;
      if (now - Date.parse(parsed.data.updated_at) > maxAgeMs) continue;
      out.push(parsed.data);
    }
    return out.sort((a, b) => b.updated_at.localeCompare(a.updated_at));
  }
}

/** The upstream registrations and server states, on PostgreSQL. */
export function createUpstreamStore(ctx: PgContext): UpstreamStore {
  return new PgUpstreamStore(ctx);
}
