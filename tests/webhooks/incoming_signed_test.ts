/**
 * The incoming router with sender signature schemes, form-encoded bodies and
 * the authentication of `?wait=true`, on a real KV store; time from the
 * router's injected clock.
 *
 * @module
 */
import { z } from "zod";
import { assertEquals, assertMatch } from "../_asserts.ts";
import type { PluginDefinition } from "../../src/gateway/mod.ts";
import type { NewIncomingWebhook } from "../../src/store/mod.ts";
import { type IncomingRouter, VERIFY_SCHEMES } from "../../src/webhooks/mod.ts";
import type { KvStore } from "../../src/store/kv/kv_store.ts";
import { incomingEnv } from "./_incoming_env.ts";
import { SENDER_SECRETS, signAs } from "./_senders.ts";

const NOW_S = 1_790_000_000;
const TOKEN = "tg_test_token_1";

/** A plugin whose `record` tool keeps the arguments of each call, once `gate` opens. */
function recordingPlugin(calls: Record<string, unknown>[], gate: Promise<void>): PluginDefinition {
  return {
    name: "rec",
    version: "1.0.0",
    zeroConfig: true,
    tools: [{
      name: "record",
      description: "Keeps its arguments",
      input: z.looseObject({}),
      execute: async (args) => {
        await gate;
        calls.push(args as Record<string, unknown>);
        return { ok: true };
      },
    }],
  };
}

interface Env {
  store: KvStore;
  router: IncomingRouter;
  calls: Record<string, unknown>[];
  open(): void;
  add(endpoint: Omit<NewIncomingWebhook, "handler">): Promise<void>;
  post(
    path: string,
    body: string,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: { error?: { code: string; message: string } } }>;
  [Symbol.asyncDispose](): Promise<void>;
}

async function setup(options: { apiToken?: string; gated?: boolean } = {}): Promise<Env> {
  const calls: Record<string, unknown>[] = [];
  let open = () => {};
  const gate = options.gated ? new Promise<void>((resolve) => open = resolve) : Promise.resolve();
  const env = await incomingEnv({
    plugins: [recordingPlugin(calls, gate)],
    ...(options.apiToken ? { apiToken: options.apiToken } : {}),
  });
  const { store } = env;
  // The router's own concurrency (not the setup's 1), at a fixed time.
  const router = env.router({ concurrency: undefined, now: () => NOW_S * 1000 });
  await router.start();
  return {
    store,
    router,
    calls,
    open: () => open(),
    async add(endpoint) {
      await store.webhooks.addIncoming({ ...endpoint, handler: "record" });
      await router.refresh();
    },
    async post(path, body, headers = {}) {
      const response = await router.handle(
        new Request(`http://127.0.0.1${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body,
        }),
        router.match(path.split("?")[0])!,
      );
      return { status: response.status, body: await response.json() };
    },
    async [Symbol.asyncDispose]() {
      open();
      await router.idle();
      await env[Symbol.asyncDispose]();
    },
  };
}

Deno.test("each scheme's signed request is accepted and handled; expired is 401 SIGNATURE_EXPIRED", async () => {
  await using env = await setup();
  for (const scheme of VERIFY_SCHEMES) {
    await env.add({
      name: scheme,
      path: `/hooks/${scheme}`,
      secret: SENDER_SECRETS[scheme],
      verify: scheme,
    });
  }
  const body = JSON.stringify({ n: 1 });
  for (const scheme of VERIFY_SCHEMES) {
    const headers = await signAs(scheme, SENDER_SECRETS[scheme], body, { timestamp: NOW_S });
    const ok = await env.post(`/hooks/${scheme}`, body, headers);
    assertEquals(ok.status, 202, `${scheme}: ${JSON.stringify(ok.body)}`);
    const bad = await env.post(`/hooks/${scheme}`, body.replace("1", "2"), headers);
    assertEquals([bad.status, bad.body.error?.code], [401, "SIGNATURE_INVALID"], scheme);
  }
  for (const scheme of ["stripe", "slack", "standard-webhooks"] as const) {
    const headers = await signAs(scheme, SENDER_SECRETS[scheme], body, { timestamp: NOW_S - 600 });
    const old = await env.post(`/hooks/${scheme}`, body, headers);
    assertEquals([old.status, old.body.error?.code], [401, "SIGNATURE_EXPIRED"], scheme);
    assertMatch(old.body.error!.message, /600 s old, past the tolerance of 300 s/);
  }
  await env.router.idle();
  assertEquals(env.calls.length, VERIFY_SCHEMES.length);
});

Deno.test("an endpoint's own tolerance lets an older Stripe signature in", async () => {
  await using env = await setup();
  await env.add({
    name: "s",
    path: "/hooks/s",
    secret: SENDER_SECRETS.stripe,
    verify: "stripe",
    tolerance_s: 900,
  });
  const body = JSON.stringify({ n: 1 });
  const at = (timestamp: number) => signAs("stripe", SENDER_SECRETS.stripe, body, { timestamp });
  assertEquals((await env.post("/hooks/s", body, await at(NOW_S - 600))).status, 202);
  assertEquals((await env.post("/hooks/s", body, await at(NOW_S - 901))).status, 401);
});

Deno.test("an endpoint stored before --verify existed still verifies X-Service-Signature or its header", async () => {
  await using env = await setup();
  await env.add({ name: "a", path: "/hooks/a", secret: "s" });
  await env.add({
    name: "b",
    path: "/hooks/b",
    secret: SENDER_SECRETS.github,
    signature_header: "X-Hub-Signature-256",
  });
  const body = JSON.stringify({ n: 1 });
  const a = await signAs("hmac-sha256", "s", body, { timestamp: NOW_S });
  assertEquals((await env.post("/hooks/a", body, a)).status, 202);
  const b = await signAs("github", SENDER_SECRETS.github, body, { timestamp: NOW_S });
  assertEquals((await env.post("/hooks/b", body, b)).status, 202);
  const missing = await env.post("/hooks/b", body);
  assertMatch(missing.body.error!.message, /Missing X-Hub-Signature-256/);
});

Deno.test("GitHub's form option (payload=<json>) is verified over the form bytes, then parsed", async () => {
  await using env = await setup({ gated: true });
  await env.add({
    name: "gh",
    path: "/hooks/gh",
    secret: SENDER_SECRETS.github,
    verify: "github",
  });
  const event = { action: "opened", issue: { number: 7, title: "a&b=c é" } };
  const form = new URLSearchParams({ payload: JSON.stringify(event) }).toString();
  const headers = {
    ...await signAs("github", SENDER_SECRETS.github, form, { timestamp: NOW_S }),
    "content-type": "application/x-www-form-urlencoded",
  };
  const accepted = await env.post("/hooks/gh", form, headers);
  assertEquals(accepted.status, 202, JSON.stringify(accepted.body));
  // The stored job holds the parsed object as JSON, for whichever process runs it.
  const [job] = await env.store.incoming.list();
  const stored = await env.store.incoming.readBody(job);
  assertEquals(JSON.parse(new TextDecoder().decode(stored!)), event);
  env.open();
  await env.router.idle();
  assertEquals(env.calls, [event]);
  // Signed over the JSON instead of the form bytes: refused.
  const wrong = {
    ...headers,
    ...await signAs("github", SENDER_SECRETS.github, JSON.stringify(event), { timestamp: NOW_S }),
  };
  assertEquals((await env.post("/hooks/gh", form, wrong)).status, 401);
  const notJson = "payload=" + encodeURIComponent("{nope");
  const bad = await env.post("/hooks/gh", notJson, {
    ...await signAs("github", SENDER_SECRETS.github, notJson, { timestamp: NOW_S }),
    "content-type": "application/x-www-form-urlencoded",
  });
  assertEquals([bad.status, bad.body.error?.code], [400, "INVALID_JSON"]);
  assertMatch(bad.body.error!.message, /form field payload/);
});

Deno.test("a Slack slash command (plain form fields) reaches the handler as an object of strings", async () => {
  await using env = await setup();
  await env.add({
    name: "slack",
    path: "/hooks/slack",
    secret: SENDER_SECRETS.slack,
    verify: "slack",
  });
  const form = "token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&channel_name=test" +
    "&user_name=Steve&command=%2Fweather&text=94070" +
    "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1234%2F5678";
  const response = await env.post("/hooks/slack?wait=true", form, {
    ...await signAs("slack", SENDER_SECRETS.slack, form, { timestamp: NOW_S }),
    "content-type": "application/x-www-form-urlencoded; charset=utf-8",
  });
  assertEquals(response.status, 200, JSON.stringify(response.body));
  assertEquals(env.calls.length, 1);
  const args = env.calls[0];
  assertEquals(args.command, "/weather");
  assertEquals(args.text, "94070");
  assertEquals(args.response_url, "https://hooks.slack.com/commands/1234/5678");
});

Deno.test("other content types are 415 naming JSON and form-encoded", async () => {
  await using env = await setup();
  await env.add({ name: "a", path: "/hooks/a" });
  const response = await env.post("/hooks/a", "x", { "content-type": "text/plain" });
  assertEquals([response.status, response.body.error?.code], [415, "UNSUPPORTED_MEDIA_TYPE"]);
  assertMatch(
    response.body.error!.message,
    /application\/json.*application\/x-www-form-urlencoded/,
  );
});

Deno.test("?wait=true with an API token: the token or a verified signature, else 401", async () => {
  await using env = await setup({ apiToken: TOKEN });
  await env.add({ name: "open", path: "/hooks/open" });
  await env.add({
    name: "signed",
    path: "/hooks/signed",
    secret: SENDER_SECRETS.github,
    verify: "github",
  });
  const body = JSON.stringify({ n: 1 });
  const signature = await signAs("github", SENDER_SECRETS.github, body, { timestamp: NOW_S });
  const cases: [string, Record<string, string>, number, string?][] = [
    ["/hooks/open?wait=true", {}, 401, "UNAUTHORIZED"],
    ["/hooks/open?wait=true", { authorization: "Bearer wrong" }, 401, "UNAUTHORIZED"],
    ["/hooks/open?wait=true", { authorization: `Bearer ${TOKEN}` }, 200],
    ["/hooks/open", {}, 202],
    ["/hooks/signed?wait=true", signature, 200],
    ["/hooks/signed?wait=true", { authorization: `Bearer ${TOKEN}` }, 401, "SIGNATURE_INVALID"],
  ];
  for (const [path, headers, status, code] of cases) {
    const response = await env.post(path, body, headers);
    assertEquals(response.status, status, `${path} ${JSON.stringify(headers)}`);
    if (code) assertEquals(response.body.error?.code, code);
  }
  const refused = await env.post("/hooks/open?wait=true", body);
  assertMatch(refused.body.error!.message, /Authorization: Bearer <TOOLGATE_API_TOKEN>/);
  assertMatch(refused.body.error!.message, /--secret/);
  await env.router.idle();
  // Refused requests never reach the handler: two waits and one accepted job.
  assertEquals(env.calls.length, 3);
});

Deno.test("?wait=true without an API token (loopback only) is allowed on an endpoint without a secret", async () => {
  await using env = await setup();
  await env.add({ name: "open", path: "/hooks/open" });
  const response = await env.post("/hooks/open?wait=true", JSON.stringify({ n: 1 }));
  assertEquals(response.status, 200);
});
