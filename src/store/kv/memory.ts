/**
 * The memory plugin's notebook: JSON values under string keys, stored as
 * UTF-8 JSON bytes so their size is exact.
 *
 * @module
 */
import { z } from "zod";
import { memoryKey, memoryPrefix } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import type {
  ListMemoryOptions,
  ListMemoryResult,
  MemoryEntry,
  SetMemoryResult,
} from "../records.ts";
import {
  checkMemoryKey,
  corruptMemoryValue,
  encodeMemoryValue,
  memoryListBounds,
  parseMemoryJson,
} from "../_memory_rules.ts";

const MemoryRecordSchema = z.strictObject({
  json: z.instanceof(Uint8Array),
  updated_at: z.string(),
});

type MemoryRecord = z.infer<typeof MemoryRecordSchema>;

const decoder = new TextDecoder();

function parseRecord(key: string, value: unknown): MemoryEntry {
  const parsed = MemoryRecordSchema.safeParse(value);
  if (!parsed.success) {
    throw corruptMemoryValue(key, String(parsed.error.issues[0]?.message));
  }
  const { json, updated_at } = parsed.data;
  const decoded = parseMemoryJson(key, decoder.decode(json));
  return { key, value: decoded, updated_at, size_bytes: json.length };
}

/**
 * Stores a JSON value under `key`, replacing any previous value.
 *
 * @throws {GatewayError} `TOOL_INPUT_INVALID` when the key or value is not
 * acceptable (empty or long key, value not JSON or over 60 KiB).
 */
export async function setMemory(
  store: KvHandle,
  key: string,
  value: unknown,
  now: Date = new Date(),
): Promise<SetMemoryResult> {
  checkMemoryKey(key);
  const { bytes: json } = encodeMemoryValue(value);
  const record: MemoryRecord = { json, updated_at: now.toISOString() };
  const kvKey = memoryKey(key);
  return await store.retry(async () => {
    const existing = await store.kv.get(kvKey);
    const result = await store.kv.atomic().check(existing).set(kvKey, record).commit();
    if (!result.ok) throw new Error("database is locked (concurrent change)");
    return {
      created: existing.value === null,
      updated_at: record.updated_at,
      size_bytes: json.length,
    };
  });
}

/**
 * Reads the value under `key`.
 *
 * @returns The entry, or `null` when the key is not set.
 * @throws {GatewayError} `TOOL_INPUT_INVALID` for a bad key, `STORE_CORRUPT`
 * when the stored value cannot be read.
 */
export async function getMemory(store: KvHandle, key: string): Promise<MemoryEntry | null> {
  checkMemoryKey(key);
  const entry = await store.get(memoryKey(key));
  return entry.value === null ? null : parseRecord(key, entry.value);
}

/**
 * Lists entries in key order, optionally only those whose key starts with
 * `prefix`.
 */
export async function listMemory(
  store: KvHandle,
  options: ListMemoryOptions = {},
): Promise<ListMemoryResult> {
  const { prefix, limit } = memoryListBounds(options);
  return await store.retry(async () => {
    const entries: MemoryEntry[] = [];
    const selector = prefix === ""
      ? { prefix: memoryPrefix() }
      : { prefix: memoryPrefix(), start: memoryKey(prefix) };
    let truncated = false;
    for await (
      const entry of store.reader.list(selector, { batchSize: Math.min(limit + 1, 500) })
    ) {
      const key = entry.key[entry.key.length - 1];
      if (typeof key !== "string") continue;
      // Keys with the same prefix are contiguous in KV order: stop at the first other one.
      if (!key.startsWith(prefix)) break;
      if (entries.length === limit) {
        truncated = true;
        break;
      }
      entries.push(parseRecord(key, entry.value));
    }
    return { entries, truncated };
  });
}

/**
 * Deletes the value under `key`.
 *
 * @returns Whether there was a value to delete.
 */
export async function deleteMemory(store: KvHandle, key: string): Promise<boolean> {
  checkMemoryKey(key);
  const kvKey = memoryKey(key);
  return await store.retry(async () => {
    const existing = await store.kv.get(kvKey);
    if (existing.value === null) return false;
    const result = await store.kv.atomic().check(existing).delete(kvKey).commit();
    if (!result.ok) throw new Error("database is locked (concurrent change)");
    return true;
  });
}
