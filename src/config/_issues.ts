/**
 * Config errors people can act on: each problem says where (the key path),
 * what is wrong, what is accepted and, where it helps, an example, never
 * the validator's own text; at most {@linkcode MAX_NAMED} problems and
 * names, then "and N more". Private to `src/config`.
 *
 * @module
 */
import type { z } from "zod";
import { boundedList, MAX_NAMED } from "../errors/bounded.ts";

/** The schema inside wrappers (default, prefault, optional, nullable, pipes). */
function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema as unknown as { _zod: { def: Record<string, unknown> } };
  for (let i = 0; i < 10; i++) {
    const def = current._zod.def;
    const inner = (def.innerType ?? (def.type === "pipe" ? def.in : undefined)) as
      | typeof current
      | undefined;
    if (!inner) break;
    current = inner;
  }
  return current as unknown as z.ZodType;
}

/** The schema at `path` under `root`, or `undefined` where it cannot be followed. */
function schemaAt(root: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let current: z.ZodType | undefined = unwrap(root);
  for (const key of path) {
    if (!current) return undefined;
    const def = (current as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
    if (def.type === "object") {
      const shape = def.shape as Record<string, z.ZodType>;
      current = shape[String(key)] && unwrap(shape[String(key)]);
    } else if (def.type === "record") current = unwrap(def.valueType as z.ZodType);
    else if (def.type === "array") current = unwrap(def.element as z.ZodType);
    else return undefined;
  }
  return current;
}

function keysOf(schema: z.ZodType | undefined): string[] {
  const def = schema && (schema as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
  return def?.type === "object" ? Object.keys(def.shape as object) : [];
}

const EXPECTED: Readonly<Record<string, string>> = {
  string: 'a string, e.g. "text"',
  number: "a number, e.g. 5000",
  int: "a whole number, e.g. 5000",
  boolean: "true or false",
  array: 'a list, e.g. ["a", "b"]',
  object: 'an object, e.g. {"key": "value"}',
  record: 'an object of names to values, e.g. {"name": …}',
};

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    out += typeof key === "number" ? `[${key}]` : out ? `.${String(key)}` : String(key);
  }
  return out || "(the top level)";
}

/** What one issue says, in words a person can act on. */
function describeIssue(root: z.ZodType, issue: z.core.$ZodIssue): string {
  const where = formatPath(issue.path);
  switch (issue.code) {
    case "unrecognized_keys": {
      const names = issue.keys.map((key) => JSON.stringify(key));
      const known = keysOf(schemaAt(root, issue.path));
      return `${where}: unknown key${issue.keys.length === 1 ? "" : "s"} ${boundedList(names)}` +
        (known.length ? `; accepted keys: ${boundedList(known)}` : "");
    }
    case "invalid_type": {
      const expected = EXPECTED[issue.expected] ?? issue.expected;
      const missing = /received undefined$/.test(issue.message);
      return missing
        ? `${where}: missing; expected ${expected}`
        : `${where}: expected ${expected}${receivedOf(issue.message)}`;
    }
    case "invalid_value":
      return `${where}: expected one of ${
        boundedList(issue.values.map((value) => JSON.stringify(value)))
      }`;
    case "invalid_union":
      return `${where}: not one of the accepted forms`;
    case "too_small":
    case "too_big": {
      const inclusive = (issue as { inclusive?: boolean }).inclusive !== false;
      const bound = issue.code === "too_small"
        ? inclusive ? "at least" : "more than"
        : inclusive
        ? "at most"
        : "less than";
      const limit = String(issue.code === "too_small" ? issue.minimum : issue.maximum);
      const what = issue.origin === "array"
        ? `${limit} entries`
        : issue.origin === "string"
        ? `${limit} characters`
        : limit;
      return `${where}: expected ${bound} ${what}`;
    }
    default:
      return `${where}: ${issue.message}`;
  }
}

function receivedOf(message: string): string {
  const received = /received (\w+)$/.exec(message)?.[1];
  return received ? `, got ${received === "object" ? "an object" : `a ${received}`}` : "";
}

/**
 * One message for all the issues of a failed parse: each problem with its
 * path, at most {@linkcode MAX_NAMED} of them.
 */
export function describeIssues(root: z.ZodType, issues: readonly z.core.$ZodIssue[]): string {
  const shown = issues.slice(0, MAX_NAMED).map((issue) => describeIssue(root, issue)).join("; ");
  const more = issues.length - MAX_NAMED;
  return more > 0 ? `${shown}; and ${more} more problem${more === 1 ? "" : "s"}` : shown;
}
