/**
 * OAuth 2.1 resource server: validates JWT access tokens from the configured
 * issuer (`auth.oauth`) against its JSON Web Key Set and turns them into an
 * `oauth` {@linkcode Caller} whose tool patterns come from the token's
 * scopes. Also the RFC 9728 protected-resource metadata and the
 * `WWW-Authenticate` challenges of the MCP authorization specification.
 *
 * The issuer's metadata and JWKS are fetched with plain `fetch`, not through
 * the egress policy: the issuer is operator configuration, like the database
 * URL, not an address a tool call or a webhook chose.
 *
 * @module
 */
import {
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  jwtVerify,
} from "jose";
import { createHash } from "node:crypto";
import { type OAuthConfig, VIRTUAL_SERVER_NAME_PATTERN } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller } from "../gateway/caller.ts";
import { matchesToolPatterns } from "../gateway/caller.ts";

/** Longest access token looked at, in characters (a JWT is longer than an API key). */
export const MAX_JWT_CHARS = 8192;

/** Signature algorithms accepted: asymmetric only (never `none` or `HS*`). */
export const OAUTH_ALGORITHMS: readonly string[] = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];

/** Path of the protected-resource metadata (RFC 9728 §3). */
export const PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource";

/** Verified tokens remembered (by SHA-256), so a client's next request skips the signature check. */
const VERIFIED_MAX = 1000;

/** Largest issuer metadata or JWKS document read, in bytes. */
const MAX_DOCUMENT_BYTES = 512 * 1024;

/** Whether `token` has the shape of a JWS compact JWT: three base64url segments. */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

/** Options of an {@linkcode OAuthValidator}. */
export interface OAuthValidatorOptions {
  /** Clock, ms since the epoch (token times, cache ages). @default Date.now */
  now?: () => number;
  /** Keys older than this are fetched again, in ms. @default 10 minutes */
  maxAgeMs?: number;
  /** Least time between two fetches for an unknown key id, in ms. @default 30 s */
  refreshCooldownMs?: number;
  /** After a failed fetch, answer 503 without fetching for this long, in ms. @default 5 s */
  failureCooldownMs?: number;
  /** Longest wait for the issuer's metadata or JWKS, in ms. @default 5 s */
  timeoutMs?: number;
  /**
   * How long a verified token is taken again without checking its signature
   * (its `exp` is still checked on every request), in ms. @default 60 s
   */
  verifiedTtlMs?: number;
  /** Where a stale JWKS kept after a failed refresh is reported. @default ignored */
  log?: (message: string) => void;
}

/** The protected-resource metadata document (RFC 9728 §2). */
export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers: string[];
  scopes_supported: string[];
  bearer_methods_supported: string[];
}

interface KeySet {
  get: ReturnType<typeof createLocalJWKSet>;
  fetchedAt: number;
}

/**
 * Validates access tokens of one issuer for one audience, with the issuer's
 * JWKS cached: fetched on first use, again after `maxAgeMs` (a stale set is
 * kept if that fails), and at once for a token whose key id it lacks (at most
 * once per `refreshCooldownMs`).
 *
 * @example
 * ```ts
 * const oauth = new OAuthValidator(config.auth.oauth!);
 * const caller = await oauth.verify(token); // {kind: "oauth", id: sub, name: client_id, tools}
 * ```
 */
export class OAuthValidator {
  /** The configuration it validates against. */
  readonly config: OAuthConfig;
  readonly #now: () => number;
  readonly #maxAgeMs: number;
  readonly #refreshCooldownMs: number;
  readonly #failureCooldownMs: number;
  readonly #timeoutMs: number;
  readonly #log: (message: string) => void;
  #jwksUrl?: string;
  #keys?: KeySet;
  #loading?: Promise<KeySet>;
  #failure?: { at: number; error: GatewayError };
  #lastKidRefresh = Number.NEGATIVE_INFINITY;
  readonly #verifiedTtlMs: number;
  /** SHA-256 of a verified token → its caller, `exp` (s) and until when it is remembered (ms). */
  readonly #verified = new Map<string, { caller: Caller; exp: number; until: number }>();

  constructor(config: OAuthConfig, options: OAuthValidatorOptions = {}) {
    this.config = config;
    this.#jwksUrl = config.jwks_url;
    this.#now = options.now ?? Date.now;
    this.#maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
    this.#refreshCooldownMs = options.refreshCooldownMs ?? 30_000;
    this.#failureCooldownMs = options.failureCooldownMs ?? 5_000;
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#verifiedTtlMs = options.verifiedTtlMs ?? 60_000;
    this.#log = options.log ?? (() => {});
  }

  /**
   * URL of the metadata document for the audience: the well-known path
   * inserted between the audience's origin and its path (RFC 9728 §3.1),
   * `https://toolgate.example.com/.well-known/oauth-protected-resource/mcp`.
   */
  get metadataUrl(): string {
    const url = new URL(this.config.audience);
    return `${url.origin}${this.metadataPath}`;
  }

  /** Path of {@linkcode metadataUrl} on this server. */
  get metadataPath(): string {
    const path = new URL(this.config.audience).pathname;
    return path === "/" ? PROTECTED_RESOURCE_PATH : `${PROTECTED_RESOURCE_PATH}${path}`;
  }

  /**
   * The resource a request path is, when it is one of its own below the
   * audience: a virtual server's `/mcp/<name>` when the audience is the
   * `/mcp` endpoint (`https://toolgate.example.com/mcp/sales`). `undefined`
   * for every other path (they are the audience itself).
   */
  resourceFor(path: string): string | undefined {
    const audience = new URL(this.config.audience);
    const base = audience.pathname.replace(/\/+$/, "");
    if (base !== "/mcp") return undefined;
    if (!path.startsWith("/mcp/")) return undefined;
    const name = path.slice("/mcp/".length).replace(/\/$/, "");
    return VIRTUAL_SERVER_NAME_PATTERN.test(name) ? `${audience.origin}${base}/${name}` : undefined;
  }

  /** URL of the metadata document of `resource` (RFC 9728 §3.1); of the audience without one. */
  metadataUrlOf(resource: string | undefined): string {
    if (resource === undefined) return this.metadataUrl;
    const url = new URL(resource);
    return `${url.origin}${PROTECTED_RESOURCE_PATH}${url.pathname}`;
  }

  /**
   * The protected-resource metadata document: of the audience, or of a
   * resource below it ({@linkcode resourceFor}).
   */
  metadata(resource: string = this.config.audience): ProtectedResourceMetadata {
    const scopes = [
      ...new Set([...Object.keys(this.config.scopes), ...this.config.required_scopes]),
    ];
    return {
      resource,
      authorization_servers: [this.config.issuer],
      scopes_supported: scopes,
      bearer_methods_supported: ["header"],
    };
  }

  /** The scopes whose rules allow `tool` (for an `insufficient_scope` challenge). */
  scopesFor(tool: string): string[] {
    return Object.entries(this.config.scopes)
      .filter(([, patterns]) => matchesToolPatterns(tool, patterns))
      .map(([scope]) => scope);
  }

  /**
   * The caller of an access token: its audience must be the configured one
   * or, for a request to a resource below it (`resource`, see
   * {@linkcode OAuthValidator.resourceFor}), that resource.
   *
   * @throws {GatewayError} `UNAUTHORIZED` saying what is wrong with the
   * token; `FORBIDDEN` with `details.required_scopes` when it lacks one of
   * `required_scopes`; `UNAVAILABLE` when the issuer's keys cannot be fetched.
   */
  async verify(token: string, resource?: string): Promise<Caller> {
    // The same token verified a moment ago for the same resource: same claims, so only time
    // can have made it invalid (the signature check is most of the cost).
    const digest = createHash("sha256").update(token).update(`\n${resource ?? ""}`).digest(
      "base64url",
    );
    const now = this.#now();
    const known = this.#verified.get(digest);
    if (known) {
      if (now < known.until && known.exp > Math.floor(now / 1000) - this.config.clock_tolerance_s) {
        return known.caller;
      }
      this.#verified.delete(digest);
    }
    const { caller, exp } = await this.#verify(token, resource);
    if (this.#verified.size >= VERIFIED_MAX) {
      this.#verified.delete(this.#verified.keys().next().value!);
    }
    this.#verified.set(digest, {
      caller,
      exp,
      until: this.#now() + this.#verifiedTtlMs,
    });
    return caller;
  }

  /** The full check: header, signature, claims, scopes. */
  async #verify(token: string, resource?: string): Promise<{ caller: Caller; exp: number }> {
    let alg: unknown;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw invalid("it is not a JWT (its header is not base64url JSON)");
    }
    if (typeof alg !== "string" || !OAUTH_ALGORITHMS.includes(alg)) {
      throw invalid(
        `its algorithm ${JSON.stringify(alg ?? null)} is not accepted; toolgate takes ` +
          `asymmetric signatures only (${OAUTH_ALGORITHMS.join(", ")}), never none or HS*`,
      );
    }
    const { issuer, audience, clock_tolerance_s } = this.config;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, (header, jws) => this.#key(header, jws), {
        issuer,
        // A resource below the audience (a virtual server) also takes tokens for the audience.
        audience: resource === undefined ? audience : [audience, resource],
        algorithms: [...OAUTH_ALGORITHMS],
        clockTolerance: clock_tolerance_s,
        currentDate: new Date(this.#now()),
        requiredClaims: ["exp", "sub"],
      }));
    } catch (error) {
      throw this.#explain(error, token, resource);
    }
    const granted = grantedScopes(payload);
    const missing = this.config.required_scopes.filter((scope) => !granted.has(scope));
    if (missing.length) {
      throw new GatewayError(
        "FORBIDDEN",
        `Forbidden: the access token lacks the scope${missing.length > 1 ? "s" : ""} ` +
          `${missing.join(" ")} every request needs; ask the issuer for a token with it`,
        { details: { required_scopes: this.config.required_scopes } },
      );
    }
    const tools = new Set<string>();
    for (const scope of granted) {
      for (const pattern of this.config.scopes[scope] ?? []) tools.add(pattern);
    }
    const sub = String(payload.sub);
    const client = typeof payload.client_id === "string"
      ? payload.client_id
      : typeof payload.azp === "string"
      ? payload.azp
      : sub;
    const caller: Caller = Object.freeze({
      kind: "oauth",
      id: sub,
      name: client,
      tools: [...tools],
      scopes: [...granted].sort(),
    });
    return { caller, exp: Number(payload.exp) };
  }

  /** The key for a token's header, refreshing the JWKS once for an unknown key id. */
  async #key(
    header: Parameters<ReturnType<typeof createLocalJWKSet>>[0],
    jws: Parameters<ReturnType<typeof createLocalJWKSet>>[1],
  ): Promise<CryptoKey> {
    const keys = await this.#keySet(false);
    try {
      return await keys.get(header, jws);
    } catch (error) {
      const now = this.#now();
      if (
        !(error instanceof errors.JWKSNoMatchingKey) ||
        now - this.#lastKidRefresh < this.#refreshCooldownMs
      ) throw error;
      this.#lastKidRefresh = now;
      const fresh = await this.#keySet(true);
      return await fresh.get(header, jws);
    }
  }

  /** The cached key set, fetched when missing, old, or `force`d. */
  async #keySet(force: boolean): Promise<KeySet> {
    const now = this.#now();
    const keys = this.#keys;
    if (!force && keys && now - keys.fetchedAt < this.#maxAgeMs) return keys;
    const failure = this.#failure;
    if (failure && now - failure.at < this.#failureCooldownMs) {
      if (!force && keys) return keys;
      throw new GatewayError("UNAVAILABLE", failure.error.message, {
        details: { retry_after_ms: failure.at + this.#failureCooldownMs - now },
      });
    }
    this.#loading ??= this.#load().finally(() => this.#loading = undefined);
    try {
      return await this.#loading;
    } catch (error) {
      if (!force && keys) {
        this.#log(`keeping the issuer's keys fetched earlier: ${(error as Error).message}`);
        return keys;
      }
      throw error;
    }
  }

  async #load(): Promise<KeySet> {
    try {
      const url = this.#jwksUrl ??= await this.#discover();
      const document = await this.#fetchJson(url, "the issuer's JWKS");
      if (
        !document || typeof document !== "object" ||
        !Array.isArray((document as { keys?: unknown }).keys)
      ) {
        throw unavailable(`the issuer's JWKS ${url} is not a JSON Web Key Set ({"keys": [...]})`);
      }
      const keys = {
        get: createLocalJWKSet(document as JSONWebKeySet),
        fetchedAt: this.#now(),
      };
      this.#keys = keys;
      this.#failure = undefined;
      return keys;
    } catch (thrown) {
      const message = thrown instanceof GatewayError
        ? thrown.message
        : unavailable(`the issuer's JWKS cannot be read (${(thrown as Error).message})`).message;
      const error = new GatewayError("UNAVAILABLE", message, {
        details: { retry_after_ms: this.#failureCooldownMs },
        cause: thrown,
      });
      this.#failure = { at: this.#now(), error };
      throw error;
    }
  }

  /**
   * `jwks_uri` from the issuer's metadata: RFC 8414 authorization server
   * metadata, then OpenID Connect discovery, in the order the MCP
   * authorization specification gives.
   */
  async #discover(): Promise<string> {
    const issuer = new URL(this.config.issuer);
    const path = issuer.pathname === "/" ? "" : issuer.pathname.replace(/\/$/, "");
    const candidates = [
      `${issuer.origin}/.well-known/oauth-authorization-server${path}`,
      `${issuer.origin}/.well-known/openid-configuration${path}`,
      ...(path ? [`${issuer.origin}${path}/.well-known/openid-configuration`] : []),
    ];
    for (const url of candidates) {
      const document = await this.#fetchJson(url, "the issuer's metadata", true);
      if (document === undefined) continue;
      const metadata = document as { issuer?: unknown; jwks_uri?: unknown };
      if (metadata.issuer !== undefined && metadata.issuer !== this.config.issuer) {
        throw unavailable(
          `the issuer's metadata ${url} names issuer ${JSON.stringify(metadata.issuer)}, ` +
            `not auth.oauth.issuer ${this.config.issuer}`,
        );
      }
      if (typeof metadata.jwks_uri !== "string" || !URL.canParse(metadata.jwks_uri)) {
        throw unavailable(
          `the issuer's metadata ${url} has no jwks_uri; set auth.oauth.jwks_url`,
        );
      }
      return metadata.jwks_uri;
    }
    throw unavailable(
      `the issuer publishes no metadata (tried ${candidates.join(", ")}); set auth.oauth.jwks_url`,
    );
  }

  /** A JSON document; `undefined` for a 404 when `missingOk`. */
  async #fetchJson(url: string, what: string, missingOk = false): Promise<unknown> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.#timeoutMs);
    try {
      let response: Response;
      try {
        response = await fetch(url, {
          headers: { accept: "application/json" },
          signal: abort.signal,
        });
      } catch (error) {
        throw unavailable(
          `${what} ${url} cannot be fetched (${
            abort.signal.aborted ? `no answer in ${this.#timeoutMs} ms` : (error as Error).message
          })`,
        );
      }
      if (!response.ok) {
        await response.body?.cancel();
        if (missingOk && response.status === 404) return undefined;
        throw unavailable(`${what} ${url} answered HTTP ${response.status}`);
      }
      const text = await response.text();
      if (text.length > MAX_DOCUMENT_BYTES) {
        throw unavailable(`${what} ${url} is over ${MAX_DOCUMENT_BYTES} bytes`);
      }
      try {
        return JSON.parse(text);
      } catch {
        throw unavailable(`${what} ${url} is not JSON`);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** A jose failure in words, as `UNAUTHORIZED` (a fetch failure stays `UNAVAILABLE`). */
  #explain(error: unknown, token: string, resource?: string): GatewayError {
    if (error instanceof GatewayError) return error;
    if (error instanceof errors.JWTExpired) {
      const exp = Number(error.payload.exp);
      return invalid(
        `it expired at ${Number.isFinite(exp) ? new Date(exp * 1000).toISOString() : "?"}` +
          ` (tolerance ${this.config.clock_tolerance_s} s); get a new one from the issuer`,
      );
    }
    if (error instanceof errors.JWTClaimValidationFailed) {
      const { claim, reason, payload } = error;
      switch (claim) {
        case "iss":
          return invalid(
            `it was issued by ${JSON.stringify(payload.iss ?? null)}, not by ${this.config.issuer}`,
          );
        case "aud":
          return invalid(
            `its audience ${JSON.stringify(payload.aud ?? null)} does not contain ` +
              `${this.config.audience}${resource ? ` or ${resource}` : ""}; ` +
              "ask the issuer for a token for this resource",
          );
        case "nbf":
          return invalid(
            `it is not valid before ${
              new Date(Number(payload.nbf) * 1000).toISOString()
            } (tolerance ${this.config.clock_tolerance_s} s)`,
          );
        case "iat":
          return invalid("it was issued in the future");
        default:
          return invalid(
            reason === "missing"
              ? `it has no ${claim} claim`
              : `its ${claim} claim is invalid (${error.message})`,
          );
      }
    }
    if (error instanceof errors.JWKSNoMatchingKey) {
      let kid: unknown;
      try {
        kid = decodeProtectedHeader(token).kid;
      } catch { /* checked before */ }
      return invalid(
        `the issuer's JWKS has no key ${
          kid === undefined ? "for its algorithm" : `with kid ${JSON.stringify(kid)}`
        }`,
      );
    }
    if (error instanceof errors.JWKSMultipleMatchingKeys) {
      return invalid("it names no kid and the issuer's JWKS has several keys that could match");
    }
    if (error instanceof errors.JWSSignatureVerificationFailed) {
      return invalid("its signature does not verify against the issuer's keys");
    }
    if (error instanceof errors.JOSEAlgNotAllowed) {
      return invalid("its algorithm is not accepted (asymmetric signatures only)");
    }
    if (error instanceof errors.JOSEError) {
      return invalid(`it is malformed (${error.message})`);
    }
    return invalid("it is malformed");
  }
}

/** The scopes of a token: `scope` (space-separated) or `scp` (array or string). */
function grantedScopes(payload: JWTPayload): Set<string> {
  const scopes = new Set<string>();
  const add = (value: unknown) => {
    if (typeof value === "string") {
      for (const scope of value.split(" ")) if (scope) scopes.add(scope);
    } else if (Array.isArray(value)) {
      for (const scope of value) if (typeof scope === "string" && scope) scopes.add(scope);
    }
  };
  add(payload.scope);
  add(payload.scp);
  return scopes;
}

function invalid(why: string): GatewayError {
  return new GatewayError("UNAUTHORIZED", `Unauthorized: the access token is refused: ${why}`);
}

function unavailable(why: string): GatewayError {
  return new GatewayError(
    "UNAVAILABLE",
    `Unavailable: access tokens cannot be checked now: ${why}`,
  );
}

/**
 * A value for a `WWW-Authenticate` auth-param: printable ASCII without `"`
 * and `\` (RFC 6750 §3), at most 300 characters.
 */
export function challengeValue(text: string): string {
  return text.replace(/["\\]/g, "'").replace(/[^\x20-\x7E]/g, "?").slice(0, 300);
}
