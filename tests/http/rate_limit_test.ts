/**
 * Rate limits over HTTP: a key made with `--rate 2/s` gets 429
 * RATE_LIMITED with Retry-After on REST and an isError result saying when
 * to retry over MCP; two keys do not share a bucket; a tool's limit holds
 * for every caller; refusals are audited. Time is the gateway's injected
 * clock: nothing here depends on how fast the machine is.
 *
 * @module
 */
import { assertEquals, assertStringIncludes } from "../_asserts.ts";
import { createApiKey } from "../../src/auth/mod.ts";
import { auditRoutes } from "../../src/http/mod.ts";
import { bearer, httpConfig, mcpClient, postJson, storedApp } from "./_fixtures.ts";

const ADMIN = "admin-token-0123456789";

async function setup(file: Record<string, unknown> = {}) {
  const config = await httpConfig(file, { TOOLGATE_API_TOKEN: ADMIN });
  const clock = { now: Date.UTC(2026, 0, 1) };
  const t = await storedApp(config, {
    gatewayClock: () => clock.now,
    routes: (_store, audit) => [auditRoutes(audit)],
  });
  return { ...t, clock };
}

Deno.test("rate limits over REST: a key with --rate 2/s gets 429 RATE_LIMITED with Retry-After past two calls; another key has its own bucket; audited", async () => {
  await using t = await setup();
  const { key: ci } = await createApiKey(t.store.apiKeys, { name: "ci", rate: "2/s" });
  const { key: other } = await createApiKey(t.store.apiKeys, { name: "other", rate: "2/s" });
  const call = (key: string) => postJson(t.app, "/tools/echo", { message: "hi" }, bearer(key));
  assertEquals((await call(ci)).status, 200);
  assertEquals((await call(ci)).status, 200);
  const refused = await call(ci);
  assertEquals(refused.status, 429);
  assertEquals(refused.headers.get("retry-after"), "1");
  const body = await refused.json();
  assertEquals(body.error.code, "RATE_LIMITED");
  assertEquals(body.error.details.retry_after_ms, 500);
  assertEquals(body.isError, true);
  assertStringIncludes(body.error.message, "API key ci is limited to 2/s; retry echo in 1 s");
  assertStringIncludes(body.content[0].text, "RATE_LIMITED: ");

  // The other key's bucket is full; the administrator is not limited.
  assertEquals((await call(other)).status, 200);
  assertEquals((await call(other)).status, 200);
  for (let i = 0; i < 5; i++) assertEquals((await call(ADMIN)).status, 200);

  // Half a second on (the gateway's clock), ci has one call again.
  t.clock.now += 500;
  assertEquals((await call(ci)).status, 200);
  assertEquals((await call(ci)).status, 429);

  const ciEntries = (await t.audit.list({ caller: "ci" })).entries;
  assertEquals(
    ciEntries.map((entry) => entry.outcome.ok ? "ok" : entry.outcome.error_code),
    ["ok", "ok", "RATE_LIMITED", "ok", "RATE_LIMITED"],
  );
});

Deno.test("rate limits: tools.overrides.<tool>.rate holds for every caller together, with Retry-After in whole seconds", async () => {
  await using t = await setup({
    tools: { overrides: { echo: { rate: "6/m" } } },
    limits: { per_caller: "100/s" },
  });
  const { key } = await createApiKey(t.store.apiKeys, { name: "agent" });
  const echo = (token: string) => postJson(t.app, "/tools/echo", { message: "x" }, bearer(token));
  for (let i = 0; i < 3; i++) assertEquals((await echo(key)).status, 200);
  for (let i = 0; i < 3; i++) assertEquals((await echo(ADMIN)).status, 200);
  const refused = await echo(ADMIN);
  assertEquals(refused.status, 429);
  assertEquals(refused.headers.get("retry-after"), "10");
  const body = await refused.json();
  assertEquals(body.error.details, {
    tool: "echo",
    limit: "tool",
    rate: "6/m",
    retry_after_ms: 10_000,
    token_interval_ms: 10_000,
  });
  assertStringIncludes(body.error.message, "tool echo is limited to 6/m");
  // Other tools are not limited by echo's rate.
  assertEquals((await postJson(t.app, "/tools/flaky", {}, bearer(key))).status, 200);
});

Deno.test("rate limits over MCP: past the key's rate a call is an isError result saying when to retry", async () => {
  await using t = await setup();
  const { key } = await createApiKey(t.store.apiKeys, { name: "agent", rate: "1/m" });
  await using session = await mcpClient(t.app, bearer(key));
  const first = await session.client.callTool({ name: "echo", arguments: { message: "m" } });
  assertEquals(first.isError ?? false, false);
  const refused = await session.client.callTool({ name: "echo", arguments: { message: "m" } });
  assertEquals(refused.isError, true);
  const text = (refused.content as { type: string; text: string }[])[0].text;
  assertStringIncludes(text, "RATE_LIMITED: Too many calls: API key agent is limited to 1/m");
  assertStringIncludes(text, "retry echo in 60 s");
  t.clock.now += 60_000;
  const again = await session.client.callTool({ name: "echo", arguments: { message: "m" } });
  assertEquals(again.isError ?? false, false);
});
