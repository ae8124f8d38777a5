/**
 * From an incoming payload to a handler call: which payloads run
 * (`--when`), which handler runs them (`--route-by`, `--route`), and which
 * arguments it gets (`--map`, `--header`). Sources are JSON Pointers into the
 * payload (RFC 6901: `/issue/title`, `/commits/0/id`, `` for the whole
 * payload) or request headers (`header:X-GitHub-Event`).
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";

/** Where a value comes from: a JSON Pointer into the payload, or a request header. */
export type Source = { pointer: string[] } | { header: string };

/** One `--when` condition: the source's value equals, differs from, or exists. */
export interface Condition {
  /** As written: `/action=opened`, `header:X-GitHub-Event!=ping`, `/issue`. */
  text: string;
  source: Source;
  op: "eq" | "ne" | "exists";
  value?: string;
}

/** How an endpoint turns payloads into calls, as stored on its registration. */
export interface IncomingMappingSpec {
  /** Argument name → source text (`/issue/title` or `header:X-GitHub-Event`). */
  map?: Record<string, string>;
  /** `--when` conditions as written; all must hold. */
  when?: string[];
  /** The source whose value picks the handler. */
  route_by?: string;
  /** Value of `route_by` → handler; others go to the endpoint's handler. */
  routes?: Record<string, string>;
}

/** What to do with one payload. */
export type MappedCall =
  | { skip: string }
  | { handler: string; args: Record<string, unknown> };

const ARGUMENT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

function usage(message: string): GatewayError {
  return new GatewayError("USAGE", message);
}

/**
 * Parses a source: `/a/b` (JSON Pointer into the payload; `~1` is `/`, `~0`
 * is `~`), `` (the whole payload) or `header:<Name>`.
 *
 * @param flag The option it came from, named in errors.
 * @throws {GatewayError} `USAGE` naming the flag and the accepted forms.
 */
export function parseSource(text: string, flag: string): Source {
  if (text.toLowerCase().startsWith("header:")) {
    const name = text.slice("header:".length).trim();
    if (!HEADER_NAME.test(name)) {
      throw usage(`Invalid ${flag} "${text}": "${name}" is not a header name`);
    }
    return { header: name.toLowerCase() };
  }
  if (text === "") return { pointer: [] };
  if (!text.startsWith("/")) {
    throw usage(
      `Invalid ${flag} "${text}": expected a JSON Pointer into the payload (/issue/title) ` +
        `or header:<Name>`,
    );
  }
  const tokens = text.slice(1).split("/");
  for (const token of tokens) {
    if (/~(?![01])/.test(token)) {
      throw usage(`Invalid ${flag} "${text}": "~" must be written ~0 and "/" ~1 in a pointer`);
    }
  }
  return { pointer: tokens.map((token) => token.replaceAll("~1", "/").replaceAll("~0", "~")) };
}

/** Parses `--map <argument>=<source>`. */
export function parseMapEntry(text: string): [string, string] {
  const eq = text.indexOf("=");
  const name = eq === -1 ? "" : text.slice(0, eq).trim();
  if (eq === -1 || !ARGUMENT_NAME.test(name)) {
    throw usage(
      `Invalid --map "${text}": expected <argument>=<source>, e.g. --map title=/issue/title ` +
        `or --map event=header:X-GitHub-Event`,
    );
  }
  const source = text.slice(eq + 1).trim();
  parseSource(source, "--map");
  return [name, source];
}

/** Parses `--header <Name>[=<argument>]` into a map entry (`x_github_event=header:X-GitHub-Event`). */
export function parseHeaderEntry(text: string): [string, string] {
  const eq = text.indexOf("=");
  const name = (eq === -1 ? text : text.slice(0, eq)).trim();
  if (!HEADER_NAME.test(name)) {
    throw usage(`Invalid --header "${text}": expected <Name>[=<argument>], e.g. X-GitHub-Event`);
  }
  const argument = eq === -1 ? name.toLowerCase().replaceAll("-", "_") : text.slice(eq + 1).trim();
  if (!ARGUMENT_NAME.test(argument)) {
    throw usage(`Invalid --header "${text}": "${argument}" is not an argument name`);
  }
  return [argument, `header:${name}`];
}

/** Parses a `--when` condition: `<source>=<value>`, `<source>!=<value>` or `<source>`. */
export function parseCondition(text: string): Condition {
  const ne = text.indexOf("!=");
  const eq = text.indexOf("=");
  if (ne !== -1 && ne < eq) {
    return {
      text,
      source: parseSource(text.slice(0, ne), "--when"),
      op: "ne",
      value: text.slice(ne + 2),
    };
  }
  if (eq !== -1) {
    return {
      text,
      source: parseSource(text.slice(0, eq), "--when"),
      op: "eq",
      value: text.slice(eq + 1),
    };
  }
  if (text === "") {
    throw usage('Invalid --when "": expected <source>=<value>, e.g. --when /action=opened');
  }
  return { text, source: parseSource(text, "--when"), op: "exists" };
}

/** Parses `--route <value>=<handler>`. */
export function parseRouteEntry(text: string): [string, string] {
  const eq = text.lastIndexOf("=");
  const handler = eq === -1 ? "" : text.slice(eq + 1).trim();
  if (eq === -1 || handler === "") {
    throw usage(
      `Invalid --route "${text}": expected <value>=<handler>, e.g. --route issues=memory_set`,
    );
  }
  return [text.slice(0, eq), handler];
}

/**
 * Checks an endpoint's mapping as a whole (each part parses; `--route`
 * needs `--route-by` and the reverse).
 *
 * @throws {GatewayError} `USAGE` naming the flag.
 */
export function validateMapping(spec: IncomingMappingSpec): void {
  for (const [name, source] of Object.entries(spec.map ?? {})) {
    parseMapEntry(`${name}=${source}`);
  }
  for (const condition of spec.when ?? []) parseCondition(condition);
  const routes = Object.keys(spec.routes ?? {});
  if (spec.route_by !== undefined) parseSource(spec.route_by, "--route-by");
  if (routes.length && spec.route_by === undefined) {
    throw usage("Invalid --route: give --route-by <source> to say which value picks the handler");
  }
  if (!routes.length && spec.route_by !== undefined) {
    throw usage("Invalid --route-by: give at least one --route <value>=<handler>");
  }
}

/** Whether the spec changes anything (without one, the payload is the handler's arguments). */
export function hasMapping(spec: IncomingMappingSpec): boolean {
  return Boolean(
    (spec.map && Object.keys(spec.map).length) || spec.when?.length || spec.route_by !== undefined,
  );
}

/** The value at a source, or `undefined` when there is none. */
function resolve(source: Source, payload: unknown, headers: Headers): unknown {
  if ("header" in source) return headers.get(source.header) ?? undefined;
  let value: unknown = payload;
  for (const token of source.pointer) {
    if (Array.isArray(value)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
      value = value[Number(token)];
    } else if (value !== null && typeof value === "object" && Object.hasOwn(value, token)) {
      value = (value as Record<string, unknown>)[token];
    } else {
      return undefined;
    }
  }
  return value;
}

/** A value as compared by `--when` and `--route`: strings as they are, other values as JSON. */
function asText(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** An endpoint's mapping, parsed once and applied to each payload. */
export class IncomingMapping {
  #map: [string, Source][];
  #when: Condition[];
  #routeBy: Source | undefined;
  #routes: Map<string, string>;
  #handler: string;
  #active: boolean;

  /**
   * @param spec The stored mapping (validated at registration).
   * @param handler The endpoint's handler: the one used when no route matches.
   */
  constructor(spec: IncomingMappingSpec, handler: string) {
    this.#map = Object.entries(spec.map ?? {}).map(([name, source]) => [
      name,
      parseSource(source, "--map"),
    ]);
    this.#when = (spec.when ?? []).map(parseCondition);
    this.#routeBy = spec.route_by === undefined
      ? undefined
      : parseSource(spec.route_by, "--route-by");
    this.#routes = new Map(Object.entries(spec.routes ?? {}));
    this.#handler = handler;
    this.#active = hasMapping(spec);
  }

  /** Whether the arguments are built by `--map` (not the payload as it came). */
  get maps(): boolean {
    return this.#map.length > 0;
  }

  /**
   * The call one payload makes, or why it is skipped.
   *
   * @example
   * ```ts
   * const mapping = new IncomingMapping({ map: { key: "/issue/html_url" }, when: ["/action=opened"] }, "memory_set");
   * mapping.apply({ action: "opened", issue: { html_url: "u" } }, new Headers());
   * // { handler: "memory_set", args: { key: "u" } }
   * ```
   */
  apply(payload: Record<string, unknown>, headers: Headers): MappedCall {
    if (!this.#active) return { handler: this.#handler, args: payload };
    for (const condition of this.#when) {
      const value = asText(resolve(condition.source, payload, headers));
      const holds = condition.op === "exists"
        ? value !== undefined
        : condition.op === "eq"
        ? value === condition.value
        : value !== condition.value;
      if (!holds) return { skip: `--when ${condition.text} does not hold` };
    }
    let handler = this.#handler;
    if (this.#routeBy) {
      const value = asText(resolve(this.#routeBy, payload, headers));
      handler = (value !== undefined ? this.#routes.get(value) : undefined) ?? this.#handler;
    }
    if (!this.#map.length) return { handler, args: payload };
    const args: Record<string, unknown> = {};
    for (const [name, source] of this.#map) {
      const value = resolve(source, payload, headers);
      if (value !== undefined) args[name] = value;
    }
    return { handler, args };
  }
}
