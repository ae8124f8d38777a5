/**
 * PostgreSQL adapter: the memory plugin's notebook, with exactly the Deno KV
 * adapter's rules (`src/store/_memory_rules.ts`).
 *
 * A key is stored as its UTF-8 bytes (`bytea`), not as `text`: bytes sort
 * byte by byte whatever the database's collation, which is the order Deno
 * KV lists string keys in, and every string KV takes (a NUL character
 * included, which `text` cannot hold) is a valid key here too. A prefix
 * listing is one index range, `[prefix, successor of prefix)`: no `LIKE`
 * pattern, so nothing in a prefix needs escaping. A value is its JSON text
 * exactly as serialized (`text`, not `jsonb`, which would reorder keys and
 * change the size).
 *
 * @module
 */
import { z } from "zod";
import { parseRecord } from "../_records.ts";
import {
  checkMemoryKey,
  corruptMemoryValue,
  encodeMemoryValue,
  memoryListBounds,
  parseMemoryJson,
} from "../_memory_rules.ts";
import type {
  ListMemoryOptions,
  ListMemoryResult,
  MemoryEntry,
  SetMemoryResult,
} from "../records.ts";
import type { MemoryStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const MEMORY_SCHEMA = `
  create table toolgate_memory (
    key bytea primary key,
    json text not null,
    updated_at text not null
  );
`;

/** A stored row, as read back. */
const MemoryRowSchema = z.strictObject({
  json: z.string(),
  updated_at: z.string(),
  size_bytes: z.number().int().min(0),
});

const encoder = new TextEncoder();
// Fatal: a key that is not UTF-8 is corrupt. ignoreBOM: a leading U+FEFF is part of the key.
const keyDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function keyBytes(key: string): Uint8Array {
  return encoder.encode(key);
}

/**
 * The smallest byte string above every string starting with `prefix`: its
 * last byte plus one. UTF-8 never holds 0xFE or 0xFF, so that byte exists.
 */
function prefixEnd(prefix: Uint8Array): Uint8Array {
  const end = prefix.slice();
  end[end.length - 1]++;
  return end;
}

function decodeKey(bytes: Uint8Array): string {
  try {
    return keyDecoder.decode(bytes);
  } catch (error) {
    const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
    throw corruptMemoryValue(`\\x${hex}`, "its key is not UTF-8", error);
  }
}

function toEntry(key: string, row: unknown): MemoryEntry {
  const { json, updated_at, size_bytes } = parseRecord(
    MemoryRowSchema,
    row,
    `memory value ${JSON.stringify(key)}`,
  );
  return { key, value: parseMemoryJson(key, json), updated_at, size_bytes };
}

class PgMemoryStore implements MemoryStore {
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async set(key: string, value: unknown, now: Date = new Date()): Promise<SetMemoryResult> {
    checkMemoryKey(key);
    const { text, bytes } = encodeMemoryValue(value);
    const updatedAt = now.toISOString();
    // One statement: of two instances setting a new key at once, one inserts
    // (created) and the other, waiting for it, updates. xmax is 0 only in a
    // freshly inserted row version.
    const [row] = await this.#ctx.run((sql) =>
      sql<{ created: boolean }[]>`
        insert into toolgate_memory (key, json, updated_at)
        values (${keyBytes(key)}::bytea, ${text}, ${updatedAt})
        on conflict (key) do update set json = excluded.json, updated_at = excluded.updated_at
        returning (xmax = 0) as created`
    );
    return { created: row.created, updated_at: updatedAt, size_bytes: bytes.length };
  }

  async get(key: string): Promise<MemoryEntry | null> {
    checkMemoryKey(key);
    const [row] = await this.#ctx.run((sql) =>
      sql`
        select json, updated_at, octet_length(json) as size_bytes
        from toolgate_memory where key = ${keyBytes(key)}::bytea`
    );
    return row ? toEntry(key, { ...row }) : null;
  }

  async list(options: ListMemoryOptions = {}): Promise<ListMemoryResult> {
    const { prefix, limit } = memoryListBounds(options);
    const start = keyBytes(prefix);
    // One row past the limit says whether there are more.
    const rows = await this.#ctx.run((sql) =>
      start.length
        ? sql<{ key: Uint8Array }[]>`
          select key, json, updated_at, octet_length(json) as size_bytes from toolgate_memory
          where key >= ${start}::bytea and key < ${prefixEnd(start)}::bytea
          order by key limit ${limit + 1}`
        : sql<{ key: Uint8Array }[]>`
          select key, json, updated_at, octet_length(json) as size_bytes from toolgate_memory
          order by key limit ${limit + 1}`
    );
    const entries = rows.slice(0, limit).map(({ key, ...row }) => toEntry(decodeKey(key), row));
    return { entries, truncated: rows.length > limit };
  }

  async delete(key: string): Promise<boolean> {
    checkMemoryKey(key);
    const rows = await this.#ctx.run((sql) =>
      sql`delete from toolgate_memory where key = ${keyBytes(key)}::bytea returning 1`
    );
    return rows.length > 0;
  }
}

/** The memory notebook, on PostgreSQL. */
export function createMemoryStore(ctx: PgContext): MemoryStore {
  return new PgMemoryStore(ctx);
}
