import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { fixtureCommand } from "../plugins/_upstreams.ts";
import { printed, toolgate } from "./_cli.ts";

interface PluginRow {
  name: string;
  state: string;
  tool_count: number;
  zero_config: boolean;
  error?: string;
  error_code?: string;
  upstream?: { kind: string; transport: string; source: string; connection: string };
}

function fixtureArgs(): string[] {
  const { command, args } = fixtureCommand();
  return ["--command", command, ...args.map((arg) => `--arg=${arg}`)];
}

Deno.test("plugins add names the bad flag and exits 2 on usage errors", async () => {
  await using tmp = await tempHome();
  const cases: [string[], string][] = [
    [["plugins", "add", "Bad", "--url", "http://127.0.0.1/mcp"], 'Invalid plugin name "Bad"'],
    [["plugins", "add", "memory", "--command", "x"], "memory is a built-in plugin"],
    [["plugins", "add", "a__b", "--command", "x"], '"__" separates plugin and tool names'],
    [["plugins", "add", "up"], "Invalid --command/--url: give exactly one"],
    [
      ["plugins", "add", "up", "--command", "x", "--url", "http://127.0.0.1/mcp"],
      "Invalid --command/--url",
    ],
    [["plugins", "add", "up", "--url", "ftp://example.com/mcp"], "Invalid --url"],
    [["plugins", "add", "up", "--url", "not a url"], "Invalid --url"],
    [["plugins", "add", "up", "--command", "x", "--env", "NOEQUALS"], 'Invalid --env "NOEQUALS"'],
    [["plugins", "add", "up", "--command", "x", "--env", "T=keychain:bad"], "Invalid --env T"],
    [["plugins", "add", "up", "--command", "x", "--header", "A: b"], "Invalid --header"],
    [["plugins", "add", "up", "--url", "http://127.0.0.1/mcp", "--arg", "a"], "Invalid --arg"],
    [
      ["plugins", "add", "up", "--url", "http://127.0.0.1/mcp", "--header", "x"],
      "Invalid --header",
    ],
    [["plugins", "add", "up", "--command", "x", "--rename", "echo"], 'Invalid --rename "echo"'],
    [["plugins", "add", "up", "--command", "x", "--rename", "a=b c"], 'Invalid --rename "a=b c"'],
  ];
  for (const [args, message] of cases) {
    const run = await toolgate(args, tmp.home);
    assertEquals(run.code, 2, `${args.join(" ")}: ${printed(run)}`);
    assertStringIncludes(run.stderr, message);
  }
});

Deno.test("plugins add stores an upstream that plugins list starts; remove, enable and disable manage it", async () => {
  await using tmp = await tempHome();
  const add = await toolgate(
    ["plugins", "add", "fix", ...fixtureArgs(), "--env", "API_TOKEN=keychain:fix.token"],
    tmp.home,
  );
  assertEquals(add.code, 0, add.stderr);
  assertStringIncludes(add.stdout, "Added plugin fix: MCP server over stdio");
  assertStringIncludes(add.stdout, "its tools are named fix__<tool>");
  assertStringIncludes(add.stderr, "keychain entry fix.token (--env API_TOKEN) is not set yet");
  const again = await toolgate(["plugins", "add", "fix", "--command", "x"], tmp.home);
  assertEquals(again.code, 1);
  assertStringIncludes(again.stderr, "Cannot add plugin fix: a plugin of that name exists");

  const list = async () => {
    const run = await toolgate(["plugins", "list", "--json"], tmp.home);
    assertEquals(run.code, 0, run.stderr);
    return (JSON.parse(run.stdout) as PluginRow[]).find((row) => row.name === "fix")!;
  };
  const missing = await list();
  assertEquals([missing.state, missing.error_code], ["not_configured", "PLUGIN_NOT_CONFIGURED"]);

  const set = await toolgate(["keychain", "set", "fix.token"], tmp.home, { stdin: "t-0ken-9" });
  assertEquals(set.code, 0, set.stderr);
  assert(!set.stderr.includes("no plugin named"), set.stderr);
  const ready = await list();
  assertEquals([ready.state, ready.tool_count, ready.zero_config], ["ready", 9, false]);
  assertEquals(ready.upstream?.source, "cli");
  const call = await toolgate(
    ["tools", "call", "fix__env", "--args", '{"name": "API_TOKEN"}'],
    tmp.home,
  );
  assertEquals(call.code, 0, call.stderr);
  assertEquals(JSON.parse(call.stdout).content[0].text, "t-0ken-9");

  const human = await toolgate(["plugins", "list"], tmp.home);
  assertStringIncludes(human.stdout, "KIND");
  assertStringIncludes(human.stdout, "mcp stdio");

  assertEquals((await toolgate(["plugins", "disable", "fix"], tmp.home)).code, 0);
  assertEquals((await list()).state, "disabled");
  const disabledCall = await toolgate(
    ["tools", "call", "fix__echo", "--args", '{"text":"a"}'],
    tmp.home,
  );
  assertEquals(disabledCall.code, 1);
  assertStringIncludes(disabledCall.stderr, "plugin fix is disabled (toolgate plugins enable fix)");
  assertEquals((await toolgate(["plugins", "enable", "fix"], tmp.home)).code, 0);
  assertEquals((await list()).state, "ready");

  const builtin = await toolgate(["plugins", "remove", "memory"], tmp.home);
  assertEquals(builtin.code, 1);
  assertStringIncludes(builtin.stderr, "Cannot remove plugin memory: it is built in");
  assertEquals((await toolgate(["plugins", "remove", "fix"], tmp.home)).code, 0);
  const gone = await toolgate(["plugins", "remove", "fix"], tmp.home);
  assertEquals(gone.code, 1);
  assertStringIncludes(gone.stderr, "No plugin fix was added with toolgate plugins add");
  assertEquals(await list(), undefined);
});

Deno.test("upstreams declared in config.json cannot be changed by the CLI; a bad one is reported by its key", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ plugins: { upstreams: { cfg: { kind: "mcp", command: "/nonexistent/x" } } } }),
  );
  const add = await toolgate(["plugins", "add", "cfg", "--command", "x"], tmp.home);
  assertEquals(add.code, 1);
  assertStringIncludes(add.stderr, "it is declared in config.json (plugins.upstreams.cfg)");
  const disable = await toolgate(["plugins", "disable", "cfg"], tmp.home);
  assertEquals(disable.code, 1);
  assertStringIncludes(disable.stderr, "edit plugins.upstreams.cfg there");
  const list = await toolgate(["plugins", "list", "--json"], tmp.home);
  const cfg = (JSON.parse(list.stdout) as PluginRow[]).find((row) => row.name === "cfg")!;
  assertEquals([cfg.state, cfg.error_code, cfg.upstream?.source], [
    "error",
    "PLUGIN_INIT_FAILED",
    "config",
  ]);

  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ plugins: { upstreams: { cfg: { kind: "mcp" } } } }),
  );
  const bad = await toolgate(["plugins", "list"], tmp.home);
  assertEquals(bad.code, 1);
  assertStringIncludes(
    bad.stderr,
    "plugins.upstreams.cfg: expected exactly one of command (stdio) or url (Streamable HTTP)",
  );
});

Deno.test("a disabled upstream's tools say where it was turned off; plugins enable warns when plugins.disabled wins", async () => {
  await using tmp = await tempHome();
  const { command, args } = fixtureCommand();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({
      plugins: {
        disabled: ["fix"],
        upstreams: { cfg: { kind: "mcp", command, args, enabled: false } },
      },
    }),
  );
  const add = await toolgate(["plugins", "add", "fix", ...fixtureArgs()], tmp.home);
  assertEquals(add.code, 0, add.stderr);
  const enable = await toolgate(["plugins", "enable", "fix"], tmp.home);
  assertEquals(enable.code, 0, enable.stderr);
  assertStringIncludes(
    enable.stderr,
    "warning: plugins.disabled in config.json lists fix: it stays disabled until you remove it there",
  );
  const rows = JSON.parse(
    (await toolgate(["plugins", "list", "--json"], tmp.home)).stdout,
  ) as PluginRow[];
  for (const name of ["fix", "cfg"]) {
    const row = rows.find((r) => r.name === name)!;
    assertEquals([row.state, row.upstream?.connection], ["disabled", "closed"], name);
  }
  const call = (tool: string) => toolgate(["tools", "call", tool, "--args", "{}"], tmp.home);
  const listed = await call("fix__echo");
  assertEquals(listed.code, 1);
  assertStringIncludes(
    listed.stderr,
    "plugin fix is disabled in config (remove it from plugins.disabled)",
  );
  const declared = await call("cfg__echo");
  assertStringIncludes(
    declared.stderr,
    "plugin cfg is disabled in config (plugins.upstreams.cfg.enabled)",
  );
  const builtin = await toolgate(["plugins", "enable", "http"], tmp.home);
  assertStringIncludes(
    builtin.stderr,
    "remove it from plugins.disabled in config.json to turn it on",
  );
});

Deno.test("plugins add --json shows keychain references and redacts literal secrets", async () => {
  await using tmp = await tempHome();
  const add = await toolgate([
    "plugins",
    "add",
    "fix",
    ...fixtureArgs(),
    "--env",
    "API_TOKEN=keychain:fix.token",
    "--env",
    "OTHER_TOKEN=l1teral-s3cret",
    "--env",
    "LOG_LEVEL=debug",
    "--json",
  ], tmp.home);
  assertEquals(add.code, 0, add.stderr);
  assert(!add.stdout.includes("l1teral-s3cret"), add.stdout);
  assertEquals(JSON.parse(add.stdout).env, {
    API_TOKEN: "keychain:fix.token",
    OTHER_TOKEN: "[REDACTED]",
    LOG_LEVEL: "debug",
  });
});

Deno.test("plugins add --include, --exclude, --rename and --no-prefix shape what the upstream offers", async () => {
  await using tmp = await tempHome();
  const add = await toolgate([
    "plugins",
    "add",
    "fix",
    ...fixtureArgs(),
    "--include",
    "e*",
    "--include=add",
    "--exclude",
    "env",
    "--rename",
    "echo=say",
    "--no-prefix",
    "--json",
  ], tmp.home);
  assertEquals(add.code, 0, add.stderr);
  const record = JSON.parse(add.stdout);
  assertEquals(
    [record.include, record.exclude, record.rename, record.prefix],
    [["e*", "add"], ["env"], { echo: "say" }, false],
  );
  const tools = await toolgate(["tools", "list", "--json"], tmp.home);
  const names = (JSON.parse(tools.stdout) as { name: string }[]).map((tool) => tool.name);
  assert(names.includes("say") && names.includes("add"), names.join(", "));
  assert(!names.some((name) => name.startsWith("fix__") || name === "env"), names.join(", "));
  const call = await toolgate(["tools", "call", "say", "--args", '{"text": "shaped"}'], tmp.home);
  assertEquals(call.code, 0, call.stderr);
  assertStringIncludes(call.stdout, "echo: shaped");
});
