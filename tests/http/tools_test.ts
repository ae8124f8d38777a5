import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { testPlugin, unconfiguredPlugin } from "../gateway/_fixtures.ts";
import { postJson, testApp } from "./_fixtures.ts";

type ErrorJson = { error: { code: string; message: string; details?: Record<string, unknown> } };

async function errorOf(response: Response, status: number, code: string): Promise<ErrorJson> {
  const body = await response.json() as ErrorJson;
  assertEquals({ status: response.status, code: body.error?.code }, { status, code });
  assertEquals(response.headers.get("content-type"), "application/json");
  assert(typeof body.error.message === "string" && body.error.message.length > 0);
  return body;
}

Deno.test("GET /tools lists name, description, plugin and inputSchema", async () => {
  await using t = await testApp();
  const response = await t.app.request("/tools");
  assertEquals(response.status, 200);
  const body = await response.json();
  assertEquals(body.tools.map((tool: { name: string }) => tool.name), [
    "echo",
    "flaky",
    "slow",
    "thrower",
    "secretive",
  ]);
  assertEquals(Object.keys(body.tools[0]).sort(), ["description", "inputSchema", "name", "plugin"]);
  assertEquals(body.tools[0].plugin, "test");
  assertEquals(body.tools[0].inputSchema.required, ["message"]);
});

Deno.test("POST /tools/{name} returns content text and structuredContent", async () => {
  await using t = await testApp();
  const response = await postJson(t.app, "/tools/echo", { message: "hi" });
  assertEquals(response.status, 200);
  assertEquals(await response.json(), {
    content: [{ type: "text", text: '{"echoed":"hi"}' }],
    structuredContent: { echoed: "hi" },
  });
  assertMatch(response.headers.get("x-session-id") ?? "", /^ses_/);
});

Deno.test("POST /tools/{name} uses X-Session-Id as session_id in tool.called", async () => {
  await using t = await testApp();
  t.events.length = 0;
  const response = await postJson(t.app, "/tools/echo", { message: "a" }, {
    "X-Session-Id": "dash-1",
  });
  assertEquals(response.status, 200);
  assertEquals(response.headers.get("x-session-id"), "dash-1");
  await response.body?.cancel();
  const called = t.events.find((e) => e.type === "tool.called");
  assertEquals((called?.data as { session_id: string }).session_id, "dash-1");
});

Deno.test("POST /tools/{name} treats an empty body as {}", async () => {
  await using t = await testApp();
  const bare = await t.app.request("/tools/flaky", { method: "POST" });
  assertEquals(bare.status, 200);
  assertEquals((await bare.json()).structuredContent, { ok: true });
  const empty = await postJson(t.app, "/tools/flaky", "");
  assertEquals(empty.status, 200);
  await empty.body?.cancel();
});

Deno.test("POST /tools/{name} answers 400 INVALID_JSON for malformed JSON", async () => {
  await using t = await testApp();
  const body = await errorOf(await postJson(t.app, "/tools/echo", "{nope"), 400, "INVALID_JSON");
  assertMatch(body.error.message, /^Invalid JSON body: /);
});

Deno.test("POST /tools/{name} answers 400 TOOL_INPUT_INVALID with field paths", async () => {
  await using t = await testApp();
  const body = await errorOf(
    await postJson(t.app, "/tools/echo", { message: 5, count: "x" }),
    400,
    "TOOL_INPUT_INVALID",
  );
  const fields = (body.error.details?.fields as { path: string }[]).map((f) => f.path).sort();
  assertEquals(fields, ["count", "message"]);
});

Deno.test("POST /tools/{name} answers 400 INVALID_JSON for a body that is not an object", async () => {
  await using t = await testApp();
  for (const [body, kind] of [["[1]", "an array"], ["null", "null"], ['"x"', "string"]]) {
    const error = await errorOf(await postJson(t.app, "/tools/echo", body), 400, "INVALID_JSON");
    assertEquals(error.error.message, `Invalid JSON body: expected a JSON object, got ${kind}`);
  }
});

Deno.test("POST /tools/{name} answers 400 USAGE for a malformed X-Session-Id", async () => {
  await using t = await testApp();
  const body = await errorOf(
    await postJson(t.app, "/tools/echo", { message: "a" }, { "X-Session-Id": "x".repeat(200) }),
    400,
    "USAGE",
  );
  assertEquals((body.error.details?.fields as { path: string }[])[0].path, "X-Session-Id");
});

Deno.test("POST /tools/{name} answers 404 TOOL_NOT_FOUND, other paths 404 NOT_FOUND", async () => {
  await using t = await testApp();
  const body = await errorOf(await postJson(t.app, "/tools/nope", {}), 404, "TOOL_NOT_FOUND");
  assertEquals(body.error.details, { tool: "nope" });
  await errorOf(await t.app.request("/nope"), 404, "NOT_FOUND");
  await errorOf(await t.app.request("/tools", { method: "DELETE" }), 404, "NOT_FOUND");
});

Deno.test("POST /tools/{name} of a plugin without its credentials answers 503 PLUGIN_NOT_CONFIGURED", async () => {
  await using t = await testApp({ plugins: [unconfiguredPlugin(), testPlugin()] });
  const body = await errorOf(await postJson(t.app, "/tools/t1", {}), 503, "PLUGIN_NOT_CONFIGURED");
  assertStringIncludes(body.error.message, "Tool t1 is unavailable: Plugin needs_token is not");
  assertStringIncludes(body.error.message, "toolgate keychain set needs_token.<key>");
  assertEquals(body.error.details, { tool: "t1", plugin: "needs_token", state: "not_configured" });
});

Deno.test("POST /tools/{name} whose client goes away is CANCELLED and leaves the circuit closed", async () => {
  await using t = await testApp({
    file: { tools: { circuit_threshold: 1, overrides: { slow: { timeout_ms: 5_000 } } } },
  });
  const client = new AbortController();
  const answered = t.app.request("/tools/slow", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
    signal: client.signal,
  });
  setTimeout(() => client.abort(), 5);
  await errorOf(await answered, 499, "CANCELLED");
  const health = await (await t.app.request("/health")).json();
  assertEquals(health.open_circuits, [], "a client leaving is not the tool failing");
  const failed = t.events.find((event) => event.type === "tool.failed");
  assertEquals(failed?.data.error_code, "CANCELLED");
});

Deno.test("POST /tools/{name} answers 415 for a non-JSON content type", async () => {
  await using t = await testApp();
  const plain = await t.app.request("/tools/echo", {
    method: "POST",
    headers: { "content-type": "text/plain" },
    body: '{"message":"a"}',
  });
  await errorOf(plain, 415, "UNSUPPORTED_MEDIA_TYPE");
  const untyped = await t.app.request("/tools/echo", {
    method: "POST",
    body: new Blob(['{"message":"a"}']),
  });
  await errorOf(untyped, 415, "UNSUPPORTED_MEDIA_TYPE");
  const vendor = await postJson(t.app, "/tools/echo", { message: "a" }, {
    "content-type": "application/vnd.api+json; charset=utf-8",
  });
  assertEquals(vendor.status, 200);
  await vendor.body?.cancel();
});

Deno.test("POST /tools/{name} answers 413 from Content-Length without reading the body", async () => {
  await using t = await testApp({ file: { server: { body_limit_bytes: 64 } } });
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled++;
      controller.enqueue(new Uint8Array(32).fill(32));
      if (pulled === 100) controller.close();
    },
  });
  const response = await t.app.request("/tools/echo", {
    method: "POST",
    headers: { "content-type": "application/json", "content-length": "3200" },
    body,
  });
  const error = await errorOf(response, 413, "PAYLOAD_TOO_LARGE");
  assertEquals(error.error.details, { limit_bytes: 64 });
  assert(pulled <= 1, `read ${pulled} chunks`);
  await body.cancel();
});

Deno.test("POST /tools/{name} answers 413 once a streamed body passes the limit", async () => {
  await using t = await testApp({ file: { server: { body_limit_bytes: 64 } } });
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled++;
      controller.enqueue(new Uint8Array(32).fill(32));
      if (pulled === 1000) controller.close();
    },
  });
  const response = await t.app.request("/tools/echo", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  await errorOf(response, 413, "PAYLOAD_TOO_LARGE");
  assert(pulled < 10, `read ${pulled} chunks`);
});

Deno.test("POST /tools/{name} maps tool failures: 502, 503 + Retry-After, 504, 500", async () => {
  const state = { failing: true, calls: 0 };
  await using t = await testApp({
    plugins: [testPlugin(state)],
    file: { tools: { overrides: { flaky: { circuit_threshold: 2, circuit_reset_ms: 60_000 } } } },
  });
  const failed = await errorOf(
    await postJson(t.app, "/tools/flaky", {}),
    502,
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(failed.error.code, "PLUGIN_REQUEST_FAILED");
  assertEquals((failed as unknown as { isError: boolean }).isError, true);
  assertEquals(
    (failed as unknown as { content: { text: string }[] }).content[0].text,
    `PLUGIN_REQUEST_FAILED: ${failed.error.message}`,
  );
  await errorOf(await postJson(t.app, "/tools/flaky", {}), 502, "PLUGIN_REQUEST_FAILED");
  const open = await postJson(t.app, "/tools/flaky", {});
  const retryAfter = Number(open.headers.get("retry-after"));
  const body = await errorOf(open, 503, "CIRCUIT_OPEN");
  assert(retryAfter >= 59 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  assert(typeof body.error.details?.retry_after_ms === "number");
  await errorOf(await postJson(t.app, "/tools/slow", {}), 504, "TOOL_TIMEOUT");
  const thrown = await errorOf(
    await postJson(t.app, "/tools/thrower", {}),
    500,
    "TOOL_EXECUTION_FAILED",
  );
  assertMatch(thrown.error.message, /boom/);
  const health = await (await t.app.request("/health")).json();
  assertEquals(health.open_circuits.map((c: { tool_name: string }) => c.tool_name), ["flaky"]);
});

Deno.test("unknown errors become 500 INTERNAL with a generic message, logged with the original", async () => {
  await using t = await testApp({
    routes: [(app) => {
      app.get("/explode", () => {
        throw new Error("secret internals at /var/db");
      });
      app.get("/refuse", () => {
        throw new GatewayError("RATE_LIMITED", "Too many requests: slow down");
      });
    }],
  });
  const body = await errorOf(await t.app.request("/explode"), 500, "INTERNAL");
  assertEquals(body.error.message, "Internal error");
  assertEquals(t.logs.length, 1);
  assertMatch(t.logs[0], /GET \/explode: Error: secret internals at \/var\/db/);
  await errorOf(await t.app.request("/refuse"), 429, "RATE_LIMITED");
  assertEquals(t.logs.length, 1, "GatewayErrors are not logged as internal");
});
