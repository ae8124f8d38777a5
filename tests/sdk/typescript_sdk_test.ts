import {
  type ServerEvent,
  ToolgateClient,
  ToolgateError,
  type ToolgateEvent,
  verifySignature,
} from "../../sdk/typescript/mod.ts";
import { signPayload } from "../../src/webhooks/signer.ts";
import { assert, assertEquals, assertMatch, assertRejects, assertThrows } from "../_asserts.ts";
import { LOOPBACK_ALLOW, MAIN, ROOT, runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "../e2e/_http_server.ts";
import { Receiver } from "../webhooks/_receiver.ts";
import { Collector } from "./_collector.ts";

/** A local port with nothing listening on it. */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

function restCall(url: string, tool: string, args: unknown, token: string): Promise<Response> {
  return fetch(`${url}/tools/${tool}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(args),
  });
}

async function expectToolgateError(
  call: () => Promise<unknown>,
  code: string,
  message?: RegExp,
): Promise<ToolgateError> {
  const error = await assertRejects(call, ToolgateError);
  assertEquals(error.code, code, error.message);
  if (message) assertMatch(error.message, message);
  return error;
}

Deno.test("TS SDK over stdio: list, call, typed errors with the server's codes", async () => {
  await using tmp = await tempHome();
  await using client = new ToolgateClient({
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", "--unstable-kv", MAIN, "mcp", "start"],
    env: { TOOLGATE_HOME: tmp.home, NO_COLOR: "1", TOOLGATE_EGRESS_ALLOW: LOOPBACK_ALLOW },
    cwd: ROOT,
    stderr: "ignore",
  });
  assertEquals(client.transport, "stdio");
  await expectToolgateError(() => client.listTools(), "USAGE", /^Not connected/);
  assertEquals(client.protocolVersion, undefined);
  await client.connect();
  assert(client.connected);
  assertEquals(client.protocolVersion, "2026-07-28");
  assertEquals(client.sessionId, undefined);

  const tools = await client.listTools();
  const names = tools.map((tool) => tool.name);
  for (const name of ["http_request", "memory_set", "memory_get"]) assert(names.includes(name));
  assertEquals(tools.find((tool) => tool.name === "memory_get")?.inputSchema.type, "object");

  const set = await client.callTool("memory_set", { key: "greeting", value: { text: "hi" } });
  assertEquals(set.isError, undefined);
  const got = await client.callTool("memory_get", { key: "greeting" });
  assertEquals(JSON.parse(got.content[0].text!).value, { text: "hi" });
  assertEquals(got.structuredContent?.found, true);

  const missing = await expectToolgateError(
    () => client.callTool("memory_get", {}),
    "TOOL_INPUT_INVALID",
    /^Invalid arguments for memory_get: key: /,
  );
  assertEquals((missing.details as { fields: { path: string }[] }).fields[0].path, "key");
  await expectToolgateError(
    () => client.callTool("memory_set", { key: 42, value: 1 }),
    "TOOL_INPUT_INVALID",
    /key: Invalid input: expected string, received number/,
  );
  await expectToolgateError(
    () => client.callTool("http_request", { url: `http://127.0.0.1:${closedPort()}/` }),
    "PLUGIN_REQUEST_FAILED",
    /^Request to 127\.0\.0\.1:\d+ failed/,
  );
  await expectToolgateError(
    () => client.callTool("no_such_tool"),
    "TOOL_NOT_FOUND",
    /^Unknown tool "no_such_tool"$/,
  );

  // A call the caller's own signal aborts: CANCELLED (the server does not count it as a failure).
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const url = `http://127.0.0.1:${(silent.addr as Deno.NetAddr).port}/`;
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    await expectToolgateError(
      () => client.callTool("http_request", { url }, { signal: controller.signal }),
      "CANCELLED",
      /^Call of http_request cancelled by its signal$/,
    );
  } finally {
    silent.close();
  }

  const usage = assertThrows(() => client.on("tool.complete", () => {}));
  assert(usage instanceof ToolgateError);
  assertEquals(usage.code, "USAGE");
  assertMatch(usage.message, /^Events need the HTTP transport/);
  await client.disconnect();
  assert(!client.connected);
  assertEquals(client.protocolVersion, undefined);
});

Deno.test("TS SDK over HTTP: token, calls, events from other transports, signed deliveries", async () => {
  await using tmp = await tempHome();
  await using receiver = new Receiver();
  const secret = "whsec-sdk-test";
  const add = await runCli(["webhooks", "add", "--url", receiver.url, "--secret", secret], {
    home: tmp.home,
  });
  assertEquals(add.code, 0, add.stderr);
  const token = "sdk-token";
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: token },
    config: { tools: { circuit_threshold: 2, circuit_reset_ms: 60_000 } },
  });
  const { url } = server;

  const wrongToken = new ToolgateClient({ baseUrl: url, token: "nope" });
  await expectToolgateError(() => wrongToken.connect(), "UNAUTHORIZED", /bearer token is wrong/);
  assert(!wrongToken.connected);

  const errors: Error[] = [];
  await using client = new ToolgateClient({
    baseUrl: `${url}/`,
    token,
    onError: (error) => errors.push(error),
  });
  const complete = new Collector<ToolgateEvent<"tool.complete">>();
  const opened = new Collector<ToolgateEvent<"circuit.opened">>();
  const all = new Collector<ServerEvent>();
  client.on("tool.complete", complete.push);
  client.on("circuit.opened", opened.push);
  const offAll = client.on("*", all.push);
  assertThrows(() => client.on("tool.completed" as "tool.complete", () => {}), "Unknown event");
  await client.connect();
  await client.eventsReady();
  // toolgate speaks 2026-07-28: stateless requests, no MCP session.
  assertEquals(client.protocolVersion, "2026-07-28");
  assertEquals(client.sessionId, undefined);

  assert((await client.listTools()).some((tool) => tool.name === "memory_set"));
  const result = await client.callTool("memory_set", { key: "k", value: [1, 2] });
  assertEquals(result.structuredContent?.key, "k");
  const mine = await complete.until(
    "tool.complete of this client's memory_set",
    (event) => event.data.tool === "memory_set",
  );
  assert(mine.data.ok);
  // Each 2026-07-28 request gets its own session id on the server.
  if (mine.data.ok) assertMatch(mine.data.session_id ?? "", /^ses_/);

  // Calls through REST (another transport) reach this client's handlers.
  const rest = await restCall(url, "memory_get", { key: "k" }, token);
  assertEquals(rest.status, 200);
  await rest.body?.cancel();
  const ok = await complete.until(
    "tool.complete for the REST memory_get",
    (event) => event.data.tool === "memory_get",
  );
  assert(ok.data.ok);
  if (ok.data.ok) {
    assert(ok.data.latency_ms >= 0);
    assertEquals(ok.data.output.value, [1, 2]);
  }
  assertMatch(ok.id, /^evt_/);

  const unreachable = `http://127.0.0.1:${closedPort()}/`;
  await expectToolgateError(
    () => client.callTool("http_request", { url: unreachable }),
    "PLUGIN_REQUEST_FAILED",
  );
  const failedRest = await restCall(url, "http_request", { url: unreachable }, token);
  assertEquals(failedRest.status, 502);
  await failedRest.body?.cancel();
  const failed = await complete.until(
    "a failed tool.complete",
    (event) => event.data.tool === "http_request" && !event.data.ok,
  );
  if (!failed.data.ok) assertEquals(failed.data.error_code, "PLUGIN_REQUEST_FAILED");
  const circuit = await opened.until("circuit.opened", () => true);
  assertEquals(circuit.data.tool_name, "http_request");
  assertEquals(circuit.data.threshold, 2);
  assertEquals(circuit.data.reset_after_ms, 60_000);
  await expectToolgateError(
    () => client.callTool("http_request", { url: unreachable }),
    "CIRCUIT_OPEN",
  );
  await all.until("audit.written", (event) => event.type === "audit.written");
  assert(!all.items.some((event) => (event.type as string) === "tool.complete"));

  offAll();
  const seen = all.items.length;
  const again = await restCall(url, "memory_get", { key: "k" }, token);
  await again.body?.cancel();
  await complete.until(
    "a second memory_get",
    (event) => event.data.tool === "memory_get" && event.id !== ok.id,
  );
  assertEquals(all.items.length, seen, "an unsubscribed handler gets nothing");

  // A real signed delivery, verified with the SDK helper.
  await receiver.waitFor(1);
  const delivery = receiver.requests[0];
  const header = delivery.headers.get("x-service-signature");
  assert(await verifySignature(secret, delivery.body, header));
  assert(await verifySignature(secret, new TextDecoder().decode(delivery.body), header));
  const altered = new Uint8Array(delivery.body);
  altered[altered.length - 2] ^= 1;
  assert(!await verifySignature(secret, altered, header));
  const flipped = header!.slice(0, -1) + (header!.endsWith("0") ? "1" : "0");
  assert(!await verifySignature(secret, delivery.body, flipped));
  assert(!await verifySignature("other-secret", delivery.body, header));
  assert(!await verifySignature(secret, delivery.body, null));
  assert(!await verifySignature(secret, delivery.body, header!.replace("sha256=", "sha1=")));

  const health = async () =>
    (await (await fetch(`${url}/health`)).json() as { mcp_sessions: number }).mcp_sessions;
  assertEquals(await health(), 0, "2026-07-28 requests open no session");
  await client.disconnect();
  assertEquals(errors, []);
  assertEquals((await server.stop()).code, 0);
});

Deno.test("TS SDK over HTTP with protocol 2025: a session, renewed when the server forgets it", async () => {
  await using tmp = await tempHome();
  const token = "sdk-token";
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: token },
  });
  const { url } = server;
  const errors: Error[] = [];
  await using client = new ToolgateClient({
    baseUrl: url,
    token,
    protocol: "2025",
    onError: (error) => errors.push(error),
  });
  const complete = new Collector<ToolgateEvent<"tool.complete">>();
  client.on("tool.complete", complete.push);
  await client.connect();
  await client.eventsReady();
  assertMatch(client.protocolVersion ?? "", /^2025-/);
  await client.callTool("memory_set", { key: "k", value: [1, 2] });

  // The server forgets the session (as after idle expiry): the client opens a new one.
  const session = client.sessionId;
  assertMatch(session ?? "", /^[0-9a-f-]{36}$/);
  const ended = await fetch(`${url}/mcp`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${token}`, "mcp-session-id": session! },
  });
  assertEquals(ended.status, 200);
  await ended.body?.cancel();
  const renewed = await client.callTool("memory_get", { key: "k" });
  assertEquals(renewed.structuredContent?.value, [1, 2]);
  assert(client.sessionId !== undefined && client.sessionId !== session);
  const mine = await complete.until(
    "tool.complete of this client's renewed session",
    (event) => event.data.ok && event.data.session_id === client.sessionId,
  );
  assertEquals(mine.data.tool, "memory_get");

  const health = async () =>
    (await (await fetch(`${url}/health`)).json() as { mcp_sessions: number }).mcp_sessions;
  assertEquals(await health(), 1);
  await client.disconnect();
  assertEquals(await health(), 0, "disconnect() ends the MCP session");
  assertEquals(errors, []);
  assertEquals((await server.stop()).code, 0);
});

Deno.test("verifySignature() accepts a body signed by the server's signer, and nothing else", async () => {
  const body = new TextEncoder().encode('{"id":"evt_1","type":"tool.called","data":{}}');
  const header = await signPayload("s3cret", body);
  assert(await verifySignature("s3cret", body, header));
  assert(
    await verifySignature(
      "s3cret",
      body.buffer,
      ` ${header.toUpperCase().replace("SHA256=", "sha256=")} `,
    ),
  );
  assert(await verifySignature(new TextEncoder().encode("s3cret"), body, header));
  assert(!await verifySignature("s3cret", body.slice(1), header));
  assert(!await verifySignature("s3cret", body, header.slice(0, -2)));
  assert(!await verifySignature("s3cret", body, undefined));
  // Known answer: HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog").
  assert(
    await verifySignature(
      "key",
      "The quick brown fox jumps over the lazy dog",
      "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8",
    ),
  );
});

Deno.test("the Node 20 build of the TS SDK calls tools and receives events from the real server", async () => {
  await using tmp = await tempHome();
  const outdir = `${tmp.home}/sdk-dist`;
  const built = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", `${ROOT}scripts/build_sdk.ts`, outdir],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(built.code, 0, new TextDecoder().decode(built.stderr));
  const pkg = JSON.parse(await Deno.readTextFile(`${outdir}/package.json`));
  assertEquals([pkg.type, pkg.exports["."]], ["module", "./mod.js"]);

  const token = "node-token";
  await using server = await startHttpServer({
    home: `${tmp.home}/data`,
    env: { TOOLGATE_API_TOKEN: token },
  });
  const node = await new Deno.Command("node", {
    args: [`${ROOT}tests/sdk/_node_smoke.mjs`, `${outdir}/mod.js`],
    env: {
      TOOLGATE_URL: server.url,
      TOOLGATE_API_TOKEN: token,
      DENO_PATH: Deno.execPath(),
      TOOLGATE_MAIN: MAIN,
      TOOLGATE_HOME: `${tmp.home}/stdio`,
      CLOSED_PORT: String(closedPort()),
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(node.stdout);
  assertEquals(node.code, 0, `${stdout}\n${new TextDecoder().decode(node.stderr)}`);
  assertEquals(JSON.parse(stdout.trim().split("\n").at(-1)!), {
    node: true,
    http_tools: true,
    call: "hello",
    input_invalid: "TOOL_INPUT_INVALID",
    request_failed: "PLUGIN_REQUEST_FAILED",
    not_found: "TOOL_NOT_FOUND",
    tool_complete: { tool: "memory_get", ok: true },
    signature: [true, false],
    http_protocol: "2026-07-28",
    stdio_tools: true,
    stdio_on: "USAGE",
    stdio_protocol: "2026-07-28",
  });
  assertEquals((await server.stop()).code, 0);
});
