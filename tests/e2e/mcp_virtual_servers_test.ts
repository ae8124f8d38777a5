/**
 * A virtual server over stdio (`toolgate mcp start --server <name>`), with
 * the official MCP client and the real process: only the server's tools are
 * listed, a call outside them is TOOL_NOT_FOUND and audited with the server,
 * `toolgate servers update` run meanwhile reaches the client as
 * `notifications/tools/list_changed`, and an unknown name exits 2.
 *
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { childEnv, LOOPBACK_ALLOW, MAIN, ROOT, runCli, tempHome } from "../_helpers.ts";
import { waitFor } from "../plugins/_upstreams.ts";

type Content = { type: string; text: string }[];

function cli(args: string[], home: string) {
  return runCli(args, { home });
}

Deno.test("mcp start --server: the official client over stdio lists the subset, is refused TOOL_NOT_FOUND outside it, and hears list_changed after servers update", async () => {
  await using tmp = await tempHome();
  const created = await cli(
    ["servers", "create", "team-a", "--tools", "memory_get,memory_set"],
    tmp.home,
  );
  assertEquals(created.code, 0, created.stderr);
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", MAIN, "mcp", "start", "--server", "team-a"],
    env: childEnv({
      TOOLGATE_HOME: tmp.home,
      TOOLGATE_KEYCHAIN: "file",
      NO_COLOR: "1",
      TOOLGATE_EGRESS_ALLOW: LOOPBACK_ALLOW,
    }),
    cwd: ROOT,
    stderr: "pipe",
  });
  const client = new Client({ name: "e2e-virtual", version: "1.0.0" });
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
  const names = async () =>
    ((await client.listTools()) as { tools: { name: string }[] }).tools.map((t) => t.name).sort();
  try {
    await client.connect(transport);
    assertEquals(await names(), ["memory_get", "memory_set"]);
    const set = await client.callTool({ name: "memory_set", arguments: { key: "k", value: 1 } });
    assert(!set.isError, JSON.stringify(set));
    const outside = await client.callTool({
      name: "memory_delete",
      arguments: { key: "k" },
    });
    assertEquals(outside.isError, true);
    assertStringIncludes(
      (outside.content as Content)[0].text,
      'TOOL_NOT_FOUND: Unknown tool "memory_delete" on virtual server team-a',
    );

    const updated = await cli(
      ["servers", "update", "team-a", "--tools", "memory_*"],
      tmp.home,
    );
    assertEquals(updated.code, 0, updated.stderr);
    await waitFor(() => changed > 0, "tools/list_changed after servers update");
    assertEquals(await names(), ["memory_delete", "memory_get", "memory_list", "memory_set"]);
  } finally {
    await client.close();
  }

  const audit = await cli(["audit", "list", "--json"], tmp.home);
  assertEquals(audit.code, 0, audit.stderr);
  const entries = JSON.parse(audit.stdout).entries as {
    tool: string;
    caller?: unknown;
    outcome: { error_code?: string };
  }[];
  assertEquals(entries.map((e) => [e.tool, e.outcome.error_code ?? null, e.caller]), [
    ["memory_set", null, { kind: "local", server: "team-a" }],
    ["memory_delete", "TOOL_NOT_FOUND", { kind: "local", server: "team-a" }],
  ]);
});

Deno.test("mcp start --server with an unknown name exits 2 before any MCP traffic; --server is for stdio only", async () => {
  await using tmp = await tempHome();
  const unknown = await cli(["mcp", "start", "--server", "nope"], tmp.home);
  assertEquals(unknown.code, 2, unknown.stderr);
  assertEquals(unknown.stdout, "");
  assertStringIncludes(unknown.stderr, 'Invalid --server "nope": no virtual server of that name');
  const http = await cli(["mcp", "start", "--transport", "http", "--server", "x"], tmp.home);
  assertEquals(http.code, 2, http.stderr);
  assertStringIncludes(http.stderr, "over HTTP every virtual server is served at /mcp/<name>");
});
