/**
 * Identifiers: a prefix and a 26-character ULID (time-sortable, random tail).
 *
 * @module
 */

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** Random bytes fetched per `crypto.getRandomValues` call: 256 identifiers' worth. */
const POOL_BYTES = 4096;

/** Random bytes per identifier: one per character of the random tail. */
const RANDOM_CHARS = 16;

const pool = new Uint8Array(POOL_BYTES);
let poolOffset = POOL_BYTES;

/** The time part of the last ULID, kept for identifiers made in the same millisecond. */
let lastTime = -1;
let lastTimeText = "";

/** The 10-character time part of a ULID for epoch ms `at`. */
function encodeTime(at: number): string {
  let time = "";
  let t = at;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time;
}

function timeText(now: number): string {
  if (now === lastTime) return lastTimeText;
  lastTime = now;
  lastTimeText = encodeTime(now);
  return lastTimeText;
}

/** The random tail of the last ULID, as base-32 digits, for identifiers made in the same millisecond. */
const lastRandom = new Uint8Array(RANDOM_CHARS);

/**
 * A new ULID: 10 characters of millisecond time, then 16 random characters.
 * The random bytes come from `crypto.getRandomValues`, fetched in blocks.
 * Monotonic within a process: a ULID made in the same millisecond as the
 * previous one has that one's tail plus one, so identifiers sort in the
 * order they were made (registrations list oldest first).
 *
 * @param now Milliseconds since the epoch. @default Date.now()
 */
export function ulid(now: number = Date.now()): string {
  if (now !== lastTime || !increment(lastRandom)) {
    if (poolOffset + RANDOM_CHARS > POOL_BYTES) {
      crypto.getRandomValues(pool);
      poolOffset = 0;
    }
    for (let i = 0; i < RANDOM_CHARS; i++) lastRandom[i] = pool[poolOffset + i] % 32;
    poolOffset += RANDOM_CHARS;
  }
  let random = "";
  for (let i = 0; i < RANDOM_CHARS; i++) random += CROCKFORD[lastRandom[i]];
  return timeText(now) + random;
}

/** Adds one to base-32 digits in place; false when they were all 31 (no room left). */
function increment(digits: Uint8Array): boolean {
  for (let i = digits.length - 1; i >= 0; i--) {
    if (digits[i] < 31) {
      digits[i]++;
      return true;
    }
    digits[i] = 0;
  }
  return false;
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

/**
 * The time (epoch ms) a {@linkcode newId} identifier was made, read from its
 * ULID, or `undefined` when `id` is not one.
 *
 * @example
 * ```ts
 * idTime(newId("dlq")); // ≈ Date.now()
 * ```
 */
export function idTime(id: string): number | undefined {
  const match = /^[a-z]+_([0-9a-hjkmnp-tv-z]{10})[0-9a-hjkmnp-tv-z]{16}$/i.exec(id);
  if (!match) return undefined;
  let time = 0;
  for (const char of match[1].toUpperCase()) time = time * 32 + CROCKFORD.indexOf(char);
  return time <= 8.64e15 ? time : undefined;
}

/**
 * An identifier in the form of {@linkcode newId} whose time part is `at` and
 * whose tail is read from `seed` (at least 16 bytes, e.g. a SHA-256 digest):
 * the same inputs give the same identifier, so a record written by several
 * processes for the same reason is written once.
 *
 * @example
 * ```ts
 * const seed = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("x")));
 * derivedId("dlq", 0, seed); // "dlq_0000000000…"
 * ```
 */
export function derivedId(prefix: string, at: number, seed: Uint8Array): string {
  if (seed.length < RANDOM_CHARS) {
    throw new RangeError(`Invalid seed: ${seed.length} bytes, at least ${RANDOM_CHARS} needed`);
  }
  let tail = "";
  for (let i = 0; i < RANDOM_CHARS; i++) tail += CROCKFORD[seed[i] % 32];
  // Not timeText(): its cache keeps ulid() monotonic within a millisecond.
  return `${prefix}_${(encodeTime(Math.max(0, Math.floor(at))) + tail).toLowerCase()}`;
}
