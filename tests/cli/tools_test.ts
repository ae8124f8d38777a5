import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { debugEnabled } from "../../src/cli/context.ts";
import { tempHome } from "../_helpers.ts";
import { closedPort } from "../plugins/_gateway.ts";
import { printed, toolgate } from "./_cli.ts";

Deno.test("tools list --json offers the http and memory tools with their input schemas", async () => {
  await using tmp = await tempHome();
  const run = await toolgate(["tools", "list", "--json"], tmp.home);
  assertEquals(run.code, 0, run.stderr);
  const tools = JSON.parse(run.stdout) as {
    name: string;
    plugin: string;
    description: string;
    inputSchema: { type: string; required?: string[] };
  }[];
  assertEquals(tools.map((t) => [t.name, t.plugin]), [
    ["http_request", "http"],
    ["memory_set", "memory"],
    ["memory_get", "memory"],
    ["memory_list", "memory"],
    ["memory_delete", "memory"],
  ]);
  for (const tool of tools) {
    assert(tool.description.length > 10, tool.name);
    assertEquals(tool.inputSchema.type, "object");
  }
  assertEquals(tools[1].inputSchema.required, ["key", "value"]);
  assertStringIncludes(run.stderr, "note: plugin slack is not_configured");

  const human = await toolgate(["tools", "list"], tmp.home);
  assertEquals(human.code, 0, human.stderr);
  assert(human.stdout.startsWith("NAME"), human.stdout);
  assertStringIncludes(human.stdout, "memory_delete  memory");
});

Deno.test("memory written by one tools call process is read by the next", async () => {
  await using tmp = await tempHome();
  const set = await toolgate([
    "tools",
    "call",
    "memory_set",
    "--args",
    '{"key": "deploy/last", "value": {"version": "1.2.3", "ok": true}}',
  ], tmp.home);
  assertEquals(set.code, 0, set.stderr);
  assertEquals(JSON.parse(set.stdout).created, true);

  const get = await toolgate(
    ["tools", "call", "memory_get", "--args", '{"key": "deploy/last"}', "--json"],
    tmp.home,
  );
  assertEquals(get.code, 0, get.stderr);
  const result = JSON.parse(get.stdout);
  assertEquals(result.tool, "memory_get");
  assertEquals(result.plugin, "memory");
  assertEquals(typeof result.latency_ms, "number");
  assertEquals(result.output.value, { version: "1.2.3", ok: true });

  const fromStdin = await toolgate(["tools", "call", "memory_list", "--args", "-"], tmp.home, {
    stdin: '{"prefix": "deploy/"}',
  });
  assertEquals(fromStdin.code, 0, fromStdin.stderr);
  assertEquals(JSON.parse(fromStdin.stdout).count, 1);
});

Deno.test("tools call reports bad input with the code, the message and the exit code", async () => {
  await using tmp = await tempHome();
  const wrongType = await toolgate(
    ["tools", "call", "memory_set", "--args", '{"key": 7, "value": 1}'],
    tmp.home,
  );
  assertEquals(wrongType.code, 2);
  assertEquals(
    wrongType.stderr,
    "toolgate: TOOL_INPUT_INVALID: Invalid arguments for memory_set: key: Invalid input: expected string, received number\n",
  );
  assertEquals(wrongType.stdout, "");

  const missing = await toolgate(["tools", "call", "memory_set"], tmp.home);
  assertEquals(missing.code, 2);
  assertStringIncludes(
    missing.stderr,
    "toolgate: TOOL_INPUT_INVALID: Invalid arguments for memory_set: key: Invalid input: expected string, received undefined; value: ",
  );

  const unknown = await toolgate(["tools", "call", "memory_fetch", "--args", "{}"], tmp.home);
  assertEquals(unknown.code, 1);
  assertEquals(
    unknown.stderr,
    'toolgate: TOOL_NOT_FOUND: Unknown tool "memory_fetch"; see toolgate tools list\n',
  );

  const badJson = await toolgate(["tools", "call", "memory_get", "--args", "{key: 1}"], tmp.home);
  assertEquals(badJson.code, 2);
  assertStringIncludes(badJson.stderr, "toolgate: USAGE: Invalid --args: not JSON (");

  const notObject = await toolgate(["tools", "call", "memory_get", "--args", "[1]"], tmp.home);
  assertEquals(notObject.code, 2);
  assertStringIncludes(notObject.stderr, "expected a JSON object such as");

  const json = await toolgate(
    ["tools", "call", "memory_get", "--args", '{"key": ""}', "--json"],
    tmp.home,
  );
  assertEquals(json.code, 2);
  const body = JSON.parse(json.stdout);
  assertEquals(body.error.code, "TOOL_INPUT_INVALID");
  assertEquals(body.error.details.fields[0].path, "key");
});

Deno.test("tools call http_request reaches a local server; an unreachable one exits 1", async () => {
  await using tmp = await tempHome();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => Response.json({ pong: true }, { status: 201 }),
  );
  try {
    const url = `http://127.0.0.1:${server.addr.port}/ping`;
    const ok = await toolgate(
      ["tools", "call", "http_request", "--args", JSON.stringify({ method: "POST", url })],
      tmp.home,
    );
    assertEquals(ok.code, 0, ok.stderr);
    const output = JSON.parse(ok.stdout);
    assertEquals(output.status, 201);
    assertEquals(output.json, { pong: true });
  } finally {
    await server.shutdown();
  }
  const port = closedPort();
  const down = await toolgate(
    [
      "tools",
      "call",
      "http_request",
      "--args",
      JSON.stringify({ url: `http://127.0.0.1:${port}/` }),
    ],
    tmp.home,
  );
  assertEquals(down.code, 1);
  assertEquals(
    down.stderr,
    `toolgate: PLUGIN_REQUEST_FAILED: Request to 127.0.0.1:${port} failed: connection refused\n`,
  );
  assert(!printed(down).includes("at "), "no stack trace");
});

Deno.test("TOOLGATE_DEBUG turns debug output on unless it says 0, false, no or off", () => {
  for (const on of ["1", "true", "yes", "verbose"]) {
    assertEquals(debugEnabled({ TOOLGATE_DEBUG: on }), true, on);
  }
  for (const off of ["", "0", "false", "No", " off "]) {
    assertEquals(debugEnabled({ TOOLGATE_DEBUG: off }), false, JSON.stringify(off));
  }
  assertEquals(debugEnabled({}), false);
});
