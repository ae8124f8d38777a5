/**
 * `?wait=true` on an endpoint without a secret authenticates like the rest
 * of the HTTP API (issue 21 item 6 with issue 22's callers): the API token,
 * an API key or an OAuth token; the handler then runs as that caller.
 */
import { assertEquals, assertMatch } from "../_asserts.ts";
import { createApiKey } from "../../src/auth/mod.ts";
import { resolveCaller } from "../../src/http/mod.ts";
import { gatedTool, incomingEnv } from "./_incoming_env.ts";

Deno.test("?wait=true needs a key that authenticates once keys exist; the handler runs as the key", async () => {
  const gated = gatedTool("count");
  gated.open();
  await using env = await incomingEnv({ plugins: [gated.plugin] });
  const endpoint = await env.store.webhooks.addIncoming({
    name: "open",
    path: "/hooks/open",
    handler: "count",
  });
  const router = env.router({
    resolveCaller: (authorization) => resolveCaller(authorization, { keys: env.store.apiKeys }),
  });
  await router.start();
  const wait = async (authorization?: string) => {
    const response = await router.handle(
      new Request("http://127.0.0.1/hooks/open?wait=true", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(authorization ? { authorization } : {}),
        },
        body: JSON.stringify({ n: 1 }),
      }),
      endpoint,
    );
    return { status: response.status, body: await response.json() };
  };
  // Nothing configured: open on loopback, as the rest of the API.
  assertEquals((await wait()).status, 200);
  const allowed = await createApiKey(env.store.apiKeys, { name: "ci", tools: "count" });
  const other = await createApiKey(env.store.apiKeys, { name: "agent", tools: "memory_*" });
  const anonymous = await wait();
  assertEquals(anonymous.status, 401);
  assertEquals(anonymous.body.error.code, "UNAUTHORIZED");
  assertMatch(
    anonymous.body.error.message,
    /\?wait=true on \/hooks\/open answers the handler's output/,
  );
  assertEquals((await wait("Bearer tg_wrong")).status, 401);
  const ok = await wait(`Bearer ${allowed.key}`);
  assertEquals([ok.status, ok.body.status], [200, "completed"]);
  const refused = await wait(`Bearer ${other.key}`);
  assertEquals(refused.status, 403, "the key may not call the handler");
  assertEquals(refused.body.error.code, "FORBIDDEN");
  // Without ?wait=true the payload is accepted as always: the endpoint has its own rules.
  const accepted = await router.handle(
    new Request("http://127.0.0.1/hooks/open", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n: 2 }),
    }),
    endpoint,
  );
  assertEquals(accepted.status, 202);
  await accepted.body?.cancel();
  await router.idle();
  const calls = (await env.audit.list({ kind: "tool.call" })).entries;
  const byKey = calls.filter((entry) =>
    (entry as { caller?: { name?: string } }).caller?.name === "ci"
  );
  assertEquals(byKey.length, 1, "the call made for the key is audited with it");
});
