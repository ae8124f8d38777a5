/**
 * The console's secret rotation, in process (`app.request()`), signed in
 * with the API token and with an injected clock: the Rotate button opens a
 * confirmation that names when each signature header switches, and only
 * its Confirm (a CSRF-checked form) rotates, showing the new secret once.
 */
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { consoleRoutes, type ToolgateApp } from "../../src/http/mod.ts";
import { addWebhook } from "../../src/webhooks/mod.ts";
import { httpConfig, storedApp } from "./_fixtures.ts";

const ORIGIN = "http://localhost";
const TOKEN = "console-rotate-token-0123456789abcdef";
const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const HOUR = 3_600_000;
const URL_ = "https://receiver.example/hook";

/** A time as the console writes it. */
function shown(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

/** The page's text: tags dropped, whitespace folded. */
function textOf(html: string): string {
  return html.replace(/<[^>]+>/g, " ").replace(/\s+/g, " ").replace(/ ([;,.:])/g, "$1");
}

async function signIn(app: ToolgateApp): Promise<string> {
  const response = await app.request("/ui/login", {
    method: "POST",
    headers: { origin: ORIGIN },
    body: new URLSearchParams({ token: TOKEN }),
  });
  await response.body?.cancel();
  assertEquals(response.status, 303);
  return (response.headers.get("set-cookie") ?? "").split(";")[0];
}

async function page(app: ToolgateApp, cookie: string, path: string) {
  const response = await app.request(path, { headers: { cookie } });
  const html = await response.text();
  return { status: response.status, html, csrf: /name="_csrf" value="([^"]+)"/.exec(html)?.[1] };
}

function post(app: ToolgateApp, cookie: string, path: string, fields: Record<string, string>) {
  return Promise.resolve(app.request(path, {
    method: "POST",
    headers: { cookie, origin: ORIGIN },
    body: new URLSearchParams(fields),
  }));
}

Deno.test("console: Rotate secret opens a confirmation naming when each header switches; only Confirm rotates", async () => {
  let now = T0;
  const config = await httpConfig({}, { TOOLGATE_API_TOKEN: TOKEN });
  await using t = await storedApp(config, {
    routes: (store, audit) => [consoleRoutes({ store, audit, now: () => now })],
  });
  const { webhook, secret: old } = await addWebhook(t.store, { url: URL_ });
  const cookie = await signIn(t.app);
  const rotatePath = `/ui/webhooks/${webhook.id}/rotate`;

  // The webhooks page: the Rotate button is a GET form to the confirmation (no CSRF, no change).
  const list = await page(t.app, cookie, "/ui/webhooks");
  assertEquals(list.status, 200);
  assertMatch(
    list.html,
    new RegExp(
      `<form method="get" action="${rotatePath}"[^>]*><button type="submit" ` +
        `aria-label="Rotate secret of ${URL_}"`,
    ),
  );

  // The confirmation: each overlap with its times; nothing rotated yet.
  const confirm = await page(t.app, cookie, rotatePath);
  assertEquals(confirm.status, 200);
  assert(confirm.csrf);
  const text = textOf(confirm.html);
  assertStringIncludes(text, "Rotate the signing secret");
  assertStringIncludes(
    text,
    `webhook-signature carries both secrets until ${shown(T0 + 24 * HOUR)}; ` +
      `X-Service-Signature keeps the old secret until ${shown(T0 + 24 * HOUR)}, then switches ` +
      `to the new one: give the new secret to the receiver before then.`,
  );
  assertStringIncludes(text, `until ${shown(T0 + HOUR)}`);
  assertStringIncludes(text, `until ${shown(T0 + 7 * 24 * HOUR)}`);
  assertStringIncludes(
    text,
    "webhook-signature drops the old secret at once; X-Service-Signature switches to the new " +
      "secret at once",
  );
  assertStringIncludes(confirm.html, `datetime="${new Date(T0 + 24 * HOUR).toISOString()}"`);
  assertMatch(
    confirm.html,
    /<input type="radio" id="overlap-24h" name="overlap" value="24h" checked/,
  );
  assertMatch(confirm.html, /value="0"/);
  assertMatch(confirm.html, /aria-label="Confirm rotating the secret of [^"]+"/);
  assertEquals((await t.store.webhooks.getOutgoing(webhook.id))?.secret, old);

  // A form without the confirmation's field (an old page's Rotate button) only asks again.
  const unconfirmed = await post(t.app, cookie, rotatePath, { _csrf: confirm.csrf });
  assertEquals(unconfirmed.status, 200);
  assertMatch(await unconfirmed.text(), /aria-label="Confirm rotating the secret of [^"]+"/);
  assertEquals((await t.store.webhooks.getOutgoing(webhook.id))?.secret, old);

  // Without the CSRF token the confirmation is refused.
  const forged = await post(t.app, cookie, rotatePath, { confirm: "rotate", overlap: "24h" });
  assertEquals(forged.status, 403);
  await forged.body?.cancel();
  assertEquals((await t.store.webhooks.getOutgoing(webhook.id))?.secret, old);

  // Confirmed a minute later: rotated with the chosen overlap, the secret shown once.
  now = T0 + 60_000;
  const done = await post(t.app, cookie, rotatePath, {
    _csrf: confirm.csrf,
    confirm: "rotate",
    overlap: "24h",
  });
  assertEquals(done.status, 200);
  const html = await done.text();
  const secret = /<code id="new-secret">([^<]+)<\/code>/.exec(html)?.[1];
  assertMatch(secret ?? "", /^whsec_/);
  const stored = await t.store.webhooks.getOutgoing(webhook.id);
  assertEquals(stored?.secret, secret);
  assertEquals(stored?.previous_secrets, [
    { secret: old!, expires_at: new Date(now + 24 * HOUR).toISOString() },
  ]);
  assertStringIncludes(
    textOf(html),
    `webhook-signature carries both secrets until ${shown(now + 24 * HOUR)}; ` +
      `X-Service-Signature keeps the old secret until ${shown(now + 24 * HOUR)}, then switches`,
  );
  // Shown once: the webhooks page does not carry it again.
  assert(!(await page(t.app, cookie, "/ui/webhooks")).html.includes(secret!));

  // A second rotation during the first's overlap, with none: the spec header keeps the first
  // secret until its overlap ends, which the confirmation says.
  now = T0 + HOUR;
  const again = await page(t.app, cookie, rotatePath);
  const againText = textOf(again.html);
  assertStringIncludes(againText, "An earlier rotation");
  assertStringIncludes(
    againText,
    `webhook-signature drops the old secret at once; X-Service-Signature keeps the secret ` +
      `from before the earlier rotation until ${shown(T0 + 60_000 + 24 * HOUR)}, then switches`,
  );
  // With 7 days, it keeps that one, then the one replaced now, then switches.
  assertStringIncludes(
    againText,
    `keeps the secret from before the earlier rotation until ${
      shown(T0 + 60_000 + 24 * HOUR)
    }, then the old one until ${shown(T0 + HOUR + 7 * 24 * HOUR)}, then switches`,
  );
  const none = await post(t.app, cookie, rotatePath, {
    _csrf: again.csrf!,
    confirm: "rotate",
    overlap: "0",
  });
  assertEquals(none.status, 200);
  const noneHtml = await none.text();
  assertMatch(noneHtml, /<code id="new-secret">whsec_/);
  assertEquals(
    (await t.store.webhooks.getOutgoing(webhook.id))?.previous_secrets?.map((p) => p.secret),
    [old!],
  );

  // A bad overlap is a 400 page, and nothing changes.
  const before = (await t.store.webhooks.getOutgoing(webhook.id))?.secret;
  const bad = await post(t.app, cookie, rotatePath, {
    _csrf: again.csrf!,
    confirm: "rotate",
    overlap: "soon",
  });
  assertEquals(bad.status, 400);
  assertStringIncludes(await bad.text(), "Invalid overlap");
  assertEquals((await t.store.webhooks.getOutgoing(webhook.id))?.secret, before);
});

Deno.test("console: with no overlap pending, None says both headers switch at once, and does so", async () => {
  const config = await httpConfig({}, { TOOLGATE_API_TOKEN: TOKEN });
  await using t = await storedApp(config, {
    routes: (store, audit) => [consoleRoutes({ store, audit, now: () => T0 })],
  });
  const { webhook } = await addWebhook(t.store, { url: URL_ });
  const cookie = await signIn(t.app);
  const rotatePath = `/ui/webhooks/${webhook.id}/rotate`;
  const confirm = await page(t.app, cookie, rotatePath);
  const done = await post(t.app, cookie, rotatePath, {
    _csrf: confirm.csrf!,
    confirm: "rotate",
    overlap: "0",
  });
  const text = textOf(await done.text());
  assertStringIncludes(text, "X-Service-Signature switches to the new secret at once");
  assertEquals((await t.store.webhooks.getOutgoing(webhook.id))?.previous_secrets, undefined);
});

Deno.test("console: an unknown webhook's confirmation is a 404 page", async () => {
  const config = await httpConfig({}, { TOOLGATE_API_TOKEN: TOKEN });
  await using t = await storedApp(config, {
    routes: (store, audit) => [consoleRoutes({ store, audit })],
  });
  const cookie = await signIn(t.app);
  const missing = await page(t.app, cookie, "/ui/webhooks/wh_missing/rotate");
  assertEquals(missing.status, 404);
  assertStringIncludes(missing.html, "No outgoing webhook with id wh_missing");
});
