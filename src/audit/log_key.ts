/**
 * The audit log's signing keys: an Ed25519 key made at first start, its
 * seed sealed with the data key and kept in the store, so every instance of
 * one database signs with the same key. A rotation adds a new key and
 * retires the old one, which stays listed so the checkpoints and receipts
 * it signed still verify.
 *
 * Receipts are signed here too: the message is the UTF-8 of
 * `toolgate-receipt/v1\n<log>\n<seq>\n<entry_hash>\n<timestamp>\n`, the
 * signature base64 of the 4-byte key ID followed by the 64-byte Ed25519
 * signature (as in a signed note's signature line).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createPrivateKey, type KeyObject, sign } from "node:crypto";
import { GatewayError } from "../errors/mod.ts";
import type { AuditLogKey, Store } from "../store/mod.ts";
import {
  formatVerifierKey,
  NoteError,
  noteKeyId,
  type NoteSigner,
  noteSigner,
  type NoteVerifier,
  parseVerifierKey,
} from "./signed_note.ts";

/** PKCS #8 prefix of an Ed25519 private key around its 32-byte seed. */
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/** Associated data of a sealed seed: binds it to its key id. */
const AAD_PREFIX = "toolgate-audit-log-key-v1:";

/** What a receipt holds (`_meta["io.toolgate/receipt"]`, header `Toolgate-Receipt`). */
export type Receipt = {
  /** The log's name (its checkpoints' origin). */
  log: string;
  seq: number;
  entry_hash: string;
  timestamp: string;
  /** Base64 of the key ID (4 bytes) and the Ed25519 signature of {@linkcode receiptMessage}. */
  signature: string;
};

/** The bytes a receipt's signature covers. */
export function receiptMessage(receipt: Omit<Receipt, "signature">): Uint8Array {
  return new TextEncoder().encode(
    `toolgate-receipt/v1\n${receipt.log}\n${receipt.seq}\n${receipt.entry_hash}\n${receipt.timestamp}\n`,
  );
}

/** One key as listed: its verifier key and whether it still signs. */
export interface ListedLogKey {
  id: string;
  /** Signed-note verifier key: `<name>+<hex id>+<base64(0x01 || public key)>`. */
  verifier_key: string;
  created_at: string;
  retired_at?: string;
}

/** A key ID as stored and listed: 8 lowercase hex digits. */
export function hexId(id: number): string {
  return id.toString(16).padStart(8, "0");
}

/** The signed-note verifier of a stored key (its public key, not its seed). */
export function verifierOf(record: AuditLogKey): NoteVerifier {
  const publicKey = new Uint8Array(Buffer.from(record.public_key, "base64"));
  return { name: record.name, id: noteKeyId(record.name, publicKey), publicKey };
}

async function makeKey(
  name: string,
  now: string,
): Promise<{ record: AuditLogKey; seed: Uint8Array }> {
  const seed = crypto.getRandomValues(new Uint8Array(32));
  const signer = await noteSigner(name, seed);
  const publicKey = parseVerifierKey(signer.verifierKey).publicKey;
  return {
    seed,
    record: {
      id: hexId(signer.id),
      name,
      public_key: Buffer.from(publicKey).toString("base64"),
      sealed_seed: "",
      created_at: now,
    },
  };
}

/** The log's keys as loaded: the current signer and every verifier. */
export class LogKeys {
  /** The key that signs now. */
  readonly signer: NoteSigner;
  /** Every key's verifier, the current first. */
  readonly verifiers: readonly NoteVerifier[];
  /** The keys as listed (`GET /audit/key`, `toolgate audit key`), the current first. */
  readonly listed: readonly ListedLogKey[];
  /** The key retired last, when it retired after `since` (it co-signs the next checkpoint). */
  readonly previous: NoteSigner | undefined;

  /** The current key for receipts: `node:crypto` signs synchronously, 4× faster than Web Crypto. */
  #privateKey: KeyObject;
  #keyId: Buffer;

  /**
   * @param signer The current key.
   * @param seed Its seed.
   * @param records Every stored key, the current first.
   * @param previous The last retired key's signer, if any.
   */
  constructor(
    signer: NoteSigner,
    seed: Uint8Array,
    records: readonly AuditLogKey[],
    previous?: NoteSigner,
  ) {
    this.signer = signer;
    this.previous = previous;
    this.#privateKey = createPrivateKey({
      key: Buffer.concat([PKCS8_PREFIX, seed]),
      format: "der",
      type: "pkcs8",
    });
    this.#keyId = Buffer.alloc(4);
    this.#keyId.writeUInt32BE(signer.id);
    this.verifiers = records.map(verifierOf);
    this.listed = records.map((record, i) => ({
      id: record.id,
      verifier_key: formatVerifierKey(record.name, this.verifiers[i].publicKey),
      created_at: record.created_at,
      ...(record.retired_at ? { retired_at: record.retired_at } : {}),
    }));
  }

  /** The current key's ID, as stored (8 hex digits). */
  get currentId(): string {
    return hexId(this.signer.id);
  }

  /** Signs a receipt of an entry. */
  receipt(entry: Omit<Receipt, "signature" | "log">): Receipt {
    const fields = {
      log: this.signer.name,
      seq: entry.seq,
      entry_hash: entry.entry_hash,
      timestamp: entry.timestamp,
    };
    const signature = sign(null, receiptMessage(fields), this.#privateKey);
    return { ...fields, signature: Buffer.concat([this.#keyId, signature]).toString("base64") };
  }
}

/** Options of {@linkcode loadLogKeys}. */
export interface LoadLogKeysOptions {
  /** The store holding the keys (and the data key sealing them). */
  store: Store;
  /** The name a new key gets: the log's origin. */
  name: string;
  /** Make the first key when the store has none. @default true */
  create?: boolean;
  /** Clock. @default Date.now */
  now?: () => number;
}

async function openSeed(
  store: Store,
  record: AuditLogKey,
): Promise<{ signer: NoteSigner; seed: Uint8Array }> {
  const seed = new Uint8Array(
    Buffer.from(await store.dataKey.open(AAD_PREFIX + record.id, record.sealed_seed), "base64"),
  );
  let signer: NoteSigner;
  try {
    signer = await noteSigner(record.name, seed);
  } catch (error) {
    if (!(error instanceof NoteError)) throw error;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored audit log key ${record.id} is unreadable: ${error.message}`,
    );
  }
  const publicKey = Buffer.from(parseVerifierKey(signer.verifierKey).publicKey).toString("base64");
  if (hexId(signer.id) !== record.id || publicKey !== record.public_key) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored audit log key ${record.id} does not match its seed`,
    );
  }
  return { signer, seed };
}

async function storeNew(
  store: Store,
  name: string,
  now: string,
  retiring: { id: string; retired_at: string } | null,
): Promise<boolean> {
  const { record, seed } = await makeKey(name, now);
  record.sealed_seed = await store.dataKey.seal(
    AAD_PREFIX + record.id,
    Buffer.from(seed).toString("base64"),
  );
  return await store.audit.addKey(record, retiring);
}

/**
 * Loads the log's keys, making the first one when there is none (of
 * instances starting together, one makes it, the others load it).
 *
 * @throws {GatewayError} `NOT_FOUND` when there is none and `create` is
 * false; `STORE_CORRUPT` when a key cannot be opened with the data key.
 */
export async function loadLogKeys(options: LoadLogKeysOptions): Promise<LogKeys> {
  const { store, name, create = true, now = Date.now } = options;
  for (let attempt = 0; attempt < 5; attempt++) {
    const records = await store.audit.readKeys();
    const current = records[0];
    if (current && current.retired_at === undefined) {
      const { signer, seed } = await openSeed(store, current);
      const last = records[1];
      const previous = last ? (await openSeed(store, last)).signer : undefined;
      return new LogKeys(signer, seed, records, previous);
    }
    if (!create) {
      throw new GatewayError(
        "NOT_FOUND",
        "The audit log has no signing key yet: it is made when the server first starts",
      );
    }
    await storeNew(store, name, new Date(now()).toISOString(), null);
  }
  throw new GatewayError("UNAVAILABLE", "Cannot load the audit log key: the keys kept changing");
}

/**
 * Makes a new signing key and retires the current one: new checkpoints and
 * receipts are signed with the new key (the first checkpoint after by both),
 * and the old one stays listed, so what it signed still verifies.
 *
 * @returns The keys after the rotation.
 * @throws {GatewayError} `CONFLICT` when another instance rotated meanwhile.
 */
export async function rotateLogKey(options: LoadLogKeysOptions): Promise<LogKeys> {
  const { store, name, now = Date.now } = options;
  const keys = await loadLogKeys(options);
  const at = new Date(now()).toISOString();
  const id = hexId(keys.signer.id);
  if (!await storeNew(store, name, at, { id, retired_at: at })) {
    throw new GatewayError("CONFLICT", "Cannot rotate the audit log key: it was rotated meanwhile");
  }
  return await loadLogKeys({ ...options, create: false });
}
