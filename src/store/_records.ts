/**
 * Reading stored records: every value read from KV is validated with its
 * zod schema; a record that does not parse is reported, never used.
 * Private to `src/store`.
 *
 * @module
 */
import type { z } from "zod";
import { GatewayError } from "../errors/mod.ts";

/**
 * Validates a stored value.
 *
 * @param what Names the record in the error, e.g. `webhook wh_…`.
 * @throws {GatewayError} `STORE_CORRUPT` when the value does not match.
 */
export function parseRecord<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored ${what} is unreadable: ${parsed.error.issues[0]?.message}`,
    );
  }
  return parsed.data;
}
