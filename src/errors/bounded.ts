/**
 * Error messages stay bounded whatever the input: at most
 * {@linkcode MAX_NAMED} offending names or problems are named, then
 * "and N more". A body with 50 000 unknown keys gives a short message.
 *
 * @module
 */

/** Most names (or problems) one message lists. */
export const MAX_NAMED = 20;

/** `"a", "b" and 3 more`: at most `max` of `items`, joined with `separator`. */
export function boundedList(items: readonly string[], max = MAX_NAMED, separator = ", "): string {
  const shown = items.slice(0, max).join(separator);
  return items.length > max ? `${shown} and ${items.length - max} more` : shown;
}

/** A validation issue as zod reports one (only what is read here). */
export interface IssueLike {
  code: string;
  path: readonly PropertyKey[];
  message: string;
  keys?: readonly string[];
}

/**
 * The fields of validation issues for messages and `details.fields`: at
 * most {@linkcode MAX_NAMED}, an unknown-keys issue naming at most as many keys.
 *
 * @returns The fields shown and how many issues were left out.
 */
export function boundedIssueFields(
  issues: readonly IssueLike[],
): { fields: { path: string; message: string }[]; omitted: number } {
  const fields = issues.slice(0, MAX_NAMED).map((issue) => ({
    path: issue.path.map(String).join(".") || "(root)",
    message: issue.code === "unrecognized_keys" && issue.keys && issue.keys.length > MAX_NAMED
      ? `Unrecognized keys: ${boundedList(issue.keys.map((key) => JSON.stringify(key)))}`
      : issue.message,
  }));
  return { fields, omitted: Math.max(0, issues.length - MAX_NAMED) };
}

/** `path: message; …` of {@linkcode boundedIssueFields}, with "and N more problems". */
export function issueSummary(
  fields: readonly { path: string; message: string }[],
  omitted: number,
): string {
  const text = fields.map((f) => `${f.path}: ${f.message}`).join("; ");
  return omitted ? `${text}; and ${omitted} more problem${omitted === 1 ? "" : "s"}` : text;
}
