/**
 * Console sessions: a sign-in with the API token sets a cookie holding a
 * random session id and its HMAC (never the token), kept in this process's
 * memory; CSRF tokens are HMACs of the session id.
 *
 * @module
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { secretsEqual } from "../bearer_auth.ts";

/** Name of the console's session cookie. */
export const SESSION_COOKIE = "toolgate_console";

/** How long a console session lasts, in ms (12 h). */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** Most sessions kept at once; the oldest is dropped past it. */
const MAX_SESSIONS = 1000;

/** Options of {@linkcode ConsoleSessions}. */
export interface ConsoleSessionsOptions {
  /** The API token a sign-in must give; `undefined`: nobody can sign in. */
  token: string | undefined;
  /** Clock in epoch ms. @default Date.now */
  now?: () => number;
  /** Session lifetime in ms. @default {@linkcode SESSION_TTL_MS} */
  ttlMs?: number;
}

/** Signed-in console sessions of this process. */
export class ConsoleSessions {
  readonly #token: string | undefined;
  readonly #key = randomBytes(32);
  readonly #now: () => number;
  readonly #ttlMs: number;
  /** Session id → expiry (epoch ms). */
  readonly #sessions = new Map<string, number>();

  constructor(options: ConsoleSessionsOptions) {
    this.#token = options.token;
    this.#now = options.now ?? Date.now;
    this.#ttlMs = options.ttlMs ?? SESSION_TTL_MS;
  }

  #mac(label: string, value: string): string {
    return createHmac("sha256", this.#key).update(`${label}:${value}`).digest("base64url");
  }

  /**
   * Starts a session when `token` is the API token.
   *
   * @returns The cookie value (`<id>.<hmac>`), or `undefined` for a wrong token.
   */
  signIn(token: string): string | undefined {
    if (this.#token === undefined || !secretsEqual(token, this.#token)) return undefined;
    const id = randomBytes(24).toString("base64url");
    const now = this.#now();
    for (const [old, expires] of this.#sessions) {
      if (expires <= now || this.#sessions.size >= MAX_SESSIONS) this.#sessions.delete(old);
      else break;
    }
    this.#sessions.set(id, now + this.#ttlMs);
    return `${id}.${this.#mac("session", id)}`;
  }

  /** The session id of a cookie value, when it is signed by this process and its session is live. */
  check(cookie: string | undefined): string | undefined {
    if (this.#token === undefined || !cookie) return undefined;
    const dot = cookie.indexOf(".");
    if (dot <= 0) return undefined;
    const id = cookie.slice(0, dot);
    const given = Buffer.from(cookie.slice(dot + 1));
    const expected = Buffer.from(this.#mac("session", id));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const expires = this.#sessions.get(id);
    if (expires === undefined) return undefined;
    if (expires <= this.#now()) {
      this.#sessions.delete(id);
      return undefined;
    }
    return id;
  }

  /** Ends a session (sign-out). */
  signOut(sessionId: string): void {
    this.#sessions.delete(sessionId);
  }

  /** The CSRF token of a session's forms. */
  csrfToken(sessionId: string): string {
    return this.#mac("csrf", sessionId);
  }

  /** Whether a form's CSRF token belongs to the session. */
  csrfValid(sessionId: string, token: string | undefined): boolean {
    if (!token) return false;
    const given = Buffer.from(token);
    const expected = Buffer.from(this.csrfToken(sessionId));
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
