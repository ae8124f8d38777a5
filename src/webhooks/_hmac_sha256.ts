/**
 * HMAC-SHA256 (RFC 2104 over FIPS 180-4 SHA-256) that allocates nothing
 * per signature but its result string: the key's inner and outer states are
 * computed once, and each signature runs on module-level scratch memory.
 *
 * Written by hand because deliveries sign every attempt twice, and under
 * webhook load the per-call garbage of `node:crypto`'s `Hmac` (a stream
 * object and several `ArrayBuffer`s each time, in Deno) made the main
 * isolate's scavenges longer — their `ArrayBuffer` sweeping — and more
 * frequent, which is what slow tool calls waited for (BENCHMARKS.md, stop
 * 30). Web Crypto's `sign` is asynchronous and costs 5–8× the CPU per small
 * body; the npm hash libraries allocate hash objects and result buffers per
 * call. Checked against `node:crypto` and the RFC 4231 vectors in tests.
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
const IV = new Int32Array([
  0x6a09e667,
  0xbb67ae85,
  0x3c6ef372,
  0xa54ff53a,
  0x510e527f,
  0x9b05688c,
  0x1f83d9ab,
  0x5be0cd19,
]);

const BLOCK = 64;

// Scratch of the one signature being computed (signing is synchronous, so never shared).
const schedule = new Int32Array(64);
const state = new Int32Array(8);
const pending = new Uint8Array(BLOCK);
let pendingLength = 0;
let totalLength = 0;
/** Text given to {@linkcode HmacSha256Key.digest}, encoded here when it fits. */
const textScratch = new Uint8Array(512);
const encoder = new TextEncoder();

/** One SHA-256 compression of `bytes[offset, offset + 64)` into `into`. */
function compress(into: Int32Array, bytes: Uint8Array, offset: number): void {
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

/** Starts hashing from `from`, a state after `length` bytes (whole blocks). */
function begin(from: Int32Array, length: number): void {
  state.set(from);
  pendingLength = 0;
  totalLength = length;
}

/** Copies `bytes[from, to)` to `pending` at `pendingLength` (no `subarray` view to allocate). */
function buffer(bytes: Uint8Array, from: number, to: number): void {
  for (let i = from; i < to; i++) pending[pendingLength++] = bytes[i];
}

function update(bytes: Uint8Array, end: number = bytes.length): void {
  let offset = 0;
  totalLength += end;
  if (pendingLength > 0) {
    offset = Math.min(BLOCK - pendingLength, end);
    buffer(bytes, 0, offset);
    if (pendingLength < BLOCK) return;
    compress(state, pending, 0);
    pendingLength = 0;
  }
  for (; offset + BLOCK <= end; offset += BLOCK) compress(state, bytes, offset);
  buffer(bytes, offset, end);
}

/** Pads and compresses the last block: `state` holds the digest. */
function finish(): void {
  const bits = totalLength * 8;
  pending[pendingLength++] = 0x80;
  if (pendingLength > BLOCK - 8) {
    pending.fill(0, pendingLength);
    compress(state, pending, 0);
    pendingLength = 0;
  }
  pending.fill(0, pendingLength, BLOCK - 8);
  const high = Math.floor(bits / 0x100000000);
  const low = bits >>> 0;
  pending[56] = high >>> 24;
  pending[57] = high >>> 16;
  pending[58] = high >>> 8;
  pending[59] = high;
  pending[60] = low >>> 24;
  pending[61] = low >>> 16;
  pending[62] = low >>> 8;
  pending[63] = low;
  compress(state, pending, 0);
}

/** Writes `state` big-endian into `pending[0, 32)`. */
function stateBytes(): void {
  for (let i = 0; i < 8; i++) {
    const word = state[i];
    pending[i * 4] = word >>> 24;
    pending[i * 4 + 1] = word >>> 16;
    pending[i * 4 + 2] = word >>> 8;
    pending[i * 4 + 3] = word;
  }
}

const HEX = encoder.encode("0123456789abcdef");
const BASE64 = encoder.encode(
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
);
/**
 * The digest's text is written here as ASCII and decoded once: building it
 * with `+=` left a chain of intermediate strings per digest (≈ 1.7 KB).
 */
const hexText = new Uint8Array(64);
const base64Text = new Uint8Array(44);
const ascii = new TextDecoder();

/** The digest in `pending[0, 32)` as lowercase hex. */
function hex(): string {
  for (let i = 0; i < 32; i++) {
    hexText[i * 2] = HEX[pending[i] >>> 4];
    hexText[i * 2 + 1] = HEX[pending[i] & 15];
  }
  return ascii.decode(hexText);
}

/** The digest in `pending[0, 32)` as padded base64. */
function base64(): string {
  let i = 0;
  let o = 0;
  for (; i + 3 <= 32; i += 3) {
    const n = (pending[i] << 16) | (pending[i + 1] << 8) | pending[i + 2];
    base64Text[o++] = BASE64[n >>> 18];
    base64Text[o++] = BASE64[(n >>> 12) & 63];
    base64Text[o++] = BASE64[(n >>> 6) & 63];
    base64Text[o++] = BASE64[n & 63];
  }
  // 32 = 30 + 2: two bytes left.
  const n = (pending[i] << 16) | (pending[i + 1] << 8);
  base64Text[o++] = BASE64[n >>> 18];
  base64Text[o++] = BASE64[(n >>> 12) & 63];
  base64Text[o++] = BASE64[(n >>> 6) & 63];
  base64Text[o] = 61; // "="
  return ascii.decode(base64Text);
}

/** An HMAC-SHA256 key with its padded inner and outer blocks already hashed. */
export class HmacSha256Key {
  /** The key's bytes as given. */
  readonly bytes: Uint8Array;
  #inner = new Int32Array(8);
  #outer = new Int32Array(8);

  /** @param key The key bytes (longer than 64 bytes: hashed first, as RFC 2104 says). */
  constructor(key: Uint8Array) {
    this.bytes = key.slice();
    const padded = new Uint8Array(BLOCK);
    if (key.length > BLOCK) {
      begin(IV, 0);
      update(key);
      finish();
      stateBytes();
      padded.set(pending.subarray(0, 32));
    } else {
      padded.set(key);
    }
    const block = new Uint8Array(BLOCK);
    for (let i = 0; i < BLOCK; i++) block[i] = padded[i] ^ 0x36;
    this.#inner.set(IV);
    compress(this.#inner, block, 0);
    for (let i = 0; i < BLOCK; i++) block[i] = padded[i] ^ 0x5c;
    this.#outer.set(IV);
    compress(this.#outer, block, 0);
  }

  /**
   * The HMAC of `text`'s UTF-8 bytes followed by `bytes`.
   *
   * @param encoding `hex` (lowercase) or `base64` (padded).
   */
  digest(text: string, bytes: Uint8Array, encoding: "hex" | "base64"): string {
    begin(this.#inner, BLOCK);
    if (text) {
      const { read, written } = encoder.encodeInto(text, textScratch);
      if (read === text.length) update(textScratch, written);
      else update(encoder.encode(text));
    }
    update(bytes);
    finish();
    stateBytes();
    begin(this.#outer, BLOCK);
    update(pending, 32);
    finish();
    stateBytes();
    return encoding === "hex" ? hex() : base64();
  }
}
