/**
 * The encrypted file backend: AES-256-GCM (Web Crypto) with a random key in
 * `<data_dir>/keychain.key` (mode 0600, created on first use, never
 * overwritten). The ciphertexts live in KV.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { KeychainRecord } from "../store/mod.ts";

/** File name of the keychain key inside the data directory. */
export const KEY_FILE = "keychain.key";

const KEY_BYTES = 32;
const IV_BYTES = 12;
const AAD_PREFIX = "toolgate-keychain-v1:";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** Encrypts and decrypts keychain values with the data directory's key. */
export class FileCipher {
  readonly path: string;
  #dataDir: string;
  #key: Promise<CryptoKey> | undefined;

  /** @param dataDir The data directory holding `keychain.key`. */
  constructor(dataDir: string) {
    this.#dataDir = dataDir;
    this.path = `${dataDir}/${KEY_FILE}`;
  }

  /** Encrypts `value` for the entry `name` (the name is bound as associated data). */
  async encrypt(name: string, value: string, now: Date = new Date()): Promise<KeychainRecord> {
    const key = await this.#loadKey(true);
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const data = new Uint8Array(
      await crypto.subtle.encrypt(
        { name: "AES-GCM", iv, additionalData: encoder.encode(AAD_PREFIX + name) },
        key,
        encoder.encode(value),
      ),
    );
    return { backend: "file", iv, data, updated_at: now.toISOString() };
  }

  /**
   * Decrypts the entry `name`.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the key file is missing,
   * unreadable or does not match.
   */
  async decrypt(name: string, record: { iv: Uint8Array; data: Uint8Array }): Promise<string> {
    const key = await this.#loadKey(false);
    try {
      const plain = await crypto.subtle.decrypt(
        {
          name: "AES-GCM",
          iv: record.iv as Uint8Array<ArrayBuffer>,
          additionalData: encoder.encode(AAD_PREFIX + name),
        },
        key,
        record.data as Uint8Array<ArrayBuffer>,
      );
      return decoder.decode(plain);
    } catch (error) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot decrypt keychain entry ${name}: ${this.path} does not match the stored secrets (was it replaced?); set the secret again with toolgate keychain set ${name}`,
        { cause: error },
      );
    }
  }

  #loadKey(create: boolean): Promise<CryptoKey> {
    if (this.#key) return this.#key;
    const loading = this.#readOrCreate(create).then((bytes) =>
      crypto.subtle.importKey("raw", bytes, "AES-GCM", false, ["encrypt", "decrypt"])
    );
    // Keep only a successful load; a missing file may be created by a later set().
    this.#key = loading;
    loading.catch(() => {
      if (this.#key === loading) this.#key = undefined;
    });
    return loading;
  }

  async #readOrCreate(create: boolean): Promise<Uint8Array<ArrayBuffer>> {
    const existing = await this.#read();
    if (existing) return existing;
    if (!create) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot decrypt the keychain: ${this.path} is missing; set the secrets again with toolgate keychain set <plugin>.<key>`,
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
    if (bytes.length !== KEY_BYTES) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot use ${this.path}: expected a ${KEY_BYTES}-byte key, found ${bytes.length} bytes; the file was left untouched (moving it away loses the stored secrets)`,
      );
    }
    return bytes;
  }

  async #create(): Promise<Uint8Array<ArrayBuffer>> {
    await Deno.mkdir(this.#dataDir, { recursive: true, mode: 0o700 });
    const key = crypto.getRandomValues(new Uint8Array(KEY_BYTES));
    const temp = `${this.path}.${crypto.randomUUID()}.tmp`;
    try {
      await Deno.writeFile(temp, key, { mode: 0o600, createNew: true });
      if (Deno.build.os !== "windows") await Deno.chmod(temp, 0o600);
      // link() never replaces an existing file: a concurrent creator wins, we read its key.
      await Deno.link(temp, this.path);
      return key;
    } catch (error) {
      if (error instanceof Deno.errors.AlreadyExists) {
        const existing = await this.#read();
        if (existing) return existing;
      }
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot create ${this.path}: ${(error as Error).message}`,
        { cause: error },
      );
    } finally {
      await Deno.remove(temp).catch(() => {});
    }
  }
}
