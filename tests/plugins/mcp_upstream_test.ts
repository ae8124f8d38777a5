import type { EventEnvelope } from "../../src/events/mod.ts";
import { toToolResult } from "../../src/gateway/mod.ts";
import {
  inheritedEnv,
  mcpUpstreamPlugin,
  type UpstreamSettings,
  type UpstreamSpec,
} from "../../src/plugins/mcp/mod.ts";
import { memoryPlugin } from "../../src/plugins/mod.ts";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { expectCode, pluginGateway } from "./_gateway.ts";
import { MAIN } from "../_helpers.ts";
import { VERSION } from "../../src/version.ts";
import {
  EVERYTHING_PACKAGE,
  fixtureCommand,
  isAlive,
  MEMORY_PACKAGE,
  npmCommand,
  startHttpFixture,
  stdioSpec,
  waitFor,
} from "./_upstreams.ts";

const SETTINGS: UpstreamSettings = {
  connectTimeoutMs: 60_000,
  restartInitialMs: 300,
  restartMaxMs: 2_000,
  inheritedEnv: inheritedEnv(Deno.env.toObject()),
};

function upstream(
  spec: UpstreamSpec,
  secrets: Record<string, string> = {},
  settings: Partial<UpstreamSettings> = {},
) {
  return mcpUpstreamPlugin(spec, {
    settings: { ...SETTINGS, ...settings },
    resolveSecret: (name) => Promise.resolve(secrets[name]),
  });
}

function texts(output: Record<string, unknown>): string[] {
  return (output.content as { type: string; text?: string }[]).map((item) => item.text ?? "");
}

function ofType(events: EventEnvelope[], type: string): Record<string, unknown>[] {
  return events.filter((event) => event.type === type).map((event) =>
    event.data as Record<string, unknown>
  );
}

Deno.test("a stdio upstream's tools are offered as <plugin>__<tool> from every page, with the upstream's schema", async () => {
  await using gw = await pluginGateway([upstream(stdioSpec("fix", fixtureCommand()))]);
  const tools = gw.gateway.listTools();
  assertEquals(tools.map((tool) => tool.name), [
    "fix__echo",
    "fix__add",
    "fix__fail",
    "fix__env",
    "fix__pid",
    "fix__header",
    "fix__sleep",
    "fix__rewrite_echo",
    "fix__add_tool",
  ]);
  const echo = tools[0];
  assertEquals(echo.plugin, "fix");
  assertEquals(echo.description, "Echoes the text");
  assertEquals(echo.inputSchema.required, ["text"]);
  const [status] = gw.gateway.listPlugins();
  assertEquals(status.state, "ready");
  assertEquals(status.tool_count, 9);
  assertEquals(status.upstream?.connection, "connected");
  assertEquals(status.upstream?.transport, "stdio");
  assertEquals(status.upstream?.server, { name: "fixture-upstream", version: "3.1.4" });
  // The fixture is a 2025 server (SDK 1.x): the probe falls back to the handshake.
  assertEquals(status.upstream?.protocol_version, "2025-11-25");
  assert(status.upstream?.pid && isAlive(status.upstream.pid));
  const ready = ofType(gw.events, "plugin.ready");
  // The plugin's version is the upstream's own serverInfo.version.
  assertEquals(status.version, "3.1.4");
  assertEquals(ready, [{ plugin_name: "fix", tool_count: 9, zero_config: true, version: "3.1.4" }]);
});

Deno.test("upstream calls return its content and structuredContent; isError and bad arguments fail with codes", async () => {
  await using gw = await pluginGateway([upstream(stdioSpec("fix", fixtureCommand()))]);
  const echo = await gw.gateway.call("fix__echo", { text: "hi" });
  assertEquals(echo.output, { content: [{ type: "text", text: "echo: hi" }] });
  assertEquals(toToolResult(echo), { content: [{ type: "text", text: "echo: hi" }] });
  const add = await gw.gateway.call("fix__add", { a: 2, b: 3 });
  assertEquals(add.output.structuredContent, { sum: 5 });
  assertEquals(toToolResult(add).structuredContent, { sum: 5 });
  const called = ofType(gw.events, "tool.called");
  assertEquals(called.map((data) => data.tool_name), ["fix__echo", "fix__add"]);
  assertEquals(called[0].plugin, "fix");

  const failed = await expectCode(
    () => gw.gateway.call("fix__fail", { message: "disk full" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(failed.message, "Upstream tool fix/fail failed: disk full");
  const thrown = await expectCode(
    () => gw.gateway.call("fix__fail", { message: "disk full", throw: true }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(thrown.message, "Upstream tool fix/fail failed: disk full");
  const toolFailed = ofType(gw.events, "tool.failed").at(-1)!;
  assertEquals(toolFailed.error_code, "PLUGIN_REQUEST_FAILED");
  assertEquals(toolFailed.tool_name, "fix__fail");

  const invalid = await expectCode(
    () => gw.gateway.call("fix__echo", { text: "", extra: 1 }),
    "TOOL_INPUT_INVALID",
  );
  const fields = (invalid.details as { fields: { path: string; message: string }[] }).fields;
  assertEquals(fields.map((field) => field.path).sort(), ["extra", "text"]);
  const missing = await expectCode(
    () => gw.gateway.call("fix__add", { a: 1 }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(missing.message, "b: Required property is missing");
  const wrongType = await expectCode(
    () => gw.gateway.call("fix__add", { a: 1, b: "2" }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(wrongType.message, "b: Must be number");
});

Deno.test("keychain references in env are resolved at connect time; a missing entry leaves the plugin not_configured", async () => {
  const spec = stdioSpec("fix", fixtureCommand(), {
    env: { API_TOKEN: "keychain:fix.api_token", PLAIN: "literal" },
  });
  {
    await using gw = await pluginGateway([upstream(spec, { "fix.api_token": "s3cr3t-value" })]);
    const token = await gw.gateway.call("fix__env", { name: "API_TOKEN" });
    assertEquals(texts(token.output), ["s3cr3t-value"]);
    const plain = await gw.gateway.call("fix__env", { name: "PLAIN" });
    assertEquals(texts(plain.output), ["literal"]);
    assertEquals(gw.gateway.listPlugins()[0].zero_config, false);
    assert(!JSON.stringify(gw.gateway.listPlugins()).includes("s3cr3t-value"));
    assert(!gw.logs.join("\n").includes("s3cr3t-value"));
  }
  await using gw = await pluginGateway([upstream(spec), memoryPlugin()]);
  const [status] = gw.gateway.listPlugins();
  assertEquals(status.state, "not_configured");
  assertEquals(status.error_code, "PLUGIN_NOT_CONFIGURED");
  assertStringIncludes(
    status.error!,
    "keychain entry fix.api_token (env API_TOKEN) is not set: store it with toolgate keychain set fix.api_token",
  );
  assertEquals(ofType(gw.events, "plugin.error")[0].error_code, "PLUGIN_NOT_CONFIGURED");
  assert(gw.gateway.hasTool("memory_get"));
});

Deno.test("an upstream given credentials (a keychain reference, a token variable, an auth header) is not zero-config", () => {
  const zeroConfig = (extra: Partial<UpstreamSpec>) =>
    upstream(stdioSpec("fix", fixtureCommand(), extra)).zeroConfig;
  assertEquals(zeroConfig({}), true);
  assertEquals(zeroConfig({ env: { MEMORY_FILE_PATH: "/tmp/graph.jsonl" } }), true);
  assertEquals(zeroConfig({ env: { GITHUB_PERSONAL_ACCESS_TOKEN: "ghp_literal" } }), false);
  assertEquals(zeroConfig({ env: { CONFIG: "keychain:fix.config" } }), false);
  assertEquals(zeroConfig({ headers: { Authorization: "Bearer x" } }), false);
  assertEquals(zeroConfig({ headers: { "X-Api-Key": "k" } }), false);
});

Deno.test("a stdio upstream inherits cache, proxy, CA and npm variables, none of toolgate's own, and its env wins", async () => {
  const outer: Record<string, string> = {
    ...Deno.env.toObject(),
    HTTPS_PROXY: "http://proxy.internal:3128",
    no_proxy: "localhost,127.0.0.1",
    NODE_EXTRA_CA_CERTS: "/etc/corp/ca.pem",
    npm_config_registry: "https://npm.internal/",
    SSL_CERT_FILE: "/etc/corp/bundle.pem",
    TOOLGATE_API_TOKEN: "admin-token",
    TOOLGATE_SECRET_FIX_KEY: "secret",
    AWS_SECRET_ACCESS_KEY: "aws",
  };
  const spec = stdioSpec("fix", fixtureCommand(), { env: { SSL_CERT_FILE: "/own/bundle.pem" } });
  await using gw = await pluginGateway([
    upstream(spec, {}, { inheritedEnv: inheritedEnv(outer) }),
  ]);
  const seen = async (name: string) =>
    texts((await gw.gateway.call("fix__env", { name })).output)[0];
  assertEquals(await seen("HTTPS_PROXY"), "http://proxy.internal:3128");
  assertEquals(await seen("no_proxy"), "localhost,127.0.0.1");
  assertEquals(await seen("NODE_EXTRA_CA_CERTS"), "/etc/corp/ca.pem");
  assertEquals(await seen("npm_config_registry"), "https://npm.internal/");
  assertEquals(await seen("SSL_CERT_FILE"), "/own/bundle.pem");
  if (outer.DENO_DIR) assertEquals(await seen("DENO_DIR"), outer.DENO_DIR);
  for (const name of ["TOOLGATE_API_TOKEN", "TOOLGATE_SECRET_FIX_KEY", "AWS_SECRET_ACCESS_KEY"]) {
    assertEquals(await seen(name), "(unset)", name);
  }
});

Deno.test("a 2025 upstream that exits on the server/discover probe is started again for the 2025 handshake", async () => {
  const spec = stdioSpec("old", fixtureCommand(), { env: { EXIT_ON_DISCOVER: "1" } });
  await using gw = await pluginGateway([upstream(spec)]);
  const [status] = gw.gateway.listPlugins();
  assertEquals(status.state, "ready", JSON.stringify(status));
  assertEquals(status.upstream?.protocol_version, "2025-11-25");
  const echo = await gw.gateway.call("old__echo", { text: "still here" });
  assertEquals(texts(echo.output), ["echo: still here"]);
  assert(
    gw.logs.some((line) => line.includes("connecting with the 2025 handshake")),
    gw.logs.join("\n"),
  );
});

Deno.test("a 2026-07-28 upstream (toolgate itself over stdio) is reached with the current revision", async () => {
  const home = await Deno.makeTempDir({ prefix: "toolgate-inner-" });
  try {
    const spec = stdioSpec("inner", {
      command: Deno.execPath(),
      args: ["run", "-A", "--cached-only", MAIN, "mcp", "start"],
    }, { env: { TOOLGATE_HOME: home, TOOLGATE_KEYCHAIN: "file" } });
    await using gw = await pluginGateway([upstream(spec)]);
    const [status] = gw.gateway.listPlugins();
    assertEquals(status.state, "ready", JSON.stringify(status));
    assertEquals(status.upstream?.protocol_version, "2026-07-28");
    assertEquals(status.version, VERSION);
    await gw.gateway.call("inner__memory_set", { key: "k", value: "through two gateways" });
    const got = await gw.gateway.call("inner__memory_get", { key: "k" });
    assertStringIncludes(texts(got.output)[0], "through two gateways");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("an upstream is shaped: include and exclude globs, renames, and its names without the prefix", async () => {
  const shape = {
    include: ["e*", "add"],
    exclude: ["env"],
    rename: { echo: "say" },
    prefix: false,
  };
  await using gw = await pluginGateway([upstream(stdioSpec("fix", fixtureCommand(), { shape }))]);
  assertEquals(gw.gateway.listTools().map((tool) => tool.name), ["say", "add"]);
  assertEquals(texts((await gw.gateway.call("say", { text: "hi" })).output), ["echo: hi"]);
  await expectCode(() => gw.gateway.call("fix__echo", { text: "hi" }), "TOOL_NOT_FOUND");
  await expectCode(() => gw.gateway.call("env", { name: "HOME" }), "TOOL_NOT_FOUND");
});

Deno.test("an unprefixed upstream whose tool name is taken is refused at start, naming both owners", async () => {
  const shape = { include: [], exclude: [], rename: { echo: "memory_get" }, prefix: false };
  await using gw = await pluginGateway([
    memoryPlugin(),
    upstream(stdioSpec("fix", fixtureCommand(), { shape })),
  ]);
  const [memory, fix] = gw.gateway.listPlugins();
  assertEquals(memory.state, "ready");
  assertEquals([fix.state, fix.error_code], ["error", "PLUGIN_INIT_FAILED"]);
  assertEquals(
    fix.error,
    "Plugin fix offers names that are taken: memory_get (plugin memory); " +
      "rename them (rename) or keep the fix__ prefix",
  );
  assertEquals(fix.upstream?.connection, "closed");
  assertEquals((await gw.gateway.call("memory_get", { key: "k" })).output.found, false);
  assert(!gw.gateway.hasTool("add"), "none of the refused plugin's tools is offered");
});

Deno.test("an upstream whose command cannot start fails with PLUGIN_INIT_FAILED while the other plugins serve", async () => {
  await using gw = await pluginGateway([
    upstream(stdioSpec("broken", { command: "/nonexistent/mcp-server", args: [] })),
    memoryPlugin(),
  ]);
  const [broken, memory] = gw.gateway.listPlugins();
  assertEquals([broken.state, broken.error_code], ["error", "PLUGIN_INIT_FAILED"]);
  assertMatch(
    broken.error!,
    /^Plugin broken failed to initialize: MCP upstream cannot run \/nonexistent\/mcp-server: /,
  );
  assertEquals(broken.upstream?.connection, "closed");
  assertEquals(memory.state, "ready");
  const errors = ofType(gw.events, "plugin.error");
  assertEquals(errors.map((data) => [data.plugin_name, data.error_code, data.state]), [
    ["broken", "PLUGIN_INIT_FAILED", "error"],
  ]);
  await gw.gateway.call("memory_set", { key: "a", value: 1 });
});

Deno.test("an upstream process that exits while starting reports its exit code and last stderr lines", async () => {
  const script = [
    "echo 'Need to install the following packages: @acme/mcp@1.0.0' >&2",
    'for i in 1 2 3 4 5 6; do echo "npm error line $i" >&2; done',
    "printf 'npm error 404 Not Found - @acme/mcp' >&2",
    "exit 3",
  ].join("; ");
  await using gw = await pluginGateway([
    upstream(stdioSpec("acme", { command: "sh", args: ["-c", script] })),
    memoryPlugin(),
  ]);
  const [acme] = gw.gateway.listPlugins();
  assertEquals([acme.state, acme.error_code], ["error", "PLUGIN_INIT_FAILED"]);
  const expected = "MCP upstream sh exited with code 3 while starting; stderr: " +
    "npm error line 3 | npm error line 4 | npm error line 5 | npm error line 6 | " +
    "npm error 404 Not Found - @acme/mcp";
  assertEquals(acme.error, `Plugin acme failed to initialize: ${expected}`);
  assertEquals(acme.upstream?.last_error, expected);
  const call = await expectCode(() => gw.gateway.call("acme__fetch", {}), "PLUGIN_INIT_FAILED");
  assertStringIncludes(call.message, expected);
});

Deno.test("an upstream that never answers the handshake fails after the connect timeout and its process is ended", async () => {
  const pidFile = await Deno.makeTempFile();
  try {
    const spec = stdioSpec("mute", {
      command: Deno.execPath(),
      args: [
        "eval",
        `Deno.writeTextFileSync(${
          JSON.stringify(pidFile)
        }, String(Deno.pid)); setInterval(() => {}, 1000);`,
      ],
    });
    const started = Date.now();
    await using gw = await pluginGateway([upstream(spec, {}, { connectTimeoutMs: 1500 })]);
    const [status] = gw.gateway.listPlugins();
    assertEquals([status.state, status.error_code], ["error", "PLUGIN_INIT_FAILED"]);
    assertStringIncludes(status.error!, "no answer within 1500 ms");
    assert(Date.now() - started < 8000, "the timeout was not bounded");
    const pid = Number(await Deno.readTextFile(pidFile));
    await waitFor(() => !isAlive(pid), "the mute upstream to end");
  } finally {
    await Deno.remove(pidFile);
  }
});

Deno.test("a killed upstream fails fast, opens its circuit, restarts with backoff, and its tools work again", async () => {
  await using gw = await pluginGateway(
    [upstream(stdioSpec("fix", fixtureCommand()), {}, { restartInitialMs: 700 })],
    {
      file: {
        tools: { overrides: { fix__echo: { circuit_threshold: 2, circuit_reset_ms: 900 } } },
      },
    },
  );
  const before = gw.gateway.listPlugins()[0].upstream!.pid!;
  Deno.kill(before, "SIGKILL");
  await waitFor(() => gw.gateway.listPlugins()[0].state === "reconnecting", "state reconnecting");
  const status = await waitFor(() => {
    const [plugin] = gw.gateway.listPlugins();
    return plugin.upstream?.next_attempt_at ? plugin : undefined;
  }, "the restart to be scheduled");
  assertEquals(
    status.last_error,
    "the upstream process was killed by SIGKILL; stderr: fixture upstream ready on stdio",
  );

  const started = Date.now();
  const first = await expectCode(
    () => gw.gateway.call("fix__echo", { text: "a" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertStringIncludes(
    first.message,
    "Upstream fix is unavailable: the upstream process was killed by SIGKILL",
  );
  await expectCode(() => gw.gateway.call("fix__echo", { text: "a" }), "PLUGIN_REQUEST_FAILED");
  assert(Date.now() - started < 500, "calls to a dead upstream were not fast");
  await expectCode(() => gw.gateway.call("fix__echo", { text: "a" }), "CIRCUIT_OPEN");
  assertEquals(ofType(gw.events, "circuit.opened")[0].tool_name, "fix__echo");

  await waitFor(
    () => gw.gateway.listPlugins()[0].upstream?.connection === "connected",
    "reconnection",
  );
  const after = gw.gateway.listPlugins()[0];
  assertEquals([after.state, after.upstream?.restarts], ["ready", 1]);
  assert(after.upstream!.pid !== before && isAlive(after.upstream!.pid!));
  await waitFor(() => ofType(gw.events, "circuit.closed").length > 0, "circuit.closed");
  const echo = await gw.gateway.call("fix__echo", { text: "back" });
  assertEquals(texts(echo.output), ["echo: back"]);
  assertEquals(after.tool_count, 9);
});

Deno.test("notifications/tools/list_changed from an upstream re-lists its tools and tells the gateway's listeners", async () => {
  await using gw = await pluginGateway([upstream(stdioSpec("fix", fixtureCommand()))]);
  let changes = 0;
  const unsubscribe = gw.gateway.onToolsChanged(() => changes++);
  try {
    await gw.gateway.call("fix__add_tool", { name: "extra" });
    await waitFor(() => gw.gateway.hasTool("fix__extra"), "fix__extra");
    assertEquals(changes, 1);
    const extra = await gw.gateway.call("fix__extra", { x: 1 });
    assertEquals(texts(extra.output), ['extra: {"x":1}']);
    assertEquals(gw.gateway.listPlugins()[0].tool_count, 10);
  } finally {
    unsubscribe();
  }
});

Deno.test("a Streamable HTTP upstream that forgot our session (it restarted) is re-opened and the call sent once more", async () => {
  const first = await startHttpFixture();
  const port = Number(new URL(first.url).port);
  await using gw = await pluginGateway([
    upstream({
      name: "remote",
      source: "cli",
      url: first.url,
      args: [],
      env: {},
      headers: {},
      enabled: true,
    }),
  ]);
  assertEquals(texts((await gw.gateway.call("remote__echo", { text: "one" })).output), [
    "echo: one",
  ]);
  await first.kill();
  await using _second = await startHttpFixture(port);
  // Concurrent calls after the restart share one new session; none sees the expiry.
  const echoes = await Promise.all(
    ["two", "three", "four"].map((text) => gw.gateway.call("remote__echo", { text })),
  );
  assertEquals(echoes.map((echo) => texts(echo.output)[0]), [
    "echo: two",
    "echo: three",
    "echo: four",
  ]);
  const [status] = gw.gateway.listPlugins();
  assertEquals([status.state, status.upstream?.connection, status.upstream?.restarts], [
    "ready",
    "connected",
    1,
  ]);
  assertEquals(ofType(gw.events, "tool.failed"), []);
  assert(gw.logs.some((line) => line.includes("a new session is open")), gw.logs.join("\n"));
});

Deno.test("a Streamable HTTP upstream gets keychain headers; when it goes away calls fail with PLUGIN_REQUEST_FAILED until it is back", async () => {
  await using fixture = await startHttpFixture();
  await using gw = await pluginGateway([
    upstream(
      {
        name: "remote",
        source: "cli",
        url: fixture.url,
        args: [],
        env: {},
        headers: { "X-Api-Key": "keychain:remote.key" },
        enabled: true,
      },
      { "remote.key": "k-1" },
    ),
  ]);
  const [status] = gw.gateway.listPlugins();
  assertEquals([status.state, status.upstream?.transport, status.upstream?.pid], [
    "ready",
    "http",
    undefined,
  ]);
  assertEquals(gw.gateway.listTools().length, 9);
  const header = await gw.gateway.call("remote__header", { name: "X-Api-Key" });
  assertEquals(texts(header.output), ["k-1"]);
  const sum = await gw.gateway.call("remote__add", { a: 20, b: 22 });
  assertEquals(sum.output.structuredContent, { sum: 42 });

  await fixture.kill();
  const error = await expectCode(
    () => gw.gateway.call("remote__echo", { text: "x" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertMatch(error.message, /^Upstream remote request failed: /);
  assertEquals(gw.gateway.listPlugins()[0].state, "reconnecting");
  await expectCode(() => gw.gateway.call("remote__echo", { text: "x" }), "PLUGIN_REQUEST_FAILED");

  // The server comes back on the same address: a new session is initialized.
  await using again = await startHttpFixture(Number(new URL(fixture.url).port));
  await waitFor(
    () => gw.gateway.listPlugins()[0].upstream?.connection === "connected",
    "the HTTP upstream to reconnect",
  );
  assertEquals(gw.gateway.listPlugins()[0].upstream?.restarts, 1);
  const echo = await gw.gateway.call("remote__echo", { text: "again" });
  assertEquals(texts(echo.output), ["echo: again"]);
  assert(again.pid !== fixture.pid);
});

Deno.test("removing an upstream plugin ends its process and withdraws its tools", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  let changes = 0;
  const unsubscribe = gw.gateway.onToolsChanged(() => changes++);
  try {
    const status = await gw.gateway.addPlugin(upstream(stdioSpec("fix", fixtureCommand())));
    assertEquals([status.state, status.tool_count, changes], ["ready", 9, 1]);
    const pid = status.upstream!.pid!;
    assert(gw.gateway.hasTool("fix__echo"));
    assertEquals(await gw.gateway.removePlugin("fix"), true);
    assertEquals([gw.gateway.hasTool("fix__echo"), changes], [false, 2]);
    assertEquals(gw.gateway.listPlugins().map((p) => p.name), ["memory"]);
    await waitFor(() => !isAlive(pid), "the upstream process to end");
    await expectCode(() => gw.gateway.call("fix__echo", { text: "x" }), "TOOL_NOT_FOUND");
  } finally {
    unsubscribe();
  }
});

Deno.test("removing an upstream that ignores SIGTERM and its closed stdin ends it with SIGKILL", async () => {
  await using gw = await pluginGateway([]);
  const status = await gw.gateway.addPlugin(
    upstream(stdioSpec("stubborn", fixtureCommand(), { env: { IGNORE_TERM: "1" } })),
  );
  assertEquals(status.state, "ready");
  const pid = status.upstream!.pid!;
  assertEquals(await gw.gateway.removePlugin("stubborn"), true);
  // stdin closed, 2 s, SIGTERM (ignored), 2 s, then SIGKILL.
  await waitFor(() => !isAlive(pid), "the stubborn upstream process to end", 8_000);
});

Deno.test("the reference servers from npm (everything, memory) are hosted and callable", async () => {
  const dir = await Deno.makeTempDir({ prefix: "toolgate-kg-" });
  try {
    await using gw = await pluginGateway([
      upstream(stdioSpec("everything", npmCommand(EVERYTHING_PACKAGE, "stdio"))),
      upstream(
        stdioSpec("kg", npmCommand(MEMORY_PACKAGE), {
          env: { MEMORY_FILE_PATH: `${dir}/graph.jsonl` },
        }),
      ),
    ]);
    for (const status of gw.gateway.listPlugins()) {
      assertEquals(status.state, "ready", JSON.stringify(status));
    }
    const names = gw.gateway.listTools().map((tool) => tool.name);
    for (
      const name of [
        "everything__echo",
        "everything__get-sum",
        "kg__create_entities",
        "kg__read_graph",
      ]
    ) {
      assert(names.includes(name), `${name} in ${names}`);
    }
    const echo = await gw.gateway.call("everything__echo", { message: "hello" });
    assertEquals(texts(echo.output), ["Echo: hello"]);
    const sum = await gw.gateway.call("everything__get-sum", { a: 1, b: 2 });
    assertStringIncludes(texts(sum.output)[0], "3");
    const bad = await expectCode(
      () => gw.gateway.call("everything__get-sum", { a: 1, b: "two" }),
      "TOOL_INPUT_INVALID",
    );
    assertEquals((bad.details as { fields: { path: string }[] }).fields[0].path, "b");

    await gw.gateway.call("kg__create_entities", {
      entities: [{ name: "toolgate", entityType: "project", observations: ["hosts MCP servers"] }],
    });
    const graph = await gw.gateway.call("kg__read_graph", {});
    assertStringIncludes(JSON.stringify(graph.output), "hosts MCP servers");
    assertStringIncludes(await Deno.readTextFile(`${dir}/graph.jsonl`), "toolgate");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an upstream call past the tool timeout fails with TOOL_TIMEOUT and the connection stays usable", async () => {
  await using gw = await pluginGateway(
    [upstream(stdioSpec("fix", fixtureCommand()))],
    { file: { tools: { overrides: { fix__sleep: { timeout_ms: 200 } } } } },
  );
  const started = Date.now();
  const error = await expectCode(() => gw.gateway.call("fix__sleep", { ms: 5000 }), "TOOL_TIMEOUT");
  assertEquals(error.message, "Tool fix__sleep timed out after 200 ms");
  assert(Date.now() - started < 2000, "the timeout did not end the call");
  const echo = await gw.gateway.call("fix__echo", { text: "still here" });
  assertEquals(texts(echo.output), ["echo: still here"]);
  assertEquals(gw.gateway.listPlugins()[0].upstream?.connection, "connected");
});

Deno.test("an unprefixed upstream may offer any name until it is ready; a prefixed one only its own", () => {
  const shape = { include: [], exclude: [], rename: {}, prefix: false };
  const unprefixed = upstream(stdioSpec("plain", fixtureCommand(), { shape }));
  assertEquals(unprefixed.mayOffer?.("fetch_page"), true);
  assertEquals(upstream(stdioSpec("fix", fixtureCommand())).mayOffer, undefined);
});
