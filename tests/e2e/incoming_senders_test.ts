/**
 * Real senders' signatures against the real server process: GitHub (its
 * JSON and form options, signed by @octokit/webhooks-methods), Stripe
 * (stripe's test header helper) and Standard Webhooks (standardwebhooks),
 * endpoints made by the CLI; and `?wait=true` behind the API token.
 *
 * @module
 */
import { assertEquals, assertMatch } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";
import { SENDER_SECRETS, signAs } from "../webhooks/_senders.ts";

const TOKEN = "tg_e2e_token_for_wait";

async function create(home: string, args: string[]): Promise<void> {
  const run = await runCli(["webhooks", "create", "--handler", "memory_set", ...args], { home });
  assertEquals(run.code, 0, run.stderr);
}

Deno.test("GitHub, Stripe and Standard Webhooks senders are verified by the server; ?wait=true needs the token or a signature", async () => {
  await using tmp = await tempHome();
  await create(tmp.home, [
    "--name",
    "github",
    "--path",
    "/hooks/github",
    "--verify",
    "github",
    "--secret",
    SENDER_SECRETS.github,
  ]);
  await create(tmp.home, [
    "--name",
    "stripe",
    "--path",
    "/hooks/stripe",
    "--verify",
    "stripe",
    "--secret",
    SENDER_SECRETS.stripe,
  ]);
  await create(tmp.home, [
    "--name",
    "std",
    "--path",
    "/hooks/std",
    "--verify",
    "standard-webhooks",
    "--secret",
    SENDER_SECRETS["standard-webhooks"],
  ]);
  await create(tmp.home, ["--name", "open", "--path", "/hooks/open"]);
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: TOKEN },
  });
  const post = (path: string, body: string, headers: Record<string, string>) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });
  const now = () => Math.floor(Date.now() / 1000);

  // GitHub, JSON: signed by octokit; ?wait=true answers the result without the token.
  const json = JSON.stringify({ key: "gh", value: { action: "opened" } });
  const github = await post(
    "/hooks/github?wait=true",
    json,
    await signAs("github", SENDER_SECRETS.github, json, { timestamp: now() }),
  );
  assertEquals(github.status, 200, await github.clone().text());
  assertEquals((await github.json()).result.structuredContent.key, "gh");
  const tampered = await post(
    "/hooks/github",
    json.replace("opened", "closed"),
    await signAs("github", SENDER_SECRETS.github, json, { timestamp: now() }),
  );
  assertEquals(tampered.status, 401);
  assertEquals((await tampered.json()).error.code, "SIGNATURE_INVALID");

  // GitHub's form option: payload=<json>, signed over the form bytes.
  const form = new URLSearchParams({
    payload: JSON.stringify({ key: "gh-form", value: "é&=" }),
  }).toString();
  const formReply = await post("/hooks/github?wait=true", form, {
    ...await signAs("github", SENDER_SECRETS.github, form, { timestamp: now() }),
    "content-type": "application/x-www-form-urlencoded",
  });
  assertEquals(formReply.status, 200, await formReply.clone().text());
  assertEquals((await formReply.json()).result.structuredContent.key, "gh-form");

  // Stripe: the test header helper; an hour-old signature is expired.
  const event = JSON.stringify({ key: "stripe", value: { type: "invoice.paid" } });
  const stripe = await post(
    "/hooks/stripe",
    event,
    await signAs("stripe", SENDER_SECRETS.stripe, event, { timestamp: now() }),
  );
  assertEquals(stripe.status, 202, await stripe.clone().text());
  assertEquals((await stripe.json()).status, "accepted");
  const stale = await post(
    "/hooks/stripe",
    event,
    await signAs("stripe", SENDER_SECRETS.stripe, event, { timestamp: now() - 3600 }),
  );
  assertEquals(stale.status, 401);
  const staleError = (await stale.json()).error;
  assertEquals(staleError.code, "SIGNATURE_EXPIRED");
  assertMatch(staleError.message, /past the tolerance of 300 s/);

  // Standard Webhooks.
  const std = JSON.stringify({ key: "std", value: 1 });
  const standard = await post(
    "/hooks/std?wait=true",
    std,
    await signAs("standard-webhooks", SENDER_SECRETS["standard-webhooks"], std, {
      timestamp: now(),
      id: "msg_e2e",
    }),
  );
  assertEquals(standard.status, 200, await standard.clone().text());
  await standard.body?.cancel();

  // An endpoint without a secret: ?wait=true needs the API token.
  const open = JSON.stringify({ key: "gh" });
  const refused = await fetch(`${server.url}/hooks/open?wait=true`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: open,
  });
  assertEquals(refused.status, 401);
  const refusal = (await refused.json()).error;
  assertEquals(refusal.code, "UNAUTHORIZED");
  assertMatch(
    refusal.message,
    /needs a token that authenticates \(TOOLGATE_API_TOKEN, an API key or an OAuth access token\)/,
  );
  const allowed = await post("/hooks/open?wait=true", JSON.stringify({ key: "o", value: 2 }), {
    authorization: `Bearer ${TOKEN}`,
  });
  assertEquals(allowed.status, 200, await allowed.clone().text());
  await allowed.body?.cancel();
  const accepted = await post("/hooks/open", JSON.stringify({ key: "o2", value: 3 }), {});
  assertEquals(accepted.status, 202);
  await accepted.body?.cancel();
});
