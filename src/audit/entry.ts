/**
 * Audit entries: their schemas, limits and hash format.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import { canonicalJson, type JsonValue } from "./canonical_json.ts";

/** `previous_hash` of the first entry: `sha256:` and 64 zeros. */
export const GENESIS_HASH = `sha256:${"0".repeat(64)}`;

/** Schema of an entry hash: `sha256:` and 64 lowercase hex digits. */
export const AuditHashSchema = z.string().regex(/^sha256:[0-9a-f]{64}$/);

/**
 * Schema of an entry kind: an open set of dotted lowercase names such as
 * `tool.call` and `webhook.incoming`.
 */
export const AuditKindSchema = z.string().max(64).regex(
  /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$/,
  "must be a dotted lowercase name such as tool.call",
);

/** Outcome of a `tool.call` entry: success with latency, or failure with a code. */
export const ToolCallOutcomeSchema = z.discriminatedUnion("ok", [
  z.looseObject({ ok: z.literal(true), latency_ms: z.number().int().min(0) }),
  z.looseObject({ ok: z.literal(false), error_code: z.string().min(1), error: z.string() }),
]);

/** Outcome of a `tool.call` entry. */
export type ToolCallOutcome = z.infer<typeof ToolCallOutcomeSchema>;

/** Outcome of a `webhook.incoming` entry: whether it was accepted, by which endpoint. */
export const WebhookIncomingOutcomeSchema = z.looseObject({
  accepted: z.boolean(),
  endpoint_id: z.string().min(1),
});

/** Outcome of a `webhook.incoming` entry. */
export type WebhookIncomingOutcome = z.infer<typeof WebhookIncomingOutcomeSchema>;

/** Outcome of a `pin.*` entry: the pin's status after it, and the fields that differ. */
const PinOutcomeSchema = z.looseObject({
  ok: z.literal(true),
  status: z.enum(["pinned", "changed", "new", "rejected"]),
  changed: z.array(z.string()),
});

/** Outcome of an `approval.*` entry: the approval's status after it. */
const ApprovalOutcomeSchema = z.looseObject({
  ok: z.literal(true),
  status: z.enum(["pending", "approved", "denied", "expired"]),
});

/** Outcome schemas of the known kinds; other kinds take any object. */
export const AUDIT_OUTCOME_SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  "tool.call": ToolCallOutcomeSchema,
  "webhook.incoming": WebhookIncomingOutcomeSchema,
  // A proxied prompts/get (tool: the prompt's name) and resources/read (tool: the URI).
  "prompt.get": ToolCallOutcomeSchema,
  "resource.read": ToolCallOutcomeSchema,
  // Old entries' bodies dropped by `toolgate audit prune` (tool: "audit"); input says which.
  "audit.pruned": z.looseObject({ ok: z.literal(true), entries: z.number().int().min(0) }),
  // Pins of upstream definitions (tool: the name clients see): first sight, change, decisions.
  "pin.created": PinOutcomeSchema,
  "pin.changed": PinOutcomeSchema,
  "pin.approved": PinOutcomeSchema,
  "pin.rejected": PinOutcomeSchema,
  // Calls held for approval (tool: the tool held; input.approval_id links them and the call).
  "approval.requested": ApprovalOutcomeSchema,
  "approval.decided": ApprovalOutcomeSchema,
  "approval.expired": ApprovalOutcomeSchema,
};

/** The kinds toolgate writes, for filters: `tool.call`, `webhook.incoming`, `prompt.get`, `resource.read`. */
export const AUDIT_KINDS = Object.keys(AUDIT_OUTCOME_SCHEMAS) as [string, ...string[]];

/**
 * Schema of who called, as an entry records it: `kind` (`admin`, `local`,
 * `key`, `oauth`) and, for keys, their `name` and `id`; `server` once virtual
 * servers land.
 */
export const AuditCallerSchema = z.strictObject({
  kind: z.string().min(1).max(32),
  name: z.string().min(1).max(256).optional(),
  id: z.string().min(1).max(256).optional(),
  server: z.string().min(1).max(256).optional(),
});

/** Who called, as an entry records it (see {@linkcode AuditCallerSchema}). */
export type AuditEntryCaller = z.infer<typeof AuditCallerSchema>;

/** Schema of what {@linkcode AuditLog.append} takes. */
export const AuditAppendInputSchema = z.strictObject({
  kind: AuditKindSchema,
  tool: z.string().min(1).max(256),
  session_id: z.string().min(1).max(256).optional(),
  caller: AuditCallerSchema.optional(),
  input: z.unknown(),
  outcome: z.record(z.string(), z.unknown()),
});

/** A new entry: the log adds seq, timestamp and the hashes. */
export interface AuditAppendInput {
  /** Kind: `tool.call`, `webhook.incoming`, or another dotted name. */
  kind: string;
  /** Tool concerned (for `webhook.incoming`, the handler tool). */
  tool: string;
  /** Session of the call, when there is one. */
  session_id?: string;
  /** Who called, when the entry point knows (absent in entries written before 0.2). */
  caller?: AuditEntryCaller;
  /** Tool arguments or webhook payload; redacted before it is stored. */
  input: unknown;
  /** What happened; see {@linkcode ToolCallOutcome}, {@linkcode WebhookIncomingOutcome}. */
  outcome: Record<string, unknown>;
}

/** Schema of a stored entry; unknown fields are kept (they are hashed too). */
export const AuditEntrySchema = z.looseObject({
  seq: z.number().int().min(1),
  timestamp: z.string(),
  kind: z.string(),
  tool: z.string(),
  session_id: z.string().optional(),
  caller: z.looseObject({ kind: z.string() }).optional(),
  input: z.unknown(),
  outcome: z.record(z.string(), z.unknown()),
  previous_hash: AuditHashSchema,
  entry_hash: AuditHashSchema,
});

/** One entry of the audit log. */
export interface AuditEntry {
  /** Position in the log, from 1, without gaps. */
  seq: number;
  /** When it was written: ISO 8601 UTC with milliseconds, never decreasing along the chain. */
  timestamp: string;
  /** Kind of entry. */
  kind: string;
  /** Tool concerned. */
  tool: string;
  /** Session, when there is one. */
  session_id?: string;
  /** Who called, when known; an optional field, so entries without it verify as before. */
  caller?: AuditEntryCaller;
  /** Redacted input. */
  input: JsonValue;
  /** Outcome. */
  outcome: { [key: string]: JsonValue };
  /** `entry_hash` of the entry before, or {@linkcode GENESIS_HASH}. */
  previous_hash: string;
  /** `sha256:` + hex SHA-256 of the canonical JSON of the other fields. */
  entry_hash: string;
}

/** Largest input stored as is, in bytes of canonical JSON; larger inputs are summarized. */
export const MAX_INPUT_BYTES = 448 * 1024;

/** Largest outcome, in bytes of canonical JSON. */
export const MAX_OUTCOME_BYTES = 16 * 1024;

/** Key of the summary that replaces an input over {@linkcode MAX_INPUT_BYTES}. */
export const TRUNCATED = "[TRUNCATED]";

/**
 * `sha256:` + lowercase hex SHA-256 of the UTF-8 bytes of `text`.
 *
 * Uses `node:crypto`'s synchronous hash: for entry-sized inputs it is about
 * 20 times faster per call than `crypto.subtle.digest`, which sets how fast a
 * chain verifies.
 */
export function sha256Tag(text: string): string {
  return `sha256:${createHash("sha256").update(text, "utf8").digest("hex")}`;
}

/**
 * The hash an entry must carry: `sha256:` + hex SHA-256 of the canonical JSON
 * of every field but `entry_hash`.
 *
 * @param entry An entry, with or without `entry_hash`.
 * @throws {TypeError} When a field is not JSON-serializable.
 */
export function computeEntryHash(entry: object): string {
  const { entry_hash: _ignored, ...body } = entry as Record<string, unknown>;
  return sha256Tag(canonicalJson(body));
}
