/**
 * PostgreSQL adapter: pins of upstream definitions. One row per plugin, kind
 * and name, the record as `jsonb`; a put is guarded by the record it
 * replaces (`jsonb` equality), and every change bumps the `registrations`
 * counter in its own transaction, so running servers pick it up.
 *
 * @module
 */
import type postgres from "postgres";
import { parseRecord } from "../_records.ts";
import { type PinKind, type ToolPinRecord, ToolPinRecordSchema } from "../records.ts";
import type { PinStore } from "../store.ts";
import { bumpCounter, type PgContext } from "./_context.ts";

/** Tables of this part, in migration 3. */
export const PINS_SCHEMA = `
  create table toolgate_tool_pins (
    plugin text collate "C",
    kind text collate "C",
    name text collate "C",
    record jsonb not null,
    primary key (plugin, kind, name)
  );
`;

interface PinRow {
  plugin: string;
  kind: string;
  name: string;
  record: unknown;
}

function parse(row: PinRow): ToolPinRecord {
  return parseRecord(ToolPinRecordSchema, row.record, `pin ${row.plugin}/${row.kind}/${row.name}`);
}

function jsonValue(record: ToolPinRecord): postgres.JSONValue {
  return record as unknown as postgres.JSONValue;
}

class PgPinStore implements PinStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async list(): Promise<ToolPinRecord[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<PinRow[]>`
        select plugin, kind, name, record from toolgate_tool_pins order by plugin, kind, name`
    );
    return rows.map(parse);
  }

  async get(plugin: string, kind: PinKind, name: string): Promise<ToolPinRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<PinRow[]>`
        select plugin, kind, name, record from toolgate_tool_pins
        where plugin = ${plugin} and kind = ${kind} and name = ${name}`
    );
    return row ? parse(row) : null;
  }

  put(record: ToolPinRecord, previous: ToolPinRecord | null): Promise<boolean> {
    const value = ToolPinRecordSchema.parse(record);
    return this.#ctx.transaction(async (tx) => {
      // A concurrent writer of the same row goes first; this one then finds it changed.
      const rows = previous === null
        ? await tx`
          insert into toolgate_tool_pins (plugin, kind, name, record)
          values (${value.plugin}, ${value.kind}, ${value.name}, ${tx.json(jsonValue(value))})
          on conflict (plugin, kind, name) do nothing
          returning name`
        : await tx`
          update toolgate_tool_pins set record = ${tx.json(jsonValue(value))}
          where plugin = ${value.plugin} and kind = ${value.kind} and name = ${value.name}
            and record = ${tx.json(jsonValue(previous))}::jsonb
          returning name`;
      if (!rows.length) return false;
      await bumpCounter(tx, "registrations");
      return true;
    });
  }

  remove(plugin: string, kind: PinKind, name: string): Promise<boolean> {
    return this.#ctx.transaction(async (tx) => {
      const rows = await tx`
        delete from toolgate_tool_pins
        where plugin = ${plugin} and kind = ${kind} and name = ${name}
        returning name`;
      if (!rows.length) return false;
      await bumpCounter(tx, "registrations");
      return true;
    });
  }
}

/** The pins, on PostgreSQL. */
export function createPinStore(ctx: PgContext): PinStore {
  return new PgPinStore(ctx);
}
