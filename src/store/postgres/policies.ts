/**
 * PostgreSQL adapter: stored policy rules. One row per name, the record as
 * `jsonb`; every change bumps the `registrations` counter in its own
 * transaction, so running servers pick it up.
 *
 * @module
 */
import type postgres from "postgres";
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { type PolicyRecord, PolicyRecordSchema } from "../records.ts";
import type { PolicyStore } from "../store.ts";
import { bumpCounter, type PgContext } from "./_context.ts";

/** Tables of this part, in migration 4. */
export const POLICIES_SCHEMA = `
  create table toolgate_policies (
    name text collate "C" primary key,
    record jsonb not null
  );
`;

interface PolicyRow {
  name: string;
  record: unknown;
}

function parse(row: PolicyRow): PolicyRecord {
  return parseRecord(PolicyRecordSchema, row.record, `policy ${row.name}`);
}

function jsonValue(record: PolicyRecord): postgres.JSONValue {
  return record as unknown as postgres.JSONValue;
}

class PgPolicyStore implements PolicyStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async add(record: PolicyRecord): Promise<PolicyRecord> {
    const value = PolicyRecordSchema.parse(record);
    await this.#ctx.transaction(async (tx) => {
      const rows = await tx`
        insert into toolgate_policies (name, record)
        values (${value.name}, ${tx.json(jsonValue(value))})
        on conflict (name) do nothing
        returning name`;
      if (!rows.length) {
        throw new GatewayError("CONFLICT", `A policy named ${value.name} exists`, {
          details: { name: value.name },
        });
      }
      await bumpCounter(tx, "registrations");
    });
    return value;
  }

  async list(): Promise<PolicyRecord[]> {
    // `position` is a safe integer (the schema's `int`): it fits a bigint.
    const rows = await this.#ctx.run((sql) =>
      sql<PolicyRow[]>`
        select name, record from toolgate_policies
        order by (record->>'position')::bigint, name`
    );
    return rows.map(parse);
  }

  async get(name: string): Promise<PolicyRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<PolicyRow[]>`select name, record from toolgate_policies where name = ${name}`
    );
    return row ? parse(row) : null;
  }

  replace(record: PolicyRecord): Promise<PolicyRecord | null> {
    const value = PolicyRecordSchema.parse(record);
    return this.#ctx.transaction(async (tx) => {
      const rows = await tx`
        update toolgate_policies set record = ${tx.json(jsonValue(value))}
        where name = ${value.name}
        returning name`;
      if (!rows.length) return null;
      await bumpCounter(tx, "registrations");
      return value;
    });
  }

  remove(name: string): Promise<boolean> {
    return this.#ctx.transaction(async (tx) => {
      const rows = await tx`delete from toolgate_policies where name = ${name} returning name`;
      if (!rows.length) return false;
      await bumpCounter(tx, "registrations");
      return true;
    });
  }
}

/** The stored policy rules, on PostgreSQL. */
export function createPolicyStore(ctx: PgContext): PolicyStore {
  return new PgPolicyStore(ctx);
}
