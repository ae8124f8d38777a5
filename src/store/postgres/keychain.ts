/**
 * PostgreSQL adapter: keychain entries. An entry is one row keyed by name:
 * the backend, and for the `file` backend the AES-GCM nonce and ciphertext
 * as `bytea` (a check constraint keeps the two shapes apart). Rows read
 * back are validated with the record's schema, bytes as plain `Uint8Array`s.
 * The key check value of the key sealing them is the `key_check` row of
 * `toolgate_meta`.
 *
 * @module
 */
import { parseRecord } from "../_records.ts";
import {
  type KeychainRecord,
  KeychainRecordSchema,
  type KeyCheckRecord,
  KeyCheckRecordSchema,
} from "../records.ts";
import type { KeychainStore, KeyCheckStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const KEYCHAIN_SCHEMA = `
  create table toolgate_keychain (
    name text collate "C" primary key,
    backend text not null,
    iv bytea,
    data bytea,
    updated_at text not null,
    constraint toolgate_keychain_file_bytes
      check ((backend = 'file') = (iv is not null and data is not null))
  );
`;

interface KeychainRow {
  name: string;
  backend: string;
  iv: Uint8Array | null;
  data: Uint8Array | null;
  updated_at: string;
}

/** A plain copy of bytes the driver returned (a `Buffer`, maybe a view of a shared pool). */
function plainBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}

function fromRow(row: KeychainRow): KeychainRecord {
  const value = row.backend === "file"
    ? {
      backend: row.backend,
      iv: row.iv && plainBytes(row.iv),
      data: row.data && plainBytes(row.data),
      updated_at: row.updated_at,
    }
    : { backend: row.backend, updated_at: row.updated_at };
  return parseRecord(KeychainRecordSchema, value, `keychain entry ${row.name}`);
}

class PgKeychainStore implements KeychainStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async put(name: string, record: KeychainRecord): Promise<void> {
    const value = KeychainRecordSchema.parse(record);
    const iv = value.backend === "file" ? value.iv : null;
    const data = value.backend === "file" ? value.data : null;
    await this.#ctx.run((sql) =>
      sql`
        insert into toolgate_keychain (name, backend, iv, data, updated_at)
        values (${name}, ${value.backend}, ${iv}::bytea, ${data}::bytea, ${value.updated_at})
        on conflict (name) do update set
          backend = excluded.backend, iv = excluded.iv, data = excluded.data,
          updated_at = excluded.updated_at`
    );
  }

  async get(name: string): Promise<KeychainRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<KeychainRow[]>`
        select name, backend, iv, data, updated_at from toolgate_keychain where name = ${name}`
    );
    return row ? fromRow(row) : null;
  }

  async list(): Promise<{ name: string; record: KeychainRecord }[]> {
    const rows = await this.#ctx.run((sql) =>
      sql<KeychainRow[]>`
        select name, backend, iv, data, updated_at from toolgate_keychain order by name`
    );
    return rows.map((row) => ({ name: row.name, record: fromRow(row) }));
  }

  async delete(name: string): Promise<boolean> {
    const rows = await this.#ctx.run((sql) =>
      sql`delete from toolgate_keychain where name = ${name} returning name`
    );
    return rows.length > 0;
  }
}

/** The keychain entries, on PostgreSQL. */
export function createKeychainStore(ctx: PgContext): KeychainStore {
  return new PgKeychainStore(ctx);
}

class PgKeyCheckStore implements KeyCheckStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async read(): Promise<KeyCheckRecord | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ value: unknown }[]>`select value from toolgate_meta where key = 'key_check'`
    );
    return row ? parseRecord(KeyCheckRecordSchema, row.value, "key check") : null;
  }

  async writeIfAbsent(record: KeyCheckRecord): Promise<KeyCheckRecord> {
    const value = KeyCheckRecordSchema.parse(record);
    await this.#ctx.run((sql) =>
      sql`
        insert into toolgate_meta (key, value) values ('key_check', ${sql.json(value)})
        on conflict (key) do nothing`
    );
    return (await this.read()) ?? value;
  }
}

/** The key check value, on PostgreSQL. */
export function createKeyCheckStore(ctx: PgContext): KeyCheckStore {
  return new PgKeyCheckStore(ctx);
}
