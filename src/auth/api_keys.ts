/**
 * API keys: made once (`tg_` and 32 random bytes, base64url), stored as
 * their SHA-256 with a short prefix to show, resolved to a
 * {@linkcode Caller} from a bearer token. What `toolgate keys` and the
 * HTTP transport's authentication use.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createHash, timingSafeEqual } from "node:crypto";
import { GatewayError } from "../errors/mod.ts";
import type { Caller } from "../gateway/caller.ts";
import { parseToolPatterns } from "../gateway/caller.ts";
import { parseRate } from "../gateway/rate_limit.ts";
import { newId } from "../ids.ts";
import type { ApiKeyRecord, ApiKeyStore } from "../store/mod.ts";

/** What every API key starts with. */
export const API_KEY_PREFIX = "tg_";

/** Random bytes in a key (256 bits). */
export const API_KEY_BYTES = 32;

/** Longest bearer token looked at, in characters; longer ones are refused unread. */
export const MAX_TOKEN_CHARS = 512;

/** Characters of a key kept to show it (`tg_` and 6 more). */
const SHOWN_CHARS = API_KEY_PREFIX.length + 6;

/** A key's name: letters, digits, `_`, `-`, `.`, at most 64. */
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** How often a key's `last_used_at` is written at most, in ms. */
const TOUCH_EVERY_MS = 60_000;

/** Lowercase hex SHA-256 of a key. SHA-256 suffices: a key has 256 random bits, nothing to guess. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** Whether `token` has the shape of an API key (`tg_` + base64url). */
export function looksLikeApiKey(token: string): boolean {
  return token.startsWith(API_KEY_PREFIX) && /^[A-Za-z0-9_-]+$/.test(token);
}

/** A new random key. */
export function generateApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(API_KEY_BYTES));
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  const base64url = btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return `${API_KEY_PREFIX}${base64url}`;
}

/** Checks a rate limit (`10/s`, `600/m`, `1000/h`, `5000/d`). */
export { parseRate };

/** Units of `--expires`, in ms. */
const EXPIRY_UNITS: Record<string, number> = {
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
};

/**
 * Checks an expiry: a duration from now (`30d`, `12h`, `90m`, `2w`) or an
 * ISO 8601 time in the future.
 *
 * @returns When the key expires, ISO 8601 UTC.
 * @throws {GatewayError} `USAGE` naming `--expires` and the forms.
 */
export function parseExpiry(raw: string, now: number, field = "--expires"): string {
  const match = /^\s*(\d{1,6})\s*(m|h|d|w)\s*$/.exec(raw);
  let at: number;
  if (match) at = now + Number(match[1]) * EXPIRY_UNITS[match[2]];
  else if (/^\d{4}-\d{2}-\d{2}/.test(raw.trim())) at = Date.parse(raw.trim());
  else at = NaN;
  if (!Number.isFinite(at) || at <= now) {
    throw new GatewayError(
      "USAGE",
      `Invalid ${field} ${JSON.stringify(raw)}: use a duration from now (30d, 12h, 90m, 2w) ` +
        `or a future ISO 8601 time (2027-01-01T00:00:00Z)`,
    );
  }
  return new Date(at).toISOString();
}

/** What {@linkcode createApiKey} takes. */
export interface NewApiKey {
  /** Unique name. */
  name: string;
  /** Tool patterns, comma-separated (`memory_*,http_request`); absent: every tool. */
  tools?: string;
  /** Virtual server name. */
  server?: string;
  /** Rate limit (`10/s`). */
  rate?: string;
  /** Expiry: a duration from now or an ISO time. */
  expires?: string;
}

/** A key made by {@linkcode createApiKey}: the record and the key, shown once. */
export interface CreatedApiKey {
  record: ApiKeyRecord;
  /** The key itself; not stored anywhere. */
  key: string;
}

/**
 * Makes and stores a key (only its hash).
 *
 * @throws {GatewayError} `USAGE` for a bad name, pattern, server, rate or
 * expiry (nothing stored), `CONFLICT` when the name is taken.
 */
export async function createApiKey(
  keys: ApiKeyStore,
  input: NewApiKey,
  now: number = Date.now(),
): Promise<CreatedApiKey> {
  if (!NAME_RE.test(input.name)) {
    throw new GatewayError(
      "USAGE",
      `Invalid --name ${JSON.stringify(input.name)}: use 1-64 letters, digits, _ - . ` +
        `starting with a letter or digit, e.g. ci or agent-a`,
    );
  }
  const tools = input.tools === undefined ? null : parseToolPatterns(input.tools);
  if (input.server !== undefined && !NAME_RE.test(input.server)) {
    throw new GatewayError(
      "USAGE",
      `Invalid --server ${JSON.stringify(input.server)}: a virtual server name is 1-64 ` +
        `letters, digits, _ - .`,
    );
  }
  const rate = input.rate === undefined ? null : parseRate(input.rate);
  const expires_at = input.expires === undefined ? null : parseExpiry(input.expires, now);
  if (await keys.getByName(input.name)) {
    throw new GatewayError(
      "CONFLICT",
      `An API key named ${input.name} exists: pick another name, or revoke it first ` +
        `(toolgate keys revoke ${input.name})`,
      { details: { name: input.name } },
    );
  }
  const key = generateApiKey();
  const record = await keys.add({
    id: newId("key"),
    name: input.name,
    prefix: key.slice(0, SHOWN_CHARS),
    hash: hashApiKey(key),
    tools,
    server: input.server ?? null,
    rate,
    expires_at,
    created_at: new Date(now).toISOString(),
    last_used_at: null,
  });
  return { record, key };
}

/**
 * Finds a key by id or name.
 *
 * @throws {GatewayError} `NOT_FOUND` naming `keys list`.
 */
export async function findApiKey(keys: ApiKeyStore, idOrName: string): Promise<ApiKeyRecord> {
  const found = idOrName.startsWith("key_")
    ? await keys.get(idOrName) ?? await keys.getByName(idOrName)
    : await keys.getByName(idOrName);
  if (!found) {
    throw new GatewayError(
      "NOT_FOUND",
      `No API key ${JSON.stringify(idOrName)}: see toolgate keys list`,
      { details: { key: idOrName } },
    );
  }
  return found;
}

/**
 * Revokes a key by id or name: it stops working at once, on every instance.
 *
 * @throws {GatewayError} `NOT_FOUND` when there is none.
 */
export async function revokeApiKey(keys: ApiKeyStore, idOrName: string): Promise<ApiKeyRecord> {
  const found = await findApiKey(keys, idOrName);
  await keys.remove(found.id);
  return found;
}

/** The caller a key record stands for. */
export function keyCaller(record: ApiKeyRecord): Caller {
  return {
    kind: "key",
    name: record.name,
    id: record.id,
    ...(record.tools ? { tools: record.tools } : {}),
    ...(record.server ? { server: record.server } : {}),
    ...(record.rate ? { rate: record.rate } : {}),
  };
}

/** Options of {@linkcode resolveApiKey}. */
export interface ResolveApiKeyOptions {
  /** Clock, ms since the epoch. @default Date.now */
  now?: number;
  /** Where a failed `last_used_at` write is reported. @default ignored */
  log?: (message: string) => void;
}

/**
 * The caller an API key stands for.
 *
 * @throws {GatewayError} `UNAUTHORIZED` when it is unknown, revoked or expired (the message says which).
 */
export async function resolveApiKey(
  keys: ApiKeyStore,
  token: string,
  options: ResolveApiKeyOptions = {},
): Promise<Caller> {
  const now = options.now ?? Date.now();
  const hash = hashApiKey(token);
  const record = await keys.findByHash(hash);
  if (
    !record ||
    !timingSafeEqual(Buffer.from(record.hash, "hex"), Buffer.from(hash, "hex"))
  ) {
    throw new GatewayError(
      "UNAUTHORIZED",
      `Unauthorized: the API key ${token.slice(0, SHOWN_CHARS)}… is unknown or revoked`,
    );
  }
  if (record.expires_at !== null && Date.parse(record.expires_at) <= now) {
    throw new GatewayError(
      "UNAUTHORIZED",
      `Unauthorized: the API key ${record.name} expired at ${record.expires_at}; ` +
        `create a new one with toolgate keys create`,
      { details: { key: record.name, expired_at: record.expires_at } },
    );
  }
  const last = record.last_used_at === null ? -Infinity : Date.parse(record.last_used_at);
  if (!(now - last < TOUCH_EVERY_MS)) {
    // At most once a minute per key; a failure only loses the timestamp.
    await keys.touch(record.id, new Date(now).toISOString()).catch((error) =>
      options.log?.(`API key ${record.name}: last use not recorded: ${(error as Error).message}`)
    );
  }
  return keyCaller(record);
}

/**
 * Whether any API key exists, as a running server needs it on every request
 * without a key (an open server on loopback serves them; one with keys
 * refuses them): read once, kept, and read again by {@linkcode refresh} when
 * the registrations counter moves (adding or removing a key moves it). So a
 * request costs no store read; a first key made with `toolgate keys create`
 * closes a running server within `plugins.upstream_settings.poll_ms` (at
 * once on PostgreSQL).
 */
export class ApiKeyPresence {
  #keys: ApiKeyStore;
  #known: Promise<boolean> | undefined;

  /** @param keys The API keys. */
  constructor(keys: ApiKeyStore) {
    this.#keys = keys;
  }

  /**
   * Whether a key exists, as last read.
   *
   * @throws what the store throws when it has never answered (the next call asks again).
   */
  exists(): Promise<boolean> {
    return this.#known ??= this.#read();
  }

  /** Reads it again; while the store cannot answer, the last answer stays. */
  refresh(): void {
    const next = this.#keys.any();
    next.then(() => this.#known = next, () => {});
  }

  #read(): Promise<boolean> {
    const read = this.#keys.any();
    read.catch(() => {
      if (this.#known === read) this.#known = undefined;
    });
    return read;
  }
}
