/**
 * PostgreSQL adapter: API keys. One row per key, the record as `jsonb`
 * beside the columns looked up (name and hash, each unique); the key itself
 * is never stored. Adding or removing a key bumps the `registrations`
 * counter, so running servers learn whether any key exists without asking
 * on every request.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { type ApiKeyRecord, ApiKeyRecordSchema } from "../records.ts";
import type { ApiKeyStore } from "../store.ts";
import { bumpCounter, type PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const API_KEYS_SCHEMA = `
  create table toolgate_api_keys (
    id text collate "C" primary key,
    name text collate "C" not null unique,
    hash text collate "C" not null unique,
    record jsonb not null
  );
`;

function parse(row: { id: string; record: unknown }): ApiKeyRecord {
  return parseRecord(ApiKeyRecordSchema, row.record, `API key ${row.id}`);
}

class PgApiKeyStore implements ApiKeyStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async add(record: ApiKeyRecord): Promise<ApiKeyRecord> {
    const value = ApiKeyRecordSchema.parse(record);
    await this.#ctx.transaction(async (tx) => {
      const rows = await tx`
        insert into toolgate_api_keys (id, name, hash, record)
        values (${value.id}, ${value.name}, ${value.hash}, ${tx.json(value)})
        on conflict do nothing
        returning id`;
      if (!rows.length) {
        throw new GatewayError("CONFLICT", `An API key named ${value.name} exists`, {
          details: { name: value.name },
        });
      }
      // Running servers re-read whether any key exists (an open server closes).
      await bumpCounter(tx, "registrations");
    });
    return value;
  }

  async list(): Promise<ApiKeyRecord[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ id: string; record: unknown }[]>`select id, record from toolgate_api_keys order by id`
    );
    return rows.map(parse);
  }

  async #one(column: "id" | "name" | "hash", value: string): Promise<ApiKeyRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ id: string; record: unknown }[]>`
        select id, record from toolgate_api_keys where ${sql(column)} = ${value}`
    );
    return row ? parse(row) : null;
  }

  get(id: string): Promise<ApiKeyRecord | null> {
    return this.#one("id", id);
  }

  getByName(name: string): Promise<ApiKeyRecord | null> {
    return this.#one("name", name);
  }

  findByHash(hash: string): Promise<ApiKeyRecord | null> {
    return this.#one("hash", hash);
  }

  async any(): Promise<boolean> {
    const rows = await this.#ctx.run((sql) => sql`select 1 from toolgate_api_keys limit 1`);
    return rows.length > 0;
  }

  async touch(id: string, at: string): Promise<void> {
    await this.#ctx.run((sql) =>
      sql`
        update toolgate_api_keys
        set record = jsonb_set(record, '{last_used_at}', to_jsonb(${at}::text))
        where id = ${id}`
    );
  }

  async remove(id: string): Promise<boolean> {
    return await this.#ctx.transaction(async (tx) => {
      const rows = await tx`delete from toolgate_api_keys where id = ${id} returning id`;
      if (rows.length) await bumpCounter(tx, "registrations");
      return rows.length > 0;
    });
  }
}

/** The API keys, on PostgreSQL. */
export function createApiKeyStore(ctx: PgContext): ApiKeyStore {
  return new PgApiKeyStore(ctx);
}
