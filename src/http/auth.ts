/**
 * Authentication: one step that turns a request's bearer token into a
 * {@linkcode Caller} (the administrator's `TOOLGATE_API_TOKEN`, an API key,
 * an OAuth access token with `auth.oauth`, or the local caller when nothing
 * is configured) and keeps API keys and OAuth callers off the management
 * API. Routes read the caller with `c.get("caller")`. With `auth.oauth`, it
 * also serves the RFC 9728 protected-resource metadata and adds the MCP
 * authorization specification's `WWW-Authenticate` challenges.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { looksLikeApiKey, MAX_TOKEN_CHARS, resolveApiKey } from "../auth/api_keys.ts";
import {
  challengeValue,
  looksLikeJwt,
  MAX_JWT_CHARS,
  type OAuthValidator,
  PROTECTED_RESOURCE_PATH,
} from "../auth/oauth.ts";
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
import { errorResponse } from "./errors.ts";
import type { AppEnv, ToolgateApp } from "./types.ts";

/** Path prefixes of the management API: the administrator's only. */
export const MANAGEMENT_PATHS: readonly string[] = [
  "/webhooks",
  "/dlq",
  "/incoming",
  "/audit",
  "/metrics",
  "/pins",
  "/policies",
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
  /**
   * OAuth access tokens (`auth.oauth`): a bearer token shaped like a JWT is
   * validated by it, and no request is open any more. @default none
   */
  oauth?: OAuthValidator;
}

/** What a client is told to send. */
function hint(options: AuthenticateOptions): string {
  if (options.oauth) {
    return `send Authorization: Bearer <an access token from ${options.oauth.config.issuer}` +
      `${options.adminToken ? ", TOOLGATE_API_TOKEN" : ""} or an API key>`;
  }
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
 * - A JWT (three base64url segments) with `auth.oauth`: the OAuth caller
 *   of a valid access token; any fault: 401.
 * - A token over {@linkcode MAX_TOKEN_CHARS} ({@linkcode MAX_JWT_CHARS} for
 *   a JWT with `auth.oauth`): 401, always.
 * - Anything else (malformed, a wrong token): 401, unless nothing is
 *   configured (then the local caller, as before).
 *
 * @throws {GatewayError} `UNAUTHORIZED` with a message that says what is
 * wrong; with `auth.oauth`, `FORBIDDEN` for a token without a required
 * scope and `UNAVAILABLE` when the issuer's keys cannot be fetched.
 */
export async function resolveCaller(
  header: string | undefined,
  options: AuthenticateOptions,
  resource?: string,
): Promise<Caller> {
  const { adminToken, keys, oauth } = options;
  const anyKeys = async () => keys !== undefined && await (options.keysExist ?? keys.any)();
  if (header === undefined) {
    if (adminToken || oauth) {
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
  const open = async () => !adminToken && !oauth && !await anyKeys();
  const maxChars = oauth ? MAX_JWT_CHARS : MAX_TOKEN_CHARS;
  if (header.length > maxChars + 16) {
    throw new GatewayError(
      "UNAUTHORIZED",
      `Unauthorized: the Authorization header is ${header.length} characters; ` +
        `a token has at most ${maxChars}`,
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
  const jwt = oauth !== undefined && looksLikeJwt(token);
  const tokenMax = jwt ? MAX_JWT_CHARS : MAX_TOKEN_CHARS;
  if (token.length > tokenMax) {
    throw new GatewayError(
      "UNAUTHORIZED",
      `Unauthorized: the bearer token is ${token.length} characters; at most ${tokenMax}`,
    );
  }
  if (adminToken && secretsEqual(token, adminToken)) return ADMIN_CALLER;
  if (keys && looksLikeApiKey(token)) {
    return await resolveApiKey(keys, token, { now: options.now?.(), log: options.log });
  }
  if (jwt) return await oauth.verify(token, resource);
  if (await open()) return LOCAL_CALLER;
  throw new GatewayError(
    "UNAUTHORIZED",
    oauth
      ? "Unauthorized: the bearer token is neither an OAuth access token (a JWT) " +
        `${adminToken ? "nor TOOLGATE_API_TOKEN " : ""}nor an API key (tg_…)`
      : adminToken
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
  const ask = options.keysExist ?? (() => keys!.any());
  const keysExist = keys && (async () => {
    try {
      return known = await ask();
    } catch (error) {
      if (known === false) return false;
      throw error;
    }
  });
  const resolving = { ...options, ...(keysExist ? { keysExist } : {}) };
  const { oauth } = options;
  return async function authenticate(c, next) {
    if (options.skip?.(c.req.path) || isProtectedResourcePath(c.req.path)) return await next();
    const header = c.req.header("authorization");
    // A virtual server's endpoint is a resource of its own (RFC 9728), below the audience.
    const resource = oauth?.resourceFor(c.req.path);
    let caller: Caller;
    try {
      caller = await resolveCaller(header, resolving, resource);
    } catch (error) {
      const challenge = oauth && error instanceof GatewayError &&
        oauthChallenge(oauth, error, header, resource);
      if (!challenge) throw error;
      const response = errorResponse(error as GatewayError);
      response.headers.set("www-authenticate", challenge);
      return response;
    }
    if (!isAdministrator(caller) && isManagementPath(c.req.path)) {
      throw new GatewayError(
        "FORBIDDEN",
        `Forbidden: ${describeCaller(caller)} may not use the management API ` +
          `(${MANAGEMENT_PATHS.join(", ")}); it takes TOOLGATE_API_TOKEN`,
      );
    }
    c.set("caller", caller);
    await next();
    // A REST tool call outside an OAuth caller's scopes: 403 with the
    // scopes that would allow it (RFC 6750 §3.1, insufficient_scope).
    const failed = c.error;
    if (
      oauth && caller.kind === "oauth" && failed instanceof GatewayError &&
      failed.code === "FORBIDDEN" && c.res.status === 403
    ) {
      const tool = (failed.details as { tool?: unknown } | undefined)?.tool;
      const scopes = typeof tool === "string" ? oauth.scopesFor(tool) : [];
      if (scopes.length) {
        c.res.headers.set(
          "www-authenticate",
          bearerChallenge({
            error: "insufficient_scope",
            scope: scopes.join(" "),
            resource_metadata: oauth.metadataUrlOf(resource),
            error_description: failed.message,
          }),
        );
      }
    }
  };
}

/** Whether `path` is the protected-resource metadata (public, RFC 9728). */
export function isProtectedResourcePath(path: string): boolean {
  return path === PROTECTED_RESOURCE_PATH || path.startsWith(`${PROTECTED_RESOURCE_PATH}/`);
}

/** A `Bearer` challenge with its auth-params, values made safe for the header. */
function bearerChallenge(params: Record<string, string | undefined>): string {
  const parts = Object.entries(params)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => `${name}="${challengeValue(value)}"`);
  return `Bearer ${parts.join(", ")}`;
}

/**
 * The `WWW-Authenticate` challenge of a refused request with `auth.oauth`
 * (MCP authorization; RFC 6750 §3, RFC 9728 §5.1): every 401 names the
 * metadata document; a given but bad token adds `error="invalid_token"`; a
 * token without a required scope is 403 `insufficient_scope`.
 */
function oauthChallenge(
  oauth: OAuthValidator,
  error: GatewayError,
  header: string | undefined,
  resource: string | undefined,
): string | undefined {
  const { required_scopes } = oauth.config;
  const scope = required_scopes.length ? required_scopes.join(" ") : undefined;
  if (error.code === "UNAUTHORIZED") {
    return bearerChallenge({
      realm: "toolgate",
      resource_metadata: oauth.metadataUrlOf(resource),
      scope,
      ...(header === undefined ? {} : { error: "invalid_token", error_description: error.message }),
    });
  }
  if (error.code === "FORBIDDEN" && scope) {
    return bearerChallenge({
      error: "insufficient_scope",
      scope,
      resource_metadata: oauth.metadataUrlOf(resource),
      error_description: error.message,
    });
  }
  return undefined;
}

/**
 * Serves the protected-resource metadata (RFC 9728) at
 * `/.well-known/oauth-protected-resource` and at the path derived from the
 * audience (`/.well-known/oauth-protected-resource/mcp`), and, when the
 * audience is `/mcp`, each virtual server's below it
 * (`/.well-known/oauth-protected-resource/mcp/sales`, its `resource` that
 * endpoint), without a token.
 *
 * @param hasServer Whether a virtual server of that name exists (others are 404).
 */
export function registerProtectedResourceMetadata(
  app: ToolgateApp,
  oauth: OAuthValidator,
  hasServer: (name: string) => boolean = () => false,
): void {
  const serve = (resource?: string) =>
    new Response(JSON.stringify(oauth.metadata(resource)), {
      headers: {
        "content-type": "application/json",
        "cache-control": "public, max-age=300",
        // Public and without credentials: browser-based MCP clients read it too.
        "access-control-allow-origin": "*",
      },
    });
  app.get(PROTECTED_RESOURCE_PATH, () => serve());
  if (oauth.metadataPath === PROTECTED_RESOURCE_PATH) return;
  app.get(oauth.metadataPath, () => serve());
  app.get(`${oauth.metadataPath}/:server`, (c) => {
    const name = c.req.param("server");
    const resource = hasServer(name) ? oauth.resourceFor(`/mcp/${name}`) : undefined;
    if (resource === undefined) {
      throw new GatewayError("NOT_FOUND", `No protected resource at ${c.req.path}`, {
        details: { path: c.req.path },
      });
    }
    return serve(resource);
  });
}
