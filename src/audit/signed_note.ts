/**
 * C2SP signed notes (https://c2sp.org/signed-note) with Ed25519 keys: the
 * format transparency-log checkpoints are signed in. A note is text ending
 * in a newline, a blank line, then one line per signature:
 * `— <key name> <base64(4-byte key ID || signature)>`. A verifier key is
 * `<name>+<hex key ID>+<base64(0x01 || public key)>`; the key ID is the
 * first 4 bytes of SHA-256(name || "\n" || 0x01 || public key).
 *
 * Written by hand on Web Crypto's Ed25519: the npm ports of Go's
 * `sumdb/note` are single-author copies; the format is short, and a
 * known-answer test pins it to Go's reference vector.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";

/** The signature type byte of Ed25519 keys. */
const ED25519 = 0x01;

/** PKCS #8 prefix of an Ed25519 private key around its 32-byte seed. */
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

const encoder = new TextEncoder();

/** A key that signs notes. */
export interface NoteSigner {
  /** The key's name (a log's origin, e.g. `toolgate.example/audit`). */
  name: string;
  /** Its key ID. */
  id: number;
  /** The verifier key others check its notes with. */
  verifierKey: string;
  /** Signs `message`. */
  sign(message: Uint8Array): Promise<Uint8Array>;
}

/** A parsed verifier key. */
export interface NoteVerifier {
  name: string;
  id: number;
  /** The raw 32-byte Ed25519 public key. */
  publicKey: Uint8Array;
}

/** A note that does not parse, or that no known key signed. */
export class NoteError extends Error {
  override name = "NoteError";
}

function checkName(name: string): void {
  if (!name || /[\s+]/u.test(name)) {
    throw new NoteError(`Invalid key name "${name}": it must be non-empty, without spaces or +`);
  }
}

/** The key ID of an Ed25519 key: the first 4 bytes of SHA-256(name || 0x0A || 0x01 || key). */
export function noteKeyId(name: string, publicKey: Uint8Array): number {
  const digest = createHash("sha256")
    .update(encoder.encode(name))
    .update(new Uint8Array([0x0a, ED25519]))
    .update(publicKey)
    .digest();
  return digest.readUInt32BE(0);
}

/** The verifier key text of an Ed25519 public key. */
export function formatVerifierKey(name: string, publicKey: Uint8Array): string {
  checkName(name);
  const id = noteKeyId(name, publicKey).toString(16).padStart(8, "0");
  const typed = Buffer.concat([Buffer.from([ED25519]), publicKey]);
  return `${name}+${id}+${typed.toString("base64")}`;
}

/**
 * Parses a verifier key (`<name>+<hex id>+<base64(0x01 || key)>`).
 *
 * @throws {NoteError} when it is malformed, not Ed25519, or its ID does not match.
 */
export function parseVerifierKey(text: string): NoteVerifier {
  const match = /^([^\s+]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+={0,2})$/.exec(text.trim());
  if (!match) {
    throw new NoteError(`Invalid verifier key: expected <name>+<8 hex digits>+<base64 key>`);
  }
  const [, name, hexId, b64] = match;
  const typed = new Uint8Array(Buffer.from(b64, "base64"));
  if (typed.length !== 33 || typed[0] !== ED25519) {
    throw new NoteError(`Invalid verifier key ${name}: not an Ed25519 key (type 0x01, 32 bytes)`);
  }
  const publicKey = typed.slice(1);
  const id = parseInt(hexId, 16);
  if (noteKeyId(name, publicKey) !== id) {
    throw new NoteError(`Invalid verifier key ${name}: its key ID ${hexId} does not match its key`);
  }
  return { name, id, publicKey };
}

/**
 * A signer from an Ed25519 seed (32 bytes).
 *
 * @example
 * ```ts
 * const signer = await noteSigner("toolgate.example/audit", crypto.getRandomValues(new Uint8Array(32)));
 * const note = await signNote("hello\n", [signer]);
 * ```
 */
export async function noteSigner(name: string, seed: Uint8Array): Promise<NoteSigner> {
  checkName(name);
  if (seed.length !== 32) {
    throw new NoteError(`Invalid Ed25519 seed: ${seed.length} bytes, expected 32`);
  }
  const pkcs8 = new Uint8Array(Buffer.concat([PKCS8_PREFIX, seed]));
  const privateKey = await crypto.subtle.importKey("pkcs8", pkcs8, "Ed25519", true, ["sign"]);
  const jwk = await crypto.subtle.exportKey("jwk", privateKey);
  const publicKey = new Uint8Array(Buffer.from(jwk.x!, "base64url"));
  return {
    name,
    id: noteKeyId(name, publicKey),
    verifierKey: formatVerifierKey(name, publicKey),
    sign: async (message) =>
      new Uint8Array(
        await crypto.subtle.sign("Ed25519", privateKey, message as Uint8Array<ArrayBuffer>),
      ),
  };
}

/**
 * Signs `text` (which must end with a newline) with every signer.
 *
 * @throws {NoteError} when the text does not end with a newline.
 */
export async function signNote(text: string, signers: readonly NoteSigner[]): Promise<string> {
  if (!text.endsWith("\n")) throw new NoteError("Invalid note text: it must end with a newline");
  const message = encoder.encode(text);
  let lines = "";
  for (const signer of signers) {
    const id = Buffer.alloc(4);
    id.writeUInt32BE(signer.id);
    const signature = Buffer.concat([id, await signer.sign(message)]);
    lines += `— ${signer.name} ${signature.toString("base64")}\n`;
  }
  return `${text}\n${lines}`;
}

/**
 * Opens a signed note: its text, when at least one signature of a known
 * key verifies (signatures of unknown keys are skipped).
 *
 * @returns The text and the names of the keys whose signatures verified.
 * @throws {NoteError} when it is malformed, or no known key's signature verifies.
 */
export async function openNote(
  note: string,
  verifiers: readonly NoteVerifier[],
): Promise<{ text: string; verifiedBy: string[] }> {
  const split = note.lastIndexOf("\n\n");
  if (split < 0 || !note.endsWith("\n")) {
    throw new NoteError("Malformed note: expected the text, a blank line and signature lines");
  }
  const text = note.slice(0, split + 1);
  const message = encoder.encode(text);
  const verifiedBy: string[] = [];
  for (const line of note.slice(split + 2, -1).split("\n")) {
    const match = /^— (\S+) ([A-Za-z0-9+/]+={0,2})$/u.exec(line);
    if (!match) throw new NoteError(`Malformed signature line: ${JSON.stringify(line)}`);
    const [, name, b64] = match;
    const blob = new Uint8Array(Buffer.from(b64, "base64"));
    if (blob.length < 5) throw new NoteError(`Malformed signature of ${name}: too short`);
    const id = Buffer.from(blob.subarray(0, 4)).readUInt32BE(0);
    const verifier = verifiers.find((v) => v.name === name && v.id === id);
    if (!verifier) continue;
    const key = await crypto.subtle.importKey(
      "raw",
      verifier.publicKey as Uint8Array<ArrayBuffer>,
      "Ed25519",
      false,
      ["verify"],
    );
    if (await crypto.subtle.verify("Ed25519", key, blob.subarray(4), message)) {
      verifiedBy.push(name);
    }
  }
  if (!verifiedBy.length) {
    throw new NoteError("Unverified note: no signature of a known key verifies");
  }
  return { text, verifiedBy };
}
