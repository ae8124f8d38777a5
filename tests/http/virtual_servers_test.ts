/**
 * Virtual servers over HTTP: `/mcp/<name>` with the official clients of both
 * eras (the subset listed, a call outside it `TOOL_NOT_FOUND` and audited
 * with the server, prompts and resources by plugin prefix, list_changed
 * when `toolgate servers update` changes the definition), an unknown name
 * 404, and an API key bound to a server refused elsewhere.
 *
 * @module
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { createApiKey } from "../../src/auth/mod.ts";
import type { CatalogSource } from "../../src/gateway/mod.ts";
import { followVirtualServers, VirtualServers } from "../../src/gateway/mod.ts";
import { eventsRoutes } from "../../src/http/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { waitFor } from "../plugins/_upstreams.ts";
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

type Named = { name: string };

/** Prompts and a resource of a plugin named `plugin`, as an MCP upstream offers them. */
function source(plugin: string): CatalogSource {
  return {
    prompts: [{
      name: `${plugin}__greet`,
      ownName: "greet",
      info: { description: `greets from ${plugin}` },
      get: () => Promise.resolve({ messages: [] }),
    }],
    resources: [{ uri: `${plugin}://readme`, name: `${plugin} readme` }],
    templates: [],
    read: (uri) => Promise.resolve({ contents: [{ uri, text: plugin }] }),
  };
}

async function setup(options: { maxSessions?: number } = {}) {
  const config = await httpConfig({
    // Config defines `cfg`; the store defines `team-a` (and a `cfg` that config shadows).
    servers: { cfg: { tools: ["echo"], description: "from config" } },
  }, { TOOLGATE_API_TOKEN: ADMIN });
  const store = await openStore({ dataDir: config.dataDir, memory: true });
  const now = new Date().toISOString();
  for (const [name, tools] of [["team-a", ["echo", "fl*", "github__*"]], ["cfg", ["*"]]] as const) {
    await store.servers.add({
      name,
      tools: [...tools],
      description: null,
      created_at: now,
      updated_at: now,
    });
  }
  const servers = new VirtualServers(config.servers);
  servers.setStored(await store.servers.list());
  const stopFollowing = followVirtualServers({
    servers,
    store,
    pollMs: 10,
    version: await store.registrationsVersion(),
  });
  const t = await storedApp(config, {
    store,
    servers,
    mcp: options,
    routes: () => [eventsRoutes()],
  });
  t.gateway.catalog.set("github", source("github"));
  t.gateway.catalog.set("jira", source("jira"));
  return {
    ...t,
    async [Symbol.asyncDispose]() {
      await stopFollowing();
      await t[Symbol.asyncDispose]();
    },
  };
}

Deno.test("/mcp/<name>: tools/list shows the subset, a call outside it is TOOL_NOT_FOUND (audited with the server), prompts and resources by plugin prefix", async () => {
  await using t = await setup();
  await using session = await mcpClient(t.app, bearer(ADMIN), "/mcp/team-a");
  const { client } = session;
  assertEquals((await client.listTools()).tools.map((tool: Named) => tool.name), ["echo", "flaky"]);
  const outside = await client.callTool({
    name: "secretive",
    arguments: { token: "t", user: "u" },
  });
  assertEquals(outside.isError, true);
  assertStringIncludes(JSON.stringify(outside.content), "TOOL_NOT_FOUND");
  assertStringIncludes(JSON.stringify(outside.content), "on virtual server team-a");
  const inside = await client.callTool({ name: "echo", arguments: { message: "m" } });
  assertEquals(inside.isError ?? false, false);
  // github__* covers plugin github's prompts and resources; jira's are not on the server.
  assertEquals((await client.listPrompts()).prompts.map((p: Named) => p.name), ["github__greet"]);
  assertEquals((await client.listResources()).resources.map((r: { uri: string }) => r.uri), [
    "github://readme",
  ]);
  assertEquals((await client.getPrompt({ name: "github__greet" })).messages, []);
  let refused = "";
  await client.getPrompt({ name: "jira__greet" }).catch((error: unknown) =>
    refused = String(error)
  );
  assertStringIncludes(refused, "Unknown prompt: jira__greet");
  refused = "";
  await client.readResource({ uri: "jira://readme" }).catch((error: unknown) =>
    refused = String(error)
  );
  assertStringIncludes(refused, "jira://readme");

  // The config's definition of cfg wins over the stored one.
  await using cfg = await mcpClient(t.app, bearer(ADMIN), "/mcp/cfg");
  assertEquals((await cfg.client.listTools()).tools.map((tool: Named) => tool.name), ["echo"]);
  assertEquals((await cfg.client.listPrompts()).prompts, []);
  // /mcp still offers everything.
  await using all = await mcpClient(t.app, bearer(ADMIN));
  assertEquals((await all.client.listTools()).tools.length, 5);
  assertEquals((await all.client.listPrompts()).prompts.length, 2);

  // A 2026-07-28 client (stateless requests) gets the same answers.
  const modern = new Client(
    { name: "modern-test", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  await modern.connect(
    new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp/team-a"), {
      fetch: inProcessFetch(t.app, bearer(ADMIN)),
    }),
  );
  try {
    assertEquals((await modern.listTools()).tools.map((tool: Named) => tool.name), [
      "echo",
      "flaky",
    ]);
    const result = await modern.callTool({ name: "slow", arguments: {} });
    assertEquals(result.isError, true);
    assertStringIncludes(JSON.stringify(result.content), "TOOL_NOT_FOUND");
  } finally {
    await modern.close();
  }

  const entries = (await t.audit.list()).entries;
  assertEquals(
    entries.filter((e) => e.kind === "tool.call").map((e) => [
      e.tool,
      e.outcome.error_code ?? null,
      e.caller,
    ]),
    [
      ["secretive", "TOOL_NOT_FOUND", { kind: "admin", server: "team-a" }],
      ["echo", null, { kind: "admin", server: "team-a" }],
      ["slow", "TOOL_NOT_FOUND", { kind: "admin", server: "team-a" }],
    ],
  );
  const prompt = entries.find((e) => e.kind === "prompt.get");
  assertEquals(prompt?.caller, { kind: "admin", server: "team-a" });
});

Deno.test("/mcp/<name>: an unknown name is 404 NOT_FOUND; a key's own patterns narrow the server's tools", async () => {
  await using t = await setup();
  const response = await t.app.request("/mcp/nope", {
    method: "POST",
    headers: { ...bearer(ADMIN), "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  assertEquals(response.status, 404);
  const body = await response.json();
  assertEquals(body.error.code, "NOT_FOUND");
  assertStringIncludes(body.error.message, "No virtual server named nope");

  const { key } = await createApiKey(t.store.apiKeys, { name: "agent", tools: "echo,slow" });
  await using session = await mcpClient(t.app, bearer(key), "/mcp/team-a");
  assertEquals((await session.client.listTools()).tools.map((tool: Named) => tool.name), ["echo"]);
  // On the server, outside the key: FORBIDDEN; outside the server: TOOL_NOT_FOUND.
  const flaky = await session.client.callTool({ name: "flaky", arguments: {} });
  assertStringIncludes(JSON.stringify(flaky.content), "FORBIDDEN");
  const slow = await session.client.callTool({ name: "slow", arguments: {} });
  assertStringIncludes(JSON.stringify(slow.content), "TOOL_NOT_FOUND");
  // The key's patterns do not cover github__*: no prompts.
  assertEquals((await session.client.listPrompts()).prompts, []);
});

Deno.test("/mcp/<name>: clients hear tools/list_changed when the definition is updated while connected", async () => {
  await using t = await setup();
  await using session = await mcpClient(t.app, bearer(ADMIN), "/mcp/team-a");
  let changed = 0;
  session.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
  assertEquals((await session.client.listTools()).tools.map((tool: Named) => tool.name), [
    "echo",
    "flaky",
  ]);
  const updated = await t.store.servers.update("team-a", { tools: ["slow", "echo"] });
  assert(updated);
  await waitFor(() => changed > 0, "notifications/tools/list_changed");
  assertEquals((await session.client.listTools()).tools.map((tool: Named) => tool.name), [
    "echo",
    "slow",
  ]);
  // Removed: its clients hear so, and every request to /mcp/team-a is 404, its sessions' too.
  await t.store.servers.remove("team-a");
  await waitFor(() => changed > 1, "list_changed after removal");
  let refused = "";
  await session.client.listTools().catch((error: unknown) => refused = String(error));
  assertStringIncludes(refused, "No virtual server named team-a");
  const gone = await t.app.request("/mcp/team-a", { method: "POST", headers: bearer(ADMIN) });
  assertEquals(gone.status, 404);
  await gone.body?.cancel();
});

Deno.test("an API key bound to a virtual server may use /mcp/<its server> only; REST lists and calls its subset", async () => {
  await using t = await setup();
  const { key, record } = await createApiKey(t.store.apiKeys, { name: "ci", server: "team-a" });
  for (const path of ["/mcp", "/mcp/cfg"]) {
    const response = await t.app.request(path, {
      method: "POST",
      headers: { ...bearer(key), "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    assertEquals(response.status, 403, path);
    const body = await response.json();
    assertEquals(body.error.code, "FORBIDDEN");
    assertStringIncludes(body.error.message, "bound to virtual server team-a; use /mcp/team-a");
  }
  await using session = await mcpClient(t.app, bearer(key), "/mcp/team-a");
  assertEquals((await session.client.listTools()).tools.map((tool: Named) => tool.name), [
    "echo",
    "flaky",
  ]);

  // REST: the same subset; a call outside it is 404 TOOL_NOT_FOUND.
  assertEquals(await restToolNames(t.app, key), ["echo", "flaky"]);
  const outside = await postJson(t.app, "/tools/slow", {}, bearer(key));
  assertEquals(outside.status, 404);
  assertEquals((await outside.json()).error.code, "TOOL_NOT_FOUND");
  assertEquals((await postJson(t.app, "/tools/echo", { message: "x" }, bearer(key))).status, 200);

  const entries = (await t.audit.list()).entries;
  assertEquals(entries.map((e) => [e.tool, e.outcome.error_code ?? null, e.caller]), [
    ["slow", "TOOL_NOT_FOUND", { kind: "key", name: "ci", id: record.id, server: "team-a" }],
    ["echo", null, { kind: "key", name: "ci", id: record.id, server: "team-a" }],
  ]);
});

Deno.test("an API key bound to a virtual server: /events leaves out the events of tools outside it", async () => {
  await using t = await setup();
  const { key } = await createApiKey(t.store.apiKeys, { name: "ci", server: "cfg" });
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

Deno.test("/mcp/<name>: resources/subscribe of a resource outside the server is resource-not-found", async () => {
  await using t = await setup();
  t.gateway.catalog.set("jira", {
    ...source("jira"),
    subscribe: () => Promise.resolve(),
    unsubscribe: () => Promise.resolve(),
  });
  await using session = await mcpClient(t.app, bearer(ADMIN), "/mcp/team-a");
  let refused = "";
  await session.client.subscribeResource({ uri: "jira://readme" })
    .catch((error: unknown) => refused = String(error));
  assertStringIncludes(refused, "jira://readme");
  // At /mcp it may be watched.
  await using all = await mcpClient(t.app, bearer(ADMIN));
  assertEquals(await all.client.subscribeResource({ uri: "jira://readme" }), {});
});

Deno.test("/mcp/<name>: virtual servers' sessions count against the one maxSessions bound with /mcp's", async () => {
  await using t = await setup({ maxSessions: 2 });
  const initialize = (path: string) =>
    t.app.request(path, {
      method: "POST",
      headers: {
        ...bearer(ADMIN),
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-11-25",
          capabilities: {},
          clientInfo: { name: "bound", version: "1" },
        },
      }),
    });
  const first = await mcpClient(t.app, bearer(ADMIN), "/mcp/team-a");
  const second = await mcpClient(t.app, bearer(ADMIN), "/mcp/cfg");
  try {
    // Two open, one on each virtual server: a third is refused wherever it asks.
    for (const path of ["/mcp", "/mcp/team-a", "/mcp/cfg"]) {
      const refused = await initialize(path);
      assertEquals(refused.status, 503, path);
      assertStringIncludes(await refused.text(), "Too many MCP sessions");
    }
  } finally {
    // Ended (DELETE), not only disconnected: the session is gone.
    await second.transport.terminateSession();
    await second.client.close();
  }
  // One ended: room for one more.
  const third = await initialize("/mcp");
  assertEquals(third.status, 200);
  await third.body?.cancel();
  await first.client.close();
});
