/**
 * What a pin covers of an upstream's tool, prompt or resource template, its
 * hash, and how two versions differ. The hash is the SHA-256 of the
 * canonical JSON (sorted keys, no whitespace: src/audit/canonical_json.ts)
 * of the fields that tell a caller or a model what the thing does and
 * takes: a tool's name, title, description, input and output schemas and
 * annotations; a prompt's name, title, description and arguments; a
 * resource template's URI template, name, title, description and MIME type.
 * Fields an upstream leaves out are left out. Icons, `_meta` and execution
 * hints are not pinned: they change nothing a model reads.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../audit/canonical_json.ts";
import type { PinKind } from "../store/mod.ts";

/** The fields pinned, per kind, in the order a diff shows them. */
export const PINNED_FIELDS: Readonly<Record<PinKind, readonly string[]>> = {
  tool: ["name", "title", "description", "inputSchema", "outputSchema", "annotations"],
  prompt: ["name", "title", "description", "arguments"],
  resource_template: ["uriTemplate", "name", "title", "description", "mimeType"],
};

/** The pinned fields of `raw` (an upstream's listing of it), those it has. */
export function pinnedDefinition(
  kind: PinKind,
  raw: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of PINNED_FIELDS[kind]) {
    if (raw[field] !== undefined) out[field] = raw[field];
  }
  return out;
}

/** SHA-256 of the canonical JSON of `definition`, lowercase hex. */
export function pinHash(definition: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(definition)).digest("hex");
}

/** The pinned fields whose values differ between `before` and `after`, in field order. */
export function changedFields(
  kind: PinKind,
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): string[] {
  return PINNED_FIELDS[kind].filter((field) =>
    canonicalJson(before[field] ?? null) !== canonicalJson(after[field] ?? null)
  );
}

/** A definition as a reader compares it: pretty JSON, keys sorted, one field at a time. */
function readable(definition: Record<string, unknown>): string {
  return `${JSON.stringify(JSON.parse(canonicalJson(definition)), null, 2)}\n`;
}

/**
 * A unified diff (`diff -u` form) of the pinned definition against the one
 * offered now, with 3 lines of context.
 */
export async function definitionDiff(
  name: string,
  pinned: Record<string, unknown> | null,
  offered: Record<string, unknown>,
): Promise<string> {
  // Loaded when a diff is asked for: nothing on a server's path to its first reply needs it.
  const { createTwoFilesPatch } = await import("diff");
  return createTwoFilesPatch(
    `${name} (pinned)`,
    `${name} (offered)`,
    pinned ? readable(pinned) : "",
    readable(offered),
    undefined,
    undefined,
    { context: 3 },
  );
}
