/**
 * Plugin credentials: `toolgate keychain set <plugin>.<key>` stores them, the
 * gateway hands each plugin a {@linkcode SecretReader} for its own.
 *
 * Backends: the OS keychain where one answers (`secret-tool` on Linux with a
 * D-Bus secret service, `security` on macOS), else AES-256-GCM encrypted
 * entries in the data directory's store with a random key in
 * `<data_dir>/keychain.key` (mode 0600). `TOOLGATE_KEYCHAIN=file|secret-tool|security`
 * forces one; `TOOLGATE_SECRET_<PLUGIN>_<KEY>` overrides a stored value.
 *
 * @example
 * ```ts
 * const keychain = createKeychain({ store, dataDir: config.dataDir, env: config.env });
 * const gateway = new Gateway({ config, store, bus, plugins,
 *   secrets: (plugin) => secretReaderFor(keychain, plugin) });
 * ```
 *
 * @module
 */
export {
  createKeychain,
  KEYCHAIN_BACKENDS,
  SECRET_MAX_BYTES,
  SECRET_NAME_PATTERN,
  secretEnvName,
  secretReaderFor,
  validateSecretName,
} from "./keychain.ts";
export type {
  Keychain,
  KeychainBackendName,
  KeychainEntryInfo,
  KeychainOptions,
} from "./keychain.ts";
export { KEY_FILE } from "./_file.ts";
