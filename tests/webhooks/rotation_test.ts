/**
 * Secret rotation as receivers see it: `rotateWebhookSecret()` on a real
 * store with an injected clock, then the registration signed as the
 * dispatcher signs it (`WebhookSigner` from the stored record) at moments
 * during and after the overlap, verified with the spec's header check
 * (`verifySignature`) and with the npm `standardwebhooks` package; and a
 * real receiver that checks only `X-Service-Signature` with the old secret
 * keeps answering 2xx after a rotation, until the overlap ends.
 */
import { Webhook } from "standardwebhooks";
import { assert, assertEquals, assertThrows } from "../_asserts.ts";
import { until } from "../_helpers.ts";
import {
  addWebhook,
  DEFAULT_ROTATION_OVERLAP_MS,
  recentAttempts,
  rotateWebhookSecret,
  verifySignature,
  WebhookSigner,
} from "../../src/webhooks/mod.ts";
import type { Store } from "../../src/store/mod.ts";
import { Receiver } from "./_receiver.ts";
import { setup, toolCalled } from "./_setup.ts";

const HOUR = 3_600_000;
const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const BODY = new TextEncoder().encode('{"id":"evt_rot","type":"tool.called","data":{}}');
const TEXT = new TextDecoder().decode(BODY);

/** What one attempt at `now` carries, signed from the stored registration. */
interface Signed {
  spec: string;
  standard: Record<string, string>;
}

async function signedAt(store: Store, id: string, now: number): Promise<Signed> {
  const record = await store.webhooks.getOutgoing(id);
  assert(record?.secret, "the webhook is signed");
  // The npm verifier checks webhook-timestamp against its own clock: the real time.
  const timestamp = Math.floor(Date.now() / 1000);
  const signed = new WebhookSigner(record.secret, record.previous_secrets ?? [])
    .sign("evt_rot", timestamp, BODY, now);
  return {
    spec: signed.signature,
    standard: {
      "webhook-id": "evt_rot",
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signed.standardSignature,
    },
  };
}

/** Which of `secrets` verify the spec header and `webhook-signature` of `signed`. */
function verifiers(signed: Signed, secrets: Record<string, string>) {
  const spec: string[] = [];
  const standard: string[] = [];
  for (const [name, secret] of Object.entries(secrets)) {
    if (verifySignature(secret, BODY, signed.spec)) spec.push(name);
    try {
      new Webhook(secret).verify(TEXT, signed.standard);
      standard.push(name);
    } catch {
      // Not this one.
    }
  }
  return { spec, standard };
}

Deno.test("during the overlap X-Service-Signature verifies with the old secret only, webhook-signature with either; after it, the new one", async () => {
  await using env = await setup();
  const { webhook, secret: old } = await addWebhook(env.store, { url: "https://example.com/h" });
  const rotated = await rotateWebhookSecret(env.store, webhook.id, { now: () => T0 });
  assertEquals(
    rotated.webhook.previous_secrets,
    [{ expires_at: new Date(T0 + DEFAULT_ROTATION_OVERLAP_MS).toISOString() }],
  );
  const secrets = { old: old!, new: rotated.secret };
  for (const at of [T0, T0 + HOUR, T0 + DEFAULT_ROTATION_OVERLAP_MS - 1]) {
    assertEquals(
      verifiers(await signedAt(env.store, webhook.id, at), secrets),
      { spec: ["old"], standard: ["old", "new"] },
      new Date(at).toISOString(),
    );
  }
  for (const at of [T0 + DEFAULT_ROTATION_OVERLAP_MS, T0 + DEFAULT_ROTATION_OVERLAP_MS + HOUR]) {
    assertEquals(
      verifiers(await signedAt(env.store, webhook.id, at), secrets),
      { spec: ["new"], standard: ["new"] },
      new Date(at).toISOString(),
    );
  }
  // The header's value is the spec's shape whichever secret keys it.
  const during = await signedAt(env.store, webhook.id, T0);
  assert(/^sha256=[0-9a-f]{64}$/.test(during.spec));
  assertThrows(() =>
    new Webhook(secrets.new).verify(TEXT, { ...during.standard, "webhook-id": "x" })
  );
});

Deno.test("overlapMs: 0 switches both headers to the new secret at once", async () => {
  await using env = await setup();
  const { webhook, secret: old } = await addWebhook(env.store, { url: "https://example.com/h" });
  const rotated = await rotateWebhookSecret(env.store, webhook.id, { now: () => T0, overlapMs: 0 });
  assertEquals(rotated.webhook.previous_secrets, []);
  assertEquals(
    verifiers(await signedAt(env.store, webhook.id, T0), { old: old!, new: rotated.secret }),
    { spec: ["new"], standard: ["new"] },
  );
});

Deno.test("two rotations in a row: X-Service-Signature keeps the first secret, then the second, then the newest", async () => {
  await using env = await setup();
  const { webhook, secret: a } = await addWebhook(env.store, { url: "https://example.com/h" });
  const b = await rotateWebhookSecret(env.store, webhook.id, {
    now: () => T0,
    overlapMs: 2 * HOUR,
  });
  const c = await rotateWebhookSecret(env.store, webhook.id, {
    now: () => T0 + HOUR,
    overlapMs: 2 * HOUR,
  });
  const secrets = { a: a!, b: b.secret, c: c.secret };
  const check = async (at: number, spec: string[], standard: string[]) =>
    assertEquals(
      verifiers(await signedAt(env.store, webhook.id, at), secrets),
      { spec, standard },
      `at T0 + ${(at - T0) / 60_000} min`,
    );
  // a's overlap ends at T0 + 2 h, b's at T0 + 3 h.
  await check(T0 + HOUR, ["a"], ["a", "b", "c"]);
  await check(T0 + 2 * HOUR - 1, ["a"], ["a", "b", "c"]);
  await check(T0 + 2 * HOUR, ["b"], ["b", "c"]);
  await check(T0 + 3 * HOUR - 1, ["b"], ["b", "c"]);
  await check(T0 + 3 * HOUR, ["c"], ["c"]);
});

Deno.test("a second rotation with a shorter overlap: X-Service-Signature keeps the secret receivers hold, then the newest", async () => {
  await using env = await setup();
  const { webhook, secret: a } = await addWebhook(env.store, { url: "https://example.com/h" });
  const b = await rotateWebhookSecret(env.store, webhook.id, {
    now: () => T0,
    overlapMs: 24 * HOUR,
  });
  // b was never in X-Service-Signature: a stays there until its own overlap ends.
  const c = await rotateWebhookSecret(env.store, webhook.id, {
    now: () => T0 + HOUR,
    overlapMs: 0,
  });
  const secrets = { a: a!, b: b.secret, c: c.secret };
  assertEquals(
    verifiers(await signedAt(env.store, webhook.id, T0 + 2 * HOUR), secrets),
    { spec: ["a"], standard: ["a", "c"] },
  );
  assertEquals(
    verifiers(await signedAt(env.store, webhook.id, T0 + 24 * HOUR), secrets),
    { spec: ["c"], standard: ["c"] },
  );
});

Deno.test("a receiver checking only X-Service-Signature with the old secret keeps answering 2xx after a rotation, until the overlap ends", async () => {
  await using env = await setup();
  // The receiver holds one secret and verifies the spec header only (examples/receiver.ts).
  let held = "";
  await using receiver = new Receiver((request) =>
    verifySignature(held, request.body, request.headers.get("x-service-signature")) ? 200 : 401
  );
  // Real time (retries fall due), moved past the overlap at the end.
  let offset = 0;
  const now = () => Date.now() + offset;
  const { webhook, secret } = await addWebhook(env.store, { url: receiver.url });
  held = secret!;
  const dispatcher = env.dispatcher({ now });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);

  const rotated = await rotateWebhookSecret(env.store, webhook.id, { now, overlapMs: 60_000 });
  // Events until one is signed from the rotated registration (two webhook-signatures).
  await until(async () => {
    const count = receiver.requests.length;
    await env.bus.emit("tool.called", toolCalled());
    await receiver.waitFor(count + 1);
    return receiver.requests.at(-1)!.headers.get("webhook-signature")!.split(" ").length === 2;
  }, "a delivery signed after the rotation");
  await dispatcher.whenIdle();
  const attempts = await recentAttempts(env.store, webhook.id);
  assert(attempts.length >= 2);
  assertEquals(attempts.filter((a) => !a.ok), [], "every delivery answered 2xx");

  // Past the overlap the header switches: the receiver needs the new secret by then.
  offset = 120_000;
  held = rotated.secret;
  const count = receiver.requests.length;
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(count + 1);
  const last = receiver.requests.at(-1)!;
  assert(verifySignature(rotated.secret, last.body, last.headers.get("x-service-signature")));
  assertEquals(verifySignature(secret!, last.body, last.headers.get("x-service-signature")), false);
  await dispatcher.whenIdle();
  assertEquals((await recentAttempts(env.store, webhook.id)).filter((a) => !a.ok), []);
  assertEquals(env.errors, []);
});
