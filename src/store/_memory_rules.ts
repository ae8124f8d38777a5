/**
 * The memory notebook's rules, the same for every adapter: which keys,
 * values and list options are acceptable, the errors that say why not, and
 * how a stored value is read back. Private to `src/store`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { type ListMemoryOptions, MEMORY_VALUE_MAX_BYTES, memoryKeyProblem } from "./records.ts";

const encoder = new TextEncoder();

/** `TOOL_INPUT_INVALID` for one argument, with `details.fields` as schema failures have it. */
export function invalidMemoryArgument(
  path: "key" | "value",
  problem: string,
  extra: Record<string, unknown> = {},
): GatewayError {
  return new GatewayError("TOOL_INPUT_INVALID", `Invalid memory ${path}: ${problem}`, {
    details: { fields: [{ path, message: problem }], ...extra },
  });
}

/**
 * Checks a key.
 *
 * @throws {GatewayError} `TOOL_INPUT_INVALID` when it is empty or too long.
 */
export function checkMemoryKey(key: string): void {
  const problem = memoryKeyProblem(key);
  if (problem) throw invalidMemoryArgument("key", problem);
}

/**
 * Serializes a value once: its JSON text and that text's UTF-8 bytes.
 *
 * @throws {GatewayError} `TOOL_INPUT_INVALID` when it is not a JSON value
 * or its JSON is over {@linkcode MEMORY_VALUE_MAX_BYTES}.
 */
export function encodeMemoryValue(
  value: unknown,
): { text: string; bytes: Uint8Array<ArrayBuffer> } {
  const text = value === undefined ? undefined : JSON.stringify(value);
  if (text === undefined) {
    throw invalidMemoryArgument("value", "it is not a JSON value");
  }
  const bytes = encoder.encode(text);
  if (bytes.length > MEMORY_VALUE_MAX_BYTES) {
    throw invalidMemoryArgument(
      "value",
      `its JSON is ${bytes.length} bytes; the limit is ${MEMORY_VALUE_MAX_BYTES} (60 KiB)`,
      { size_bytes: bytes.length, limit: MEMORY_VALUE_MAX_BYTES },
    );
  }
  return { text, bytes };
}

/** `STORE_CORRUPT` for a stored value of `key` that cannot be read. */
export function corruptMemoryValue(key: string, reason: string, cause?: unknown): GatewayError {
  return new GatewayError(
    "STORE_CORRUPT",
    `Stored memory value ${JSON.stringify(key)} is unreadable: ${reason}`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Parses a stored value's JSON text.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when it is not JSON.
 */
export function parseMemoryJson(key: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw corruptMemoryValue(key, (error as Error).message, error);
  }
}

/**
 * The prefix and limit of a listing, defaults applied.
 *
 * @throws {RangeError} when `limit` is not a positive integer.
 */
export function memoryListBounds(options: ListMemoryOptions): { prefix: string; limit: number } {
  const { prefix = "", limit = 100 } = options;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new RangeError(`Invalid limit: ${limit} is not a positive integer`);
  }
  return { prefix, limit };
}
