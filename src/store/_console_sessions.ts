/**
 * What both adapters share about console sessions: the stored name of a
 * session is the SHA-256 of its id, so whoever reads the store cannot
 * present it. Private to `src/store`.
 *
 * @module
 */
import { createHash } from "node:crypto";

/** The stored name of a console session: the SHA-256 of its id, lowercase hex. */
export function consoleSessionHash(id: string): string {
  return createHash("sha256").update(id, "utf8").digest("hex");
}

/**
 * How long a store keeps a session past its expiry before removing it, in
 * ms: removal is housekeeping (`get` decides by the expiry itself), so a
 * clock a little off never drops a live session.
 */
export const CONSOLE_SESSION_SLACK_MS = 60_000;
