/**
 * An independent verifier for toolgate's verifiable audit log, written from the
 * public specs only so end-to-end tests can check what the real server serves
 * without trusting the code that produced it:
 *
 * - RFC 9162 §2.1: Merkle tree hash, inclusion (§2.1.3.2) and consistency
 *   (§2.1.4.2) proof verification;
 * - C2SP signed-note (https://c2sp.org/signed-note), Ed25519 keys only;
 * - C2SP tlog-checkpoint (https://c2sp.org/tlog-checkpoint);
 * - toolgate's leaf data and receipts (documented on `entryLeaf` and
 *   `verifyReceipt`).
 *
 * It imports nothing: Web Crypto (SHA-256, Ed25519) and `atob`/`btoa` only.
 *
 * @module
 */

const encoder = new TextEncoder();
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const ED25519 = 0x01;

/** Decodes standard, padded base64; throws on anything else (including non-canonical padding bits). */
export function fromBase64(s: string): Uint8Array {
  if (!BASE64.test(s)) throw new Error(`invalid base64: ${JSON.stringify(s)}`);
  const bytes = Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  if (toBase64(bytes) !== s) throw new Error(`non-canonical base64: ${JSON.stringify(s)}`);
  return bytes;
}

/** Encodes bytes as standard, padded base64. */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

function concat(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

async function sha256(...parts: Uint8Array[]): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", concat(...parts)));
}

async function ed25519Verify(
  publicKey: Uint8Array,
  signature: Uint8Array,
  message: Uint8Array,
): Promise<boolean> {
  if (signature.length !== 64) return false;
  const key = await crypto.subtle.importKey("raw", concat(publicKey), "Ed25519", false, [
    "verify",
  ]);
  return await crypto.subtle.verify("Ed25519", key, concat(signature), concat(message));
}

// ---------------------------------------------------------------- signed notes

/** A parsed C2SP signed-note Ed25519 verifier key. */
export interface VerifierKey {
  name: string;
  keyId: Uint8Array;
  publicKey: Uint8Array;
}

/** A key name is non-empty, has no "+" and no (Unicode) white space. */
function isValidKeyName(name: string): boolean {
  return name.length > 0 && !name.includes("+") && !/\s/u.test(name) && name.isWellFormed();
}

/**
 * Parses `<name>+<8 hex digit key id>+<base64(0x01 || 32-byte Ed25519 public key)>`,
 * checking the algorithm byte and that the key id is the first 4 bytes of
 * SHA-256(name || "\n" || 0x01 || publicKey).
 */
export async function parseVerifierKey(text: string): Promise<VerifierKey> {
  const first = text.indexOf("+");
  const second = text.indexOf("+", first + 1);
  if (first < 0 || second < 0) throw new Error(`verifier key: expected name+id+key: ${text}`);
  const name = text.slice(0, first);
  const idHex = text.slice(first + 1, second);
  if (!isValidKeyName(name)) throw new Error(`verifier key: invalid key name: ${name}`);
  if (!/^[0-9a-fA-F]{8}$/.test(idHex)) throw new Error(`verifier key: invalid key id: ${idHex}`);
  const key = fromBase64(text.slice(second + 1));
  if (key.length !== 33) throw new Error(`verifier key: expected 33 key bytes, got ${key.length}`);
  if (key[0] !== ED25519) throw new Error(`verifier key: unknown algorithm byte ${key[0]}`);
  const publicKey = key.slice(1);
  const keyId = Uint8Array.from(idHex.match(/../g)!, (h) => parseInt(h, 16));
  const expected = (await sha256(encoder.encode(name + "\n"), key)).slice(0, 4);
  if (!equalBytes(keyId, expected)) throw new Error(`verifier key: key id does not match key`);
  return { name, keyId, publicKey };
}

/**
 * Opens a C2SP signed note: splits it at the last "\n\n" into text (ending in
 * "\n") and signature lines `— <name> <base64(key id || signature)>`, and checks
 * every signature by a given key (name and key id both match). Signatures by
 * other keys are ignored; a bad signature by a given key, a malformed note, or
 * no verified signature at all throws. Returns the text and the names of the
 * keys that signed it.
 */
export async function verifyNoteSignatures(
  note: string,
  verifierKeys: string[],
): Promise<{ text: string; signedBy: string[] }> {
  if (!note.isWellFormed() || [...note].some((c) => c < " " && c !== "\n")) {
    throw new Error("note: not valid UTF-8 text without control characters");
  }
  const split = note.lastIndexOf("\n\n");
  if (split < 0 || !note.endsWith("\n")) throw new Error("note: no signature block");
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2, -1).split("\n");
  const keys = await Promise.all(verifierKeys.map(parseVerifierKey));
  const message = encoder.encode(text);
  const signedBy: string[] = [];
  for (const line of lines) {
    const match = /^\u2014 ([^ ]+) ([^ ]+)$/.exec(line);
    if (!match || !isValidKeyName(match[1])) throw new Error(`note: malformed signature line`);
    const [, name, b64] = match;
    const sig = fromBase64(b64);
    if (sig.length < 5) throw new Error("note: signature too short");
    const key = keys.find((k) => k.name === name && equalBytes(k.keyId, sig.subarray(0, 4)));
    if (!key) continue; // by a key we were not given: ignored
    if (!(await ed25519Verify(key.publicKey, sig.subarray(4), message))) {
      throw new Error(`note: invalid signature by ${name}`);
    }
    if (!signedBy.includes(name)) signedBy.push(name);
  }
  if (signedBy.length === 0) throw new Error("note: no signature by a known key");
  return { text, signedBy };
}

/** An opened C2SP tlog-checkpoint. */
export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
  extensions: string[];
  signedBy: string[];
}

/**
 * Verifies a signed checkpoint note (see `verifyNoteSignatures`) and parses its
 * body: origin, decimal tree size (no leading zeros), base64 32-byte root hash,
 * then optional non-empty extension lines. Throws when anything is wrong.
 */
export async function openCheckpoint(note: string, verifierKeys: string[]): Promise<Checkpoint> {
  const { text, signedBy } = await verifyNoteSignatures(note, verifierKeys);
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3) throw new Error("checkpoint: fewer than three lines");
  const [origin, sizeText, rootText, ...extensions] = lines;
  if (origin === "") throw new Error("checkpoint: empty origin");
  if (!/^(0|[1-9][0-9]*)$/.test(sizeText)) throw new Error(`checkpoint: bad size: ${sizeText}`);
  const size = Number(sizeText);
  if (!Number.isSafeInteger(size)) throw new Error(`checkpoint: size too large: ${sizeText}`);
  const root = fromBase64(rootText);
  if (root.length !== 32) throw new Error("checkpoint: root hash is not 32 bytes");
  if (extensions.includes("")) throw new Error("checkpoint: empty extension line");
  return { origin, size, root, extensions, signedBy };
}

// ---------------------------------------------------------------- Merkle trees

/** RFC 9162 leaf hash: SHA-256(0x00 || data). */
export async function leafHash(data: Uint8Array): Promise<Uint8Array> {
  return await sha256(Uint8Array.of(0x00), data);
}

/** RFC 9162 interior node hash: SHA-256(0x01 || left || right). */
export async function nodeHash(left: Uint8Array, right: Uint8Array): Promise<Uint8Array> {
  return await sha256(Uint8Array.of(0x01), left, right);
}

/** RFC 9162 MTH over leaf hashes, by the RFC's recursion; the empty tree hashes to SHA-256(""). */
export async function rootFromLeaves(leafHashes: Uint8Array[]): Promise<Uint8Array> {
  const n = leafHashes.length;
  if (n === 0) return await sha256();
  if (n === 1) return leafHashes[0];
  let k = 1;
  while (k * 2 < n) k *= 2; // the largest power of two smaller than n
  return await nodeHash(
    await rootFromLeaves(leafHashes.slice(0, k)),
    await rootFromLeaves(leafHashes.slice(k)),
  );
}

const isSize = (n: number) => Number.isSafeInteger(n) && n >= 0;
const isHash = (h: Uint8Array) => h instanceof Uint8Array && h.length === 32;
const lsb = (n: number) => n % 2 === 1;
const shr = (n: number) => Math.floor(n / 2);

/** RFC 9162 §2.1.3.2: verifies an inclusion proof for `leafHash` at `leafIndex` in a tree of `treeSize`. */
export async function verifyInclusion(
  leafIndex: number,
  treeSize: number,
  leafHash: Uint8Array,
  proof: Uint8Array[],
  root: Uint8Array,
): Promise<boolean> {
  if (!isSize(leafIndex) || !isSize(treeSize) || !isHash(leafHash) || !isHash(root)) return false;
  if (!proof.every(isHash)) return false;
  if (leafIndex >= treeSize) return false; // 1
  let fn = leafIndex, sn = treeSize - 1; // 2
  let r = leafHash; // 3
  for (const p of proof) { // 4
    if (sn === 0) return false; // 4a
    if (lsb(fn) || fn === sn) { // 4b
      r = await nodeHash(p, r);
      while (!lsb(fn) && fn !== 0) [fn, sn] = [shr(fn), shr(sn)]; // only when LSB(fn) is unset
    } else {
      r = await nodeHash(r, p);
    }
    [fn, sn] = [shr(fn), shr(sn)]; // 4c
  }
  return sn === 0 && equalBytes(r, root); // 5
}

/**
 * RFC 9162 §2.1.4.2: verifies that the tree of `size2` with `root2` extends the
 * tree of `size1` with `root1`. Equal sizes need an empty proof and equal roots;
 * size 0 needs an empty proof and root1 = SHA-256("") (the empty tree is a
 * prefix of every tree); size1 > size2 is refused.
 */
export async function verifyConsistency(
  size1: number,
  size2: number,
  root1: Uint8Array,
  root2: Uint8Array,
  proof: Uint8Array[],
): Promise<boolean> {
  if (!isSize(size1) || !isSize(size2) || !isHash(root1) || !isHash(root2)) return false;
  if (!proof.every(isHash) || size1 > size2) return false;
  if (size1 === size2) return proof.length === 0 && equalBytes(root1, root2);
  if (size1 === 0) return proof.length === 0 && equalBytes(root1, await sha256());
  if (proof.length === 0) return false; // 1
  let path = proof;
  let p2 = size1;
  while (!lsb(p2)) p2 = shr(p2);
  if (p2 === 1) path = [root1, ...proof]; // 2: size1 is an exact power of 2
  let fn = size1 - 1, sn = size2 - 1; // 3
  while (lsb(fn)) [fn, sn] = [shr(fn), shr(sn)]; // 4
  let fr = path[0], sr = path[0]; // 5
  for (const c of path.slice(1)) { // 6
    if (sn === 0) return false; // 6a
    if (lsb(fn) || fn === sn) { // 6b
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      while (!lsb(fn) && fn !== 0) [fn, sn] = [shr(fn), shr(sn)]; // only when LSB(fn) is unset
    } else {
      sr = await nodeHash(sr, c);
    }
    [fn, sn] = [shr(fn), shr(sn)]; // 6c
  }
  return equalBytes(fr, root1) && equalBytes(sr, root2) && sn === 0; // 7
}

// ---------------------------------------------------------------- toolgate

/**
 * toolgate's leaf data for an entry: its `entry_hash` (`"sha256:"` + 64
 * lowercase hex digits) as the 32 raw digest bytes. Throws on a malformed hash.
 */
export function entryLeaf(entryHash: string): Uint8Array {
  if (!/^sha256:[0-9a-f]{64}$/.test(entryHash)) {
    throw new Error(`malformed entry_hash: ${JSON.stringify(entryHash)}`);
  }
  return Uint8Array.from(entryHash.slice(7).match(/../g)!, (h) => parseInt(h, 16));
}

/** A toolgate receipt as served. */
export interface Receipt {
  log: string;
  seq: number;
  entry_hash: string;
  timestamp: string;
  signature: string;
}

/**
 * Verifies a toolgate receipt: `signature` is base64(4-byte key id || Ed25519
 * signature) over the UTF-8 of `"toolgate-receipt/v1\n" + log + "\n" + seq +
 * "\n" + entry_hash + "\n" + timestamp + "\n"`, by the given key named `log`
 * with that key id. Malformed receipts are refused (false).
 */
export async function verifyReceipt(receipt: Receipt, verifierKeys: string[]): Promise<boolean> {
  const { log, seq, entry_hash, timestamp, signature } = receipt;
  if (!isSize(seq) || [log, entry_hash, timestamp].some((f) => f.includes("\n"))) return false;
  if (!/^sha256:[0-9a-f]{64}$/.test(entry_hash)) return false;
  let sig: Uint8Array;
  try {
    sig = fromBase64(signature);
  } catch {
    return false;
  }
  if (sig.length !== 68) return false;
  const keys = await Promise.all(verifierKeys.map(parseVerifierKey));
  const key = keys.find((k) => k.name === log && equalBytes(k.keyId, sig.subarray(0, 4)));
  if (!key) return false;
  const message = `toolgate-receipt/v1\n${log}\n${seq}\n${entry_hash}\n${timestamp}\n`;
  return await ed25519Verify(key.publicKey, sig.subarray(4), encoder.encode(message));
}
