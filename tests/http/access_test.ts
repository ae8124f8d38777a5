/**
 * Who may call what over HTTP: the administrator's token, API keys with
 * tool patterns (REST, MCP with the official clients of both eras,
 * /events), the 401 variants, the management API refused to keys, and the
 * caller in the audit log.
 *
 * @module
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { createApiKey } from "../../src/auth/mod.ts";
import { auditRoutes, eventsRoutes } from "../../src/http/mod.ts";
import {
  bearer,
  httpConfig,
  inProcessFetch,
  mcpClient,
  postJson,
  restToolNames,
  storedApp,
} from "./_fixtures.ts";

const ADMIN = "admin-token-0123456789";

async function setup(env: Record<string, string> = { TOOLGATE_API_TOKEN: ADMIN }) {
  const config = await httpConfig({}, env);
  const clock = { now: Date.now() };
  const t = await storedApp(config, {
    now: () => clock.now,
    routes: (_store, audit) => [auditRoutes(audit), eventsRoutes()],
  });
  return { ...t, clock };
}

Deno.test("API keys: 401 for a missing, malformed, oversized, unknown, revoked or expired token, with WWW-Authenticate, and nothing stored", async () => {
  await using t = await setup();
  const { key: revoked } = await createApiKey(t.store.apiKeys, { name: "old" });
  await t.store.apiKeys.remove((await t.store.apiKeys.getByName("old"))!.id);
  const { key: expiring } = await createApiKey(t.store.apiKeys, {
    name: "temp",
    expires: "1h",
  });
  // Works now; two hours on (the app's clock), it has expired.
  assertEquals(
    (await postJson(t.app, "/tools/echo", { message: "hi" }, bearer(expiring))).status,
    200,
  );
  const head = (await t.audit.head()).head_seq;
  t.clock.now += 2 * 3_600_000;
  const cases: [Record<string, string>, string][] = [
    [{}, "send Authorization: Bearer <TOOLGATE_API_TOKEN or an API key>"],
    [{ authorization: "Basic dXNlcjpwdw==" }, "is not 'Bearer <token>'"],
    [bearer("x".repeat(600)), "at most 512"],
    [{ authorization: `Bearer ${"x".repeat(5000)}` }, "at most 512"],
    [bearer("tg_" + "A".repeat(43)), "unknown or revoked"],
    [bearer(revoked), "unknown or revoked"],
    [bearer(expiring), "API key temp expired at"],
    [bearer("wrong-token"), "the bearer token is wrong"],
  ];
  for (const [headers, message] of cases) {
    for (
      const response of [
        await postJson(t.app, "/tools/echo", { message: "hi" }, headers),
        await t.app.request("/tools", { headers }),
        await t.app.request("/mcp", { method: "POST", headers, body: "{}" }),
      ]
    ) {
      assertEquals(response.status, 401, message);
      assertStringIncludes(response.headers.get("www-authenticate") ?? "", "Bearer");
      const body = await response.json();
      assertEquals(body.error.code, "UNAUTHORIZED");
      assertStringIncludes(body.error.message, message);
    }
  }
  assertEquals((await t.audit.head()).head_seq, head, "nothing audited");
});

Deno.test("API keys: GET /tools lists only the key's tools; a call outside them is 403 FORBIDDEN and audited with the caller", async () => {
  await using t = await setup();
  const { key, record } = await createApiKey(t.store.apiKeys, { name: "ci", tools: "echo,fl*" });
  const { key: all } = await createApiKey(t.store.apiKeys, { name: "all" });
  assertEquals(await restToolNames(t.app, key), ["echo", "flaky"]);
  assertEquals(await restToolNames(t.app, all), ["echo", "flaky", "slow", "thrower", "secretive"]);
  assertEquals(await restToolNames(t.app, ADMIN), [
    "echo",
    "flaky",
    "slow",
    "thrower",
    "secretive",
  ]);

  const ok = await postJson(t.app, "/tools/echo", { message: "hi" }, bearer(key));
  assertEquals(ok.status, 200);
  const denied = await postJson(t.app, "/tools/secretive", { token: "t", user: "u" }, bearer(key));
  assertEquals(denied.status, 403);
  const body = await denied.json();
  assertEquals(body.error.code, "FORBIDDEN");
  assertStringIncludes(body.error.message, "API key ci may not call secretive");
  assertEquals(body.isError, true);
  // An unknown tool outside the patterns is refused the same way (nothing said about what exists).
  assertEquals((await postJson(t.app, "/tools/nope", {}, bearer(key))).status, 403);
  assertEquals((await postJson(t.app, "/tools/echo", { message: "a" }, bearer(ADMIN))).status, 200);

  const { entries } = await t.audit.list();
  assertEquals(entries.map((e) => [e.tool, e.outcome.ok, e.outcome.error_code ?? null]), [
    ["echo", true, null],
    ["secretive", false, "FORBIDDEN"],
    ["nope", false, "FORBIDDEN"],
    ["echo", true, null],
  ]);
  assertEquals(entries[0].caller, { kind: "key", name: "ci", id: record.id });
  assertEquals(entries[1].caller, { kind: "key", name: "ci", id: record.id });
  assertEquals(entries[3].caller, { kind: "admin" });
  assertEquals(entries[1].input, { token: "[REDACTED]", user: "u" });

  // GET /audit?caller= filters by name or id; the chain still verifies.
  const byName = await (await t.app.request("/audit?caller=ci", { headers: bearer(ADMIN) })).json();
  assertEquals(byName.entries.map((e: { seq: number }) => e.seq), [1, 2, 3]);
  const byId = await (await t.app.request(`/audit?caller=${record.id}`, { headers: bearer(ADMIN) }))
    .json();
  assertEquals(byId.entries.length, 3);
  const admin = await (await t.app.request("/audit?caller=admin", { headers: bearer(ADMIN) }))
    .json();
  assertEquals(admin.entries.map((e: { seq: number }) => e.seq), [4]);
  assertEquals((await t.audit.verify()).ok, true);
  // The key's last use is recorded.
  assert((await t.store.apiKeys.get(record.id))?.last_used_at);
});

Deno.test("API keys: the management API is the administrator's (403 FORBIDDEN for a key); /events is open to keys", async () => {
  await using t = await setup();
  const { key } = await createApiKey(t.store.apiKeys, { name: "ci", tools: "echo" });
  for (
    const path of ["/audit", "/webhooks", "/dlq", "/incoming/failed", "/audit?caller=ci"]
  ) {
    const response = await t.app.request(path, { headers: bearer(key) });
    assertEquals(response.status, 403, path);
    const body = await response.json();
    assertEquals(body.error.code, "FORBIDDEN");
    assertStringIncludes(body.error.message, "may not use the management API");
  }
  assertEquals((await t.app.request("/audit", { headers: bearer(ADMIN) })).status, 200);
  const events = await t.app.request("/events", { headers: bearer(key) });
  assertEquals(events.status, 200);
  await events.body?.cancel();
  assertEquals((await t.app.request("/openapi.json", { headers: bearer(key) })).status, 200);
  assertEquals((await t.app.request("/health")).status, 200);
});

Deno.test("API keys: /events leaves out the events of tools the key may not call", async () => {
  await using t = await setup();
  const { key } = await createApiKey(t.store.apiKeys, { name: "ci", tools: "echo" });
  const response = await t.app.request("/events?types=tool.called", { headers: bearer(key) });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  await postJson(t.app, "/tools/flaky", {}, bearer(ADMIN));
  await postJson(t.app, "/tools/echo", { message: "seen" }, bearer(ADMIN));
  let text = "";
  while (!text.includes('"seen"')) text += (await reader.read()).value ?? "";
  await reader.cancel();
  assertStringIncludes(text, '"tool_name":"echo"');
  assert(!text.includes('"tool_name":"flaky"'), text);
});

Deno.test("API keys over MCP: tools/list is filtered and a call outside the patterns is an isError result (2025 session and 2026 client)", async () => {
  await using t = await setup();
  const { key } = await createApiKey(t.store.apiKeys, { name: "agent", tools: "echo" });
  await using session = await mcpClient(t.app, bearer(key));
  const listed = await session.client.listTools();
  assertEquals(listed.tools.map((tool: { name: string }) => tool.name), ["echo"]);
  const refused = await session.client.callTool({
    name: "secretive",
    arguments: { token: "t", user: "u" },
  });
  assertEquals(refused.isError, true);
  assertStringIncludes(JSON.stringify(refused.content), "FORBIDDEN");
  const called = await session.client.callTool({ name: "echo", arguments: { message: "m" } });
  assertEquals(called.isError ?? false, false);

  // Another caller cannot use the key's session.
  const sessionId = session.transport.sessionId!;
  const other = await t.app.request("/mcp", {
    method: "POST",
    headers: {
      ...bearer(ADMIN),
      "mcp-session-id": sessionId,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
  });
  assertEquals(other.status, 403);
  await other.body?.cancel();

  // A 2026-07-28 client (stateless requests) gets the same answers.
  const modern = new Client(
    { name: "modern-test", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  await modern.connect(
    new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp"), {
      fetch: inProcessFetch(t.app, bearer(key)),
    }),
  );
  try {
    assertEquals((await modern.listTools()).tools.map((tool) => tool.name), ["echo"]);
    const result = await modern.callTool({ name: "flaky", arguments: {} });
    assertEquals(result.isError, true);
    assertStringIncludes(JSON.stringify(result.content), "FORBIDDEN");
  } finally {
    await modern.close();
  }
  const callers = (await t.audit.list()).entries.map((e) => [e.tool, e.caller?.name]);
  assertEquals(callers, [["secretive", "agent"], ["echo", "agent"], ["flaky", "agent"]]);
});

Deno.test("without TOOLGATE_API_TOKEN: open on loopback until a key exists, then every request needs a key", async () => {
  await using t = await setup({});
  assertEquals((await t.app.request("/tools")).status, 200);
  assertEquals((await t.app.request("/tools", { headers: bearer("anything") })).status, 200);
  assertEquals((await t.app.request("/audit")).status, 200);
  const { key } = await createApiKey(t.store.apiKeys, { name: "ci", tools: "echo" });
  const missing = await t.app.request("/tools");
  assertEquals(missing.status, 401);
  assertStringIncludes((await missing.json()).error.message, "API keys exist");
  assertEquals((await t.app.request("/tools", { headers: bearer("anything") })).status, 401);
  assertEquals(await restToolNames(t.app, key), ["echo"]);
  assertEquals((await t.app.request("/audit", { headers: bearer(key) })).status, 403);
  assertEquals((await t.app.request("/health")).status, 200);
});
