/**
 * The data directory's secret key: AES-256-GCM (Web Crypto) with 32 random
 * bytes in `<data_dir>/keychain.key` (mode 0600, created on first use, never
 * overwritten), or the key `TOOLGATE_SECRET_KEY` gives (several instances on
 * one PostgreSQL database share it). It seals the keychain's file backend
 * entries and the webhook signing secrets the store keeps.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { GatewayError } from "../errors/mod.ts";
import { writeFileOnce } from "./_data_dir.ts";

/** File name of the key inside the data directory. */
export const KEY_FILE = "keychain.key";

/** Bytes of the key. */
export const DATA_KEY_BYTES = 32;

/** Associated-data prefix of the keychain's file backend entries (followed by the entry's name). */
export const KEYCHAIN_AAD_PREFIX = "toolgate-keychain-v1:";

/** The label whose HMAC-SHA256 under the key is the key check value. */
export const KEY_CHECK_LABEL = "toolgate key check v1";

/** A key's check value: proves which key it is without revealing it. */
export interface KeyCheckValue {
  /** base64 of HMAC-SHA256(key, `toolgate key check v1`). */
  check: string;
  /** The first 16 hex digits of the check value, for people to compare. */
  fingerprint: string;
}

const IV_BYTES = 12;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** Options of {@linkcode DataKey}. */
export interface DataKeyOptions {
  /** The data directory holding `keychain.key`. */
  dataDir: string;
  /** The key itself (`TOOLGATE_SECRET_KEY`, decoded): the key file is then neither read nor made. */
  key?: Uint8Array;
  /** An in-memory store: a random key that lives as long as this object. @default false */
  memory?: boolean;
}

/** Where a {@linkcode DataKey} comes from. */
export type DataKeySource = "env" | "file" | "memory";

/** The data directory's key: loads it once, seals and opens secrets with it. */
export class DataKey {
  /** The key file (used when the source is `file`). */
  readonly path: string;
  /** Where the key comes from. */
  readonly source: DataKeySource;
  #options: DataKeyOptions;
  #key: Promise<CryptoKey> | undefined;
  #check: Promise<KeyCheckValue> | undefined;
  #guard: (() => Promise<void>) | undefined;

  /** @throws {RangeError} when `key` is not 32 bytes. */
  constructor(options: DataKeyOptions) {
    const { dataDir, key, memory = false } = options;
    if (key !== undefined && key.length !== DATA_KEY_BYTES) {
      throw new RangeError(`Invalid key: ${key.length} bytes, expected ${DATA_KEY_BYTES}`);
    }
    this.#options = memory && !key
      ? { ...options, key: crypto.getRandomValues(new Uint8Array(DATA_KEY_BYTES)) }
      : options;
    this.path = `${dataDir}/${KEY_FILE}`;
    this.source = memory ? "memory" : key ? "env" : "file";
  }

  /** The key's origin, for messages: `TOOLGATE_SECRET_KEY` or the key file's path. */
  describe(): string {
    return this.source === "env"
      ? "TOOLGATE_SECRET_KEY"
      : this.source === "memory"
      ? "the in-memory key"
      : this.path;
  }

  /**
   * The same key's source, loaded afresh on first use (a keychain made
   * later sees a key file replaced meanwhile).
   */
  reloaded(): DataKey {
    const { dataDir, key } = this.#options;
    const fresh = new DataKey({ dataDir, key, memory: this.source === "memory" });
    fresh.#guard = this.#guard;
    return fresh;
  }

  /**
   * Runs `guard` before anything is sealed with this key (and keys
   * {@linkcode DataKey.reloaded} from it): the store checks there that this
   * is the key its secrets are sealed with. A guard that throws stops the seal.
   */
  guardSeals(guard: () => Promise<void>): void {
    this.#guard = guard;
  }

  /**
   * The AES-GCM key, loaded once.
   *
   * @param create Make the key file when it is missing (to seal; opening needs it to exist).
   * @throws {GatewayError} `STORE_CORRUPT` when the key file is unreadable,
   * not 32 bytes, or missing and `create` is false.
   */
  cryptoKey(create: boolean): Promise<CryptoKey> {
    if (this.#key) return this.#key;
    const loading = this.#bytes(create).then((bytes) =>
      crypto.subtle.importKey("raw", bytes, "AES-GCM", false, ["encrypt", "decrypt"])
    );
    // Keep only a successful load; a missing file may be created by a later seal.
    this.#key = loading;
    loading.catch(() => {
      if (this.#key === loading) this.#key = undefined;
    });
    return loading;
  }

  /**
   * The key's check value and fingerprint, computed once.
   *
   * @param create Make the key file when it is missing.
   * @throws {GatewayError} `STORE_CORRUPT` as {@linkcode DataKey.cryptoKey}.
   */
  checkValue(create: boolean): Promise<KeyCheckValue> {
    if (this.#check) return this.#check;
    const computing = this.#bytes(create).then((bytes) => keyCheckValue(bytes));
    this.#check = computing;
    computing.catch(() => {
      if (this.#check === computing) this.#check = undefined;
    });
    return computing;
  }

  /** Whether the key exists (given, in memory, or its file present) without making it. */
  async exists(): Promise<boolean> {
    if (this.#options.key) return true;
    return (await this.#read()) !== undefined;
  }

  /**
   * Encrypts `plain`, bound to `aad` (associated data: the same `aad` is
   * needed to open it).
   *
   * @returns The base64 of the random 12-byte nonce followed by the ciphertext and tag.
   */
  async seal(aad: string, plain: string): Promise<string> {
    const { iv, data } = await this.encrypt(aad, encoder.encode(plain));
    const out = new Uint8Array(iv.length + data.length);
    out.set(iv);
    out.set(data, iv.length);
    return Buffer.from(out).toString("base64");
  }

  /**
   * Decrypts what {@linkcode DataKey.seal} made with the same `aad`.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the key is missing or is not
   * the one it was sealed with, or the text was altered.
   */
  async open(aad: string, sealed: string): Promise<string> {
    const bytes = new Uint8Array(Buffer.from(sealed, "base64"));
    if (bytes.length < IV_BYTES + 16) {
      throw new GatewayError("STORE_CORRUPT", "Cannot decrypt a stored secret: it is truncated");
    }
    return await this.decrypt(aad, {
      iv: bytes.subarray(0, IV_BYTES),
      data: bytes.subarray(IV_BYTES),
    });
  }

  /** Encrypts bytes bound to `aad`: a random nonce and the ciphertext with its tag. */
  async encrypt(
    aad: string,
    plain: Uint8Array,
  ): Promise<{ iv: Uint8Array<ArrayBuffer>; data: Uint8Array<ArrayBuffer> }> {
    await this.#guard?.();
    const key = await this.cryptoKey(true);
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const data = new Uint8Array(
      await crypto.subtle.encrypt(
        { name: "AES-GCM", iv, additionalData: encoder.encode(aad) },
        key,
        plain as Uint8Array<ArrayBuffer>,
      ),
    );
    return { iv, data };
  }

  /**
   * Decrypts what {@linkcode DataKey.encrypt} made with the same `aad`.
   *
   * @throws {GatewayError} `STORE_CORRUPT` as {@linkcode DataKey.open}.
   */
  async decrypt(aad: string, record: { iv: Uint8Array; data: Uint8Array }): Promise<string> {
    const key = await this.cryptoKey(false);
    try {
      const plain = await crypto.subtle.decrypt(
        {
          name: "AES-GCM",
          iv: record.iv as Uint8Array<ArrayBuffer>,
          additionalData: encoder.encode(aad),
        },
        key,
        record.data as Uint8Array<ArrayBuffer>,
      );
      return decoder.decode(plain);
    } catch (error) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot decrypt a stored secret: ${this.describe()} is not the key it was sealed with`,
        { cause: error },
      );
    }
  }

  async #bytes(create: boolean): Promise<Uint8Array<ArrayBuffer>> {
    const given = this.#options.key;
    if (given) return new Uint8Array(given);
    const existing = await this.#read();
    if (existing) return existing;
    if (!create) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot decrypt the stored secrets: ${this.path} is missing; restore it, or set the secrets again`,
      );
    }
    return await this.#create();
  }

  async #read(): Promise<Uint8Array<ArrayBuffer> | undefined> {
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = await Deno.readFile(this.path);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return undefined;
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot read ${this.path}: ${(error as Error).message}; the file was left untouched`,
        { cause: error },
      );
    }
    if (bytes.length !== DATA_KEY_BYTES) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot use ${this.path}: expected a ${DATA_KEY_BYTES}-byte key, found ${bytes.length} bytes; the file was left untouched (moving it away loses the stored secrets)`,
      );
    }
    return bytes;
  }

  async #create(): Promise<Uint8Array<ArrayBuffer>> {
    const { dataDir } = this.#options;
    const key = crypto.getRandomValues(new Uint8Array(DATA_KEY_BYTES));
    try {
      await Deno.mkdir(dataDir, { recursive: true, mode: 0o700 });
      // A concurrent creator wins: we read its key.
      if (await writeFileOnce(this.path, key)) return key;
    } catch (error) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot create ${this.path}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const existing = await this.#read();
    if (existing) return existing;
    throw new GatewayError("STORE_CORRUPT", `Cannot create ${this.path}: it vanished meanwhile`);
  }
}

/**
 * The check value of a key: HMAC-SHA256 of {@linkcode KEY_CHECK_LABEL} under
 * the key's bytes, and its first 16 hex digits as the fingerprint.
 */
export async function keyCheckValue(key: Uint8Array): Promise<KeyCheckValue> {
  const hmac = await crypto.subtle.importKey(
    "raw",
    key as Uint8Array<ArrayBuffer>,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", hmac, encoder.encode(KEY_CHECK_LABEL)),
  );
  return {
    check: Buffer.from(mac).toString("base64"),
    fingerprint: Buffer.from(mac.subarray(0, 8)).toString("hex"),
  };
}

/**
 * Decodes `TOOLGATE_SECRET_KEY`: the base64 of exactly 32 bytes.
 *
 * @returns The key bytes, or `undefined` when it is not one.
 */
export function decodeSecretKey(text: string): Uint8Array | undefined {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/]{43}=$/.test(trimmed)) return undefined;
  const bytes = new Uint8Array(Buffer.from(trimmed, "base64"));
  return bytes.length === DATA_KEY_BYTES ? bytes : undefined;
}
