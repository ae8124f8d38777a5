import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { assert, assertEquals, assertMatch, assertRejects } from "../_asserts.ts";
import { testPlugin } from "../gateway/_fixtures.ts";
import type { ToolgateApp } from "../../src/http/mod.ts";
import { initializeRequest, until } from "../_helpers.ts";
import { mcpClient, testApp } from "./_fixtures.ts";

const INITIALIZE = JSON.stringify(initializeRequest());

const MCP_HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

/** Opens a session with a raw initialize request; returns its id. */
async function initialize(app: ToolgateApp): Promise<string> {
  const response = await app.request("/mcp", {
    method: "POST",
    headers: MCP_HEADERS,
    body: INITIALIZE,
  });
  assertEquals(response.status, 200);
  const text = await response.text();
  assertMatch(text, /"serverInfo":\{"name":"toolgate"/);
  const id = response.headers.get("mcp-session-id");
  assert(id, "initialize answers with Mcp-Session-Id");
  return id;
}

/** A raw `tools/call` of the test plugin's `echo`. */
function echoCall(id: number, message: string): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name: "echo", arguments: { message } },
  });
}

function listTools(app: ToolgateApp, sessionId: string): Promise<Response> {
  return Promise.resolve(app.request("/mcp", {
    method: "POST",
    headers: { ...MCP_HEADERS, "mcp-session-id": sessionId },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  }));
}

function sessionIds(events: { type: string; data: unknown }[]): string[] {
  return events.filter((e) => e.type === "tool.called")
    .map((e) => (e.data as { session_id: string }).session_id);
}

Deno.test("/mcp: the SDK client lists and calls tools; session_id is the MCP session id", async () => {
  const state = { failing: true, calls: 0 };
  await using t = await testApp({ plugins: [testPlugin(state)] });
  await using c = await mcpClient(t.app);
  const { tools } = await c.client.listTools();
  assertEquals(tools.map((tool: { name: string }) => tool.name), [
    "echo",
    "flaky",
    "slow",
    "thrower",
    "secretive",
  ]);
  assertEquals(tools[0].inputSchema.type, "object");
  const result = await c.client.callTool({ name: "echo", arguments: { message: "hi" } });
  assertEquals(result.content, [{ type: "text", text: '{"echoed":"hi"}' }]);
  assertEquals(result.structuredContent, { echoed: "hi" });
  assert(c.transport.sessionId);
  assertEquals(sessionIds(t.events), [c.transport.sessionId]);
  assertEquals(t.mcp.size, 1);
  const failed = await c.client.callTool({ name: "flaky", arguments: {} });
  assertEquals(failed.isError, true);
  assertMatch(
    (failed.content as { text: string }[])[0].text,
    /^PLUGIN_REQUEST_FAILED: Upstream unreachable/,
  );
  const invalid = await c.client.callTool({ name: "echo", arguments: { message: 1 } });
  assertEquals(invalid.isError, true);
  assertMatch((invalid.content as { text: string }[])[0].text, /^TOOL_INPUT_INVALID: /);
  await assertRejects(() => c.client.callTool({ name: "nope", arguments: {} }), McpError);
});

Deno.test("/mcp: requests are answered with one JSON body, not an SSE stream; notifications with 202", async () => {
  await using t = await testApp({ plugins: [testPlugin({ failing: false, calls: 0 })] });
  const id = await initialize(t.app);
  const headers = { ...MCP_HEADERS, "mcp-session-id": id };
  const initialized = await t.app.request("/mcp", {
    method: "POST",
    headers,
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  assertEquals(initialized.status, 202);
  await initialized.body?.cancel();
  const call = await t.app.request("/mcp", {
    method: "POST",
    headers,
    body: echoCall(7, "hi"),
  });
  assertEquals(call.status, 200);
  assertMatch(call.headers.get("content-type") ?? "", /^application\/json/);
  assertEquals(await call.json(), {
    jsonrpc: "2.0",
    id: 7,
    result: {
      content: [{ type: "text", text: '{"echoed":"hi"}' }],
      structuredContent: { echoed: "hi" },
    },
  });
});

Deno.test("/mcp: with server.mcp_responses = sse a call is answered on an SSE stream; the SDK client works too", async () => {
  await using t = await testApp({
    file: { server: { mcp_responses: "sse" } },
    plugins: [testPlugin({ failing: false, calls: 0 })],
  });
  const id = await initialize(t.app);
  const call = await t.app.request("/mcp", {
    method: "POST",
    headers: { ...MCP_HEADERS, "mcp-session-id": id },
    body: echoCall(3, "hi"),
  });
  assertEquals(call.status, 200);
  assertMatch(call.headers.get("content-type") ?? "", /^text\/event-stream/);
  const data = (await call.text()).split("\n").find((line) => line.startsWith("data:"));
  assert(data, "an SSE data line");
  assertEquals(JSON.parse(data.slice(5)).result.structuredContent, { echoed: "hi" });
  await using c = await mcpClient(t.app);
  const result = await c.client.callTool({ name: "echo", arguments: { message: "again" } });
  assertEquals(result.structuredContent, { echoed: "again" });
});

Deno.test("/mcp: two concurrent sessions stay isolated", async () => {
  await using t = await testApp();
  await using a = await mcpClient(t.app);
  await using b = await mcpClient(t.app);
  assert(a.transport.sessionId && b.transport.sessionId);
  assert(a.transport.sessionId !== b.transport.sessionId);
  assertEquals(t.mcp.size, 2);
  await Promise.all([
    a.client.callTool({ name: "echo", arguments: { message: "a" } }),
    b.client.callTool({ name: "echo", arguments: { message: "b" } }),
    a.client.callTool({ name: "echo", arguments: { message: "a2" } }),
  ]);
  const bySession = new Map<string, string[]>();
  for (const event of t.events.filter((e) => e.type === "tool.called")) {
    const data = event.data as { session_id: string; input: { message: string } };
    bySession.set(data.session_id, [...bySession.get(data.session_id) ?? [], data.input.message]);
  }
  assertEquals(bySession.get(a.transport.sessionId)?.sort(), ["a", "a2"]);
  assertEquals(bySession.get(b.transport.sessionId), ["b"]);
});

Deno.test("/mcp: DELETE ends a session; later requests with its id get 404", async () => {
  await using t = await testApp();
  await using c = await mcpClient(t.app);
  const id = c.transport.sessionId!;
  await c.transport.terminateSession();
  assertEquals(t.mcp.size, 0);
  const response = await listTools(t.app, id);
  assertEquals(response.status, 404);
  assertEquals((await response.json()).error.code, -32001);
});

Deno.test("/mcp: protocol errors for missing, unknown and wrong requests", async () => {
  await using t = await testApp();
  const unknown = await listTools(t.app, "no-such-session");
  assertEquals(unknown.status, 404);
  await unknown.body?.cancel();
  const noSession = await t.app.request("/mcp", {
    method: "POST",
    headers: MCP_HEADERS,
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  });
  assertEquals(noSession.status, 400);
  await noSession.body?.cancel();
  const get = await t.app.request("/mcp", { headers: { accept: "text/event-stream" } });
  assertEquals(get.status, 400);
  await get.body?.cancel();
  const put = await t.app.request("/mcp", { method: "PUT" });
  assertEquals(put.status, 405);
  await put.body?.cancel();
  const notAcceptable = await t.app.request("/mcp", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: INITIALIZE,
  });
  assertEquals(notAcceptable.status, 406);
  await notAcceptable.body?.cancel();
  assertEquals(t.mcp.size, 0, "failed initializations leave no session behind");
  const id = await initialize(t.app);
  const post = (headers: Record<string, string>, body: string) =>
    t.app.request("/mcp", { method: "POST", headers: { "mcp-session-id": id, ...headers }, body });
  const notJson = await post(MCP_HEADERS, "{not json");
  assertEquals(notJson.status, 400);
  assertEquals((await notJson.json()).error.code, -32700);
  const notRpc = await post(MCP_HEADERS, "[1]");
  assertEquals(notRpc.status, 400);
  assertMatch((await notRpc.json()).error.message, /Invalid JSON-RPC message/);
  const wrongType = await post({ ...MCP_HEADERS, "content-type": "text/plain" }, "{not json");
  assertEquals(wrongType.status, 415);
  await wrongType.body?.cancel();
  const listed = await listTools(t.app, id);
  assertEquals(listed.status, 200, "the session still serves requests");
  await listed.body?.cancel();
});

Deno.test("/mcp: idle sessions expire after server.session_idle_ms", async () => {
  await using t = await testApp({ file: { server: { session_idle_ms: 40 } } });
  const id = await initialize(t.app);
  assertEquals(t.mcp.size, 1);
  const alive = await listTools(t.app, id);
  assertEquals(alive.status, 200);
  await alive.body?.cancel();
  await new Promise((resolve) => setTimeout(resolve, 120));
  assertEquals(t.mcp.size, 0);
  const expired = await listTools(t.app, id);
  assertEquals(expired.status, 404);
  await expired.body?.cancel();
});

Deno.test("/mcp: each request restarts the idle time; the session expires idle_ms after the last one", async () => {
  await using t = await testApp({ file: { server: { session_idle_ms: 300 } } });
  const id = await initialize(t.app);
  // Requests every 50 ms for 1 s: more than three idle periods in all, never
  // one without a request.
  const started = performance.now();
  while (performance.now() - started < 1000) {
    const alive = await listTools(t.app, id);
    assertEquals(alive.status, 200);
    await alive.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const last = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 100));
  if (performance.now() - last < 300) assertEquals(t.mcp.size, 1, "not expired before idle_ms");
  await until(() => t.mcp.size === 0, "the session to expire", 5_000);
});

Deno.test("/mcp: an open GET stream keeps its session from expiring", async () => {
  await using t = await testApp({ file: { server: { session_idle_ms: 40 } } });
  const c = await mcpClient(t.app);
  await new Promise((resolve) => setTimeout(resolve, 120));
  assertEquals(t.mcp.size, 1, "the client's GET stream is open");
  await c.client.callTool({ name: "echo", arguments: { message: "still here" } });
  await c.client.close();
  await new Promise((resolve) => setTimeout(resolve, 120));
  assertEquals(t.mcp.size, 0, "expired once the stream closed");
});

Deno.test("/mcp: drain() refuses new sessions; closeAll() ends the open ones", async () => {
  await using t = await testApp();
  const id = await initialize(t.app);
  t.mcp.drain();
  const refused = await t.app.request("/mcp", {
    method: "POST",
    headers: MCP_HEADERS,
    body: INITIALIZE,
  });
  assertEquals(refused.status, 503);
  await refused.body?.cancel();
  const stream = await t.app.request("/mcp", {
    headers: { accept: "text/event-stream", "mcp-session-id": id },
  });
  assertEquals(stream.status, 503);
  await stream.body?.cancel();
  const existing = await listTools(t.app, id);
  assertEquals(existing.status, 200, "open sessions still finish their work");
  await existing.body?.cancel();
  await t.mcp.closeAll();
  assertEquals(t.mcp.size, 0);
});

Deno.test("/mcp: the bearer token applies to MCP clients", async () => {
  await using t = await testApp({ env: { TOOLGATE_API_TOKEN: "mcp-token" } });
  await assertRejects(() => mcpClient(t.app));
  assertEquals(t.mcp.size, 0);
  await using c = await mcpClient(t.app, { authorization: "Bearer mcp-token" });
  assertEquals((await c.client.listTools()).tools.length, 5);
});

Deno.test("McpHttpSessions keeps its own body limit when called without the app's middleware", async () => {
  await using t = await testApp({ file: { server: { body_limit_bytes: 2048 } } });
  const post = (body: string, sessionId?: string) =>
    t.mcp.handle(
      new Request("http://127.0.0.1/mcp", {
        method: "POST",
        headers: { ...MCP_HEADERS, ...(sessionId ? { "mcp-session-id": sessionId } : {}) },
        body,
      }),
    );
  const opened = await post(INITIALIZE);
  assertEquals(opened.status, 200);
  await opened.body?.cancel();
  const id = opened.headers.get("mcp-session-id")!;
  const tooLarge = await post(echoCall(9, "x".repeat(4000)), id);
  assertEquals(tooLarge.status, 413);
  await tooLarge.body?.cancel();
  // Under the limit in characters, over it in UTF-8 bytes (3 bytes each).
  const multibyte = await post(echoCall(9, "€".repeat(1000)), id);
  assertEquals(multibyte.status, 413);
  await multibyte.body?.cancel();
  const fits = await post(echoCall(9, "€".repeat(100)), id);
  assertEquals(fits.status, 200);
  assertEquals((await fits.json()).result.structuredContent, { echoed: "€".repeat(100) });
});
