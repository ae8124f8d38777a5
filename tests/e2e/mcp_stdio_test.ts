import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdioTransport } from "@modelcontextprotocol/client/stdio";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import {
  childEnv,
  initializeRequest,
  LOOPBACK_ALLOW,
  MAIN,
  ROOT,
  runCli,
  tempHome,
} from "../_helpers.ts";

type TextContent = { type: string; text: string }[];

/** Raw JSON-RPC lines: initialize (id 1), initialized, tools/list (id 2). */
const HANDSHAKE_AND_LIST = [
  initializeRequest(),
  { jsonrpc: "2.0", method: "notifications/initialized" },
  { jsonrpc: "2.0", id: 2, method: "tools/list" },
];

function connectClient(home: string): { client: Client; transport: StdioClientTransport } {
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", "--unstable-kv", MAIN, "mcp", "start"],
    env: childEnv({ TOOLGATE_HOME: home, NO_COLOR: "1", TOOLGATE_EGRESS_ALLOW: LOOPBACK_ALLOW }),
    cwd: ROOT,
    stderr: "pipe",
  });
  const client = new Client({ name: "toolgate-test", version: "1.0.0" });
  return { client, transport };
}

Deno.test("the official MCP client over stdio lists the built-in tools and calls each", async () => {
  await using tmp = await tempHome();
  const receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (request) => Response.json({ method: request.method, path: new URL(request.url).pathname }),
  );
  const { client, transport } = connectClient(tmp.home);
  try {
    await client.connect(transport);
    const { tools } = await client.listTools() as {
      tools: { name: string; inputSchema: { type: string } }[];
    };
    const names = tools.map((t) => t.name).sort();
    for (
      const expected of ["http_request", "memory_delete", "memory_get", "memory_list", "memory_set"]
    ) {
      assert(names.includes(expected), `missing ${expected} in ${names.join(", ")}`);
    }
    assert(!names.includes("slack_post_message"), "slack is offered without a token");
    for (const tool of tools) assertEquals(tool.inputSchema.type, "object");

    const set = await client.callTool({
      name: "memory_set",
      arguments: { key: "k", value: { n: 1 } },
    });
    assert(!set.isError, JSON.stringify(set));
    const get = await client.callTool({ name: "memory_get", arguments: { key: "k" } });
    assertMatch((get.content as TextContent)[0].text, /"n":1/);
    const list = await client.callTool({ name: "memory_list", arguments: {} });
    assertMatch((list.content as TextContent)[0].text, /"k"/);
    const del = await client.callTool({ name: "memory_delete", arguments: { key: "k" } });
    assert(!del.isError, JSON.stringify(del));

    const url = `http://127.0.0.1:${receiver.addr.port}/ping`;
    const http = await client.callTool({ name: "http_request", arguments: { url } });
    assert(!http.isError, JSON.stringify(http));
    assertMatch((http.content as TextContent)[0].text, /"status":200/);

    const bad = await client.callTool({ name: "memory_set", arguments: { value: 1 } });
    assertEquals(bad.isError, true);
    assertMatch((bad.content as TextContent)[0].text, /^TOOL_INPUT_INVALID: .*key/);

    let unknownError: unknown;
    try {
      await client.callTool({ name: "no_such_tool", arguments: {} });
    } catch (error) {
      unknownError = error;
    }
    assertEquals((unknownError as Error).message, "MCP error -32602: Unknown tool: no_such_tool");
  } finally {
    await client.close();
    await receiver.shutdown();
  }
});

Deno.test("stdout carries only JSON-RPC lines, and requests sent before stdin closes are all answered", async () => {
  await using tmp = await tempHome();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", "--unstable-kv", MAIN, "mcp", "start"],
    env: { TOOLGATE_HOME: tmp.home, NO_COLOR: "1" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const requests = [
    ...HANDSHAKE_AND_LIST,
    {
      jsonrpc: "2.0",
      id: 3,
      method: "tools/call",
      params: { name: "memory_set", arguments: { key: "a", value: 1 } },
    },
    { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "memory_get", arguments: {} } },
  ];
  const writer = child.stdin.getWriter();
  await writer.write(
    new TextEncoder().encode(requests.map((r) => JSON.stringify(r)).join("\n") + "\n"),
  );
  // Wait for the last reply before closing stdin, so the server answers everything.
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes('"id":4')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  await writer.close();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  const status = await child.status;
  await child.stderr.cancel();
  assertEquals(status.code, 0);
  const lines = text.split("\n").filter((line) => line.length > 0);
  assertEquals(lines.length, 4, text);
  for (const line of lines) {
    const message = JSON.parse(line);
    assertEquals(message.jsonrpc, "2.0");
    assert("result" in message || "error" in message, line);
  }
  const byId = new Map(lines.map((l) => JSON.parse(l)).map((m) => [m.id, m]));
  assertEquals(byId.get(4).result.isError, true);
});

Deno.test("a stdio server whose store cannot open exits 1 with the reason, also in replies", async () => {
  await using tmp = await tempHome();
  await Deno.mkdir(`${tmp.home}/toolgate.kv`); // a directory where the KV file should be
  const requests = HANDSHAKE_AND_LIST;
  const run = await runCli(["mcp", "start"], {
    home: tmp.home,
    stdin: requests.map((r) => JSON.stringify(r)).join("\n") + "\n",
  });
  assertEquals(run.code, 1, run.stderr);
  assertMatch(run.stderr, /Cannot open .*toolgate\.kv/);
  // The session ends as soon as start-up fails: requests read before that
  // are answered (initialize at once, tools/list with the reason), later ones
  // are not. stdout holds nothing but JSON-RPC either way.
  const replies = run.stdout.split("\n").filter((line) => line).map((line) => JSON.parse(line));
  assert(replies.length <= 2, run.stdout);
  replies.forEach((reply, i) => assertEquals([reply.jsonrpc, reply.id], ["2.0", i + 1]));
  if (replies[0]) assertEquals(replies[0].result.serverInfo.name, "toolgate");
  if (replies[1]) assertMatch(replies[1].error.message, /Cannot open .*toolgate\.kv/);
});

Deno.test("a 2026-07-28 client over stdio negotiates the current revision and calls tools", async () => {
  await using tmp = await tempHome();
  const transport = new ModernStdioTransport({
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", MAIN, "mcp", "start"],
    env: childEnv({ TOOLGATE_HOME: tmp.home, NO_COLOR: "1" }),
    cwd: ROOT,
    stderr: "pipe",
  });
  const client = new ModernClient(
    { name: "modern-stdio", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  try {
    await client.connect(transport);
    assertEquals(client.getNegotiatedProtocolVersion(), "2026-07-28");
    const { tools } = await client.listTools();
    assert(tools.some((tool) => tool.name === "memory_set"), JSON.stringify(tools));
    await client.callTool({ name: "memory_set", arguments: { key: "era", value: "2026" } });
    const got = await client.callTool({ name: "memory_get", arguments: { key: "era" } });
    assertMatch(JSON.stringify(got.content), /2026/);
    const unknown = await client.callTool({ name: "no_such_tool", arguments: {} }).then(
      () => undefined,
      (error: Error) => error,
    );
    assertMatch(String(unknown?.message), /Unknown tool: no_such_tool/);
  } finally {
    await client.close();
  }
  const audit = await runCli(["audit", "list", "--json"], { home: tmp.home });
  const tools = JSON.parse(audit.stdout).entries.map((entry: { tool: string }) => entry.tool);
  assertEquals(tools, ["memory_set", "memory_get"]);
});
