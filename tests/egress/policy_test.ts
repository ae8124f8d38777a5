import { assert, assertEquals, assertMatch, assertRejects, assertThrows } from "../_asserts.ts";
import {
  allowEntryProblem,
  classifyAddress,
  EgressPolicy,
  type EgressProfile,
  LookupError,
} from "../../src/egress/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";

/** Asserts that `fn` throws `EGRESS_DENIED` (with `includes` in its message). */
function denied(fn: () => unknown, includes?: string, label?: string): GatewayError {
  const error = assertThrows(fn, includes);
  assert(error instanceof GatewayError, `${label ?? ""}: expected a GatewayError, got ${error}`);
  assertEquals(error.code, "EGRESS_DENIED", label);
  return error;
}

function refused(policy: EgressPolicy, address: string, profile: EgressProfile = "public") {
  return denied(() => policy.check(address, address, 80, profile), undefined, address);
}

const DENIED_PUBLIC: [string, string][] = [
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["::1", "loopback"],
  ["10.0.0.1", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["192.168.1.1", "private"],
  ["fc00::1", "unique-local"],
  ["fd12:3456::1", "unique-local"],
  ["169.254.1.1", "link-local"],
  ["169.254.169.254", "metadata"],
  ["169.254.170.2", "metadata"],
  ["100.100.100.200", "metadata"],
  ["fd00:ec2::254", "metadata"],
  ["fe80::1", "link-local"],
  ["febf::1", "link-local"],
  ["100.64.0.1", "carrier-grade-nat"],
  ["100.127.255.255", "carrier-grade-nat"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["ff02::1", "multicast"],
  ["0.0.0.0", "unspecified"],
  ["0.1.2.3", "unspecified"],
  ["::", "unspecified"],
  ["255.255.255.255", "broadcast"],
  ["240.0.0.1", "reserved"],
  ["192.0.2.1", "reserved"],
  ["198.18.0.1", "reserved"],
  ["2001:db8::1", "reserved"],
  ["2001::1", "reserved"],
  ["100::1", "reserved"],
  ["64:ff9b:1::1", "reserved"],
  ["fec0::1", "private"],
  // IPv4 inside IPv6: mapped, translated, compatible, NAT64, 6to4.
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::ffff:169.254.169.254", "metadata"],
  ["::ffff:10.1.2.3", "private"],
  ["::ffff:0:192.168.0.1", "private"],
  ["::127.0.0.1", "loopback"],
  ["64:ff9b::a9fe:a9fe", "metadata"],
  ["64:ff9b::10.0.0.1", "private"],
  ["2002:7f00:1::", "loopback"],
  ["2002:a9fe:a9fe::1", "metadata"],
  ["2002:c0a8:101::", "private"],
];

Deno.test("classifyAddress() names the range of every refused address", () => {
  for (const [address, range] of DENIED_PUBLIC) {
    assertEquals(classifyAddress(address)?.range, range, address);
  }
});

Deno.test("the public profile refuses every non-public range, with the fix in the message", () => {
  const policy = new EgressPolicy();
  for (const [address] of DENIED_PUBLIC) {
    const error = refused(policy, address);
    assertEquals(error.code, "EGRESS_DENIED", address);
    assertMatch(error.message, /egress\.allow .*TOOLGATE_EGRESS_ALLOW/, address);
  }
});

Deno.test("the public profile lets public addresses through", () => {
  const policy = new EgressPolicy();
  for (
    const address of [
      "93.184.215.14",
      "8.8.8.8",
      "100.63.255.255",
      "100.128.0.0",
      "172.32.0.1",
      "192.169.0.1",
      "2606:4700::1111",
      "::ffff:8.8.8.8",
      "64:ff9b::8.8.8.8",
      "2002:808:808::1",
    ]
  ) {
    policy.check(address, address, 443, "public");
  }
});

Deno.test("the operator profile allows loopback and private, never link-local or metadata", () => {
  const policy = new EgressPolicy();
  for (
    const address of ["127.0.0.1", "::1", "10.0.0.1", "192.168.1.1", "fd12::1", "100.64.0.1"]
  ) {
    policy.check(address, address, 80, "operator");
  }
  for (
    const address of [
      "169.254.169.254",
      "fd00:ec2::254",
      "100.100.100.200",
      "169.254.1.1",
      "fe80::1",
      "::ffff:169.254.169.254",
      "224.0.0.1",
      "0.0.0.0",
      "240.0.0.1",
    ]
  ) {
    assertEquals(refused(policy, address, "operator").code, "EGRESS_DENIED", address);
  }
});

Deno.test("the refusal names the host, the address and the entry to add", () => {
  const policy = new EgressPolicy();
  const error = denied(
    () => policy.check("metadata.internal", "169.254.169.254", 80, "public"),
  );
  assertMatch(error.message, /169\.254\.169\.254/);
  assertMatch(error.message, /metadata\.internal resolves to/);
  assertMatch(error.message, /"metadata\.internal" or "169\.254\.169\.254\/32"/);
  assertEquals((error.details as Record<string, unknown>).range, "metadata");
  assertEquals((error.details as Record<string, unknown>).allow_entry, "metadata.internal");
  const mapped = refused(policy, "::ffff:10.0.0.1");
  assertMatch(mapped.message, /IPv4 10\.0\.0\.1 inside it/);
  assertMatch(mapped.message, /"10\.0\.0\.1\/32"/);
});

Deno.test("egress.allow CIDRs and addresses open their ranges, v4 and v6", () => {
  const policy = new EgressPolicy({
    allow: ["10.1.0.0/16", "127.0.0.1", "fd00:1::/32", "169.254.169.254/32", "::1"],
  });
  policy.check("x", "10.1.2.3", 80, "public");
  policy.check("x", "127.0.0.1", 80, "public");
  policy.check("x", "::ffff:127.0.0.1", 80, "public"); // mapped form of an allowed address
  policy.check("x", "fd00:1:2::3", 80, "public");
  policy.check("x", "::1", 80, "public");
  policy.check("x", "169.254.169.254", 80, "operator");
  refused(policy, "10.2.0.1");
  refused(policy, "127.0.0.2");
  refused(policy, "fd00:2::1");
});

Deno.test("egress.allow hosts: exact names and *.suffix wildcards (not the bare suffix)", () => {
  const policy = new EgressPolicy({ allow: ["api.internal", "*.corp.example"] });
  policy.check("api.internal", "10.0.0.5", 80, "public");
  policy.check("API.Internal", "10.0.0.5", 80, "public");
  policy.check("a.b.corp.example", "192.168.0.9", 80, "public");
  denied(() => policy.check("corp.example", "10.0.0.1", 80, "public"));
  denied(() => policy.check("other.internal", "10.0.0.5", 80, "public"));
});

Deno.test("allowEntryProblem() accepts hosts, wildcards, addresses and CIDRs, and names the fix", () => {
  for (
    const entry of [
      "api.internal",
      "*.corp.example",
      "localhost",
      "127.0.0.1",
      "::1",
      "10.0.0.0/8",
      "0.0.0.0/0",
      "::/0",
      "fd00::/8",
      "[::1]",
    ]
  ) {
    assertEquals(allowEntryProblem(entry), undefined, entry);
  }
  for (
    const [entry, pattern] of [
      ["10.0.0.0/33", /prefix length 33 is over 32/],
      ["fd00::/129", /prefix length 129 is over 128/],
      ["10.0.0/8", /not a valid CIDR/],
      ["*", /0\.0\.0\.0\/0 and ::\/0/],
      ["localhost:8080", /ports are not part of an entry/],
      ["http://x.test/a", /is a URL; give its host \(x\.test\)/],
      ["bad_host!", /not a host name/],
      ["", /empty/],
    ] as const
  ) {
    assertMatch(allowEntryProblem(entry) ?? "", pattern, entry);
  }
});

Deno.test("own listening addresses are refused even when egress.allow allows them", () => {
  const policy = new EgressPolicy({
    allow: ["127.0.0.0/8", "::1", "0.0.0.0/0", "::/0", "localhost"],
    listening: [{ hostname: "127.0.0.1", port: 7821 }],
  });
  const own = denied(
    () => policy.check("localhost", "127.0.0.1", 7821, "public"),
  );
  assertEquals(own.code, "EGRESS_DENIED");
  assertMatch(own.message, /toolgate's own listening address \(127\.0\.0\.1:7821\)/);
  assertEquals((own.details as Record<string, unknown>).reason, "own_address");
  // The mapped form and the unspecified address reach it too.
  denied(() => policy.check("x", "::ffff:127.0.0.1", 7821, "operator"));
  denied(() => policy.check("x", "0.0.0.0", 7821, "public"));
  // Another port or another loopback address is not toolgate.
  policy.check("x", "127.0.0.1", 7822, "public");
  policy.check("x", "127.0.0.2", 7821, "public");
});

Deno.test("a 0.0.0.0 or :: bind makes every local address on that port toolgate's own", () => {
  const policy = new EgressPolicy({
    allow: ["0.0.0.0/0", "::/0"],
    localAddresses: () => ["10.9.8.7", "fe80::1"],
  });
  policy.listen({ hostname: "0.0.0.0", port: 9000 });
  policy.listen({ hostname: "::", port: 9001 });
  for (const address of ["127.0.0.1", "127.1.2.3", "10.9.8.7", "::ffff:10.9.8.7"]) {
    denied(() => policy.check("x", address, 9000, "public"), "own", address);
  }
  for (const address of ["::1", "fe80::1", "10.9.8.7"]) {
    denied(() => policy.check("x", address, 9001, "public"), "own", address);
  }
  policy.check("x", "10.9.8.6", 9000, "public");
  policy.check("x", "10.9.8.7", 9002, "public");
  // A localhost bind is every loopback address.
  policy.listen({ hostname: "localhost", port: 9003 });
  denied(() => policy.check("x", "::1", 9003, "public"), "own");
});

Deno.test("resolve() checks every address a name resolves to and returns the first", async () => {
  const policy = new EgressPolicy({
    lookup: (host) =>
      Promise.resolve(
        host === "mixed.test"
          ? [{ address: "93.184.215.14", family: 4 }, { address: "10.0.0.1", family: 4 }]
          : [{ address: "2606:4700::1111", family: 6 }, { address: "93.184.215.14", family: 4 }],
      ),
  });
  const target = await policy.resolve(new URL("https://public.test/x"), "public");
  assertEquals(target, { host: "public.test", address: "2606:4700::1111", family: 6, port: 443 });
  const error = await assertRejects(
    () => policy.resolve(new URL("http://mixed.test:8080/"), "public"),
    GatewayError,
  );
  assertMatch(error.message, /10\.0\.0\.1 \(mixed\.test resolves to 10\.0\.0\.1\)/);
});

Deno.test("resolve(): a name that resolves to 127.0.0.1 is refused (localhost, real resolver)", async () => {
  const policy = new EgressPolicy();
  const error = await assertRejects(
    () => policy.resolve(new URL("http://localhost:1/"), "public"),
    GatewayError,
  );
  assertEquals(error.code, "EGRESS_DENIED");
  assertMatch(error.message, /localhost resolves to (127\.0\.0\.1|::1)/);
  assertMatch(error.message, /"localhost" or/);
  // Allowed by name, it resolves.
  const allowed = new EgressPolicy({ allow: ["localhost"] });
  const target = await allowed.resolve(new URL("http://localhost:1/"), "public");
  assertEquals(classifyAddress(target.address)?.range, "loopback");
});

Deno.test("resolve(): IP literals are checked without a lookup; a failed lookup is a LookupError", async () => {
  let lookups = 0;
  const policy = new EgressPolicy({
    lookup: () => {
      lookups++;
      return Promise.reject(Object.assign(new Error("nope"), { code: "ENOTFOUND" }));
    },
  });
  await assertRejects(() => policy.resolve(new URL("http://[::1]/"), "public"), GatewayError);
  await assertRejects(
    () => policy.resolve(new URL("http://0x7f.1/"), "public"), // the URL parser makes it 127.0.0.1
    GatewayError,
  );
  assertEquals(lookups, 0);
  const error = await assertRejects(
    () => policy.resolve(new URL("http://gone.test/"), "public"),
    LookupError,
  );
  assertMatch(error.message, /DNS lookup of gone\.test failed \(ENOTFOUND\)/);
});

Deno.test("checkLiteral() refuses denied IP literals and localhost without resolving names", () => {
  const policy = new EgressPolicy({ lookup: () => Promise.reject(new Error("no lookups")) });
  denied(() => policy.checkLiteral(new URL("http://127.0.0.1:9/"), "public"));
  denied(() => policy.checkLiteral(new URL("http://localhost/"), "public"));
  denied(() => policy.checkLiteral(new URL("http://[fd00:ec2::254]/"), "public"));
  policy.checkLiteral(new URL("http://receiver.test/"), "public");
  policy.checkLiteral(new URL("https://8.8.8.8/"), "public");
});
