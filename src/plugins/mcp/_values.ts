/**
 * `keychain:<name>` references in the `env` and `headers` of an upstream,
 * resolved when it connects; resolved values live only in the connection.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { isSecretKey } from "../../redact.ts";

/** Prefix of a value that names a keychain entry instead of a literal. */
export const KEYCHAIN_REFERENCE_PREFIX = "keychain:";

/** The keychain entry a value refers to, or `undefined` for a literal. */
export function keychainReference(value: string): string | undefined {
  return value.startsWith(KEYCHAIN_REFERENCE_PREFIX)
    ? value.slice(KEYCHAIN_REFERENCE_PREFIX.length)
    : undefined;
}

/**
 * Whether an upstream is given credentials: a keychain reference, or a
 * variable or header named like one (`GITHUB_TOKEN`, `Authorization`,
 * `X-Api-Key`). Such an upstream is not zero-config.
 */
export function carriesCredentials(...maps: Record<string, string>[]): boolean {
  return maps.some((map) =>
    Object.entries(map).some(([name, value]) => keychainReference(value) || isSecretKey(name))
  );
}

/**
 * Replaces keychain references by the entries' values.
 *
 * @param values `env` or `headers` of an upstream.
 * @param what `env` or `header`, for messages.
 * @param resolveSecret Reads a keychain entry by its full name.
 * @throws {GatewayError} `PLUGIN_NOT_CONFIGURED` naming the missing entry.
 */
export async function resolveValues(
  values: Record<string, string>,
  what: "env" | "header",
  resolveSecret: (name: string) => Promise<string | undefined>,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(values)) {
    const reference = keychainReference(value);
    if (reference === undefined) {
      out[key] = value;
      continue;
    }
    const secret = await resolveSecret(reference);
    if (secret === undefined) {
      throw new GatewayError(
        "PLUGIN_NOT_CONFIGURED",
        `keychain entry ${reference} (${what} ${key}) is not set: store it with toolgate keychain set ${reference}`,
        { details: { keychain_entry: reference, [what]: key } },
      );
    }
    out[key] = secret;
  }
  return out;
}
