/**
 * API keys in KV: one record per key (its hash, never the key) and two
 * unique indexes, name → id and hash → id, written in one atomic commit
 * that also bumps the registrations counter (running servers re-read
 * whether any key exists).
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { type ApiKeyRecord, ApiKeyRecordSchema } from "../records.ts";
import type { ApiKeyStore } from "../store.ts";
import {
  apiKeyHashIndexKey,
  apiKeyKey,
  apiKeyNameIndexKey,
  apiKeysPrefix,
  registrationsVersionKey,
} from "./keys.ts";
import type { KvHandle } from "./_handle.ts";

function parse(value: unknown, what: string): ApiKeyRecord {
  return parseRecord(ApiKeyRecordSchema, value, `API key ${what}`);
}

async function byId(store: KvHandle, id: string): Promise<Deno.KvEntryMaybe<unknown>> {
  return await store.get(apiKeyKey(id));
}

async function byIndex(store: KvHandle, key: Deno.KvKey): Promise<ApiKeyRecord | null> {
  const index = await store.get<string>(key);
  if (typeof index.value !== "string") return null;
  const entry = await byId(store, index.value);
  return entry.value === null ? null : parse(entry.value, index.value);
}

/** The API keys, on Deno KV. */
export function createKvApiKeyStore(store: KvHandle): ApiKeyStore {
  return {
    async add(record) {
      const value = ApiKeyRecordSchema.parse(record);
      const nameKey = apiKeyNameIndexKey(value.name);
      const hashKey = apiKeyHashIndexKey(value.hash);
      const result = await store.retry(() =>
        store.kv.atomic()
          .check({ key: nameKey, versionstamp: null })
          .check({ key: hashKey, versionstamp: null })
          .check({ key: apiKeyKey(value.id), versionstamp: null })
          .set(apiKeyKey(value.id), value)
          .set(nameKey, value.id)
          .set(hashKey, value.id)
          // Running servers re-read whether any key exists (an open server closes).
          .sum(registrationsVersionKey(), 1n)
          .commit()
      );
      if (!result.ok) {
        throw new GatewayError("CONFLICT", `An API key named ${value.name} exists`, {
          details: { name: value.name },
        });
      }
      return value;
    },
    async list() {
      return await store.retry(async () => {
        const out: ApiKeyRecord[] = [];
        for await (const entry of store.kv.list({ prefix: apiKeysPrefix() })) {
          out.push(parse(entry.value, String(entry.key[entry.key.length - 1])));
        }
        return out; // ids are ULIDs: oldest first
      });
    },
    async get(id) {
      const entry = await byId(store, id);
      return entry.value === null ? null : parse(entry.value, id);
    },
    getByName: (name) => byIndex(store, apiKeyNameIndexKey(name)),
    findByHash: (hash) => byIndex(store, apiKeyHashIndexKey(hash)),
    async any() {
      return await store.retry(async () => {
        for await (const _ of store.kv.list({ prefix: apiKeysPrefix() }, { limit: 1 })) {
          return true;
        }
        return false;
      });
    },
    async touch(id, at) {
      await store.retry(async () => {
        const entry = await store.kv.get(apiKeyKey(id));
        if (entry.value === null) return;
        const record = parse(entry.value, id);
        // A lost race only loses a newer timestamp to an equal one: not retried.
        await store.kv.atomic().check(entry).set(apiKeyKey(id), { ...record, last_used_at: at })
          .commit();
      });
    },
    async remove(id) {
      return await store.retry(async () => {
        const entry = await store.kv.get(apiKeyKey(id));
        if (entry.value === null) return false;
        const record = parse(entry.value, id);
        const result = await store.kv.atomic().check(entry)
          .delete(apiKeyKey(id))
          .delete(apiKeyNameIndexKey(record.name))
          .delete(apiKeyHashIndexKey(record.hash))
          .sum(registrationsVersionKey(), 1n)
          .commit();
        if (!result.ok) throw new Error("database is locked (concurrent change)");
        return true;
      });
    },
  };
}
