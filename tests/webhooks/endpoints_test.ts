import { assert, assertEquals, assertMatch, assertRejects, assertThrows } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import {
  addWebhook,
  disableWebhook,
  enableWebhook,
  getWebhook,
  listWebhooks,
  MAX_PREVIOUS_SECRETS,
  parseDuration,
  removeWebhook,
  rotateWebhookSecret,
  updateWebhook,
} from "../../src/webhooks/mod.ts";
import { setup } from "./_setup.ts";

const HOUR = 3_600_000;

async function codeOf(promise: Promise<unknown>): Promise<string> {
  return (await assertRejects(() => promise, GatewayError)).code;
}

Deno.test("addWebhook() generates a whsec_ secret unless given one or null, and views never carry secrets", async () => {
  await using env = await setup();
  const generated = await addWebhook(env.store, { url: "https://example.com/a" });
  assertMatch(generated.secret!, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assertEquals(
    (await env.store.webhooks.getOutgoing(generated.webhook.id))?.secret,
    generated.secret,
  );
  const given = await addWebhook(env.store, { url: "https://example.com/b", secret: "s3cret" });
  assertEquals(given.secret, undefined);
  const unsigned = await addWebhook(env.store, { url: "https://example.com/c", secret: null });
  assertEquals([unsigned.secret, unsigned.webhook.has_secret], [undefined, false]);
  const views = await listWebhooks(env.store);
  assertEquals(views.map((v) => v.has_secret), [true, true, false]);
  const text = JSON.stringify(views);
  assert(!text.includes(generated.secret!.slice(6)) && !text.includes("s3cret"));
  assertEquals(await codeOf(addWebhook(env.store, { url: "ftp://x/" })), "USAGE");
  assertEquals(
    await codeOf(addWebhook(env.store, { url: "https://x/", events: ["nope"] })),
    "USAGE",
  );
  assertEquals(
    await codeOf(addWebhook(env.store, { url: "https://x/", secret: "whsec_!" })),
    "USAGE",
  );
  assertEquals(await codeOf(addWebhook(env.store, { url: "https://x/", secret: "" })), "USAGE");
  assertEquals((await listWebhooks(env.store)).length, 3);
});

Deno.test("rotateWebhookSecret() keeps the old secret for the overlap, drops expired ones, keeps at most 5", async () => {
  await using env = await setup();
  let now = Date.parse("2026-01-01T00:00:00.000Z");
  const clock = { now: () => now };
  const { webhook, secret: first } = await addWebhook(env.store, { url: "https://x.test/" });
  const one = await rotateWebhookSecret(env.store, webhook.id, { ...clock, overlapMs: HOUR });
  let stored = await env.store.webhooks.getOutgoing(webhook.id);
  assertEquals(stored?.secret, one.secret);
  assertEquals(stored?.previous_secrets, [{
    secret: first!,
    expires_at: "2026-01-01T01:00:00.000Z",
  }]);
  assertEquals(one.webhook.previous_secrets, [{ expires_at: "2026-01-01T01:00:00.000Z" }]);

  now += 2 * HOUR; // the first secret has expired
  const two = await rotateWebhookSecret(env.store, webhook.id, { ...clock, overlapMs: HOUR });
  stored = await env.store.webhooks.getOutgoing(webhook.id);
  assertEquals(stored?.previous_secrets?.map((p) => p.secret), [one.secret]);

  const zero = await rotateWebhookSecret(env.store, webhook.id, { ...clock, overlapMs: 0 });
  stored = await env.store.webhooks.getOutgoing(webhook.id);
  assertEquals(stored?.secret, zero.secret);
  assertEquals(stored?.previous_secrets?.map((p) => p.secret), [one.secret]); // two: no overlap
  assert(two.secret !== zero.secret);

  for (let i = 0; i < 8; i++) await rotateWebhookSecret(env.store, webhook.id, clock);
  stored = await env.store.webhooks.getOutgoing(webhook.id);
  assertEquals(stored?.previous_secrets?.length, MAX_PREVIOUS_SECRETS);

  now += 2 * 24 * HOUR; // every previous secret has expired: an update drops them
  await updateWebhook(env.store, webhook.id, { description: "x" }, clock);
  stored = await env.store.webhooks.getOutgoing(webhook.id);
  assertEquals(stored?.previous_secrets, undefined);

  for (const overlapMs of [-1, 1.5, 31 * 24 * HOUR]) {
    assertEquals(await codeOf(rotateWebhookSecret(env.store, webhook.id, { overlapMs })), "USAGE");
  }
  assertEquals(await codeOf(rotateWebhookSecret(env.store, "wh_missing")), "NOT_FOUND");
  const unsigned = await addWebhook(env.store, { url: "https://x.test/", secret: null });
  const firstSecret = await rotateWebhookSecret(env.store, unsigned.webhook.id, clock);
  assertEquals(firstSecret.webhook.has_secret, true);
  assertEquals(firstSecret.webhook.previous_secrets, []);
});

Deno.test("updateWebhook(), disableWebhook() and enableWebhook() change only what they name", async () => {
  await using env = await setup();
  const now = Date.parse("2026-02-03T04:05:06.000Z");
  const { webhook } = await addWebhook(env.store, {
    url: "https://x.test/",
    description: "note",
    events: ["tool.called"],
  });
  assertEquals(await codeOf(updateWebhook(env.store, webhook.id, {})), "USAGE");
  assertEquals(
    await codeOf(updateWebhook(env.store, "wh_missing", { url: "https://y/" })),
    "NOT_FOUND",
  );
  assertEquals(await codeOf(updateWebhook(env.store, "in_x", { url: "https://y/" })), "NOT_FOUND");
  const moved = await updateWebhook(env.store, webhook.id, { url: "https://y.test/", events: "*" });
  assertEquals([moved.url, moved.events, moved.description], ["https://y.test/", "*", "note"]);
  const cleared = await updateWebhook(env.store, webhook.id, { description: "" });
  assertEquals(cleared.description, undefined);

  const disabled = await disableWebhook(env.store, webhook.id, " moving ", { now: () => now });
  assertEquals(disabled.disabled, {
    at: "2026-02-03T04:05:06.000Z",
    reason: "manual",
    detail: "moving",
  });
  // A streak left by dead letters starts again from 0 when enabled.
  for (let i = 0; i < 3; i++) await env.store.webhooks.recordOutcome(webhook.id, "dead_lettered");
  const enabled = await enableWebhook(env.store, webhook.id);
  assertEquals([enabled.was_disabled, enabled.webhook.disabled], [true, undefined]);
  assertEquals(await env.store.webhooks.recordOutcome(webhook.id, "dead_lettered"), 1);
  assertEquals((await enableWebhook(env.store, webhook.id)).was_disabled, false);
  assertEquals((await getWebhook(env.store, webhook.id)).url, "https://y.test/");

  await removeWebhook(env.store, webhook.id);
  assertEquals(await codeOf(removeWebhook(env.store, webhook.id)), "NOT_FOUND");
  assertEquals(await codeOf(getWebhook(env.store, webhook.id)), "NOT_FOUND");
});

Deno.test("parseDuration() takes ms, s, m, h, d and a bare 0; names the field otherwise", () => {
  assertEquals(
    ["24h", "30m", "90s", "2d", "1500ms", "0", "0h", "1.5h"].map((raw) => parseDuration(raw)),
    [86_400_000, 1_800_000, 90_000, 172_800_000, 1500, 0, 0, 5_400_000],
  );
  for (const raw of ["", "5", "h", "-1h", "1w", "1 h x"]) {
    assertThrows(() => parseDuration(raw, "--overlap"), "Invalid --overlap");
  }
});
