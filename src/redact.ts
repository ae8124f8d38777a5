/**
 * Redaction of secret-looking values before they reach events, logs or the
 * audit log.
 *
 * @module
 */

/** Replacement for redacted values. */
export const REDACTED = "[REDACTED]";

const SECRET_KEY =
  /token|secret|password|passwd|authorization|api[_-]?key|cookie|private[_-]?key|credential/i;

/** Whether a key names a secret (token, secret, password, authorization, api_key, …). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/** Copies made by {@linkcode redact}: redacting one again returns it as is. */
const redactedCopies = new WeakSet<object>();

/**
 * A deep copy of `value` with the values of secret-looking keys replaced by
 * `"[REDACTED]"`, in nested objects and arrays. A copy this function made is
 * returned as is (it is already redacted), so a value redacted once can be
 * handed to several sinks (audit entry, event) without copying it again; do
 * not add secrets to a redacted copy.
 *
 * @example
 * ```ts
 * redact({ user: "a", api_key: "k" }); // { user: "a", api_key: "[REDACTED]" }
 * ```
 */
export function redact<T>(value: T): T {
  if (value === null || typeof value !== "object" || redactedCopies.has(value)) return value;
  const copy = redactValue(value, 0) as T & object;
  redactedCopies.add(copy);
  return copy;
}

function redactValue(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== "object") return value;
  if (depth > 32) return REDACTED;
  if (Array.isArray(value)) return value.map((item) => redactValue(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    out[key] = isSecretKey(key) && item !== null && item !== undefined && item !== ""
      ? REDACTED
      : redactValue(item, depth + 1);
  }
  return out;
}
