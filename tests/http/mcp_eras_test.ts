/**
 * `/mcp` serves both protocol eras: 2025 sessions (`initialize`,
 * `Mcp-Session-Id`) and 2026-07-28 stateless requests, each with the
 * official client of its SDK generation.
 *
 * @module
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as Client2025 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as Transport2025 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { inProcessFetch, testApp } from "./_fixtures.ts";
import type { ToolgateApp } from "../../src/http/mod.ts";

const MODERN = "2026-07-28";

/** The per-request `_meta` envelope of a 2026-07-28 request. */
function envelope(version = MODERN): Record<string, unknown> {
  return {
    "io.modelcontextprotocol/protocolVersion": version,
    "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
    "io.modelcontextprotocol/clientCapabilities": {},
  };
}

/** A raw 2026 POST with its headers (override or drop them to test the checks). */
function modernPost(
  app: ToolgateApp,
  body: Record<string, unknown>,
  headers: Record<string, string | undefined> = {},
): Promise<Response> {
  const params = body.params as { name?: string } | undefined;
  const all: Record<string, string | undefined> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": MODERN,
    "mcp-method": body.method as string,
    ...(params?.name !== undefined ? { "mcp-name": params.name } : {}),
    ...headers,
  };
  const sent = Object.fromEntries(
    Object.entries(all).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  return Promise.resolve(
    app.request("/mcp", { method: "POST", headers: sent, body: JSON.stringify(body) }),
  );
}

function modernClient(app: ToolgateApp): Promise<Client> {
  const client = new Client(
    { name: "modern-test", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  const transport = new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp"), {
    fetch: inProcessFetch(app),
  });
  return client.connect(transport).then(() => client);
}

Deno.test("/mcp: a 2026-07-28 client negotiates the current revision, lists with cache hints and calls statelessly", async () => {
  await using t = await testApp();
  const client = await modernClient(t.app);
  try {
    assertEquals(client.getNegotiatedProtocolVersion(), MODERN);
    const listed = await client.listTools() as { tools: { name: string }[]; ttlMs?: number };
    assert(listed.tools.some((tool) => tool.name === "echo"), JSON.stringify(listed));
    const result = await client.callTool({ name: "echo", arguments: { message: "stateless" } });
    assertEquals(result.isError, undefined);
    assertEquals(JSON.stringify(result.content).includes("stateless"), true);
    // Every 2026 request is its own exchange: no session is opened.
    assertEquals(t.mcp.size, 0);
    const called = t.events.filter((event) => event.type === "tool.called");
    assertEquals(called.length, 1);
  } finally {
    await client.close();
  }
});

Deno.test("/mcp: a 2025 client and a 2026 client are served side by side", async () => {
  await using t = await testApp();
  const legacy = new Client2025({ name: "legacy-test", version: "1.0.0" });
  await legacy.connect(
    new Transport2025(new URL("http://127.0.0.1/mcp"), { fetch: inProcessFetch(t.app) }),
  );
  const modern = await modernClient(t.app);
  try {
    assertEquals(legacy.getServerVersion()?.name, "toolgate");
    assertEquals(t.mcp.size, 1);
    const [a, b] = await Promise.all([
      legacy.callTool({ name: "echo", arguments: { message: "2025" } }),
      modern.callTool({ name: "echo", arguments: { message: "2026" } }),
    ]);
    assertStringIncludes(JSON.stringify(a.content), "2025");
    assertStringIncludes(JSON.stringify(b.content), "2026");
  } finally {
    await legacy.close();
    await modern.close();
  }
});

Deno.test("/mcp: server/discover names the supported revisions and the server", async () => {
  await using t = await testApp();
  const response = await modernPost(t.app, {
    jsonrpc: "2.0",
    id: 1,
    method: "server/discover",
    params: { _meta: envelope() },
  });
  assertEquals(response.status, 200);
  const { result } = await response.json();
  assert(result.supportedVersions.includes(MODERN), JSON.stringify(result));
  assertEquals(result._meta["io.modelcontextprotocol/serverInfo"].name, "toolgate");
  assert(result.capabilities.tools, JSON.stringify(result.capabilities));
});

Deno.test("/mcp: an unsupported revision gets -32022 listing the supported ones", async () => {
  await using t = await testApp();
  const response = await modernPost(
    t.app,
    { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: envelope("2099-01-01") } },
    { "mcp-protocol-version": "2099-01-01" },
  );
  const body = await response.json();
  assertEquals(body.error.code, -32022, JSON.stringify(body));
  assert(JSON.stringify(body.error.data).includes(MODERN), JSON.stringify(body));
});

Deno.test("/mcp: MCP-Protocol-Version, Mcp-Method and Mcp-Name must match the body (400 naming both), and are required", async () => {
  await using t = await testApp();
  const call = {
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name: "echo", arguments: { message: "x" }, _meta: envelope() },
  };
  const wrongMethod = await modernPost(t.app, call, { "mcp-method": "tools/list" });
  assertEquals(wrongMethod.status, 400);
  const method = await wrongMethod.json();
  assertEquals(method.error.code, -32020);
  assertStringIncludes(method.error.message, "tools/call");
  assertStringIncludes(method.error.message, "tools/list");

  const wrongName = await modernPost(t.app, call, { "mcp-name": "other" });
  assertEquals(wrongName.status, 400);
  const name = await wrongName.json();
  assertStringIncludes(name.error.message, "echo");
  assertStringIncludes(name.error.message, "other");

  const missing = await modernPost(t.app, call, { "mcp-method": undefined });
  assertEquals(missing.status, 400);

  const wrongVersion = await modernPost(t.app, call, { "mcp-protocol-version": "2025-11-25" });
  assertEquals(wrongVersion.status, 400);
  const version = await wrongVersion.json();
  assertStringIncludes(version.error.message, "2026-07-28");
  assertStringIncludes(version.error.message, "2025-11-25");
  assertEquals(t.events.filter((event) => event.type === "tool.called").length, 0);

  const right = await modernPost(t.app, call);
  assertEquals(right.status, 200);
  assertEquals(t.events.filter((event) => event.type === "tool.called").length, 1);
});
