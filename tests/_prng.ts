/**
 * A small seeded PRNG for generated test cases, so that a failing case is
 * replayed from its seed.
 *
 * @module
 */

/**
 * mulberry32: a 32-bit seed to a function returning numbers in [0, 1).
 *
 * @example
 * ```ts
 * const random = prng(42);
 * const pick = Math.floor(random() * 10);
 * ```
 */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
