import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { assert, assertEquals, assertMatch, assertThrows } from "../_asserts.ts";
import {
  importSigningKey,
  importStandardKey,
  signPayload,
  signStandard,
  standardKeyBytes,
  verifySignature,
  WebhookSigner,
} from "../../src/webhooks/mod.ts";

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

// Standard Webhooks (`webhook-signature`) -------------------------------------

/** The Standard Webhooks specification's own example. */
const SPEC_VECTOR = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: encoder.encode('{"test": 2432232314}'),
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

Deno.test("signStandard() matches the Standard Webhooks known-answer vector", () => {
  const { secret, id, timestamp, body, signature } = SPEC_VECTOR;
  assertEquals(signStandard([importStandardKey(secret)], id, timestamp, body), signature);
});

Deno.test("signStandard() equals an independent HMAC over id.timestamp.body with the decoded whsec_ key", () => {
  const key = crypto.getRandomValues(new Uint8Array(24));
  const secret = "whsec_" + btoa(String.fromCharCode(...key));
  const expected = createHmac("sha256", key)
    .update(`evt_1.1700000000.${new TextDecoder().decode(BODY)}`).digest("base64");
  assertEquals(
    signStandard([importStandardKey(secret)], "evt_1", 1700000000, BODY),
    `v1,${expected}`,
  );
  assertEquals(standardKeyBytes(secret), key);
});

Deno.test("a secret without whsec_ (or not base64 after it) is keyed with its UTF-8 bytes", () => {
  for (const secret of ["s3cret", "whsec_not base64!", "whsec_"]) {
    const expected = createHmac("sha256", encoder.encode(secret))
      .update("evt_1.5.").update(BODY).digest("base64");
    assertEquals(signStandard([importStandardKey(secret)], "evt_1", 5, BODY), `v1,${expected}`);
  }
  assertEquals(standardKeyBytes("whsec_not base64!"), undefined);
  assertEquals(standardKeyBytes("plain"), encoder.encode("plain"));
});

Deno.test("WebhookSigner adds previous secrets to webhook-signature until they expire; X-Service-Signature keeps the oldest of them", () => {
  const current = "whsec_" + btoa("current-key-current-key-");
  const previous = "whsec_" + btoa("previous-key-previous-ke");
  const older = "whsec_" + btoa("older-key-older-key-olde");
  const signer = new WebhookSigner(current, [
    { secret: previous, expires_at: "2026-01-01T01:00:00.000Z" },
    { secret: older, expires_at: "2026-01-01T00:30:00.000Z" },
  ]);
  const one = (secret: string) => signStandard([importStandardKey(secret)], "evt_1", 9, BODY);
  const at = (iso: string) => signer.sign("evt_1", 9, BODY, Date.parse(iso));
  const early = at("2026-01-01T00:00:00.000Z");
  assertEquals(early.standardSignature, [one(current), one(previous), one(older)].join(" "));
  // The spec header has room for one: the oldest previous secret still in its overlap.
  assertEquals(early.signature, signPayload(older, BODY));
  const middle = at("2026-01-01T00:30:00.000Z");
  assertEquals(middle.standardSignature, `${one(current)} ${one(previous)}`);
  assertEquals(middle.signature, signPayload(previous, BODY));
  const late = at("2026-01-01T01:00:00.000Z");
  assertEquals(late.standardSignature, one(current));
  assertEquals(late.signature, signPayload(current, BODY));
  assertEquals(
    new WebhookSigner(current).sign("evt_1", 9, BODY, 0).standardSignature,
    one(current),
  );
});

Deno.test("the npm standardwebhooks verifier accepts signStandard() and each signature of a rotation", () => {
  const secrets = ["whsec_" + btoa("a".repeat(32)), "whsec_" + btoa("b".repeat(32))];
  const timestamp = Math.floor(Date.now() / 1000); // the library checks it against its own clock
  const signer = new WebhookSigner(secrets[0], [
    { secret: secrets[1], expires_at: new Date(Date.now() + 60_000).toISOString() },
  ]);
  const { standardSignature } = signer.sign("evt_2", timestamp, BODY, Date.now());
  const headers = {
    "webhook-id": "evt_2",
    "webhook-timestamp": String(timestamp),
    "webhook-signature": standardSignature,
  };
  const text = new TextDecoder().decode(BODY);
  for (const secret of secrets) {
    assertEquals(new Webhook(secret).verify(text, headers), JSON.parse(text));
  }
  assertThrows(() => new Webhook("whsec_" + btoa("c".repeat(32))).verify(text, headers));
});
