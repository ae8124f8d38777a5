/**
 * The append-only, hash-chained audit log.
 *
 * Every tool call (`tool.call`) and incoming webhook (`webhook.incoming`) is
 * recorded as an entry `{seq, timestamp, kind, tool, session_id?, input,
 * outcome, previous_hash, entry_hash}`, with the input redacted.
 * `entry_hash` is `sha256:` + hex SHA-256 of the canonical JSON (keys sorted
 * recursively, no whitespace) of the entry without `entry_hash`; the first
 * entry's `previous_hash` is {@linkcode GENESIS_HASH}. Appends are group
 * committed and serialized by an atomic check on the chain head, so
 * concurrent writers — in one process or several on one data directory —
 * never fork the chain, skip or reuse a seq. Each committed entry emits
 * `audit.written` on the event bus.
 *
 * @example
 * ```ts
 * import { createAuditLog } from "./src/audit/mod.ts";
 * import { openStore } from "./src/store/mod.ts";
 *
 * const store = await openStore({ dataDir: "/tmp/toolgate" });
 * const log = createAuditLog({ store });
 * const entry = await log.append({
 *   kind: "tool.call",
 *   tool: "echo",
 *   input: { text: "hi", api_key: "k-1" }, // stored as { api_key: "[REDACTED]", text: "hi" }
 *   outcome: { ok: true, latency_ms: 2 },
 * });
 * const page = await log.list({ after: 0, limit: 100 });
 * const result = await log.verify(); // { ok: true, count, head_seq, head_hash }
 * for await (const e of log.entries()) console.log(JSON.stringify(e)); // export
 * await log.close();
 * await store.close();
 * ```
 *
 * @module
 */
export {
  AuditLog,
  createAuditLog,
  DEFAULT_LIST_LIMIT,
  MAX_LIST_LIMIT,
  MAX_LIST_SCAN,
} from "./audit_log.ts";
export type {
  AuditAppendOptions,
  AuditAttachedEvent,
  AuditEntriesOptions,
  AuditHeadInfo,
  AuditListOptions,
  AuditLogOptions,
  AuditOutbox,
  AuditPage,
} from "./audit_log.ts";
export {
  AUDIT_KINDS,
  AUDIT_OUTCOME_SCHEMAS,
  AuditAppendInputSchema,
  AuditCallerSchema,
  AuditEntrySchema,
  AuditHashSchema,
  AuditKindSchema,
  computeEntryHash,
  GENESIS_HASH,
  MAX_INPUT_BYTES,
  MAX_OUTCOME_BYTES,
  sha256Tag,
  ToolCallOutcomeSchema,
  TRUNCATED,
  WebhookIncomingOutcomeSchema,
} from "./entry.ts";
export type {
  AuditAppendInput,
  AuditEntry,
  AuditEntryCaller,
  ToolCallOutcome,
  WebhookIncomingOutcome,
} from "./entry.ts";
export { canonicalJson } from "./canonical_json.ts";
export type { JsonValue } from "./canonical_json.ts";
export { verifyAuditChain } from "./verify.ts";
export type {
  AuditChainFailureReason,
  AuditVerifyFailure,
  AuditVerifyOk,
  AuditVerifyProgress,
  AuditVerifyResult,
  VerifyAuditChainOptions,
} from "./verify.ts";
export { compileRedactPatterns, createRedactor, isSecretKey, redact, REDACTED } from "../redact.ts";
export type { Redactor, RedactorOptions } from "../redact.ts";
export { AuditProofs } from "./proofs.ts";
export type { ConsistencyProof, InclusionProof } from "./proofs.ts";
export { Checkpointer, startCheckpointer } from "./checkpointer.ts";
export type { CheckpointerOptions, CheckpointHistoryLine, CheckpointSink } from "./checkpointer.ts";
export { loadLogKeys, LogKeys, receiptMessage, rotateLogKey } from "./log_key.ts";
export type { ListedLogKey, LoadLogKeysOptions, Receipt } from "./log_key.ts";
export { CheckpointError, formatCheckpoint, parseCheckpoint } from "./checkpoint.ts";
export type { Checkpoint } from "./checkpoint.ts";
export { NoteError, openNote, parseVerifierKey } from "./signed_note.ts";
export { TiledTree, TreeError } from "./tiles.ts";
export { checkpointsFromText, verifyAuditTree } from "./verify_tree.ts";
export type {
  AuditTreeFailureReason,
  AuditTreeVerifyResult,
  CheckpointSource,
  VerifyAuditTreeOptions,
} from "./verify_tree.ts";
export { pruneAuditLog, scheduleRetention } from "./prune.ts";
export type { PruneAuditOptions, PruneAuditResult, RetentionOptions } from "./prune.ts";
