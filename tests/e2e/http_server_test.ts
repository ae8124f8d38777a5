import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Validator } from "@seriousme/openapi-schema-validator";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { VERSION } from "../../src/version.ts";
import { rawRequest, startHttpServer } from "./_http_server.ts";

type ErrorJson = { error: { code: string; message: string; details?: Record<string, unknown> } };

/** Reads a JSON body and checks status and error code. */
async function expectError(
  response: Response,
  status: number,
  code: string,
): Promise<ErrorJson> {
  const body = await response.json() as ErrorJson;
  assertEquals([response.status, body.error?.code], [status, code], JSON.stringify(body));
  return body;
}

function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** A local port with nothing listening on it. */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/** A receiver whose requests hang until the client gives up or `release()` is called. */
function hangingReceiver() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  let arrived!: () => void;
  const arrival = new Promise<void>((resolve) => arrived = resolve);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    arrived();
    return new Promise<Response>((resolve) => {
      const answer = () => resolve(Response.json({ late: true }));
      request.signal.addEventListener("abort", answer, { once: true });
      released.then(answer);
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/slow`,
    arrival,
    release,
    async [Symbol.asyncDispose]() {
      release();
      await server.shutdown();
    },
  };
}

async function connectMcp(url: string, headers: Record<string, string> = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers },
  });
  const client = new Client({ name: "toolgate-e2e", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

Deno.test("http transport: REST endpoints and every error status of the real process", async () => {
  await using tmp = await tempHome();
  await using slow = hangingReceiver();
  await using server = await startHttpServer({
    home: tmp.home,
    config: {
      server: { body_limit_bytes: 4096 },
      tools: {
        overrides: {
          http_request: { timeout_ms: 300, circuit_threshold: 3, circuit_reset_ms: 60_000 },
        },
      },
    },
  });
  const { url } = server;
  assertMatch(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assertEquals(
    server.banner,
    `toolgate ${VERSION} listening on ${url} (REST, MCP at ${url}/mcp)`,
  );

  const health = await fetch(`${url}/health`);
  assertEquals(health.status, 200);
  const healthBody = await health.json();
  assertEquals(healthBody.status, "ok");
  assertEquals(healthBody.version, VERSION);
  assertEquals(
    Object.fromEntries(
      healthBody.plugins.map((p: { name: string; state: string }) => [p.name, p.state]),
    ),
    { http: "ready", memory: "ready", slack: "not_configured" },
  );

  const tools = await (await fetch(`${url}/tools`)).json();
  const names = tools.tools.map((t: { name: string }) => t.name);
  for (const name of ["http_request", "memory_set", "memory_get"]) {
    assert(names.includes(name), `${name} in ${names}`);
  }
  assertEquals(Object.keys(tools.tools[0]).sort(), [
    "description",
    "inputSchema",
    "name",
    "plugin",
  ]);

  const set = await post(`${url}/tools/memory_set`, { key: "greeting", value: "hello" }, {
    "X-Session-Id": "e2e-rest",
  });
  assertEquals(set.status, 200);
  assertEquals(set.headers.get("x-session-id"), "e2e-rest");
  await set.body?.cancel();
  const get = await post(`${url}/tools/memory_get`, { key: "greeting" });
  assertEquals(get.status, 200);
  const got = await get.json();
  assertMatch(got.content[0].text, /"hello"/);

  await expectError(await post(`${url}/tools/memory_get`, "{oops"), 400, "INVALID_JSON");
  const invalid = await expectError(
    await post(`${url}/tools/memory_set`, { value: 1 }),
    400,
    "TOOL_INPUT_INVALID",
  );
  assertEquals((invalid.error.details?.fields as { path: string }[])[0].path, "key");
  await expectError(await post(`${url}/tools/no_such_tool`, {}), 404, "TOOL_NOT_FOUND");
  await expectError(await fetch(`${url}/no/such/route`), 404, "NOT_FOUND");
  await expectError(
    await fetch(`${url}/tools/memory_get`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: '{"key":"greeting"}',
    }),
    415,
    "UNSUPPORTED_MEDIA_TYPE",
  );
  await expectError(
    await post(`${url}/tools/memory_set`, { key: "big", value: "x".repeat(5000) }),
    413,
    "PAYLOAD_TOO_LARGE",
  );

  const unreachable = `http://127.0.0.1:${closedPort()}/`;
  const failed = await expectError(
    await post(`${url}/tools/http_request`, { url: unreachable }),
    502,
    "PLUGIN_REQUEST_FAILED",
  );
  assertStringIncludes(failed.error.message, "127.0.0.1");
  await expectError(
    await post(`${url}/tools/http_request`, { url: unreachable }),
    502,
    "PLUGIN_REQUEST_FAILED",
  );
  await expectError(
    await post(`${url}/tools/http_request`, { url: slow.url }),
    504,
    "TOOL_TIMEOUT",
  );
  // Breakers are per destination: the timeout counted towards the slow one's, not this one's.
  await expectError(
    await post(`${url}/tools/http_request`, { url: unreachable }),
    502,
    "PLUGIN_REQUEST_FAILED",
  );
  const open = await post(`${url}/tools/http_request`, { url: unreachable });
  const retryAfter = Number(open.headers.get("retry-after"));
  const openBody = await expectError(open, 503, "CIRCUIT_OPEN");
  assert(retryAfter >= 58 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  assert(Number(openBody.error.details?.retry_after_ms) > 0);
  const destination = `http://127.0.0.1:${new URL(unreachable).port}`;
  assertEquals(openBody.error.details?.destination, destination);
  const circuits = (await (await fetch(`${url}/health`)).json()).open_circuits;
  assertEquals(
    circuits.map((c: { tool_name: string; destination?: string }) => [c.tool_name, c.destination]),
    [["http_request", destination]],
  );

  const doc = await (await fetch(`${url}/openapi.json`)).json();
  assertEquals(await new Validator().validate(structuredClone(doc)), { valid: true });
  assertEquals(doc.openapi, "3.1.0");
  for (
    const path of [
      "/tools",
      "/tools/{name}",
      "/health",
      "/openapi.json",
      "/mcp",
      "/audit",
      "/events",
    ]
  ) {
    assert(doc.paths[path], `${path} in /openapi.json`);
  }
  assertEquals(doc.servers, [{ url }]);

  const { code, stderr } = await server.stop("SIGTERM");
  assertEquals(code, 0, stderr);
  assertStringIncludes(stderr, "Shutting down");
});

Deno.test("http transport: Host and Origin checks protect the loopback bind", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home });
  const { port } = server;
  for (const path of ["/tools", "/mcp", "/health"]) {
    const refused = await rawRequest(port, { path, host: "evil.example" });
    assertEquals(refused.status, 403, path);
    assertStringIncludes(refused.body, '"FORBIDDEN"');
  }
  const refusedPost = await rawRequest(port, {
    method: "POST",
    path: "/mcp",
    host: `evil.example:${port}`,
    headers: { "content-length": "0" },
  });
  assertEquals(refusedPost.status, 403);
  for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, "localhost"]) {
    assertEquals((await rawRequest(port, { path: "/tools", host })).status, 200, host);
  }
  const origin = await fetch(`${server.url}/tools`, {
    headers: { origin: "https://evil.example" },
  });
  await expectError(origin, 403, "FORBIDDEN");
  const local = await fetch(`${server.url}/tools`, {
    headers: { origin: "http://localhost:3000" },
  });
  assertEquals(local.status, 200);
  await local.body?.cancel();
  assertEquals((await server.stop()).code, 0);
});

Deno.test("http transport: MCP sessions over Streamable HTTP with the official SDK client", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home });
  const { url } = server;
  const a = await connectMcp(url);
  const b = await connectMcp(url);
  try {
    const { tools } = await a.client.listTools();
    assert(tools.some((tool: { name: string }) => tool.name === "memory_set"));
    const [ra, rb] = await Promise.all([
      a.client.callTool({ name: "memory_set", arguments: { key: "from_a", value: 1 } }),
      b.client.callTool({ name: "memory_set", arguments: { key: "from_b", value: 2 } }),
    ]);
    assert(!ra.isError && !rb.isError, JSON.stringify([ra, rb]));
    const idA = a.transport.sessionId;
    const idB = b.transport.sessionId;
    assert(idA && idB && idA !== idB);
    const bad = await a.client.callTool({ name: "memory_set", arguments: { value: 1 } });
    assertEquals(bad.isError, true);
    assertMatch((bad.content as { text: string }[])[0].text, /^TOOL_INPUT_INVALID: /);

    const health = await (await fetch(`${url}/health`)).json();
    assertEquals(health.mcp_sessions, 2);

    await b.transport.terminateSession();
    const afterDelete = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": idB,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
    });
    assertEquals(afterDelete.status, 404);
    await afterDelete.body?.cancel();
    const unknown = await fetch(`${url}/mcp`, {
      headers: { accept: "text/event-stream", "mcp-session-id": "not-a-session" },
    });
    assertEquals(unknown.status, 404);
    await unknown.body?.cancel();

    const audit = await runCli(["audit", "list", "--tool", "memory_set", "--json"], {
      home: tmp.home,
    });
    assertEquals(audit.code, 0, audit.stderr);
    const sessions =
      (JSON.parse(audit.stdout).entries as { session_id: string; input: { key: string } }[])
        .map((entry) => [entry.input?.key, entry.session_id]);
    assertEquals(
      sessions.filter(([key]) => key !== undefined).sort(),
      [["from_a", idA], ["from_b", idB]],
      "each call is recorded with its own MCP session id",
    );
  } finally {
    await a.client.close();
    await b.client.close();
  }
  assertEquals((await server.stop()).code, 0);
});

Deno.test("http transport: TOOLGATE_API_TOKEN guards REST and /mcp, not /health", async () => {
  await using tmp = await tempHome();
  await using slow = hangingReceiver();
  const token = "e2e-secret-token";
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: token },
  });
  const { url } = server;
  for (const headers of [{}, { authorization: "Bearer wrong" }] as Record<string, string>[]) {
    const tools = await fetch(`${url}/tools`, { headers });
    assertEquals(tools.headers.get("www-authenticate"), 'Bearer realm="toolgate"');
    await expectError(tools, 401, "UNAUTHORIZED");
    await expectError(await fetch(`${url}/mcp`, { method: "POST", headers }), 401, "UNAUTHORIZED");
    await expectError(await fetch(`${url}/openapi.json`, { headers }), 401, "UNAUTHORIZED");
  }
  const health = await fetch(`${url}/health`);
  assertEquals(health.status, 200);
  await health.body?.cancel();
  const auth = { authorization: `Bearer ${token}` };
  const ok = await fetch(`${url}/tools`, { headers: auth });
  assertEquals(ok.status, 200);
  await ok.body?.cancel();
  const doc = await (await fetch(`${url}/openapi.json`, { headers: auth })).json();
  assertEquals(doc.security, [{ bearerAuth: [] }]);
  const mcp = await connectMcp(url, auth);
  try {
    assert((await mcp.client.listTools()).tools.length > 0);
  } finally {
    await mcp.client.close();
  }

  // Graceful shutdown: a call in flight when SIGTERM arrives still completes.
  const inFlight = post(`${url}/tools/http_request`, { url: slow.url }, auth);
  await slow.arrival;
  const stopping = server.stop("SIGTERM");
  await new Promise((resolve) => setTimeout(resolve, 100));
  slow.release();
  const response = await inFlight;
  assertEquals(response.status, 200);
  assertMatch((await response.json()).content[0].text, /"late":true/);
  const { code, stderr } = await stopping;
  assertEquals(code, 0, stderr);
});

Deno.test("http transport: binding beyond loopback without a token refuses to start", async () => {
  await using tmp = await tempHome();
  const run = await runCli([
    "mcp",
    "start",
    "--transport",
    "http",
    "--host",
    "0.0.0.0",
    "--port",
    "0",
  ], {
    home: tmp.home,
  });
  assertEquals(run.code, 1);
  assertMatch(run.stderr, /Refusing to bind 0\.0\.0\.0: set TOOLGATE_API_TOKEN/);
});

Deno.test("http transport: a port in use stops start-up with exit 1 and one line that says what to change", async () => {
  await using tmp = await tempHome();
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  const run = await runCli(["mcp", "start", "--transport", "http", "--port", String(port)], {
    home: tmp.home,
  });
  assertEquals(run.code, 1);
  assertEquals(
    run.stderr.trimEnd().split("\n").at(-1),
    `toolgate: LISTEN_FAILED: Cannot listen on 127.0.0.1:${port}: the address is in use; ` +
      "pick another with --port <n>, --port 0 or TOOLGATE_PORT",
  );
});
