/**
 * PostgreSQL adapter: approvals. One row per id, the record as `jsonb`
 * beside the columns listings filter and order by (`status`, `created_at`);
 * an update is guarded by the record it replaces (`jsonb` equality).
 * Approvals are not registrations: no write bumps a counter.
 *
 * @module
 */
import type postgres from "postgres";
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { approvalListBounds, StoredApprovalSchema } from "../_rules.ts";
import type { ApprovalRecord } from "../records.ts";
import type { ApprovalStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 5. */
export const APPROVALS_SCHEMA = `
  create table toolgate_approvals (
    id text collate "C" primary key,
    status text not null,
    created_at timestamptz not null,
    record jsonb not null
  );
  create index toolgate_approvals_by_status on toolgate_approvals (status, created_at desc);
`;

interface ApprovalRow {
  id: string;
  record: unknown;
}

function parse(row: ApprovalRow): ApprovalRecord {
  return parseRecord(StoredApprovalSchema, row.record, `approval ${row.id}`);
}

function jsonValue(record: ApprovalRecord): postgres.JSONValue {
  return record as unknown as postgres.JSONValue;
}

/**
 * The `created_at` column of a record: its time to the millisecond, as the
 * Deno KV adapter orders by it (`Date.parse`).
 */
export function createdAtColumn(record: ApprovalRecord): string {
  return new Date(Date.parse(record.created_at)).toISOString();
}

class PgApprovalStore implements ApprovalStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async create(record: ApprovalRecord): Promise<ApprovalRecord> {
    const value = StoredApprovalSchema.parse(record);
    const rows = await this.#ctx.run((sql) =>
      sql`
        insert into toolgate_approvals (id, status, created_at, record)
        values (${value.id}, ${value.status}, ${createdAtColumn(value)},
          ${sql.json(jsonValue(value))})
        on conflict (id) do nothing
        returning id`
    );
    if (!rows.length) {
      throw new GatewayError("CONFLICT", `An approval with id ${value.id} exists`, {
        details: { id: value.id },
      });
    }
    return value;
  }

  async get(id: string): Promise<ApprovalRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<ApprovalRow[]>`select id, record from toolgate_approvals where id = ${id}`
    );
    return row ? parse(row) : null;
  }

  async list(
    options: { status?: ApprovalRecord["status"]; limit?: number } = {},
  ): Promise<ApprovalRecord[]> {
    const { status, limit } = approvalListBounds(options);
    const rows = await this.#ctx.run((sql) =>
      status === undefined
        ? sql<ApprovalRow[]>`
          select id, record from toolgate_approvals
          order by created_at desc, id desc limit ${limit}`
        : sql<ApprovalRow[]>`
          select id, record from toolgate_approvals where status = ${status}
          order by created_at desc, id desc limit ${limit}`
    );
    return rows.map(parse);
  }

  async update(record: ApprovalRecord, previous: ApprovalRecord): Promise<boolean> {
    const value = StoredApprovalSchema.parse(record);
    // A concurrent writer of the same row goes first; this one then finds it changed.
    const rows = await this.#ctx.run((sql) =>
      sql`
        update toolgate_approvals
        set status = ${value.status}, created_at = ${createdAtColumn(value)},
          record = ${sql.json(jsonValue(value))}
        where id = ${value.id} and record = ${sql.json(jsonValue(previous))}::jsonb
        returning id`
    );
    return rows.length > 0;
  }
}

/** The approvals, on PostgreSQL. */
export function createApprovalStore(ctx: PgContext): ApprovalStore {
  return new PgApprovalStore(ctx);
}
