/**
 * PostgreSQL adapter: virtual servers. One row per name, the record as
 * `jsonb`; every change bumps the `registrations` counter in its own
 * transaction, so running servers pick it up.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import {
  type VirtualServerRecord,
  VirtualServerRecordSchema,
  type VirtualServerUpdate,
} from "../records.ts";
import type { VirtualServerStore } from "../store.ts";
import { bumpCounter, type PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const VIRTUAL_SERVERS_SCHEMA = `
  create table toolgate_virtual_servers (
    name text collate "C" primary key,
    record jsonb not null
  );
`;

function parse(row: { name: string; record: unknown }): VirtualServerRecord {
  return parseRecord(VirtualServerRecordSchema, row.record, `virtual server ${row.name}`);
}

class PgVirtualServerStore implements VirtualServerStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async add(record: VirtualServerRecord): Promise<VirtualServerRecord> {
    const value = VirtualServerRecordSchema.parse(record);
    await this.#ctx.transaction(async (tx) => {
      const rows = await tx`
        insert into toolgate_virtual_servers (name, record)
        values (${value.name}, ${tx.json(value)})
        on conflict (name) do nothing
        returning name`;
      if (!rows.length) {
        throw new GatewayError("CONFLICT", `A virtual server named ${value.name} exists`, {
          details: { name: value.name },
        });
      }
      await bumpCounter(tx, "registrations");
    });
    return value;
  }

  async list(): Promise<VirtualServerRecord[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ name: string; record: unknown }[]>`
        select name, record from toolgate_virtual_servers order by name`
    );
    return rows.map(parse);
  }

  async get(name: string): Promise<VirtualServerRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ name: string; record: unknown }[]>`
        select name, record from toolgate_virtual_servers where name = ${name}`
    );
    return row ? parse(row) : null;
  }

  update(name: string, update: VirtualServerUpdate): Promise<VirtualServerRecord | null> {
    return this.#ctx.transaction(async (tx) => {
      const [row] = await tx<{ name: string; record: unknown }[]>`
        select name, record from toolgate_virtual_servers where name = ${name} for update`;
      if (!row) return null;
      const record = VirtualServerRecordSchema.parse({
        ...parse(row),
        ...(update.tools === undefined ? {} : { tools: update.tools }),
        ...(update.description === undefined ? {} : { description: update.description }),
        updated_at: new Date().toISOString(),
      });
      await tx`
        update toolgate_virtual_servers set record = ${tx.json(record)} where name = ${name}`;
      await bumpCounter(tx, "registrations");
      return record;
    });
  }

  remove(name: string): Promise<boolean> {
    return this.#ctx.transaction(async (tx) => {
      const rows =
        await tx`delete from toolgate_virtual_servers where name = ${name} returning name`;
      if (!rows.length) return false;
      await bumpCounter(tx, "registrations");
      return true;
    });
  }
}

/** The virtual servers, on PostgreSQL. */
export function createVirtualServerStore(ctx: PgContext): VirtualServerStore {
  return new PgVirtualServerStore(ctx);
}
