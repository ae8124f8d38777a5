/**
 * Canonical JSON: the byte form audit entries are hashed over.
 *
 * @module
 */

/** A JSON value. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

/**
 * Serializes `value` as canonical JSON: object keys sorted recursively (by
 * UTF-16 code units, as RFC 8785 does), no whitespace, strings and numbers
 * written exactly as `JSON.stringify` writes them. Everything else follows
 * `JSON.stringify` too: `toJSON` is honoured, `undefined`, functions and
 * symbols are left out of objects and become `null` in arrays, non-finite
 * numbers become `null`.
 *
 * @param value A JSON-like value.
 * @returns The canonical JSON text.
 * @throws {TypeError} When `value` is not serializable: a `bigint`, a
 * reference cycle, or `undefined` at the top.
 *
 * @example
 * ```ts
 * canonicalJson({ b: [1, { d: 1, c: 2 }], a: "x" }); // '{"a":"x","b":[1,{"c":2,"d":1}]}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  const text = write(value, "", new Set<object>());
  if (text === undefined) throw new TypeError("Cannot serialize a value that is not JSON");
  return text;
}

function write(value: unknown, key: string, ancestors: Set<object>): string | undefined {
  if (value !== null && typeof value === "object") {
    const toJson = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJson === "function") value = toJson.call(value, key);
  }
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : "null";
    case "boolean":
      return value ? "true" : "false";
    case "bigint":
      throw new TypeError("Cannot serialize a bigint as JSON");
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (value === null) return "null";
  const object = value as object;
  if (ancestors.has(object)) throw new TypeError("Cannot serialize a reference cycle as JSON");
  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      const items = object.map((item, index) => write(item, String(index), ancestors) ?? "null");
      return `[${items.join(",")}]`;
    }
    const record = object as Record<string, unknown>;
    const members: string[] = [];
    for (const name of Object.keys(record).sort()) {
      const item = write(record[name], name, ancestors);
      if (item !== undefined) members.push(`${JSON.stringify(name)}:${item}`);
    }
    return `{${members.join(",")}}`;
  } finally {
    ancestors.delete(object);
  }
}
