import { createHmac } from "node:crypto";
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { importSigningKey, signPayload, verifySignature } from "../../src/webhooks/mod.ts";

const encoder = new TextEncoder();
const SECRET = "whsec_test_secret";
const BODY = encoder.encode(
  '{"id":"evt_01jd4x","type":"tool.called","timestamp":"2025-01-02T03:04:05.678Z","data":{"tool_name":"echo","note":"héllo ✓"}}',
);

Deno.test("signPayload() matches RFC 4231 test case 2 (HMAC-SHA256)", () => {
  assertEquals(
    signPayload("Jefe", encoder.encode("what do ya want for nothing?")),
    "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
  );
});

Deno.test("signPayload() equals an independent node:crypto HMAC over the raw bytes", () => {
  const expected = "sha256=" + createHmac("sha256", SECRET).update(BODY).digest("hex");
  const header = signPayload(SECRET, BODY);
  assertEquals(header, expected);
  assertMatch(header, /^sha256=[0-9a-f]{64}$/);
  assertEquals(signPayload(importSigningKey(SECRET), BODY), expected);
});

Deno.test("verifySignature() accepts the signature of the exact bytes", () => {
  const header = "sha256=" + createHmac("sha256", SECRET).update(BODY).digest("hex");
  assert(verifySignature(SECRET, BODY, header));
  assert(verifySignature(importSigningKey(SECRET), BODY, header));
});

Deno.test("verifySignature() rejects one changed body byte", () => {
  const header = signPayload(SECRET, BODY);
  const changed = BODY.slice();
  changed[10] ^= 1;
  assertEquals(verifySignature(SECRET, changed, header), false);
});

Deno.test("verifySignature() rejects re-serialized JSON (whitespace changes the digest)", () => {
  const header = signPayload(SECRET, BODY);
  const reserialized = encoder.encode(
    JSON.stringify(JSON.parse(new TextDecoder().decode(BODY)), null, 1),
  );
  assertEquals(verifySignature(SECRET, reserialized, header), false);
});

Deno.test("verifySignature() rejects another secret", () => {
  const header = signPayload(SECRET, BODY);
  assertEquals(verifySignature(SECRET + "x", BODY, header), false);
});

Deno.test("verifySignature() rejects malformed headers", () => {
  const hex = createHmac("sha256", SECRET).update(BODY).digest("hex");
  for (
    const header of [
      null,
      undefined,
      "",
      hex,
      `sha1=${hex}`,
      `sha256=${hex.slice(2)}`,
      `sha256=${hex}00`,
      `sha256=${"zz".repeat(32)}`,
    ]
  ) {
    assertEquals(verifySignature(SECRET, BODY, header), false, String(header));
  }
});
