/**
 * Approvals in KV: one record per id. A create is checked against the id
 * being free, an update against the record it replaces. Approvals are not
 * registrations: no write bumps the registrations version.
 *
 * @module
 */
import { serialize } from "node:v8";
import { GatewayError } from "../../errors/mod.ts";
import { parseRecord } from "../_records.ts";
import { approvalListBounds, StoredApprovalSchema } from "../_rules.ts";
import { sameJson } from "../_same_json.ts";
import type { ApprovalRecord } from "../records.ts";
import type { ApprovalStore } from "../store.ts";
import { approvalKey, approvalsPrefix } from "./keys.ts";
import type { KvHandle } from "./_handle.ts";

/**
 * Largest approval stored, in bytes as Deno KV counts them (its V8
 * serialization): below KV's limit of 64 KiB on one value.
 */
export const APPROVAL_MAX_BYTES = 60 * 1024;

/**
 * Most approval records one listing reads: the newest ids (ids are ULIDs,
 * so by when they were made). A store holding more lists the newest of
 * those only.
 */
export const APPROVALS_LIST_MAX = 10_000;

function parse(value: unknown, id: string): ApprovalRecord {
  return parseRecord(StoredApprovalSchema, value, `approval ${id}`);
}

/**
 * The record checked for storing: its schema, and its size.
 *
 * @throws {GatewayError} `PAYLOAD_TOO_LARGE` when it is over {@linkcode APPROVAL_MAX_BYTES}.
 */
function storable(record: ApprovalRecord): ApprovalRecord {
  const value = StoredApprovalSchema.parse(record);
  // KV counts a string one byte a character, or two when one of its
  // characters is past U+00FF, whatever its UTF-8 length: measured as KV does.
  const bytes = serialize(value).byteLength;
  if (bytes > APPROVAL_MAX_BYTES) {
    throw new GatewayError(
      "PAYLOAD_TOO_LARGE",
      `Approval ${value.id} is too large to store (${bytes} bytes over 60 KiB): ` +
        "its arguments or output do not fit in a Deno KV value; a PostgreSQL store keeps them",
      { details: { id: value.id, bytes, max_bytes: APPROVAL_MAX_BYTES } },
    );
  }
  return value;
}

/** The approvals, on Deno KV. */
export function createKvApprovalStore(store: KvHandle): ApprovalStore {
  return {
    async create(record) {
      const value = storable(record);
      const key = approvalKey(value.id);
      const result = await store.retry(() =>
        store.kv.atomic().check({ key, versionstamp: null }).set(key, value).commit()
      );
      if (!result.ok) {
        throw new GatewayError("CONFLICT", `An approval with id ${value.id} exists`, {
          details: { id: value.id },
        });
      }
      return value;
    },
    async get(id) {
      const entry = await store.get(approvalKey(id));
      return entry.value === null ? null : parse(entry.value, id);
    },
    async list(options = {}) {
      const { status, limit } = approvalListBounds(options);
      const records = await store.retry(async () => {
        const out: { record: ApprovalRecord; at: number }[] = [];
        // Bounded: at most APPROVALS_LIST_MAX records read (the newest ids), sorted in memory.
        const entries = store.kv.list(
          { prefix: approvalsPrefix() },
          { reverse: true, limit: APPROVALS_LIST_MAX },
        );
        for await (const entry of entries) {
          const record = parse(entry.value, String(entry.key[entry.key.length - 1]));
          if (status === undefined || record.status === status) {
            out.push({ record, at: Date.parse(record.created_at) });
          }
        }
        return out;
      });
      // Newest first; ties by id, descending. KV read the ids descending, and the sort is stable.
      return records.sort((a, b) => b.at - a.at).slice(0, limit).map(({ record }) => record);
    },
    async update(record, previous) {
      const value = storable(record);
      const key = approvalKey(value.id);
      return await store.retry(async () => {
        // Checked against the read entry; read again when it changed meanwhile.
        for (;;) {
          const entry = await store.kv.get(key);
          const stored = entry.value === null ? null : parse(entry.value, value.id);
          if (!sameJson(stored, previous)) return false;
          const result = await store.kv.atomic().check(entry).set(key, value).commit();
          if (result.ok) return true;
        }
      });
    },
  };
}
