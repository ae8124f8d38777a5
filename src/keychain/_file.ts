/**
 * The encrypted file backend: AES-256-GCM with the data directory's key
 * (`<data_dir>/keychain.key`, or `TOOLGATE_SECRET_KEY`; see the store's
 * `DataKey`). The ciphertexts live in the store.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import {
  type DataKey,
  KEY_FILE,
  KEYCHAIN_AAD_PREFIX as AAD_PREFIX,
  type KeychainRecord,
} from "../store/mod.ts";

export { KEY_FILE };

const encoder = new TextEncoder();

/** Encrypts and decrypts keychain values with the data directory's key. */
export class FileCipher {
  readonly path: string;
  #key: DataKey;

  /** @param key The data directory's key, loaded afresh by this cipher. */
  constructor(key: DataKey) {
    this.#key = key.reloaded();
    this.path = this.#key.describe();
  }

  /** Encrypts `value` for the entry `name` (the name is bound as associated data). */
  async encrypt(name: string, value: string, now: Date = new Date()): Promise<KeychainRecord> {
    const { iv, data } = await this.#key.encrypt(AAD_PREFIX + name, encoder.encode(value));
    return { backend: "file", iv, data, updated_at: now.toISOString() };
  }

  /**
   * Decrypts the entry `name`.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the key file is missing,
   * unreadable or does not match.
   */
  async decrypt(name: string, record: { iv: Uint8Array; data: Uint8Array }): Promise<string> {
    await this.#key.cryptoKey(false).catch((error) => {
      if (error instanceof GatewayError && error.message.includes(" is missing")) {
        throw new GatewayError(
          "STORE_CORRUPT",
          `Cannot decrypt the keychain: ${this.path} is missing; set the secrets again with toolgate keychain set <plugin>.<key>`,
          { cause: error },
        );
      }
      throw error;
    });
    try {
      return await this.#key.decrypt(AAD_PREFIX + name, record);
    } catch (error) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot decrypt keychain entry ${name}: ${this.path} does not match the stored secrets (was it replaced?); set the secret again with toolgate keychain set ${name}`,
        { cause: error },
      );
    }
  }
}
