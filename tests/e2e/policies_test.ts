/**
 * Policies end to end: config rules and one added with the CLI decide REST
 * and MCP calls of the real server (denied calls refused 403 `FORBIDDEN`
 * naming the rule, and audited), `policies test` explains, REST manages
 * them, and a rule whose expression does not parse stops the start naming
 * the rule and the position.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";

const POLICIES = [
  {
    name: "only-example-hosts",
    tools: ["http_request"],
    when: "!args.url.startsWith('https://api.example.com/')",
    effect: "deny",
    reason: "http_request may reach api.example.com only",
  },
  {
    name: "keep-notes",
    tools: ["memory_delete"],
    annotations: { destructiveHint: true },
    effect: "deny",
  },
];

async function call(url: string, tool: string, args: Record<string, unknown>) {
  const response = await fetch(`${url}/tools/${tool}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(args),
  });
  return { status: response.status, body: await response.json() as Record<string, unknown> };
}

Deno.test("config and stored policies deny calls over REST and MCP, naming the rule; test explains", async () => {
  await using tmp = await tempHome();
  const { home } = tmp;
  await using server = await startHttpServer({
    home,
    config: { policies: POLICIES, plugins: { upstream_settings: { poll_ms: 50 } } },
  });
  const { url } = server;

  const denied = await call(url, "http_request", { url: "https://evil.example.net/" });
  assertEquals(denied.status, 403);
  const error = denied.body.error as {
    code: string;
    message: string;
    details: Record<string, unknown>;
  };
  assertEquals(error.code, "FORBIDDEN");
  assertEquals(
    error.message,
    "Forbidden by policy only-example-hosts: http_request may reach api.example.com only",
  );
  assertEquals(error.details.policy, "only-example-hosts");
  assertEquals((await call(url, "memory_delete", { key: "k" })).status, 403);
  assertEquals((await call(url, "memory_set", { key: "k", value: 1 })).status, 200);

  // Added with the CLI: the running server follows.
  const added = await runCli([
    "policies",
    "add",
    "--rule",
    JSON.stringify({
      name: "no-big-notes",
      tools: ["memory_set"],
      when: "args.value > 100",
      effect: "deny",
    }),
  ], { home });
  assertEquals(added.code, 0, added.stderr);
  assertStringIncludes(added.stdout, "Added policy no-big-notes (position 0)");
  await until(
    async () => (await call(url, "memory_set", { key: "k", value: 101 })).status === 403,
    "the new rule",
  );
  assertEquals((await call(url, "memory_set", { key: "k", value: 5 })).status, 200);

  const mcp = new Client({ name: "policies-e2e", version: "1.0.0" });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  try {
    const result = await mcp.callTool({ name: "memory_set", arguments: { key: "k", value: 500 } });
    assertEquals(result.isError, true);
    assertStringIncludes(JSON.stringify(result.content), "Forbidden by policy no-big-notes");
  } finally {
    await mcp.close();
  }

  // Refusals are audited as calls that did not run.
  const audit = await (await fetch(`${url}/audit?tool=http_request`)).json() as {
    entries: { outcome: { ok: boolean; error_code?: string; error?: string } }[];
  };
  assertEquals(audit.entries.map((e) => e.outcome.error_code), ["FORBIDDEN"]);

  const listed = await runCli(["policies", "list", "--json"], { home });
  assertEquals(
    JSON.parse(listed.stdout).map((p: { name: string; source: string }) => `${p.name} ${p.source}`),
    ["only-example-hosts config", "keep-notes config", "no-big-notes store"],
  );
  const explained = await runCli([
    "policies",
    "test",
    "--tool",
    "memory_set",
    "--args",
    '{"key": "k", "value": 1000}',
  ], { home });
  assertEquals(explained.code, 0, explained.stderr);
  assertStringIncludes(
    explained.stdout,
    "  only-example-hosts (config): tool memory_set is not one of http_request",
  );
  assertStringIncludes(explained.stdout, "→ no-big-notes (store): when is true");
  assertStringIncludes(explained.stdout, "Decision: deny by no-big-notes (store)");

  // Over REST: test, a bad rule refused naming its field, removal.
  const tested = await (await fetch(`${url}/policies/test`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ tool: "memory_get", args: { key: "k" } }),
  })).json();
  assertEquals(tested.decision, null);
  const bad = await fetch(`${url}/policies`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ rule: { name: "x", effect: "deny", when: "args.a ==" } }),
  });
  assertEquals(bad.status, 500);
  const badBody = await bad.json();
  assertEquals(badBody.error.code, "CONFIG_INVALID");
  assertStringIncludes(badBody.error.message, "Invalid policy x (store): when: line:column 1:");
  const conflict = await fetch(`${url}/policies`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ rule: { name: "keep-notes", effect: "allow" } }),
  });
  assertEquals(conflict.status, 409);
  await conflict.body?.cancel();
  const removed = await fetch(`${url}/policies/no-big-notes`, { method: "DELETE" });
  assertEquals(removed.status, 204);
  assertEquals((await call(url, "memory_set", { key: "k", value: 1000 })).status, 200);
  await server.stop();
});

Deno.test("a policy whose expression does not parse stops the start, naming the rule and where", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({
      policies: [{ name: "broken", when: "args.url.startsWith(", effect: "deny" }],
    }),
  );
  const run = await runCli(["tools", "call", "memory_get", "--args", '{"key": "k"}'], {
    home: tmp.home,
  });
  assertEquals(run.code, 1);
  assertStringIncludes(
    run.stderr,
    "CONFIG_INVALID: Invalid policy broken (config): when: line:column 1:",
  );
  const shape = await runCli(["policies", "list"], { home: tmp.home, env: {} });
  assert(shape.code !== 0);
});
