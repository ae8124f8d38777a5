/**
 * verifyIncoming(): each sender's scheme, signed by the sender's own library
 * or documented algorithm (tests/webhooks/_senders.ts), then one thing
 * changed per test. Time comes from the `now` option.
 *
 * @module
 */
import { createHmac } from "node:crypto";
import { assertEquals, assertMatch, assertThrows } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import {
  bearerMatches,
  VERIFY_SCHEMES,
  verifyIncoming,
  type VerifyScheme,
} from "../../src/webhooks/mod.ts";
import { SENDER_SECRETS, signAs } from "./_senders.ts";

const NOW_S = 1_790_000_000;
const NOW = NOW_S * 1000;
const BODY = '{"action":"opened","issue":{"number":1,"title":"Hé"}}';
const encoder = new TextEncoder();

/** The header each scheme's signature travels in. */
const SIGNATURE_HEADER: Record<VerifyScheme, string> = {
  "hmac-sha256": "X-Service-Signature",
  github: "X-Hub-Signature-256",
  stripe: "Stripe-Signature",
  slack: "X-Slack-Signature",
  shopify: "X-Shopify-Hmac-Sha256",
  "standard-webhooks": "webhook-signature",
};

const TIMED: VerifyScheme[] = ["stripe", "slack", "standard-webhooks"];

function verify(
  scheme: VerifyScheme,
  headers: Record<string, string>,
  body = BODY,
  extra: { now?: number; toleranceS?: number; secret?: string } = {},
) {
  return verifyIncoming(new Headers(headers), encoder.encode(body), {
    scheme,
    secret: extra.secret ?? SENDER_SECRETS[scheme],
    now: extra.now ?? NOW,
    ...(extra.toleranceS ? { toleranceS: extra.toleranceS } : {}),
  });
}

function rejects(fn: () => unknown, code: string, message: RegExp): void {
  const error = assertThrows(fn);
  if (!(error instanceof GatewayError)) throw error;
  assertEquals(error.code, code, error.message);
  assertEquals(error.status, 401);
  assertMatch(error.message, message);
}

function signed(scheme: VerifyScheme, options: { timestamp?: number; secret?: string } = {}) {
  return signAs(scheme, options.secret ?? SENDER_SECRETS[scheme], BODY, {
    timestamp: options.timestamp ?? NOW_S,
  });
}

for (const scheme of VERIFY_SCHEMES) {
  const header = SIGNATURE_HEADER[scheme];

  Deno.test(`${scheme}: the sender's signature verifies`, async () => {
    const verified = verify(scheme, await signed(scheme));
    assertEquals(verified.scheme, scheme);
    if (TIMED.includes(scheme)) assertEquals(verified.timestamp, NOW_S);
  });

  Deno.test(`${scheme}: one changed byte of the body is SIGNATURE_INVALID`, async () => {
    const headers = await signed(scheme);
    rejects(
      () => verify(scheme, headers, BODY.replace("opened", "opened ")),
      "SIGNATURE_INVALID",
      new RegExp(`Invalid ${header}: the signature does not match`, "i"),
    );
  });

  Deno.test(`${scheme}: another secret's signature is SIGNATURE_INVALID`, async () => {
    const other = scheme === "standard-webhooks"
      ? "whsec_" + btoa("another key of 24 bytes!")
      : SENDER_SECRETS[scheme] + "x";
    const headers = await signed(scheme, { secret: other });
    rejects(
      () => verify(scheme, headers),
      "SIGNATURE_INVALID",
      new RegExp(`Invalid ${header}`, "i"),
    );
  });

  Deno.test(`${scheme}: a missing signature header is SIGNATURE_INVALID naming it`, async () => {
    const headers = { ...await signed(scheme) };
    for (const name of Object.keys(headers)) {
      if (name.toLowerCase() === header.toLowerCase()) delete headers[name];
    }
    rejects(() => verify(scheme, headers), "SIGNATURE_INVALID", new RegExp(`Missing ${header}`));
    rejects(() => verify(scheme, {}), "SIGNATURE_INVALID", /Missing /);
  });
}

for (const scheme of TIMED) {
  Deno.test(`${scheme}: a timestamp over 5 minutes old or ahead is SIGNATURE_EXPIRED`, async () => {
    for (const offset of [-301, 301]) {
      const headers = await signed(scheme, { timestamp: NOW_S + offset });
      rejects(
        () => verify(scheme, headers),
        "SIGNATURE_EXPIRED",
        offset < 0 ? /is 301 s old, past the tolerance of 300 s/ : /301 s in the future/,
      );
    }
    // At the edge it still verifies, and a wider per-endpoint tolerance lets older ones in.
    for (const offset of [-300, 300]) {
      verify(scheme, await signed(scheme, { timestamp: NOW_S + offset }));
    }
    const old = await signed(scheme, { timestamp: NOW_S - 3000 });
    verify(scheme, old, BODY, { toleranceS: 3600 });
  });

  Deno.test(`${scheme}: an old timestamp with a wrong signature is SIGNATURE_INVALID`, async () => {
    const headers = await signed(scheme, { timestamp: NOW_S - 3600 });
    rejects(() => verify(scheme, headers, BODY + " "), "SIGNATURE_INVALID", /does not match/);
  });
}

Deno.test("stripe: any v1 signature of the header may match (a secret being rolled)", async () => {
  const good = (await signed("stripe"))["Stripe-Signature"];
  const other = (await signed("stripe", { secret: "whsec_old" }))["Stripe-Signature"];
  const goodV1 = /v1=([0-9a-f]+)/.exec(good)![1];
  const header = `${other},v1=${goodV1}`;
  assertEquals(verify("stripe", { "Stripe-Signature": header }).timestamp, NOW_S);
  rejects(
    () => verify("stripe", { "Stripe-Signature": `t=${NOW_S},v0=${goodV1}` }),
    "SIGNATURE_INVALID",
    /Invalid Stripe-Signature: expected t=<timestamp>,v1=<hex>/,
  );
});

Deno.test("standard-webhooks: any v1 signature matches; the verified webhook-id is returned", async () => {
  const headers = await signAs("standard-webhooks", SENDER_SECRETS["standard-webhooks"], BODY, {
    timestamp: NOW_S,
    id: "msg_2Hx",
  });
  const header = `v1,${btoa("x".repeat(32))} ${headers["webhook-signature"]} v2,abc`;
  const verified = verify("standard-webhooks", { ...headers, "webhook-signature": header });
  assertEquals(verified.id, "msg_2Hx");
  // The id is signed: another id with the same signature does not verify.
  rejects(
    () => verify("standard-webhooks", { ...headers, "webhook-id": "msg_other" }),
    "SIGNATURE_INVALID",
    /Invalid webhook-signature/,
  );
});

Deno.test("slack: the timestamp header is signed and required", async () => {
  const headers = await signed("slack");
  rejects(
    () => verify("slack", { ...headers, "X-Slack-Request-Timestamp": String(NOW_S + 1) }),
    "SIGNATURE_INVALID",
    /Invalid X-Slack-Signature/,
  );
  rejects(
    () => verify("slack", { "X-Slack-Signature": headers["X-Slack-Signature"] }),
    "SIGNATURE_INVALID",
    /Missing X-Slack-Request-Timestamp/,
  );
});

Deno.test("github: the octokit signature is also today's sha256=<hex> under another header", async () => {
  const headers = await signed("github");
  const value = headers["X-Hub-Signature-256"];
  assertEquals(
    value,
    "sha256=" + createHmac("sha256", SENDER_SECRETS.github).update(BODY).digest("hex"),
  );
  verifyIncoming(new Headers({ "X-Hub-Signature-256": value }), encoder.encode(BODY), {
    scheme: "hmac-sha256",
    secret: SENDER_SECRETS.github,
    signatureHeader: "X-Hub-Signature-256",
    now: NOW,
  });
});

Deno.test("bearerMatches() needs Bearer and the exact token", () => {
  assertEquals(bearerMatches("Bearer tok-1", "tok-1"), true);
  assertEquals(bearerMatches("bearer tok-1", "tok-1"), true);
  assertEquals(bearerMatches("Bearer tok-2", "tok-1"), false);
  assertEquals(bearerMatches("Bearer tok-1x", "tok-1"), false);
  assertEquals(bearerMatches("tok-1", "tok-1"), false);
  assertEquals(bearerMatches(null, "tok-1"), false);
});
