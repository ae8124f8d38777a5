/**
 * Which range an IP address falls in, for the egress policy. Private to
 * `src/egress`.
 *
 * IPv6 forms that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`,
 * IPv4-translated `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64
 * `64:ff9b::a.b.c.d` and 6to4 `2002:AABB:CCDD::`) are judged by the IPv4
 * address inside them.
 *
 * @module
 */
import ipaddr from "ipaddr.js";

/** The kinds of address the policy tells apart; `public` is everything else. */
export type AddressRange =
  | "public"
  | "loopback"
  | "private"
  | "unique-local"
  | "carrier-grade-nat"
  | "link-local"
  | "metadata"
  | "multicast"
  | "unspecified"
  | "broadcast"
  | "reserved";

/** What a range is, in words, for refusal messages. */
export const RANGE_NAMES: Readonly<Record<AddressRange, string>> = {
  public: "a public address",
  loopback: "a loopback address",
  private: "a private (RFC 1918) address",
  "unique-local": "a unique-local IPv6 address (fc00::/7)",
  "carrier-grade-nat": "a carrier-grade NAT address (100.64.0.0/10)",
  "link-local": "a link-local address",
  metadata: "a cloud metadata address",
  multicast: "a multicast address",
  unspecified: "the unspecified address",
  broadcast: "the broadcast address",
  reserved: "a reserved or special-purpose address",
};

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

function cidrs(...list: string[]): Cidr[] {
  return list.map((text) => ipaddr.parseCIDR(text));
}

/** Cloud instance metadata services, refused in every profile unless allowed. */
const METADATA = cidrs(
  "169.254.169.254/32", // AWS, GCP, Azure, OpenStack, DigitalOcean, …
  "169.254.170.2/32", // AWS ECS task metadata
  "100.100.100.200/32", // Alibaba Cloud
  "fd00:ec2::254/128", // AWS (IPv6)
);

/** IPv4 ranges, checked in order (the first match wins). */
const V4: [AddressRange, Cidr[]][] = [
  ["metadata", METADATA.filter(([address]) => address.kind() === "ipv4")],
  ["broadcast", cidrs("255.255.255.255/32")],
  ["unspecified", cidrs("0.0.0.0/8")],
  ["loopback", cidrs("127.0.0.0/8")],
  ["private", cidrs("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")],
  ["carrier-grade-nat", cidrs("100.64.0.0/10")],
  ["link-local", cidrs("169.254.0.0/16")],
  ["multicast", cidrs("224.0.0.0/4")],
  [
    "reserved",
    cidrs(
      "192.0.0.0/24", // IETF protocol assignments
      "192.0.2.0/24", // TEST-NET-1
      "192.88.99.0/24", // 6to4 relay anycast
      "198.18.0.0/15", // benchmarking
      "198.51.100.0/24", // TEST-NET-2
      "203.0.113.0/24", // TEST-NET-3
      "240.0.0.0/4", // reserved for future use
    ),
  ],
];

/** IPv6 ranges (besides those embedding IPv4), checked in order. */
const V6: [AddressRange, Cidr[]][] = [
  ["metadata", METADATA.filter(([address]) => address.kind() === "ipv6")],
  ["unspecified", cidrs("::/128")],
  ["loopback", cidrs("::1/128")],
  ["link-local", cidrs("fe80::/10")],
  ["unique-local", cidrs("fc00::/7")],
  ["private", cidrs("fec0::/10")], // site-local (deprecated)
  ["multicast", cidrs("ff00::/8")],
  [
    "reserved",
    cidrs(
      "64:ff9b:1::/48", // local-use NAT64
      "100::/64", // discard-only
      "2001::/32", // Teredo
      "2001:2::/48", // benchmarking
      "2001:10::/28", // ORCHID
      "2001:20::/28", // ORCHIDv2
      "2001:db8::/32", // documentation
      "3fff::/20", // documentation
    ),
  ],
];

/** Only 2000::/3 is global unicast; everything else not named above is reserved. */
const GLOBAL_UNICAST = ipaddr.parseCIDR("2000::/3");

/** Where an IPv6 address carries an IPv4 one: the range and how to take it out. */
const EMBEDDING: [Cidr, (parts: number[]) => number[]][] = [
  // IPv4-mapped ::ffff:a.b.c.d and IPv4-translated ::ffff:0:a.b.c.d
  [ipaddr.parseCIDR("::ffff:0:0/96"), (p) => low32(p)],
  [ipaddr.parseCIDR("::ffff:0:0:0/96"), (p) => low32(p)],
  // NAT64 well-known prefix 64:ff9b::a.b.c.d
  [ipaddr.parseCIDR("64:ff9b::/96"), (p) => low32(p)],
  // 6to4 2002:AABB:CCDD::/48
  [ipaddr.parseCIDR("2002::/16"), (p) => [p[1] >> 8, p[1] & 0xff, p[2] >> 8, p[2] & 0xff]],
  // IPv4-compatible ::a.b.c.d (deprecated; :: and ::1 are judged as IPv6 above)
  [ipaddr.parseCIDR("::/96"), (p) => low32(p)],
];

function low32(parts: number[]): number[] {
  return [parts[6] >> 8, parts[6] & 0xff, parts[7] >> 8, parts[7] & 0xff];
}

/** A parsed address, as the policy sees it. */
export interface Classified {
  /** The address as given, normalised (IPv6 in RFC 5952 form, no zone). */
  address: string;
  /** The IPv4 address judged instead, when `address` embeds one. */
  embedded?: string;
  /** Its range. */
  range: AddressRange;
  /** The parsed address (the embedded IPv4 one when there is one). */
  parsed: ipaddr.IPv4 | ipaddr.IPv6;
}

function rangeOf(address: ipaddr.IPv4 | ipaddr.IPv6): AddressRange {
  const table = address.kind() === "ipv4" ? V4 : V6;
  for (const [range, list] of table) {
    if (list.some((cidr) => address.kind() === cidr[0].kind() && address.match(cidr))) {
      return range;
    }
  }
  if (address.kind() === "ipv6" && !address.match(GLOBAL_UNICAST)) return "reserved";
  return "public";
}

/**
 * Parses and classifies an IP address.
 *
 * @returns `undefined` when `text` is not an IP address.
 */
export function classify(text: string): Classified | undefined {
  const bare = text.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  if (!ipaddr.isValid(bare)) return undefined;
  // ipaddr also takes "1.2.3" and "0x7f.1"; only the four-part decimal form is an IPv4 literal here.
  if (!bare.includes(":") && !ipaddr.IPv4.isValidFourPartDecimal(bare)) return undefined;
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === "ipv4") {
    return { address: parsed.toString(), range: rangeOf(parsed), parsed };
  }
  const v6 = parsed as ipaddr.IPv6;
  const address = v6.toRFC5952String();
  const own = rangeOf(v6);
  // :: and ::1 are IPv6's own unspecified and loopback, not IPv4-compatible forms.
  if (own === "unspecified" || own === "loopback") return { address, range: own, parsed: v6 };
  for (const [cidr, extract] of EMBEDDING) {
    if (v6.match(cidr)) {
      const v4 = new ipaddr.IPv4(extract(v6.parts));
      return { address, embedded: v4.toString(), range: rangeOf(v4), parsed: v4 };
    }
  }
  return { address, range: own, parsed: v6 };
}
