/**
 * Pins of upstream definitions in KV: one record per plugin, kind and name;
 * every change bumps the registrations version in the same atomic commit,
 * so running servers pick it up.
 *
 * @module
 */
import { parseRecord } from "../_records.ts";
import { sameJson } from "../_same_json.ts";
import { type ToolPinRecord, ToolPinRecordSchema } from "../records.ts";
import type { PinStore } from "../store.ts";
import { pinKey, pinsPrefix, registrationsVersionKey } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import { removeRegistration } from "./_registrations.ts";

function parse(value: unknown, key: Deno.KvKey): ToolPinRecord {
  const [, plugin, kind, name] = key;
  return parseRecord(
    ToolPinRecordSchema,
    value,
    `pin ${String(plugin)}/${String(kind)}/${String(name)}`,
  );
}

/** The pins, on Deno KV. */
export function createKvPinStore(store: KvHandle): PinStore {
  return {
    async list() {
      return await store.retry(async () => {
        const out: ToolPinRecord[] = [];
        for await (const entry of store.kv.list({ prefix: pinsPrefix() })) {
          out.push(parse(entry.value, entry.key));
        }
        return out; // KV lists keys in order: by plugin, kind, name
      });
    },
    async get(plugin, kind, name) {
      const key = pinKey(plugin, kind, name);
      const entry = await store.get(key);
      return entry.value === null ? null : parse(entry.value, key);
    },
    async put(record, previous) {
      const value = ToolPinRecordSchema.parse(record);
      const key = pinKey(value.plugin, value.kind, value.name);
      return await store.retry(async () => {
        // Checked against the read entry; read again when it changed meanwhile.
        for (;;) {
          const entry = await store.kv.get(key);
          const stored = entry.value === null ? null : parse(entry.value, key);
          if (!sameJson(stored, previous)) return false;
          const result = await store.kv.atomic()
            .check(entry)
            .set(key, value)
            .sum(registrationsVersionKey(), 1n)
            .commit();
          if (result.ok) return true;
        }
      });
    },
    remove(plugin, kind, name) {
      return removeRegistration(store, pinKey(plugin, kind, name));
    },
  };
}
