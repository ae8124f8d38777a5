/**
 * Rate limits end to end: a key made with `toolgate keys create --rate`
 * against a running server is refused past its rate over REST (429,
 * Retry-After), the SDK (RATE_LIMITED) and MCP (an isError result); two
 * instances on one PostgreSQL database count against one bucket. The rates
 * are per day, so no refill can happen while a test runs, however slow the
 * machine.
 *
 * @module
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { ToolgateClient, ToolgateError } from "../../sdk/typescript/mod.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { childEnv, MAIN, ROOT, runCli, tempHome } from "../_helpers.ts";
import { startPostgres } from "../_postgres.ts";
import { startHttpServer } from "./_http_server.ts";

const ADMIN = "e2e-admin-token";

function callRest(url: string, token: string, key: string): Promise<Response> {
  return fetch(`${url}/tools/memory_set`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ key, value: 1 }),
  });
}

async function createKey(home: string, rate: string, env: Record<string, string> = {}) {
  const created = await runCli(["keys", "create", "--name", "ci", "--rate", rate], { home, env });
  assertEquals(created.code, 0, created.stderr);
  return created.stdout.trim();
}

Deno.test("e2e: a key made with --rate 3/d is refused past 3 calls: 429 with Retry-After over REST, RATE_LIMITED in the SDK, isError over MCP; audited", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: ADMIN },
  });
  const key = await createKey(tmp.home, "3/d");

  for (let i = 0; i < 2; i++) {
    const ok = await callRest(server.url, key, `k${i}`);
    assertEquals(ok.status, 200);
    await ok.body?.cancel();
  }
  await using client = new ToolgateClient({ baseUrl: server.url, token: key });
  await client.connect();
  await client.callTool("memory_set", { key: "k2", value: 1 });
  const refused = await assertRejects(
    () => client.callTool("memory_set", { key: "k3", value: 1 }),
    ToolgateError,
  );
  assertEquals(refused.code, "RATE_LIMITED");

  const rest = await callRest(server.url, key, "k4");
  assertEquals(rest.status, 429);
  // A third of a day to the next token, give or take the seconds the test took.
  const retryAfter = Number(rest.headers.get("retry-after"));
  assert(retryAfter > 28_000 && retryAfter <= 28_800, `Retry-After ${retryAfter}`);
  const body = await rest.json();
  assertEquals(body.error.code, "RATE_LIMITED");
  assertStringIncludes(body.error.message, "API key ci is limited to 3/d");

  const mcp = new Client({ name: "rate-e2e", version: "1.0.0" });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  try {
    const result = await mcp.callTool({ name: "memory_set", arguments: { key: "k5", value: 1 } });
    assertEquals(result.isError, true);
    assertStringIncludes(
      JSON.stringify(result.content),
      "RATE_LIMITED: Too many calls: API key ci is limited to 3/d",
    );
  } finally {
    await mcp.close();
  }

  // The administrator is not limited by the key's rate.
  const admin = await callRest(server.url, ADMIN, "k6");
  assertEquals(admin.status, 200);
  await admin.body?.cancel();

  const audit = await fetch(`${server.url}/audit?caller=ci`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  const entries = (await audit.json()).entries as { outcome: { error_code?: string } }[];
  const codes = entries.map((entry) => entry.outcome.error_code ?? "ok");
  assertEquals(codes.slice(0, 5), ["ok", "ok", "ok", "RATE_LIMITED", "RATE_LIMITED"]);
});

Deno.test("e2e: two instances on one PostgreSQL database share a key's bucket", async () => {
  await using pg = await startPostgres();
  await using homeA = await tempHome();
  await using homeB = await tempHome();
  const secretKey = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
  const env = {
    TOOLGATE_DATABASE_URL: pg.url,
    TOOLGATE_SECRET_KEY: secretKey,
    TOOLGATE_API_TOKEN: ADMIN,
  };
  await using a = await startHttpServer({ home: homeA.home, env });
  await using b = await startHttpServer({ home: homeB.home, env });
  const key = await createKey(homeA.home, "4/d", env);
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) {
    const response = await callRest(i % 2 ? a.url : b.url, key, `k${i}`);
    statuses.push(response.status);
    await response.body?.cancel();
  }
  assertEquals(statuses, [200, 200, 200, 200, 429, 429]);
});

Deno.test("e2e: over MCP stdio a tool's rate (tools.overrides.<tool>.rate) holds: past it, an isError result saying when to retry", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ tools: { overrides: { memory_set: { rate: "2/d" } } } }),
  );
  const client = new Client({ name: "rate-stdio", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: Deno.execPath(),
      args: ["run", "-A", "--cached-only", "--unstable-kv", MAIN, "mcp", "start"],
      env: childEnv({ TOOLGATE_HOME: tmp.home, NO_COLOR: "1" }),
      cwd: ROOT,
      stderr: "pipe",
    }),
  );
  try {
    const results = [];
    for (let i = 0; i < 3; i++) {
      results.push(
        await client.callTool({ name: "memory_set", arguments: { key: `k${i}`, value: i } }),
      );
    }
    assertEquals(results.map((result) => result.isError ?? false), [false, false, true]);
    const text = JSON.stringify(results[2].content);
    assertStringIncludes(text, "RATE_LIMITED: Too many calls: tool memory_set is limited to 2/d");
    assertStringIncludes(text, "retry memory_set in");
    // Other tools are not limited.
    const got = await client.callTool({ name: "memory_get", arguments: { key: "k0" } });
    assertEquals(got.isError ?? false, false);
  } finally {
    await client.close();
  }
});
