/**
 * The keychain: plugin credentials named `<plugin>.<key>`, held by the OS
 * keychain where one answers, else encrypted in the data directory's store.
 * `TOOLGATE_SECRET_<PLUGIN>_<KEY>` overrides any stored value.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { SecretReader } from "../gateway/mod.ts";
import type { KeychainRecord, Store } from "../store/mod.ts";
import { FileCipher } from "./_file.ts";
import { type OsBackend, type OsBackendName, SecretToolBackend, SecurityBackend } from "./_os.ts";

/** Where secrets are kept. */
export type KeychainBackendName = "file" | OsBackendName;

/** Accepted values of `TOOLGATE_KEYCHAIN` and the `backend` option. */
export const KEYCHAIN_BACKENDS: readonly KeychainBackendName[] = [
  "file",
  "secret-tool",
  "security",
];

/** Pattern of a secret name: `<plugin>.<key>`, lower case. */
export const SECRET_NAME_PATTERN = /^[a-z0-9_-]+\.[a-z0-9_.-]+$/;

/** Largest secret value, in UTF-8 bytes. */
export const SECRET_MAX_BYTES = 32 * 1024;

/** Options of {@linkcode createKeychain}. */
export interface KeychainOptions {
  /** The data directory's store (encrypted entries and the index of names). */
  store: Store;
  /** The data directory (its `keychain.key` is the store's `dataKey`, unless `TOOLGATE_SECRET_KEY` replaces it). */
  dataDir: string;
  /** The environment: `TOOLGATE_SECRET_*` overrides, `TOOLGATE_KEYCHAIN`, `PATH`. */
  env: Readonly<Record<string, string>>;
  /**
   * Backend for new secrets. @default `TOOLGATE_KEYCHAIN`, else the OS keychain
   * when it answers (`security` on macOS, `secret-tool` on Linux), else `file`
   */
  backend?: KeychainBackendName;
}

/** A stored secret's name and where it is kept (never its value). */
export interface KeychainEntryInfo {
  /** `<plugin>.<key>`. */
  name: string;
  /** Where the value is kept. */
  backend: KeychainBackendName;
  /** When it was last set (ISO 8601 UTC). */
  updated_at: string;
  /** Whether `TOOLGATE_SECRET_…` overrides it in this environment. */
  overridden_by_env: boolean;
}

/** Plugin credentials. */
export interface Keychain {
  /** The backend new secrets go to. @throws {GatewayError} `CONFIG_INVALID` */
  backend(): Promise<KeychainBackendName>;
  /** Stores (creates or replaces) the secret `name`. */
  set(name: string, value: string): Promise<void>;
  /** The secret `name` (environment override first), or `undefined`. */
  get(name: string): Promise<string | undefined>;
  /** Names of the stored secrets, sorted. */
  list(): Promise<string[]>;
  /** Names of the stored secrets with where they are kept, sorted. */
  entries(): Promise<KeychainEntryInfo[]>;
  /** Deletes the secret `name`; `false` when it was not stored. */
  delete(name: string): Promise<boolean>;
}

/**
 * The environment variable that overrides the secret `name`:
 * `TOOLGATE_SECRET_` + the name upper-cased with `.` and `-` as `_`.
 *
 * @example
 * ```ts
 * secretEnvName("slack.bot_token"); // "TOOLGATE_SECRET_SLACK_BOT_TOKEN"
 * ```
 */
export function secretEnvName(name: string): string {
  return `TOOLGATE_SECRET_${name.toUpperCase().replace(/[.-]/g, "_")}`;
}

/**
 * Checks a secret name.
 *
 * @throws {GatewayError} `USAGE` when it is not `<plugin>.<key>` in lower case.
 */
export function validateSecretName(name: string): string {
  if (!SECRET_NAME_PATTERN.test(name)) {
    throw new GatewayError(
      "USAGE",
      `Invalid secret name ${
        JSON.stringify(name)
      }: expected <plugin>.<key> in lower-case letters, digits, _ and -, e.g. slack.bot_token`,
    );
  }
  return name;
}

function validateValue(name: string, value: string): void {
  if (value.length === 0) {
    throw new GatewayError("USAGE", `Invalid value for secret ${name}: it is empty`);
  }
  const bytes = new TextEncoder().encode(value).length;
  if (bytes > SECRET_MAX_BYTES) {
    throw new GatewayError(
      "USAGE",
      `Invalid value for secret ${name}: ${bytes} bytes; the limit is ${SECRET_MAX_BYTES}`,
    );
  }
}

function parseBackendName(raw: string, source: string): KeychainBackendName {
  if ((KEYCHAIN_BACKENDS as readonly string[]).includes(raw)) return raw as KeychainBackendName;
  throw new GatewayError(
    "CONFIG_INVALID",
    `Invalid ${source} ${JSON.stringify(raw)}: expected ${KEYCHAIN_BACKENDS.join(", ")}`,
  );
}

class StoreKeychain implements Keychain {
  #store: Store;
  #env: Readonly<Record<string, string>>;
  #cipher: FileCipher;
  #os: Record<OsBackendName, OsBackend>;
  #requested: KeychainBackendName | undefined;
  #backend: Promise<KeychainBackendName> | undefined;

  constructor(options: KeychainOptions) {
    const { store, env, backend } = options;
    this.#store = store;
    this.#env = env;
    this.#cipher = new FileCipher(store.dataKey);
    this.#os = { "secret-tool": new SecretToolBackend(env), security: new SecurityBackend(env) };
    this.#requested = backend;
  }

  backend(): Promise<KeychainBackendName> {
    this.#backend ??= this.#select();
    return this.#backend;
  }

  async #select(): Promise<KeychainBackendName> {
    const raw = this.#requested ?? (this.#env.TOOLGATE_KEYCHAIN || undefined);
    if (raw !== undefined) {
      const name = parseBackendName(
        raw,
        this.#requested ? "keychain backend" : "TOOLGATE_KEYCHAIN",
      );
      if (name !== "file") {
        const reason = await this.#os[name].unavailableReason();
        if (reason) {
          throw new GatewayError(
            "CONFIG_INVALID",
            `Keychain backend ${name} is not available: ${reason}; set TOOLGATE_KEYCHAIN=file to use the encrypted file store`,
          );
        }
      }
      return name;
    }
    const candidate = Deno.build.os === "darwin"
      ? this.#os.security
      : Deno.build.os === "linux"
      ? this.#os["secret-tool"]
      : undefined;
    if (candidate && (await candidate.unavailableReason()) === undefined) return candidate.name;
    return "file";
  }

  async set(name: string, value: string): Promise<void> {
    validateSecretName(name);
    validateValue(name, value);
    const backend = await this.backend();
    const previous = await this.#store.keychain.get(name);
    let record: KeychainRecord;
    if (backend === "file") {
      record = await this.#cipher.encrypt(name, value);
    } else {
      const os = this.#os[backend];
      await os.store(name, value);
      if ((await os.lookup(name)) !== value) {
        throw new GatewayError(
          "STORE_CORRUPT",
          `Cannot store keychain entry ${name} with ${backend}: reading it back gave a different value`,
        );
      }
      record = { backend, updated_at: new Date().toISOString() };
    }
    await this.#store.keychain.put(name, record);
    if (previous && previous.backend !== "file" && previous.backend !== backend) {
      await this.#os[previous.backend].remove(name);
    }
  }

  async get(name: string): Promise<string | undefined> {
    validateSecretName(name);
    const override = this.#env[secretEnvName(name)];
    if (override) return override;
    const record = await this.#store.keychain.get(name);
    if (!record) return undefined;
    if (record.backend === "file") return await this.#cipher.decrypt(name, record);
    const os = this.#os[record.backend];
    const reason = await os.unavailableReason();
    if (reason) {
      throw new GatewayError(
        "CONFIG_INVALID",
        `Cannot read secret ${name}: it is kept by ${record.backend}, which is not available: ${reason}`,
      );
    }
    return await os.lookup(name);
  }

  async list(): Promise<string[]> {
    return (await this.entries()).map((entry) => entry.name);
  }

  async entries(): Promise<KeychainEntryInfo[]> {
    const records = await this.#store.keychain.list();
    return records.map(({ name, record }) => ({
      name,
      backend: record.backend,
      updated_at: record.updated_at,
      overridden_by_env: Boolean(this.#env[secretEnvName(name)]),
    })).sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  }

  async delete(name: string): Promise<boolean> {
    validateSecretName(name);
    const record = await this.#store.keychain.get(name);
    if (!record) return false;
    if (record.backend !== "file") await this.#os[record.backend].remove(name);
    return await this.#store.keychain.delete(name);
  }
}

/**
 * Creates the keychain of a data directory. The backend is chosen on first
 * use, so creating a keychain is cheap.
 *
 * @example
 * ```ts
 * const keychain = createKeychain({ store, dataDir: config.dataDir, env: config.env });
 * await keychain.set("slack.bot_token", "xoxb-…");
 * await keychain.get("slack.bot_token"); // "xoxb-…"
 * ```
 */
export function createKeychain(options: KeychainOptions): Keychain {
  return new StoreKeychain(options);
}

/**
 * The {@linkcode SecretReader} a plugin receives: `get("bot_token")` reads
 * `<plugin>.bot_token`.
 */
export function secretReaderFor(keychain: Keychain, plugin: string): SecretReader {
  return { get: (key: string) => keychain.get(`${plugin}.${key}`) };
}
