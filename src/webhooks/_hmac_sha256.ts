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
import { SHA256_BLOCK, SHA256_IV as IV, sha256Compress as compress } from "../sha256.ts";

const BLOCK = SHA256_BLOCK;

// Scratch of the one signature being computed (signing is synchronous, so never shared).
const state = new Int32Array(8);
const pending = new Uint8Array(BLOCK);
let pendingLength = 0;
let totalLength = 0;
/** Text given to {@linkcode HmacSha256Key.digest}, encoded here when it fits. */
const textScratch = new Uint8Array(512);
const encoder = new TextEncoder();

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
