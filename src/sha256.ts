/**
 * The SHA-256 compression function (FIPS 180-4), for the hand-written
 * hashes on hot paths that allocate nothing per call: HMAC-SHA256 of
 * webhook signatures (`src/webhooks/_hmac_sha256.ts`) and the Merkle tree's
 * leaf and node hashes (`src/audit/merkle.ts`), whose inputs are one or two
 * blocks: there `node:crypto` costs 4–6 µs a hash in Deno (a stream object
 * per call), this well under one. Checked against `node:crypto` in tests.
 *
 * @module
 */

const K = new Int32Array([
  0x428a2f98,
  0x71374491,
  0xb5c0fbcf,
  0xe9b5dba5,
  0x3956c25b,
  0x59f111f1,
  0x923f82a4,
  0xab1c5ed5,
  0xd807aa98,
  0x12835b01,
  0x243185be,
  0x550c7dc3,
  0x72be5d74,
  0x80deb1fe,
  0x9bdc06a7,
  0xc19bf174,
  0xe49b69c1,
  0xefbe4786,
  0x0fc19dc6,
  0x240ca1cc,
  0x2de92c6f,
  0x4a7484aa,
  0x5cb0a9dc,
  0x76f988da,
  0x983e5152,
  0xa831c66d,
  0xb00327c8,
  0xbf597fc7,
  0xc6e00bf3,
  0xd5a79147,
  0x06ca6351,
  0x14292967,
  0x27b70a85,
  0x2e1b2138,
  0x4d2c6dfc,
  0x53380d13,
  0x650a7354,
  0x766a0abb,
  0x81c2c92e,
  0x92722c85,
  0xa2bfe8a1,
  0xa81a664b,
  0xc24b8b70,
  0xc76c51a3,
  0xd192e819,
  0xd6990624,
  0xf40e3585,
  0x106aa070,
  0x19a4c116,
  0x1e376c08,
  0x2748774c,
  0x34b0bcb5,
  0x391c0cb3,
  0x4ed8aa4a,
  0x5b9cca4f,
  0x682e6ff3,
  0x748f82ee,
  0x78a5636f,
  0x84c87814,
  0x8cc70208,
  0x90befffa,
  0xa4506ceb,
  0xbef9a3f7,
  0xc67178f2,
]);

/** SHA-256's initial state. */
export const SHA256_IV = new Int32Array([
  0x6a09e667,
  0xbb67ae85,
  0x3c6ef372,
  0xa54ff53a,
  0x510e527f,
  0x9b05688c,
  0x1f83d9ab,
  0x5be0cd19,
]);

/** Bytes of a SHA-256 block. */
export const SHA256_BLOCK = 64;

const schedule = new Int32Array(64);

/** One SHA-256 compression of `bytes[offset, offset + 64)` into `into`. */
export function sha256Compress(into: Int32Array, bytes: Uint8Array, offset: number): void {
  const w = schedule;
  for (let i = 0; i < 16; i++) {
    const at = offset + i * 4;
    w[i] = (bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = w[i - 15];
    const y = w[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
  }
  let a = into[0], b = into[1], c = into[2], d = into[3];
  let e = into[4], f = into[5], g = into[6], h = into[7];
  for (let i = 0; i < 64; i++) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + s1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  into[0] = (into[0] + a) | 0;
  into[1] = (into[1] + b) | 0;
  into[2] = (into[2] + c) | 0;
  into[3] = (into[3] + d) | 0;
  into[4] = (into[4] + e) | 0;
  into[5] = (into[5] + f) | 0;
  into[6] = (into[6] + g) | 0;
  into[7] = (into[7] + h) | 0;
}

/** Writes the state `from` big-endian into `out[offset, offset + 32)`. */
export function sha256StateBytes(from: Int32Array, out: Uint8Array, offset = 0): void {
  for (let i = 0; i < 8; i++) {
    const word = from[i];
    out[offset + i * 4] = word >>> 24;
    out[offset + i * 4 + 1] = word >>> 16;
    out[offset + i * 4 + 2] = word >>> 8;
    out[offset + i * 4 + 3] = word;
  }
}
