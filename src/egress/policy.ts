/**
 * The egress policy: which addresses an outgoing connection toolgate makes
 * on someone's behalf may reach.
 *
 * @module
 */
import ipaddr from "ipaddr.js";
import { GatewayError } from "../errors/mod.ts";
import { type AddressRange, type Classified, classify, RANGE_NAMES } from "./_ranges.ts";
import { allowingCidr, type AllowList, allowsHost, parseAllowList } from "./allow_list.ts";

/**
 * Who the connection is for. `public`: `http_request` and webhook deliveries,
 * whose URLs come from callers; only public addresses. `operator`: HTTP MCP
 * upstreams, the operator's own configuration; also loopback and private
 * addresses, never link-local or metadata ones.
 */
export type EgressProfile = "public" | "operator";

/** An address toolgate itself listens on. */
export interface ListenAddress {
  /** Bound host: an address (`127.0.0.1`, `0.0.0.0`, `::`) or `localhost`. */
  hostname: string;
  /** Bound port. */
  port: number;
}

/** One resolved address. */
export interface LookupAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to its addresses, in the order to try them. */
export type LookupFunction = (hostname: string) => Promise<LookupAddress[]>;

/** A checked destination: connect to `address`, speak to `host`. */
export interface EgressTarget {
  /** The URL's host name (what `Host`, SNI and the certificate name use). */
  host: string;
  /** The checked address to connect to. */
  address: string;
  /** Its family. */
  family: 4 | 6;
  /** The port. */
  port: number;
}

/** Options of {@linkcode EgressPolicy}. */
export interface EgressPolicyOptions {
  /** `egress.allow` entries (hosts, `*.suffix`, addresses, CIDRs). @default [] */
  allow?: readonly string[];
  /** Toolgate's own listening addresses, refused always. @default [] */
  listening?: readonly ListenAddress[];
  /** The `X-Toolgate-Loop` value sent with deliveries and requests. @default none */
  marker?: string;
  /** An HTTP(S) proxy is configured from the environment (`HTTP_PROXY`, …). @default false */
  proxied?: boolean;
  /** DNS resolution. @default the system resolver (`getaddrinfo`, as `fetch` and `Deno.connect` use) */
  lookup?: LookupFunction;
  /** This machine's addresses (for `0.0.0.0` and `::` binds). @default Deno.networkInterfaces() */
  localAddresses?: () => string[];
  /**
   * CA certificates (PEM) trusted beside the built-in roots for `https:`, as
   * `DENO_CERT` adds them to `fetch`'s. @default none
   */
  caCerts?: readonly string[];
  /**
   * The root stores `https:` connections trust, as `DENO_TLS_CA_STORE` names
   * them for Deno's own connections: Mozilla's roots built into the runtime,
   * the operating system's store, or both. @default ["mozilla"]
   */
  caStores?: readonly CaStore[];
}

/** A root certificate store (`DENO_TLS_CA_STORE`). */
export type CaStore = "mozilla" | "system";

/** The ranges each profile lets through without an allow-list entry. */
const PASSING: Record<EgressProfile, ReadonlySet<AddressRange>> = {
  public: new Set(["public"]),
  operator: new Set(["public", "loopback", "private", "unique-local", "carrier-grade-nat"]),
};

const PROFILE_USERS: Record<EgressProfile, string> = {
  public: "http_request and webhook deliveries",
  operator: "MCP upstreams",
};

/** The header that marks toolgate's own outgoing requests (loop detection). */
export const LOOP_HEADER = "X-Toolgate-Loop";

/** A failed DNS resolution (not a refusal). */
export class LookupError extends Error {
  /** @param host the name that did not resolve */
  constructor(host: string, cause?: unknown) {
    const code = (cause as { code?: string } | undefined)?.code;
    super(`DNS lookup of ${host} failed${code ? ` (${code})` : ""}`, { cause });
    this.name = "LookupError";
  }
}

async function systemLookup(hostname: string): Promise<LookupAddress[]> {
  // Loaded on first use, not on the stdio start-up path.
  const { lookup } = await import("node:dns/promises");
  const found = await lookup(hostname, { all: true, verbatim: true });
  return found.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
}

function systemAddresses(): string[] {
  try {
    return Deno.networkInterfaces().map((item) => item.address);
  } catch {
    return []; // No --allow-sys: loopback and the unspecified address still count.
  }
}

/** `[::1]` → `::1`. */
function bareHost(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, "$1");
}

/** `localhost` and `*.localhost` (RFC 6761): loopback whatever DNS says. */
function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  return name === "localhost" || name.endsWith(".localhost");
}

/**
 * The one egress policy of a process: refuses addresses outside the
 * profile's ranges unless `egress.allow` lists the host or a CIDR covering
 * the address, and refuses toolgate's own listening addresses always.
 *
 * @example
 * ```ts
 * const egress = new EgressPolicy({ allow: ["10.1.0.0/16"] });
 * const target = await egress.resolve(new URL("http://api.internal/x"), "public");
 * // connect to target.address, send Host / SNI target.host
 * ```
 */
export class EgressPolicy {
  /** The `X-Toolgate-Loop` value, once known. */
  marker: string | undefined;
  /** An HTTP(S) proxy configured from the environment makes the connections. */
  readonly proxied: boolean;
  /** CA certificates (PEM) trusted beside the built-in roots (`DENO_CERT`). */
  readonly caCerts: readonly string[];
  /** The root stores trusted (`DENO_TLS_CA_STORE`). */
  readonly caStores: readonly CaStore[];
  #allow: AllowList;
  #listening: ListenAddress[];
  #lookup: LookupFunction;
  #localAddresses: () => string[];
  #local: Set<string> | undefined;

  /**
   * @param options allow-list, own addresses, marker, resolver
   * @throws {TypeError} on an invalid allow-list entry (config parsing rejects them first)
   */
  constructor(options: EgressPolicyOptions = {}) {
    const {
      allow = [],
      listening = [],
      marker,
      proxied = false,
      lookup = systemLookup,
      localAddresses = systemAddresses,
      caCerts = [],
      caStores = ["mozilla"],
    } = options;
    this.#allow = parseAllowList(allow);
    this.#listening = [...listening];
    this.marker = marker;
    this.proxied = proxied;
    this.caCerts = [...caCerts];
    this.caStores = [...caStores];
    this.#lookup = lookup;
    this.#localAddresses = localAddresses;
  }

  /** Adds an address toolgate listens on (refused from then on). */
  listen(address: ListenAddress): void {
    if (
      !this.#listening.some((known) =>
        known.hostname === address.hostname && known.port === address.port
      )
    ) {
      this.#listening.push({ ...address });
    }
  }

  /**
   * Resolves the URL's host (IP literals as they are), checks every address
   * it resolves to, and returns the first: connect to that one, so nothing
   * can change between the check and the connection.
   *
   * @throws {GatewayError} `EGRESS_DENIED` naming the host, the address and the setting that allows it
   * @throws {LookupError} when the name does not resolve
   */
  async resolve(url: URL, profile: EgressProfile): Promise<EgressTarget> {
    const host = bareHost(url.hostname);
    const port = portOf(url);
    const literal = classify(host);
    if (literal) {
      this.#check(host, literal, port, profile);
      return { host, address: literal.address, family: host.includes(":") ? 6 : 4, port };
    }
    let found: LookupAddress[];
    try {
      found = await this.#lookup(host);
    } catch (error) {
      throw new LookupError(host, error);
    }
    if (found.length === 0) throw new LookupError(host);
    // localhost is loopback whatever the resolver says (RFC 6761).
    if (isLocalhostName(host)) {
      const stray = found.find((item) => classify(item.address)?.range !== "loopback");
      if (stray) found = [{ address: "127.0.0.1", family: 4 }];
    }
    let first: EgressTarget | undefined;
    for (const item of found) {
      const classified = classify(item.address);
      if (!classified) throw new LookupError(host, new Error(`bad address ${item.address}`));
      this.#check(host, classified, port, profile);
      first ??= { host, address: classified.address, family: item.family, port };
    }
    return first!;
  }

  /**
   * Checks a URL whose host is an IP address or `localhost` without
   * resolving anything (names are checked when connecting).
   *
   * @throws {GatewayError} `EGRESS_DENIED`
   */
  checkLiteral(url: URL, profile: EgressProfile): void {
    const host = bareHost(url.hostname);
    const port = portOf(url);
    const literal = classify(host) ?? (isLocalhostName(host) ? classify("127.0.0.1") : undefined);
    if (literal) this.#check(host, literal, port, profile);
  }

  /**
   * Whether an address may be reached, as {@linkcode EgressPolicy.resolve}
   * decides for each resolved address.
   *
   * @throws {GatewayError} `EGRESS_DENIED`
   */
  check(host: string, address: string, port: number, profile: EgressProfile): void {
    const classified = classify(address);
    if (!classified) throw new TypeError(`Not an IP address: ${address}`);
    this.#check(bareHost(host), classified, port, profile);
  }

  #check(host: string, target: Classified, port: number, profile: EgressProfile): void {
    const shown = target.address.includes(":") ? `[${target.address}]` : target.address;
    const own = this.#ownListener(target, port);
    if (own) {
      throw new GatewayError(
        "EGRESS_DENIED",
        `Refused to connect to ${host} (${shown}:${port}): it is toolgate's own listening address ` +
          `(${own}); it is refused always, even where egress.allow allows the address, so that ` +
          `toolgate cannot call itself in a loop`,
        {
          details: { host, address: target.address, port, reason: "own_address", profile },
        },
      );
    }
    if (PASSING[profile].has(target.range)) return;
    if (allowsHost(this.#allow, host)) return;
    if (allowingCidr(this.#allow, target.parsed)) return;
    // An IPv6 form of an IPv4 address may be listed as itself too.
    if (target.embedded && allowingCidr(this.#allow, ipaddr.parse(target.address))) return;
    const isName = classify(host) === undefined;
    const entry = `${target.embedded ?? target.address}/${
      (target.embedded ?? target.address).includes(":") ? 128 : 32
    }`;
    const fix = isName ? `"${host}" or "${entry}"` : `"${entry}"`;
    const embedded = target.embedded ? ` (IPv4 ${target.embedded} inside it)` : "";
    const resolved = isName ? ` (${host} resolves to ${target.address})` : "";
    throw new GatewayError(
      "EGRESS_DENIED",
      `Refused to connect to ${target.address}${embedded}${resolved}: it is ${
        RANGE_NAMES[target.range]
      }, which ${PROFILE_USERS[profile]} may not reach by default; to allow it add ${fix} to ` +
        `egress.allow in config.json or to TOOLGATE_EGRESS_ALLOW`,
      {
        details: {
          host,
          address: target.address,
          port,
          range: target.range,
          profile,
          allow_entry: isName ? host : entry,
        },
      },
    );
  }

  /** The listener `target:port` reaches, shown as `host:port`, if any. */
  #ownListener(target: Classified, port: number): string | undefined {
    const address = target.embedded ?? target.address;
    for (const listener of this.#listening) {
      if (listener.port !== port) continue;
      const shown = `${
        listener.hostname.includes(":") ? `[${listener.hostname}]` : listener.hostname
      }:${port}`;
      // Connecting to 0.0.0.0 or :: reaches a local listener.
      if (target.range === "unspecified") return shown;
      const bound = classify(listener.hostname);
      if (!bound) {
        if (isLocalhostName(listener.hostname) && target.range === "loopback") return shown;
        continue;
      }
      if (bound.range === "unspecified") {
        // A wildcard bind answers on every local address.
        if (target.range === "loopback" || this.#isLocal(address)) return shown;
      } else if ((bound.embedded ?? bound.address) === address) {
        return shown;
      }
    }
    return undefined;
  }

  #isLocal(address: string): boolean {
    if (!this.#local) {
      this.#local = new Set();
      for (const text of this.#localAddresses()) {
        const classified = classify(text);
        if (classified) this.#local.add(classified.embedded ?? classified.address);
      }
    }
    return this.#local.has(address);
  }
}

function portOf(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === "https:" ? 443 : 80;
}
