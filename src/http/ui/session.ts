/**
 * Console sessions: a sign-in with the API token sets a cookie holding a
 * random session id and its HMAC (never the token). Sessions live in the
 * store (only the SHA-256 of each id), so every instance on it honours
 * them and they survive restarts; the HMAC key, which also makes the CSRF
 * tokens, is derived from the API token, so it is the same on every
 * instance and changing the token ends every session.
 *
 * @module
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";
import type { ConsoleSessionStore } from "../../store/mod.ts";
import { secretsEqual } from "../bearer_auth.ts";

/** Name of the console's session cookie. */
export const SESSION_COOKIE = "toolgate_console";

/** How long a console session lasts, in ms (12 h). */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** The HKDF-SHA256 label (`info`) of the console's key, derived from the API token. */
const KEY_LABEL = "toolgate console sessions v1";

/** Bytes of a session id (192 random bits). */
const SESSION_ID_BYTES = 24;

/** Options of {@linkcode ConsoleSessions}. */
export interface ConsoleSessionsOptions {
  /** The API token a sign-in must give; `undefined`: nobody can sign in. */
  token: string | undefined;
  /** Where sessions live, shared by every instance on the store. */
  store: ConsoleSessionStore;
  /** Clock in epoch ms. @default Date.now */
  now?: () => number;
  /** Session lifetime in ms. @default {@linkcode SESSION_TTL_MS} */
  ttlMs?: number;
}

/**
 * The console's key: HKDF-SHA256 of the API token under a fixed label, so
 * every instance with the same token has the same key. Without a token (an
 * open, loopback-only console, where nobody signs in) it is random, and only
 * makes this process's CSRF tokens.
 */
function consoleKey(token: string | undefined): Buffer {
  if (token === undefined) return randomBytes(32);
  return Buffer.from(hkdfSync("sha256", token, new Uint8Array(0), KEY_LABEL, 32));
}

/** Constant-time equality of two strings (lengths may differ). */
function macEqual(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Signed-in console sessions, kept in the store. */
export class ConsoleSessions {
  readonly #token: string | undefined;
  readonly #key: Buffer;
  readonly #store: ConsoleSessionStore;
  readonly #now: () => number;
  readonly #ttlMs: number;

  constructor(options: ConsoleSessionsOptions) {
    const { token, store, now = Date.now, ttlMs = SESSION_TTL_MS } = options;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 1) {
      throw new RangeError(`Invalid ttlMs: ${ttlMs} is not a positive integer of ms`);
    }
    this.#token = token;
    this.#key = consoleKey(token);
    this.#store = store;
    this.#now = now;
    this.#ttlMs = ttlMs;
  }

  #mac(label: string, value: string): string {
    return createHmac("sha256", this.#key).update(`${label}:${value}`).digest("base64url");
  }

  /**
   * Starts a session when `token` is the API token, and stores it.
   *
   * @returns The cookie value (`<id>.<hmac>`), or `undefined` for a wrong token.
   * @throws {GatewayError} `STORE_UNAVAILABLE` when the store cannot be reached.
   */
  async signIn(token: string): Promise<string | undefined> {
    if (this.#token === undefined || !secretsEqual(token, this.#token)) return undefined;
    const id = randomBytes(SESSION_ID_BYTES).toString("base64url");
    await this.#store.create(id, this.#now() + this.#ttlMs);
    return `${id}.${this.#mac("session", id)}`;
  }

  /**
   * The session id of a cookie value, when it is signed with this token's key
   * and its session is in the store and live.
   *
   * @throws {GatewayError} `STORE_UNAVAILABLE` when the store cannot be reached.
   */
  async check(cookie: string | undefined): Promise<string | undefined> {
    if (this.#token === undefined || !cookie) return undefined;
    const dot = cookie.indexOf(".");
    if (dot <= 0) return undefined;
    const id = cookie.slice(0, dot);
    if (!macEqual(cookie.slice(dot + 1), this.#mac("session", id))) return undefined;
    const expires = await this.#store.get(id, this.#now());
    return expires === null ? undefined : id;
  }

  /** Ends a session (sign-out), for every instance on the store. */
  async signOut(sessionId: string): Promise<void> {
    await this.#store.delete(sessionId);
  }

  /** The CSRF token of a session's forms. */
  csrfToken(sessionId: string): string {
    return this.#mac("csrf", sessionId);
  }

  /** Whether a form's CSRF token belongs to the session. */
  csrfValid(sessionId: string, token: string | undefined): boolean {
    return token !== undefined && token !== "" && macEqual(token, this.csrfToken(sessionId));
  }
}
