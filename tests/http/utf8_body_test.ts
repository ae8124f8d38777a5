/**
 * Bytes that are not UTF-8 in a JSON body are refused with 400
 * `INVALID_JSON` on every route that takes JSON (tool calls, the management
 * API, MCP), never decoded with U+FFFD in their place and stored.
 */
import { assertEquals, assertStringIncludes } from "../_asserts.ts";
import { webhookRoutes } from "../../src/http/mod.ts";
import { decodeJsonText } from "../../src/http/json_body.ts";
import { LOOPBACK_EGRESS, setup } from "../webhooks/_setup.ts";
import { testApp } from "./_fixtures.ts";

/** `{"message":"caf<0xE9>"}`: Latin-1 é, not UTF-8. */
const LATIN1 = new Uint8Array([
  ...new TextEncoder().encode('{"message":"caf'),
  0xe9,
  ...new TextEncoder().encode('"}'),
]);

function post(
  app: { request: (p: string, i: RequestInit) => Response | Promise<Response> },
  path: string,
  body: Uint8Array,
  headers: Record<string, string> = {},
) {
  return Promise.resolve(app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: body as Uint8Array<ArrayBuffer>,
  }));
}

Deno.test("decodeJsonText() names the offset of the first byte that is not UTF-8", () => {
  assertEquals(decodeJsonText(new TextEncoder().encode('{"a":"é"}')), '{"a":"é"}');
  let message = "";
  try {
    decodeJsonText(LATIN1);
  } catch (error) {
    message = (error as Error).message;
  }
  assertStringIncludes(message, "not UTF-8 (first bad byte at offset 15)");
});

Deno.test("a tool call whose body is not UTF-8 is 400 INVALID_JSON and runs nothing", async () => {
  await using t = await testApp();
  const response = await post(t.app, "/tools/echo", LATIN1);
  assertEquals(response.status, 400);
  const body = await response.json();
  assertEquals(body.error.code, "INVALID_JSON");
  assertStringIncludes(body.error.message, "not UTF-8");
  assertEquals(t.events.filter((e) => e.type === "tool.called").length, 0);
  // The same text in UTF-8 runs.
  const ok = await post(t.app, "/tools/echo", new TextEncoder().encode('{"message":"café"}'));
  assertEquals(ok.status, 200, await ok.clone().text());
  await ok.body?.cancel();
});

Deno.test("a management request whose body is not UTF-8 is 400 INVALID_JSON and stores nothing", async () => {
  await using env = await setup();
  await using t = await testApp({
    routes: [webhookRoutes(env.store, { egress: LOOPBACK_EGRESS })],
  });
  const body = new Uint8Array([
    ...new TextEncoder().encode('{"url":"https://example.com/h","description":"caf'),
    0xe9,
    ...new TextEncoder().encode('"}'),
  ]);
  const response = await post(t.app, "/webhooks", body);
  assertEquals(response.status, 400);
  assertEquals((await response.json()).error.code, "INVALID_JSON");
  assertEquals(await env.store.webhooks.listOutgoing(), []);
});

Deno.test("an MCP request whose body is not UTF-8 gets a JSON-RPC parse error with 400", async () => {
  await using t = await testApp();
  const initialize = new Uint8Array([
    ...new TextEncoder().encode(
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"caf',
    ),
    0xe9,
    ...new TextEncoder().encode('","version":"1"}}}'),
  ]);
  const response = await post(t.app, "/mcp", initialize, {
    accept: "application/json, text/event-stream",
  });
  assertEquals(response.status, 400);
  const body = await response.json();
  assertEquals(body.error.code, -32700);
  assertStringIncludes(body.error.message, "INVALID_JSON");
  assertEquals(t.mcp.size, 0, "no session was opened");
});
