/**
 * Authentication: one step that turns a request's bearer token into a
 * {@linkcode Caller} (the administrator's `TOOLGATE_API_TOKEN`, an API key,
 * or the local caller when nothing is configured) and keeps API keys off the
 * management API. Routes read the caller with `c.get("caller")`.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { looksLikeApiKey, MAX_TOKEN_CHARS, resolveApiKey } from "../auth/api_keys.ts";
import { GatewayError } from "../errors/mod.ts";
import {
  ADMIN_CALLER,
  type Caller,
  describeCaller,
  isAdministrator,
  LOCAL_CALLER,
} from "../gateway/caller.ts";
import type { ApiKeyStore } from "../store/mod.ts";
import { secretsEqual } from "./bearer_auth.ts";
import type { AppEnv } from "./types.ts";

/** Path prefixes of the management API: the administrator's only. */
export const MANAGEMENT_PATHS: readonly string[] = [
  "/webhooks",
  "/dlq",
  "/incoming",
  "/audit",
  "/metrics",
];

/** Whether `path` belongs to the management API. */
export function isManagementPath(path: string): boolean {
  return MANAGEMENT_PATHS.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}

/** Options of {@linkcode authenticate} and {@linkcode resolveCaller}. */
export interface AuthenticateOptions {
  /** `TOOLGATE_API_TOKEN`: the administrator. @default none */
  adminToken?: string;
  /** The API keys. @default none: only the administrator's token */
  keys?: ApiKeyStore;
  /** Paths that need no token (`/health`, incoming webhooks). @default none */
  skip?: (path: string) => boolean;
  /** Clock for key expiry, ms since the epoch. @default Date.now */
  now?: () => number;
  /** Where a failed last-use write of a key is reported. @default ignored */
  log?: (message: string) => void;
  /**
   * Whether any API key exists. @default `keys.any()`; {@linkcode authenticate}
   * remembers the last answer, so that while the store cannot be reached a
   * server that had no key stays open on loopback as before
   */
  keysExist?: () => Promise<boolean>;
}

/** What a client is told to send. */
function hint(options: AuthenticateOptions): string {
  return options.adminToken
    ? "send Authorization: Bearer <TOOLGATE_API_TOKEN or an API key>"
    : "send Authorization: Bearer <API key> (toolgate keys create)";
}

/**
 * The caller of a request from its `Authorization` header.
 *
 * - No header: the local caller when neither `TOOLGATE_API_TOKEN` nor any
 *   API key exists (open on loopback, as before keys); otherwise 401.
 * - `Bearer <TOOLGATE_API_TOKEN>`: the administrator.
 * - `Bearer tg_…`: the API key's caller; unknown, revoked or expired: 401.
 * - A token over {@linkcode MAX_TOKEN_CHARS}: 401, always.
 * - Anything else (malformed, a wrong token): 401, unless nothing is
 *   configured (then the local caller, as before).
 *
 * @throws {GatewayError} `UNAUTHORIZED` with a message that says what is wrong.
 */
export async function resolveCaller(
  header: string | undefined,
  options: AuthenticateOptions,
): Promise<Caller> {
  const { adminToken, keys } = options;
  const anyKeys = async () => keys !== undefined && await (options.keysExist ?? keys.any)();
  if (header === undefined) {
    if (adminToken) {
      throw new GatewayError("UNAUTHORIZED", `Unauthorized: ${hint(options)}`);
    }
    if (await anyKeys()) {
      throw new GatewayError(
        "UNAUTHORIZED",
        `Unauthorized: API keys exist, so every request needs one: ${hint(options)}`,
      );
    }
    return LOCAL_CALLER;
  }
  const open = async () => !adminToken && !await anyKeys();
  if (header.length > MAX_TOKEN_CHARS + 16) {
    throw new GatewayError(
      "UNAUTHORIZED",
      `Unauthorized: the Authorization header is ${header.length} characters; ` +
        `a token has at most ${MAX_TOKEN_CHARS}`,
    );
  }
  const match = /^Bearer +([^\s]+) *$/i.exec(header);
  if (!match) {
    if (await open()) return LOCAL_CALLER;
    throw new GatewayError(
      "UNAUTHORIZED",
      `Unauthorized: the Authorization header is not 'Bearer <token>'; ${hint(options)}`,
    );
  }
  const token = match[1];
  if (token.length > MAX_TOKEN_CHARS) {
    throw new GatewayError(
      "UNAUTHORIZED",
      `Unauthorized: the bearer token is ${token.length} characters; at most ${MAX_TOKEN_CHARS}`,
    );
  }
  if (adminToken && secretsEqual(token, adminToken)) return ADMIN_CALLER;
  if (keys && looksLikeApiKey(token)) {
    return await resolveApiKey(keys, token, { now: options.now?.(), log: options.log });
  }
  if (await open()) return LOCAL_CALLER;
  throw new GatewayError(
    "UNAUTHORIZED",
    adminToken
      ? "Unauthorized: the bearer token is wrong (neither TOOLGATE_API_TOKEN nor an API key)"
      : "Unauthorized: the bearer token is not an API key (tg_…)",
  );
}

/**
 * Middleware: resolves the caller ({@linkcode resolveCaller}) into
 * `c.var.caller`, and answers 403 `FORBIDDEN` when an API key asks for the
 * management API ({@linkcode MANAGEMENT_PATHS}).
 *
 * @example
 * ```ts
 * app.use(authenticate({ adminToken, keys: store.apiKeys, skip: (p) => p === "/health" }));
 * ```
 */
export function authenticate(options: AuthenticateOptions): MiddlewareHandler<AppEnv> {
  if (options.adminToken === "") throw new RangeError("Invalid bearer token: it is empty");
  const { keys } = options;
  // The last answer of keys.any(), for when the store cannot be reached
  // (PostgreSQL down): no key known, no key needed; keys known, 503 as any
  // request that needs the store.
  let known: boolean | undefined;
  const keysExist = keys && (async () => {
    try {
      return known = await keys.any();
    } catch (error) {
      if (known === false) return false;
      throw error;
    }
  });
  const resolving = { ...options, ...(keysExist ? { keysExist } : {}) };
  return async function authenticate(c, next) {
    if (options.skip?.(c.req.path)) return await next();
    const caller = await resolveCaller(c.req.header("authorization"), resolving);
    if (!isAdministrator(caller) && isManagementPath(c.req.path)) {
      throw new GatewayError(
        "FORBIDDEN",
        `Forbidden: ${describeCaller(caller)} may not use the management API ` +
          `(${MANAGEMENT_PATHS.join(", ")}); it takes TOOLGATE_API_TOKEN`,
      );
    }
    c.set("caller", caller);
    await next();
  };
}
