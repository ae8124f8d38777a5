/**
 * Rules both storage adapters apply alike, kept in one place so they cannot
 * drift apart. Private to `src/store`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import {
  type ApprovalRecord,
  ApprovalRecordSchema,
  type AuditEntryWrite,
  type DeliveryLease,
} from "./records.ts";

/**
 * Whether the process that holds `lease` is known to be gone: same host, and
 * no such pid under `/proc`. Without `/proc` (macOS) nothing is known, and
 * the lease simply expires.
 */
export function leaseHolderIsGone(lease: DeliveryLease): boolean {
  if (lease.hostname !== Deno.hostname() || lease.pid === Deno.pid) return false;
  try {
    Deno.statSync(`/proc/${lease.pid}`);
    return false;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) return false;
    try {
      Deno.statSync("/proc/self");
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Checks a batch of audit entries before it is committed: not empty, no
 * entry over `maxEntryBytes`, and at most `maxMutations` in all (the head
 * counts one).
 *
 * @param mutationsOf What storing an entry of that many bytes costs.
 * @throws {GatewayError} `INTERNAL`: the caller sizes batches from the store's limits.
 */
export function checkAuditBatch(
  entries: readonly AuditEntryWrite[],
  limits: { maxEntryBytes: number; maxMutations: number },
  mutationsOf: (byteLength: number) => number,
  tiles = 0,
): void {
  if (!entries.length && !tiles) {
    throw new GatewayError("INTERNAL", "Cannot commit an empty audit batch");
  }
  let mutations = 1 + tiles;
  for (const entry of entries) {
    if (entry.bytes.length > limits.maxEntryBytes) {
      throw new GatewayError(
        "INTERNAL",
        `Cannot store audit entry ${entry.seq}: ${entry.bytes.length} bytes is over the limit`,
      );
    }
    mutations += mutationsOf(entry.bytes.length);
  }
  if (mutations > limits.maxMutations) {
    throw new GatewayError("INTERNAL", `Cannot commit ${mutations} audit mutations at once`);
  }
}

/** The log's signing keys in the order the store hands them out: the current first, then the retired ones, newest first. */
export function sortLogKeys<T extends { created_at: string; retired_at?: string }>(keys: T[]): T[] {
  return keys.sort((a, b) =>
    Number(a.retired_at !== undefined) - Number(b.retired_at !== undefined) ||
    (b.retired_at ?? b.created_at).localeCompare(a.retired_at ?? a.created_at)
  );
}

/**
 * An approval as both adapters store it: {@linkcode ApprovalRecordSchema},
 * with a `created_at` that reads as a time (listings are ordered by it).
 */
export const StoredApprovalSchema = ApprovalRecordSchema.refine(
  (record) => !Number.isNaN(Date.parse(record.created_at)),
  { path: ["created_at"], message: "created_at is not a time" },
);

/** What an approvals listing asks for, defaults applied (see `ApprovalStore.list`). */
export interface ApprovalListBounds {
  /** Only approvals of this status; `undefined`: every status. */
  status: ApprovalRecord["status"] | undefined;
  /** At most this many. */
  limit: number;
}

/**
 * The status and limit of an approvals listing, defaults applied.
 *
 * @throws {RangeError} when `limit` is not a positive integer.
 */
export function approvalListBounds(
  options: { status?: ApprovalRecord["status"]; limit?: number },
): ApprovalListBounds {
  const { status, limit = 100 } = options;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new RangeError(`Invalid limit: ${limit} is not a positive integer`);
  }
  return { status, limit };
}
