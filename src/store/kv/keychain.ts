/**
 * Keychain entries in KV: the encrypted values of the file backend, the
 * names (never the values) of secrets held by an OS keychain, and the key
 * check value of the key that seals them.
 *
 * @module
 */
import { keychainKey, keychainPrefix, keyCheckKey } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import { parseRecord } from "../_records.ts";
import {
  type KeychainRecord,
  KeychainRecordSchema,
  type KeyCheckRecord,
  KeyCheckRecordSchema,
} from "../records.ts";

function parseKeychainRecord(name: string, value: unknown): KeychainRecord {
  return parseRecord(KeychainRecordSchema, value, `keychain entry ${name}`);
}
/** Writes (creates or replaces) the keychain entry `name`. */
export async function putKeychainRecord(
  store: KvHandle,
  name: string,
  record: KeychainRecord,
): Promise<void> {
  const value = KeychainRecordSchema.parse(record);
  await store.retry(() => store.kv.set(keychainKey(name), value));
}

/** The keychain entry `name`, or `null`. */
export async function getKeychainRecord(
  store: KvHandle,
  name: string,
): Promise<KeychainRecord | null> {
  const entry = await store.retry(() => store.kv.get(keychainKey(name)));
  return entry.value === null ? null : parseKeychainRecord(name, entry.value);
}

/** Every keychain entry with its name, in name order. */
export async function listKeychainRecords(
  store: KvHandle,
): Promise<{ name: string; record: KeychainRecord }[]> {
  return await store.retry(async () => {
    const out: { name: string; record: KeychainRecord }[] = [];
    for await (const entry of store.kv.list({ prefix: keychainPrefix() })) {
      const name = String(entry.key[entry.key.length - 1]);
      out.push({ name, record: parseKeychainRecord(name, entry.value) });
    }
    return out;
  });
}

/**
 * Deletes the keychain entry `name`.
 *
 * @returns Whether it existed.
 */
export async function deleteKeychainRecord(store: KvHandle, name: string): Promise<boolean> {
  const key = keychainKey(name);
  return await store.retry(async () => {
    const existing = await store.kv.get(key);
    if (existing.value === null) return false;
    const result = await store.kv.atomic().check(existing).delete(key).commit();
    if (!result.ok) throw new Error("database is locked (concurrent change)");
    return true;
  });
}

/** The recorded key check value, or `null`. */
export async function readKeyCheck(store: KvHandle): Promise<KeyCheckRecord | null> {
  const entry = await store.retry(() => store.kv.get(keyCheckKey()));
  return entry.value === null ? null : parseRecord(KeyCheckRecordSchema, entry.value, "key check");
}

/** Records `record` unless a key check value is recorded; the one recorded. */
export async function writeKeyCheck(
  store: KvHandle,
  record: KeyCheckRecord,
): Promise<KeyCheckRecord> {
  const value = KeyCheckRecordSchema.parse(record);
  const key = keyCheckKey();
  const result = await store.retry(() =>
    store.kv.atomic().check({ key, versionstamp: null }).set(key, value).commit()
  );
  return result.ok ? value : (await readKeyCheck(store)) ?? value;
}
