/**
 * How entries become bytes and back: validation, redaction and size limits
 * of a new entry, sealing it at its seq, decoding and checking stored bytes.
 * Private to `src/audit`.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { GatewayError } from "../errors/mod.ts";
import { redact as builtinRedact, type Redactor } from "../redact.ts";
import { canonicalJson, type JsonValue } from "./canonical_json.ts";
import {
  AUDIT_OUTCOME_SCHEMAS,
  type AuditAppendInput,
  AuditAppendInputSchema,
  type AuditEntry,
  type AuditEntryCaller,
  AuditEntrySchema,
  computeEntryHash,
  MAX_INPUT_BYTES,
  MAX_OUTCOME_BYTES,
  sha256Tag,
  TRUNCATED,
} from "./entry.ts";

/** Longest string kept in an outcome over {@linkcode MAX_OUTCOME_BYTES}. */
const OUTCOME_STRING_CHARS = 1024;

/** Bytes of an entry besides input, outcome and names: hashes, seq, timestamp, keys. */
const FIXED_ENTRY_BYTES = 400;

const encoder = new TextEncoder();

/** The UTF-8 length of `text`, without encoding it. */
function utf8Length(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

function shortenStrings(value: JsonValue): JsonValue {
  if (typeof value === "string") {
    return value.length > OUTCOME_STRING_CHARS ? `${value.slice(0, OUTCOME_STRING_CHARS)}…` : value;
  }
  if (Array.isArray(value)) return value.map(shortenStrings);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shortenStrings(v)]));
  }
  return value;
}

function serializable(value: unknown, what: string): string {
  try {
    return canonicalJson(value);
  } catch (error) {
    throw new GatewayError(
      "INTERNAL",
      `Cannot write audit entry: its ${what} is not JSON (${(error as Error).message})`,
      { cause: error },
    );
  }
}

/** A validated, redacted entry waiting for its seq and hashes. */
export interface PreparedEntry {
  readonly kind: string;
  readonly tool: string;
  readonly session_id?: string;
  readonly caller?: AuditEntryCaller;
  /** Canonical JSON of `caller`. */
  readonly callerJson?: string;
  readonly input: JsonValue;
  readonly outcome: { [key: string]: JsonValue };
  /** Canonical JSON of `input`. */
  readonly inputJson: string;
  /** Canonical JSON of `outcome`. */
  readonly outcomeJson: string;
  /** Upper bound of the sealed entry's size in bytes. */
  readonly maxBytes: number;
}

/**
 * Validates and redacts a new entry, once, before it is queued: the input is
 * redacted, normalized to JSON and summarized when over
 * {@linkcode MAX_INPUT_BYTES}; long outcome strings are shortened when the
 * outcome is over {@linkcode MAX_OUTCOME_BYTES}.
 *
 * @throws {GatewayError} `INTERNAL` when the input is malformed (a bug in the
 * caller, not a user error).
 */
export function prepareEntry(
  input: AuditAppendInput,
  redact: Redactor = builtinRedact,
): PreparedEntry {
  const parsed = AuditAppendInputSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new GatewayError(
      "INTERNAL",
      `Cannot write audit entry: ${issue?.path.join(".") || "(root)"} ${issue?.message}`,
    );
  }
  const { kind, tool, session_id, caller } = parsed.data;
  const callerJson = caller === undefined ? undefined : canonicalJson(caller);
  let inputJson = serializable(redact(parsed.data.input ?? null), "input");
  const inputBytes = utf8Length(inputJson);
  if (inputBytes > MAX_INPUT_BYTES) {
    inputJson = canonicalJson({
      [TRUNCATED]: true,
      bytes: inputBytes,
      sha256: sha256Tag(inputJson),
    });
  }
  let outcomeJson = serializable(redact(parsed.data.outcome), "outcome");
  let outcome = JSON.parse(outcomeJson) as { [key: string]: JsonValue };
  if (utf8Length(outcomeJson) > MAX_OUTCOME_BYTES) {
    outcome = shortenStrings(outcome) as { [key: string]: JsonValue };
    outcomeJson = canonicalJson(outcome);
    if (utf8Length(outcomeJson) > MAX_OUTCOME_BYTES) {
      throw new GatewayError(
        "INTERNAL",
        `Cannot write audit entry: its outcome is over ${MAX_OUTCOME_BYTES} bytes`,
      );
    }
  }
  const outcomeSchema = AUDIT_OUTCOME_SCHEMAS[kind];
  if (outcomeSchema) {
    const checked = outcomeSchema.safeParse(outcome);
    if (!checked.success) {
      const issue = checked.error.issues[0];
      throw new GatewayError(
        "INTERNAL",
        `Cannot write audit entry: outcome.${
          issue?.path.join(".")
        } of a ${kind} entry ${issue?.message}`,
      );
    }
  }
  const names = utf8Length(JSON.stringify([kind, tool, session_id ?? "", callerJson ?? ""]));
  return {
    kind,
    tool,
    ...(session_id === undefined ? {} : { session_id }),
    ...(caller === undefined ? {} : { caller, callerJson }),
    input: JSON.parse(inputJson) as JsonValue,
    outcome,
    inputJson,
    outcomeJson,
    maxBytes: FIXED_ENTRY_BYTES + names + utf8Length(inputJson) + utf8Length(outcomeJson),
  };
}

/** An entry with its seq and hashes, and the exact bytes to store. */
export interface SealedEntry {
  entry: AuditEntry;
  bytes: Uint8Array;
}

/**
 * Gives a prepared entry its place in the chain. The canonical JSON is built
 * by concatenation in sorted key order (`caller`, `input`, `kind`, `outcome`,
 * `previous_hash`, `seq`, `session_id`, `timestamp`, `tool`; `entry_hash`
 * sorts first; `caller` and `session_id` only when set), from the parts canonicalized once in
 * {@linkcode prepareEntry}.
 */
export function sealEntry(
  prepared: PreparedEntry,
  seq: number,
  previousHash: string,
  timestamp: string,
): SealedEntry {
  const { kind, tool, session_id, caller, callerJson } = prepared;
  const session = session_id === undefined ? "" : `,"session_id":${JSON.stringify(session_id)}`;
  const who = callerJson === undefined ? "" : `"caller":${callerJson},`;
  const body = `{${who}"input":${prepared.inputJson},"kind":${JSON.stringify(kind)},` +
    `"outcome":${prepared.outcomeJson},"previous_hash":"${previousHash}","seq":${seq}${session},` +
    `"timestamp":"${timestamp}","tool":${JSON.stringify(tool)}}`;
  const entryHash = sha256Tag(body);
  const entry: AuditEntry = {
    seq,
    timestamp,
    kind,
    tool,
    ...(session_id === undefined ? {} : { session_id }),
    ...(caller === undefined ? {} : { caller }),
    input: prepared.input,
    outcome: prepared.outcome,
    previous_hash: previousHash,
    entry_hash: entryHash,
  };
  return { entry, bytes: encoder.encode(`{"entry_hash":"${entryHash}",${body.slice(1)}`) };
}

/** Why stored bytes are not a readable entry. */
export class UnreadableEntryError extends Error {
  /** @param message What is wrong. */
  constructor(message: string) {
    super(message);
    this.name = "UnreadableEntryError";
  }
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/** Length of `{"entry_hash":"sha256:<64 hex>",`: where the rest of the body starts. */
const BODY_OFFSET = 88;

/** How canonical entry bytes (as {@linkcode sealEntry} writes them) begin. */
export const CANONICAL_START = '{"entry_hash":"';

/**
 * Whether stored bytes may hold every one of `needles` (JSON text such as
 * `"tool":"echo"`), tested on the text without parsing it: `false` only for
 * canonical bytes (sorted keys, no spaces, strings as `JSON.stringify`
 * writes them) that lack one, so a filter can skip them. `true` still needs
 * the parsed entry to tell.
 */
export function mayContain(bytes: Uint8Array, needles: readonly string[]): boolean {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    return true; // Not UTF-8: parsing says what is wrong.
  }
  if (!text.startsWith(CANONICAL_START)) return true;
  return needles.every((needle) => text.includes(needle));
}

/** `{"entry_hash":"sha256:` as bytes: how canonical entry bytes begin. */
const HASH_PREFIX = encoder.encode(`${CANONICAL_START}sha256:`);

/**
 * The `entry_hash` of stored entry bytes, unchecked: read in place from
 * canonical bytes (what the tree's leaves need), else from the parsed entry.
 *
 * @throws {UnreadableEntryError} When the bytes are not an entry.
 */
export function entryHashOf(bytes: Uint8Array): string {
  let canonical = bytes.length > BODY_OFFSET && bytes[86] === 0x22 && bytes[87] === 0x2c;
  for (let i = 0; canonical && i < HASH_PREFIX.length; i++) canonical = bytes[i] === HASH_PREFIX[i];
  return canonical
    ? String.fromCharCode(...bytes.subarray(15, 86))
    : parseEntry(bytes).entry.entry_hash;
}

/**
 * Decodes stored entry bytes without checking their hash: what listing
 * needs (`audit verify` checks every hash, see {@linkcode decodeEntry}).
 *
 * @throws {UnreadableEntryError} When the bytes are not an entry.
 */
export function readEntry(bytes: Uint8Array): AuditEntry {
  return parseEntry(bytes).entry;
}

function parseEntry(bytes: Uint8Array): { entry: AuditEntry; text: string } {
  let text: string;
  let raw: unknown;
  try {
    text = decoder.decode(bytes);
    raw = JSON.parse(text);
  } catch (error) {
    throw new UnreadableEntryError(`not JSON (${(error as Error).message})`);
  }
  const parsed = AuditEntrySchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new UnreadableEntryError(`${issue?.path.join(".") || "(root)"} ${issue?.message}`);
  }
  return { entry: raw as AuditEntry, text };
}

/**
 * Decodes stored entry bytes and checks them against their `entry_hash`.
 *
 * @returns The entry and whether its content still matches its hash.
 * @throws {UnreadableEntryError} When the bytes are not an entry.
 */
export function decodeEntry(bytes: Uint8Array): { entry: AuditEntry; hashMatches: boolean } {
  const { entry, text } = parseEntry(bytes);
  // Fast path: bytes written by sealEntry are canonical, so the hashed body is
  // "{" followed by the text after the entry_hash member. Otherwise (bytes
  // re-serialized by something else) recompute the canonical form from the fields.
  let hashMatches = text.startsWith('{"entry_hash":"') && text.slice(15, 86) === entry.entry_hash &&
    text.charCodeAt(86) === 0x22 && text.charCodeAt(87) === 0x2c &&
    sha256Tag(`{${text.slice(BODY_OFFSET)}`) === entry.entry_hash;
  if (!hashMatches) hashMatches = computeEntryHash(entry) === entry.entry_hash;
  return { entry, hashMatches };
}
