/**
 * Who may call: API keys (`toolgate keys`) and how a bearer token becomes a
 * {@linkcode Caller}. The caller itself lives in `src/gateway/caller.ts`,
 * which the call pipeline checks.
 *
 * @module
 */
export {
  API_KEY_BYTES,
  API_KEY_PREFIX,
  ApiKeyPresence,
  createApiKey,
  findApiKey,
  generateApiKey,
  hashApiKey,
  keyCaller,
  looksLikeApiKey,
  MAX_TOKEN_CHARS,
  parseExpiry,
  parseRate,
  resolveApiKey,
  revokeApiKey,
} from "./api_keys.ts";
export type { CreatedApiKey, NewApiKey, ResolveApiKeyOptions } from "./api_keys.ts";
export type { Caller } from "../gateway/caller.ts";
