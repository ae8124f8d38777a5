/**
 * Who is calling: the identity one authentication step resolves (HTTP
 * bearer token, stdio, CLI) and the call pipeline carries to the tool
 * check, the audit log and, later, virtual servers and rate limits.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";

/**
 * The caller of a request.
 *
 * - `admin`: `TOOLGATE_API_TOKEN`; every tool and the management API.
 * - `local`: no authentication configured (loopback HTTP without a token
 *   or any key), stdio, the CLI; the same rights as `admin`.
 * - `key`: an API key (`toolgate keys create`): the tools its patterns
 *   allow, no management API.
 * - `oauth`: an OAuth access token (`auth.oauth`): the tools its scopes
 *   map to, no management API.
 */
export interface Caller {
  /** How the caller authenticated. */
  kind: "admin" | "local" | "key" | "oauth";
  /** The key's name, or the OAuth client (`client_id`, else `azp`, else the subject). */
  name?: string;
  /** The key's id, or the OAuth subject (`sub`). */
  id?: string;
  /** Glob patterns of the tools it may call (`memory_*`); absent: every tool. */
  tools?: readonly string[];
  /** The virtual server it is bound to (`/mcp/<server>`): it sees and calls only that server's tools. */
  server?: string;
  /** Its rate limit (`10/s`): a token bucket of its tool calls (`rate_limit.ts`). */
  rate?: string;
  /** An OAuth caller's granted scopes (what policies match on). */
  scopes?: readonly string[];
}

/** The administrator (`TOOLGATE_API_TOKEN`). */
export const ADMIN_CALLER: Caller = Object.freeze({ kind: "admin" });

/** A caller on this machine with nothing to authenticate (stdio, CLI, open loopback HTTP). */
export const LOCAL_CALLER: Caller = Object.freeze({ kind: "local" });

/**
 * Whether the caller may use the management API (`/webhooks`, `/dlq`,
 * `/incoming`, `/audit`, `/metrics`).
 */
export function isAdministrator(caller: Caller): boolean {
  return caller.kind === "admin" || caller.kind === "local";
}

const patternCache = new Map<string, RegExp>();

/**
 * A tool pattern as a regular expression: `*` matches any run of
 * characters, `?` one character; everything else literally.
 */
function patternRegExp(pattern: string): RegExp {
  let re = patternCache.get(pattern);
  if (!re) {
    const body = [...pattern].map((ch) =>
      ch === "*" ? ".*" : ch === "?" ? "." : ch.replace(/[.+^${}()|[\]\\/-]/g, "\\$&")
    ).join("");
    re = new RegExp(`^${body}$`);
    if (patternCache.size > 1000) patternCache.clear();
    patternCache.set(pattern, re);
  }
  return re;
}

/** Whether `tool` matches one of `patterns` (globs: `*`, `?`). */
export function matchesToolPatterns(tool: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => patternRegExp(pattern).test(tool));
}

/** Whether the caller may call `tool`. */
export function mayCall(caller: Caller | undefined, tool: string): boolean {
  if (!caller?.tools) return true;
  return matchesToolPatterns(tool, caller.tools);
}

/** The `FORBIDDEN` error of a call outside the caller's rights. */
export function forbiddenCall(caller: Caller, tool: string): GatewayError {
  return new GatewayError(
    "FORBIDDEN",
    `Forbidden: ${describeCaller(caller)} may not call ${tool} ` +
      `(it may call ${caller.tools?.length ? caller.tools.join(", ") : "no tool"})`,
    { details: { tool, caller: auditCaller(caller) } },
  );
}

/** The caller in words, for messages: `API key ci`, `the administrator`. */
export function describeCaller(caller: Caller): string {
  switch (caller.kind) {
    case "key":
      return `API key ${caller.name ?? caller.id}`;
    case "oauth":
      return `OAuth client ${caller.name ?? "?"} (subject ${caller.id ?? "?"})`;
    case "admin":
      return "the administrator";
    default:
      return "the local caller";
  }
}

/**
 * How the caller is recorded in an audit entry: `{kind}` and, for keys and
 * OAuth, `name` and `id` (never the patterns or the token).
 */
export function auditCaller(caller: Caller): AuditCaller {
  return {
    kind: caller.kind,
    ...(caller.name === undefined ? {} : { name: caller.name }),
    ...(caller.id === undefined ? {} : { id: caller.id }),
    ...(caller.server === undefined ? {} : { server: caller.server }),
  };
}

/** The caller as an audit entry records it. */
export interface AuditCaller {
  kind: string;
  name?: string;
  id?: string;
  server?: string;
}

/**
 * Checks a list of tool patterns (`memory_*,http_request`): names of
 * letters, digits, `_`, `-`, `.` and the globs `*` and `?`.
 *
 * @returns The patterns, trimmed, without empties.
 * @throws {GatewayError} `USAGE` naming the bad pattern.
 */
export function parseToolPatterns(text: string, what = "--tools"): string[] {
  const patterns = text.split(",").map((p) => p.trim()).filter((p) => p.length > 0);
  if (!patterns.length) {
    throw new GatewayError(
      "USAGE",
      `Invalid ${what}: give one or more tool names or patterns, e.g. 'memory_*,http_request'`,
    );
  }
  for (const pattern of patterns) {
    if (!/^[A-Za-z0-9_.*?-]{1,128}$/.test(pattern)) {
      throw new GatewayError(
        "USAGE",
        `Invalid ${what} pattern ${JSON.stringify(pattern)}: use tool names of letters, digits, ` +
          `_ - . with * (any run) and ? (one character), e.g. memory_* or github__*`,
      );
    }
  }
  return patterns;
}
