/**
 * Identifiers: a prefix and a 26-character ULID (time-sortable, random tail).
 *
 * @module
 */

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * A new ULID: 10 characters of millisecond time, then 16 random characters.
 *
 * @param now Milliseconds since the epoch. @default Date.now()
 */
export function ulid(now: number = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let random = "";
  for (const byte of bytes) random += CROCKFORD[byte % 32];
  return time + random;
}

/**
 * A new identifier such as `wh_01J…`.
 *
 * @example
 * ```ts
 * newId("evt"); // "evt_01JD4X…"
 * ```
 */
export function newId(prefix: string): string {
  return `${prefix}_${ulid().toLowerCase()}`;
}
