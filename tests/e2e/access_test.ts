/**
 * API keys end to end: keys made with the CLI against a running server,
 * used by the TypeScript SDK and raw HTTP, revoked while it runs, and the
 * caller in the audit log.
 *
 * @module
 */
import { ToolgateClient, ToolgateError } from "../../sdk/typescript/mod.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";

Deno.test("e2e: a CLI-made key lists and calls only its tools through the SDK, is refused the management API, and stops at once when revoked", async () => {
  await using tmp = await tempHome();
  const admin = "e2e-admin-token";
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_API_TOKEN: admin },
  });
  const { url } = server;
  // Made while the server runs: no restart needed.
  const created = await runCli(["keys", "create", "--name", "ci", "--tools", "memory_*"], {
    home: tmp.home,
  });
  assertEquals(created.code, 0, created.stderr);
  const key = created.stdout.trim();

  await using client = new ToolgateClient({ baseUrl: url, token: key });
  await client.connect();
  const names = (await client.listTools()).map((tool) => tool.name);
  assert(names.length > 0 && names.every((name) => name.startsWith("memory_")), names.join());
  await client.callTool("memory_set", { key: "k", value: 1 });
  const refused = await assertRejects(
    () => client.callTool("http_request", { url: "https://example.com" }),
    ToolgateError,
  );
  assertEquals(refused.code, "FORBIDDEN");

  const rest = await fetch(`${url}/tools/http_request`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ url: "https://example.com" }),
  });
  assertEquals(rest.status, 403);
  assertEquals((await rest.json()).error.code, "FORBIDDEN");
  const management = await fetch(`${url}/webhooks`, {
    headers: { authorization: `Bearer ${key}` },
  });
  assertEquals(management.status, 403);
  await management.body?.cancel();

  const audit = await fetch(`${url}/audit?caller=ci`, {
    headers: { authorization: `Bearer ${admin}` },
  });
  const entries = (await audit.json()).entries as {
    tool: string;
    caller: { name: string };
    outcome: { error_code?: string };
  }[];
  assertEquals(entries.map((e) => [e.tool, e.caller.name, e.outcome.error_code ?? "ok"]), [
    ["memory_set", "ci", "ok"],
    ["http_request", "ci", "FORBIDDEN"],
    ["http_request", "ci", "FORBIDDEN"],
  ]);
  const listed = await runCli(["audit", "list", "--caller", "ci", "--json"], { home: tmp.home });
  assertEquals(JSON.parse(listed.stdout).entries.length, 3);

  const revoked = await runCli(["keys", "revoke", "ci"], { home: tmp.home });
  assertEquals(revoked.code, 0, revoked.stderr);
  const after = await fetch(`${url}/tools`, { headers: { authorization: `Bearer ${key}` } });
  assertEquals(after.status, 401);
  assertStringIncludes((await after.json()).error.message, "unknown or revoked");
  assertStringIncludes(after.headers.get("www-authenticate") ?? "", "Bearer");
  const keysList = await runCli(["keys", "list"], { home: tmp.home });
  assert(!keysList.stdout.includes(key));
});

Deno.test("e2e: an open server closes when the first key is made with the CLI, and opens again when the last is revoked", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({
    home: tmp.home,
    config: { plugins: { upstream_settings: { poll_ms: 50 } } },
  });
  const { url } = server;
  const status = async (headers: Record<string, string> = {}) => {
    const response = await fetch(`${url}/tools`, { headers });
    await response.body?.cancel();
    return response.status;
  };
  const until = async (want: number, headers?: Record<string, string>) => {
    const deadline = Date.now() + 10_000;
    let seen = await status(headers);
    while (seen !== want && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      seen = await status(headers);
    }
    assertEquals(seen, want);
  };
  assertEquals(await status(), 200);
  const created = await runCli(["keys", "create", "--name", "ci"], { home: tmp.home });
  assertEquals(created.code, 0, created.stderr);
  const key = created.stdout.trim();
  await until(401);
  assertEquals(await status({ authorization: `Bearer ${key}` }), 200);
  const revoked = await runCli(["keys", "revoke", "ci"], { home: tmp.home });
  assertEquals(revoked.code, 0, revoked.stderr);
  await until(200);
});
