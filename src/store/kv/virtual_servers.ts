/**
 * Virtual servers in KV: one record per name; every change bumps the
 * registrations version in the same atomic commit, so running servers pick
 * it up.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { type VirtualServerRecord, VirtualServerRecordSchema } from "../records.ts";
import type { VirtualServerStore } from "../store.ts";
import { registrationsVersionKey, virtualServerKey, virtualServersPrefix } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import { removeRegistration } from "./_registrations.ts";

function parse(value: unknown, name: string): VirtualServerRecord {
  return parseRecord(VirtualServerRecordSchema, value, `virtual server ${name}`);
}

/** The virtual servers, on Deno KV. */
export function createKvVirtualServerStore(store: KvHandle): VirtualServerStore {
  return {
    async add(record) {
      const value = VirtualServerRecordSchema.parse(record);
      const key = virtualServerKey(value.name);
      const result = await store.retry(() =>
        store.kv.atomic()
          .check({ key, versionstamp: null })
          .set(key, value)
          .sum(registrationsVersionKey(), 1n)
          .commit()
      );
      if (!result.ok) {
        throw new GatewayError("CONFLICT", `A virtual server named ${value.name} exists`, {
          details: { name: value.name },
        });
      }
      return value;
    },
    async list() {
      return await store.retry(async () => {
        const out: VirtualServerRecord[] = [];
        for await (const entry of store.kv.list({ prefix: virtualServersPrefix() })) {
          out.push(parse(entry.value, String(entry.key[entry.key.length - 1])));
        }
        return out; // KV lists keys in order: by name
      });
    },
    async get(name) {
      const entry = await store.retry(() => store.kv.get(virtualServerKey(name)));
      return entry.value === null ? null : parse(entry.value, name);
    },
    async update(name, update) {
      const key = virtualServerKey(name);
      return await store.retry(async () => {
        // Checked against the read entry; read again when it changed meanwhile.
        for (;;) {
          const entry = await store.kv.get(key);
          if (entry.value === null) return null;
          const record = VirtualServerRecordSchema.parse({
            ...parse(entry.value, name),
            ...(update.tools === undefined ? {} : { tools: update.tools }),
            ...(update.description === undefined ? {} : { description: update.description }),
            updated_at: new Date().toISOString(),
          });
          const result = await store.kv.atomic()
            .check(entry)
            .set(key, record)
            .sum(registrationsVersionKey(), 1n)
            .commit();
          if (result.ok) return record;
        }
      });
    },
    remove(name) {
      return removeRegistration(store, virtualServerKey(name));
    },
  };
}
