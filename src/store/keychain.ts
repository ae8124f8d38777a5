/**
 * Keychain entries in KV: the encrypted values of the file backend, and the
 * names (never the values) of secrets held by an OS keychain.
 *
 * @module
 */
import { z } from "zod";
import { keychainKey, keychainPrefix } from "./keys.ts";
import type { Store } from "./store.ts";
import { parseRecord } from "./_records.ts";

/** A keychain entry as stored. */
export const KeychainRecordSchema = z.discriminatedUnion("backend", [
  z.strictObject({
    /** Encrypted in this record (AES-256-GCM). */
    backend: z.literal("file"),
    /** The 96-bit AES-GCM nonce. */
    iv: z.instanceof(Uint8Array),
    /** Ciphertext with the GCM tag. */
    data: z.instanceof(Uint8Array),
    updated_at: z.string(),
  }),
  z.strictObject({
    /** Held by an OS keychain; only the name is recorded here. */
    backend: z.enum(["secret-tool", "security"]),
    updated_at: z.string(),
  }),
]);

/** A keychain entry as stored. */
export type KeychainRecord = z.infer<typeof KeychainRecordSchema>;

function parseKeychainRecord(name: string, value: unknown): KeychainRecord {
  return parseRecord(KeychainRecordSchema, value, `keychain entry ${name}`);
}

/** Writes (creates or replaces) the keychain entry `name`. */
export async function putKeychainRecord(
  store: Store,
  name: string,
  record: KeychainRecord,
): Promise<void> {
  const value = KeychainRecordSchema.parse(record);
  await store.retry(() => store.kv.set(keychainKey(name), value));
}

/** The keychain entry `name`, or `null`. */
export async function getKeychainRecord(
  store: Store,
  name: string,
): Promise<KeychainRecord | null> {
  const entry = await store.retry(() => store.kv.get(keychainKey(name)));
  return entry.value === null ? null : parseKeychainRecord(name, entry.value);
}

/** Every keychain entry with its name, in name order. */
export async function listKeychainRecords(
  store: Store,
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
export async function deleteKeychainRecord(store: Store, name: string): Promise<boolean> {
  const key = keychainKey(name);
  return await store.retry(async () => {
    const existing = await store.kv.get(key);
    if (existing.value === null) return false;
    const result = await store.kv.atomic().check(existing).delete(key).commit();
    if (!result.ok) throw new Error("database is locked (concurrent change)");
    return true;
  });
}
