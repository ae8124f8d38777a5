/**
 * Stored policy rules in KV: one record per name; every change bumps the
 * registrations version in the same atomic commit, so running servers pick
 * it up.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { type PolicyRecord, PolicyRecordSchema } from "../records.ts";
import type { PolicyStore } from "../store.ts";
import { policiesPrefix, policyKey, registrationsVersionKey } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import { removeRegistration } from "./_registrations.ts";

function parse(value: unknown, name: string): PolicyRecord {
  return parseRecord(PolicyRecordSchema, value, `policy ${name}`);
}

/** The stored policy rules, on Deno KV. */
export function createKvPolicyStore(store: KvHandle): PolicyStore {
  return {
    async add(record) {
      const value = PolicyRecordSchema.parse(record);
      const key = policyKey(value.name);
      const result = await store.retry(() =>
        store.kv.atomic()
          .check({ key, versionstamp: null })
          .set(key, value)
          .sum(registrationsVersionKey(), 1n)
          .commit()
      );
      if (!result.ok) {
        throw new GatewayError("CONFLICT", `A policy named ${value.name} exists`, {
          details: { name: value.name },
        });
      }
      return value;
    },
    async list() {
      const out = await store.retry(async () => {
        const records: PolicyRecord[] = [];
        for await (const entry of store.kv.list({ prefix: policiesPrefix() })) {
          records.push(parse(entry.value, String(entry.key[entry.key.length - 1])));
        }
        return records;
      });
      // KV lists keys by name; a stable sort by position keeps that order among ties.
      return out.sort((a, b) => a.position - b.position);
    },
    async get(name) {
      const entry = await store.get(policyKey(name));
      return entry.value === null ? null : parse(entry.value, name);
    },
    async replace(record) {
      const value = PolicyRecordSchema.parse(record);
      const key = policyKey(value.name);
      return await store.retry(async () => {
        // Checked against the read entry; read again when it changed meanwhile.
        for (;;) {
          const entry = await store.kv.get(key);
          if (entry.value === null) return null;
          const result = await store.kv.atomic()
            .check(entry)
            .set(key, value)
            .sum(registrationsVersionKey(), 1n)
            .commit();
          if (result.ok) return value;
        }
      });
    },
    remove(name) {
      return removeRegistration(store, policyKey(name));
    },
  };
}
