/**
 * Comparing records as JSON, whatever the order of their keys: what a write
 * guarded by the record it replaces checks on an adapter without a JSON
 * equality of its own (Deno KV). Private to `src/store`.
 *
 * @module
 */

/**
 * Whether `a` and `b` are the same JSON: equal once serialized with the keys
 * of every object sorted (`JSON.stringify` otherwise: `undefined` members
 * are left out).
 *
 * @example
 * ```ts
 * sameJson({ a: 1, b: [{ d: 2, c: 3 }] }, { b: [{ c: 3, d: 2 }], a: 1 }); // true
 * ```
 */
export function sameJson(a: unknown, b: unknown): boolean {
  return stableJson(a) === stableJson(b);
}

function stableJson(value: unknown): string | undefined {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item === null || typeof item !== "object" || Array.isArray(item)) return item;
    const record = item as Record<string, unknown>;
    return Object.fromEntries(Object.keys(record).sort().map((key) => [key, record[key]]));
  });
}
