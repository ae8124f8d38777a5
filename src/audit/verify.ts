/**
 * Verification of the audit chain, streaming over the stored entries.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { AuditRecord, Store } from "../store/mod.ts";
import { decodeEntry, UnreadableEntryError } from "./_codec.ts";
import type { AuditEntry } from "./entry.ts";
import { GENESIS_HASH } from "./entry.ts";

/**
 * Why the chain is broken at a seq:
 * - `content_changed`: the entry no longer matches its `entry_hash`;
 * - `link_broken`: its `previous_hash` is not the hash of the entry before,
 *   or it is stored at another seq than its own (entries moved or swapped);
 * - `seq_gap`: the entry at this seq is missing;
 * - `unreadable`: the stored bytes are not an entry;
 * - `head_mismatch`: the head does not point at the last entry.
 */
export type AuditChainFailureReason =
  | "content_changed"
  | "link_broken"
  | "seq_gap"
  | "unreadable"
  | "head_mismatch";

/** Progress of a verification, reported after each page of entries. */
export interface AuditVerifyProgress {
  /** Entries verified so far. */
  checked: number;
  /** Head seq when verification started. */
  total: number;
}

/** Options of {@linkcode verifyAuditChain}. */
export interface VerifyAuditChainOptions {
  /** Called after each page (up to 1000 entries). @default none */
  onProgress?: (progress: AuditVerifyProgress) => void;
  /** Stops verification: the promise rejects with the signal's reason. @default none */
  signal?: AbortSignal;
}

/** The chain is intact. */
export interface AuditVerifyOk {
  ok: true;
  /** Entries verified. */
  count: number;
  /** Head seq verified up to. */
  head_seq: number;
  /** Head hash verified up to. */
  head_hash: string;
  /** Entries up to this seq were pruned (not verified: the tree keeps their leaves). */
  pruned_through?: number;
}

/** The chain is broken; `seq` is the first bad seq. */
export interface AuditVerifyFailure {
  ok: false;
  /** First bad seq. */
  seq: number;
  /** Why it is bad. */
  reason: AuditChainFailureReason;
  /** What is wrong, for people. */
  message: string;
  /** Entries verified before it. */
  count: number;
}

/** Result of {@linkcode verifyAuditChain}. */
export type AuditVerifyResult = AuditVerifyOk | AuditVerifyFailure;

/**
 * Verifies the chain from seq 1 to the head read at the start, reading one
 * page of entries at a time (memory stays bounded whatever the length).
 * Entries appended while it runs are not covered. For each entry in order it
 * checks, and reports the first failure of: presence at the next seq
 * (`seq_gap`), readability (`unreadable`), its hash (`content_changed`), its
 * link to the previous entry and its own seq (`link_broken`); then that the
 * head names the last entry and nothing is stored past it (`head_mismatch`,
 * or `seq_gap` when entries at the end are missing).
 *
 * @returns `{ok: true, count}` or `{ok: false, seq, reason, message}`.
 * @throws {GatewayError} `STORE_CORRUPT` when the head itself is unreadable.
 *
 * @example
 * ```ts
 * const result = await verifyAuditChain(store);
 * if (!result.ok) console.error(`seq ${result.seq}: ${result.reason}: ${result.message}`);
 * ```
 */
export async function verifyAuditChain(
  store: Store,
  options: VerifyAuditChainOptions = {},
): Promise<AuditVerifyResult> {
  const { onProgress, signal } = options;
  signal?.throwIfAborted();
  const { head } = await store.audit.readHead();
  const headSeq = head?.seq ?? 0;
  // Pruned entries are gone: the chain is checked from the first kept one, linked to the mark.
  const pruned = await store.audit.readPruned();
  let expected = (pruned?.through ?? 0) + 1;
  let previous = pruned?.hash ?? GENESIS_HASH;
  const fail = (
    seq: number,
    reason: AuditChainFailureReason,
    message: string,
  ): AuditVerifyFailure => ({
    ok: false,
    seq,
    reason,
    message,
    count: expected - 1 - (pruned?.through ?? 0),
  });

  if (headSeq > 0) {
    const pages = store.audit.pages({ after: expected - 1, before: headSeq + 1 })[
      Symbol.asyncIterator
    ]();
    for (;;) {
      let next: IteratorResult<AuditRecord[]>;
      try {
        next = await pages.next();
      } catch (error) {
        // A damaged page of the store: the entries from here on cannot be read.
        if (!(error instanceof GatewayError) || error.code !== "STORE_CORRUPT") throw error;
        return fail(
          expected,
          "unreadable",
          `Entry ${expected} and later cannot be read: ${error.message}`,
        );
      }
      if (next.done) break;
      const page = next.value;
      signal?.throwIfAborted();
      for (const record of page) {
        if (record.seq !== expected) {
          return fail(
            expected,
            "seq_gap",
            `Entry ${expected} is missing: the next stored entry is ${record.seq}`,
          );
        }
        let entry: AuditEntry;
        let hashMatches: boolean;
        try {
          if (!record.bytes) throw new UnreadableEntryError("a part is missing or is not bytes");
          ({ entry, hashMatches } = decodeEntry(record.bytes));
        } catch (error) {
          if (!(error instanceof UnreadableEntryError)) throw error;
          return fail(expected, "unreadable", `Entry ${expected} is unreadable: ${error.message}`);
        }
        if (!hashMatches) {
          return fail(
            expected,
            "content_changed",
            `Entry ${expected} does not match its entry_hash: its content was changed`,
          );
        }
        if (entry.seq !== expected) {
          return fail(
            expected,
            "link_broken",
            `Entry ${expected} holds entry ${entry.seq}: entries were moved or swapped`,
          );
        }
        if (entry.previous_hash !== previous) {
          return fail(
            expected,
            "link_broken",
            expected === 1
              ? "Entry 1 does not start from the genesis hash"
              : pruned && expected === pruned.through + 1
              ? `Entry ${expected} does not link to the last pruned entry ${pruned.through}`
              : `Entry ${expected} does not link to entry ${
                expected - 1
              }: its previous_hash differs`,
          );
        }
        previous = entry.entry_hash;
        expected++;
      }
      onProgress?.({ checked: expected - 1, total: headSeq });
    }
  }
  if (expected <= headSeq) {
    return fail(
      expected,
      "seq_gap",
      `Entries ${expected} to ${headSeq} are missing: the head is at seq ${headSeq}`,
    );
  }
  if (head && previous !== head.hash) {
    return fail(
      headSeq,
      "head_mismatch",
      `The head names a different hash than entry ${headSeq}: the last entry was replaced`,
    );
  }
  const after = await store.audit.readHeadAndNext(headSeq);
  if (after.nextExists && (after.head?.seq ?? 0) <= headSeq) {
    return fail(
      headSeq + 1,
      "head_mismatch",
      `Entry ${headSeq + 1} is stored after the head (seq ${headSeq}): the head was moved back`,
    );
  }
  onProgress?.({ checked: headSeq, total: headSeq });
  return {
    ok: true,
    count: headSeq - (pruned?.through ?? 0),
    head_seq: headSeq,
    head_hash: head?.hash ?? GENESIS_HASH,
    ...(pruned ? { pruned_through: pruned.through } : {}),
  };
}
