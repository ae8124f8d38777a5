/**
 * The RFC 9162 (Certificate Transparency v2) Merkle tree hash, §2.1: leaf
 * `SHA-256(0x00 || data)`, node `SHA-256(0x01 || left || right)`, split at
 * the largest power of two below the size; inclusion proofs (§2.1.3) and
 * consistency proofs (§2.1.4), made and verified.
 *
 * Written by hand: no well-kept npm package does RFC 9162 proofs on plain
 * bytes without pulling in a whole log client, and the algorithms are a
 * page of the RFC. Known-answer tests pin it to the Certificate
 * Transparency reference vectors. These functions work on the leaf hashes
 * in memory: they are the reference the store-backed tree is checked
 * against, and what a verifier outside toolgate runs.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { SHA256_IV, sha256Compress, sha256StateBytes } from "../sha256.ts";

/** Bytes of a hash. */
export const HASH_BYTES = 32;

function sha256(...parts: Uint8Array[]): Uint8Array {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return new Uint8Array(hash.digest());
}

const LEAF_PREFIX = new Uint8Array([0]);

/**
 * The padded message of a leaf over 32 bytes: `0x00 || data || 0x80 ||
 * zeros || 264` (bits) fits one block; of a node: `0x01 || left || right
 * || 0x80 || zeros || 520` two. Filled in place, hashed with the
 * compression function: no allocation but the result.
 */
const leafBlock = new Uint8Array(64);
leafBlock[33] = 0x80;
leafBlock[62] = (33 * 8) >>> 8;
leafBlock[63] = (33 * 8) & 0xff;
const nodeBlocks = new Uint8Array(128);
nodeBlocks[0] = 1;
nodeBlocks[65] = 0x80;
nodeBlocks[126] = (65 * 8) >>> 8;
nodeBlocks[127] = (65 * 8) & 0xff;
const state = new Int32Array(8);

/** The hash of a leaf: `SHA-256(0x00 || data)`. */
export function leafHash(data: Uint8Array): Uint8Array {
  if (data.length !== HASH_BYTES) return sha256(LEAF_PREFIX, data);
  const out = new Uint8Array(HASH_BYTES);
  leafHashInto(data, 0, out, 0);
  return out;
}

/**
 * Writes the leaf hash of the 32 bytes `data[from, from + 32)` to
 * `out[at, at + 32)`, allocating nothing (the tree's appends).
 */
export function leafHashInto(data: Uint8Array, from: number, out: Uint8Array, at: number): void {
  for (let i = 0; i < HASH_BYTES; i++) leafBlock[1 + i] = data[from + i];
  state.set(SHA256_IV);
  sha256Compress(state, leafBlock, 0);
  sha256StateBytes(state, out, at);
}

/** The hash of an interior node: `SHA-256(0x01 || left || right)`. */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  const out = new Uint8Array(HASH_BYTES);
  nodeHashInto(left, 0, right, 0, out, 0);
  return out;
}

/**
 * Writes the node hash of `left[l, l + 32)` and `right[r, r + 32)` to
 * `out[at, at + 32)`, allocating nothing; `out` may overlap the inputs.
 */
export function nodeHashInto(
  left: Uint8Array,
  l: number,
  right: Uint8Array,
  r: number,
  out: Uint8Array,
  at: number,
): void {
  for (let i = 0; i < HASH_BYTES; i++) {
    nodeBlocks[1 + i] = left[l + i];
    nodeBlocks[33 + i] = right[r + i];
  }
  state.set(SHA256_IV);
  sha256Compress(state, nodeBlocks, 0);
  sha256Compress(state, nodeBlocks, 64);
  sha256StateBytes(state, out, at);
}

/** The largest power of two smaller than `n` (n ≥ 2). */
function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * The root of the tree over `leaves` (leaf hashes): `SHA-256()` for none.
 *
 * @example
 * ```ts
 * rootOf([leafHash(new Uint8Array())]); // 6e340b9c…
 * ```
 */
export function rootOf(leaves: readonly Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return sha256();
  if (leaves.length === 1) return leaves[0];
  const k = split(leaves.length);
  return nodeHash(rootOf(leaves.slice(0, k)), rootOf(leaves.slice(k)));
}

/**
 * The inclusion proof of leaf `index` in the tree over `leaves` (RFC 9162
 * §2.1.3.1), from the leaf up.
 *
 * @throws {RangeError} when `index` is not a leaf of the tree.
 */
export function inclusionProof(index: number, leaves: readonly Uint8Array[]): Uint8Array[] {
  if (!Number.isInteger(index) || index < 0 || index >= leaves.length) {
    throw new RangeError(`Invalid leaf index ${index}: the tree has ${leaves.length} leaves`);
  }
  const path = (m: number, tree: readonly Uint8Array[]): Uint8Array[] => {
    if (tree.length === 1) return [];
    const k = split(tree.length);
    return m < k
      ? [...path(m, tree.slice(0, k)), rootOf(tree.slice(k))]
      : [...path(m - k, tree.slice(k)), rootOf(tree.slice(0, k))];
  };
  return path(index, leaves);
}

/** Right-shifts both while `fn` is even and not 0: the climb past a left edge (§2.1.3.2, §2.1.4.2). */
function shiftWhileEven(fn: number, sn: number): [number, number] {
  while (fn % 2 === 0 && fn !== 0) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return [fn, sn];
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

/**
 * Whether `proof` shows leaf `index` with hash `leaf` in the tree of `size`
 * leaves whose root is `root` (RFC 9162 §2.1.3.2). `size` and `root` must
 * come together (from one signed checkpoint): the algorithm uses the size
 * only for the shape of the path, so a proof may also fit a neighbouring
 * size with the same root.
 */
export function verifyInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) {
    return false;
  }
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) [fn, sn] = shiftWhileEven(fn, sn);
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && equal(r, root);
}

/**
 * The consistency proof between the tree of the first `first` leaves and
 * the tree over all `leaves` (RFC 9162 §2.1.4.1). Empty when the sizes are
 * equal or `first` is 0.
 *
 * @throws {RangeError} when `first` is past the tree's size.
 */
export function consistencyProof(first: number, leaves: readonly Uint8Array[]): Uint8Array[] {
  if (!Number.isInteger(first) || first < 0 || first > leaves.length) {
    throw new RangeError(`Invalid size ${first}: the tree has ${leaves.length} leaves`);
  }
  if (first === 0 || first === leaves.length) return [];
  const subproof = (m: number, tree: readonly Uint8Array[], whole: boolean): Uint8Array[] => {
    if (m === tree.length) return whole ? [] : [rootOf(tree)];
    const k = split(tree.length);
    return m <= k
      ? [...subproof(m, tree.slice(0, k), whole), rootOf(tree.slice(k))]
      : [...subproof(m - k, tree.slice(k), false), rootOf(tree.slice(0, k))];
  };
  return subproof(first, leaves, true);
}

/**
 * Whether `proof` shows that the tree of `second` leaves with root
 * `secondRoot` extends the tree of `first` leaves with root `firstRoot`
 * (RFC 9162 §2.1.4.2): nothing of the first was changed or taken away.
 */
export function verifyConsistency(
  first: number,
  second: number,
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(second)) return false;
  if (first < 0 || first > second) return false;
  if (first === second) return proof.length === 0 && equal(firstRoot, secondRoot);
  // Every tree extends the empty one.
  if (first === 0) return proof.length === 0;
  if (proof.length === 0) return false;
  const path = Number.isInteger(Math.log2(first)) ? [firstRoot, ...proof] : [...proof];
  let fn = first - 1;
  let sn = second - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) [fn, sn] = shiftWhileEven(fn, sn);
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && equal(fr, firstRoot) && equal(sr, secondRoot);
}
