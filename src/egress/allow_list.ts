/**
 * `egress.allow` entries: host names (`api.internal`), subdomain wildcards
 * (`*.corp.example`), CIDRs (`10.1.0.0/16`, `fd00::/8`) and single addresses
 * (`127.0.0.1`, taken as `/32` or `/128`).
 *
 * @module
 */
import ipaddr from "ipaddr.js";
import { classify } from "./_ranges.ts";

/** A parsed allow-list. */
export interface AllowList {
  /** Exact host names, lower case. */
  readonly hosts: ReadonlySet<string>;
  /** Suffixes of `*.suffix` entries, with their leading dot (`.corp.example`). */
  readonly suffixes: readonly string[];
  /** Address ranges. */
  readonly cidrs: readonly { text: string; range: [ipaddr.IPv4 | ipaddr.IPv6, number] }[];
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

function isHostName(name: string): boolean {
  if (name.length > 253) return false;
  const labels = name.split(".");
  return labels.every((label) => LABEL.test(label)) && !/^\d+$/.test(labels.at(-1)!);
}

/**
 * Why an `egress.allow` entry is not valid, or `undefined` when it is.
 *
 * @example
 * ```ts
 * allowEntryProblem("10.0.0.0/33"); // "…prefix length 33 is over 32…"
 * allowEntryProblem("*.corp.example"); // undefined
 * ```
 */
export function allowEntryProblem(entry: string): string | undefined {
  const text = entry.trim().toLowerCase();
  const expected =
    "expected a host (api.internal), a subdomain wildcard (*.corp.example), an address (127.0.0.1, ::1) or a CIDR (10.0.0.0/8, fd00::/8)";
  if (text === "") return `an empty entry; ${expected}`;
  if (URL.canParse(text) && text.includes("://")) {
    return `"${entry}" is a URL; give its host (${new URL(text).hostname}) or address instead`;
  }
  if (text.includes("/")) {
    const [address, bits, ...rest] = text.split("/");
    const parsed = rest.length === 0 ? classify(address) : undefined;
    if (!parsed || !/^\d{1,3}$/.test(bits)) return `"${entry}" is not a valid CIDR; ${expected}`;
    const max = address.includes(":") ? 128 : 32;
    if (Number(bits) > max) {
      return `"${entry}": prefix length ${bits} is over ${max}; ${expected}`;
    }
    return undefined;
  }
  if (classify(text)) return undefined;
  if (text === "*") {
    return `"*" is not an entry; to allow every address use 0.0.0.0/0 and ::/0 (this turns the egress policy off)`;
  }
  if (/:\d+$/.test(text) && !text.includes("::")) {
    return `"${entry}": ports are not part of an entry (allow the host or its address for every port); ${expected}`;
  }
  const host = text.startsWith("*.") ? text.slice(2) : text;
  if (!isHostName(host)) return `"${entry}" is not a host name, address or CIDR; ${expected}`;
  return undefined;
}

/**
 * Parses validated `egress.allow` entries.
 *
 * @throws {TypeError} on an entry {@linkcode allowEntryProblem} rejects.
 */
export function parseAllowList(entries: readonly string[]): AllowList {
  const hosts = new Set<string>();
  const suffixes: string[] = [];
  const list: { text: string; range: [ipaddr.IPv4 | ipaddr.IPv6, number] }[] = [];
  for (const entry of entries) {
    const problem = allowEntryProblem(entry);
    if (problem) throw new TypeError(`Invalid egress.allow entry: ${problem}`);
    const text = entry.trim().toLowerCase();
    if (text.includes("/")) {
      const [address, bits] = text.split("/");
      list.push({ text, range: [ipaddr.parse(address.replace(/^\[|\]$/g, "")), Number(bits)] });
      continue;
    }
    const single = classify(text);
    if (single) {
      const parsed = ipaddr.parse(single.address);
      list.push({ text, range: [parsed, parsed.kind() === "ipv4" ? 32 : 128] });
    } else if (text.startsWith("*.")) {
      suffixes.push(text.slice(1));
    } else {
      hosts.add(text);
    }
  }
  return { hosts, suffixes, cidrs: list };
}

/** Whether a host name is allowed by name. */
export function allowsHost(list: AllowList, hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  return list.hosts.has(host) || list.suffixes.some((suffix) => host.endsWith(suffix));
}

/** The allow-list entry that covers an address, if any. */
export function allowingCidr(
  list: AllowList,
  address: ipaddr.IPv4 | ipaddr.IPv6,
): string | undefined {
  for (const { text, range } of list.cidrs) {
    if (range[0].kind() === address.kind() && address.match(range)) return text;
  }
  return undefined;
}
