import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdioTransport } from "@modelcontextprotocol/client/stdio";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { childEnv, MAIN, ROOT, runCli, tempHome, toolgateStdio } from "../_helpers.ts";
import {
  conformanceFixtureCommand,
  EVERYTHING_PACKAGE,
  fixtureCommand,
  isAlive,
  MEMORY_PACKAGE,
  npmCommand,
  startHttpFixture,
  waitFor,
} from "../plugins/_upstreams.ts";
import { Receiver } from "../webhooks/_receiver.ts";
import { startHttpServer } from "./_http_server.ts";

interface PluginJson {
  name: string;
  state: string;
  tool_count: number;
  error_code?: string;
  error?: string;
  last_error?: string;
  upstream?: { connection: string; pid?: number; restarts: number; transport: string };
  server?: { pid: number; transport: string };
}

type Content = { type: string; text: string }[];

function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function health(url: string): Promise<Map<string, PluginJson>> {
  const body = await (await fetch(`${url}/health`)).json() as { plugins: PluginJson[] };
  return new Map(body.plugins.map((plugin) => [plugin.name, plugin]));
}

async function toolNames(url: string): Promise<string[]> {
  const body = await (await fetch(`${url}/tools`)).json() as { tools: { name: string }[] };
  return body.tools.map((tool) => tool.name);
}

function deliveries(receiver: Receiver): { type: string; data: Record<string, unknown> }[] {
  return receiver.requests.map((request) => JSON.parse(new TextDecoder().decode(request.body)));
}

function upstreamConfig(
  run: { command: string; args: string[] },
  env: Record<string, string> = {},
) {
  return { kind: "mcp", command: run.command, args: run.args, env };
}

/** Writes `config.json` in `home` declaring `upstreams` (60 s to connect: npm servers start slowly). */
async function writeUpstreams(home: string, upstreams: Record<string, unknown>): Promise<void> {
  await Deno.writeTextFile(
    `${home}/config.json`,
    JSON.stringify({
      plugins: { upstream_settings: { connect_timeout_ms: 60_000 }, upstreams },
    }),
  );
}

/** `toolgate plugins add <name> --command … --arg …` for a stdio upstream. */
function addArgs(name: string, run: { command: string; args: string[] }): string[] {
  return ["plugins", "add", name, "--command", run.command, ...run.args.map((a) => `--arg=${a}`)];
}

Deno.test("upstream MCP servers behind the real HTTP server: REST, MCP HTTP, audit, webhooks, restart after kill, live add/remove", async () => {
  await using tmp = await tempHome();
  await using receiver = new Receiver();
  await using remote = await startHttpFixture();
  const home = tmp.home;
  const kgFile = `${home}/graph.jsonl`;

  const hook = await runCli([
    "webhooks",
    "add",
    "--url",
    receiver.url,
    "--events",
    "tool.called,tool.failed,circuit.opened,circuit.closed,plugin.error,plugin.ready",
  ], { home });
  assertEquals(hook.code, 0, hook.stderr);
  const kg = await runCli([
    ...addArgs("kg", npmCommand(MEMORY_PACKAGE)),
    `--env=MEMORY_FILE_PATH=${kgFile}`,
  ], { home });
  assertEquals(kg.code, 0, kg.stderr);
  const added = await runCli(
    ["plugins", "add", "remote", "--url", remote.url, "--header", "X-Api-Key: keychain:remote.key"],
    { home },
  );
  assertEquals(added.code, 0, added.stderr);
  assertStringIncludes(
    added.stderr,
    "keychain entry remote.key (--header X-Api-Key) is not set yet",
  );
  const secret = await runCli(["keychain", "set", "remote.key"], { home, stdin: "k-123" });
  assertEquals(secret.code, 0, secret.stderr);

  await using server = await startHttpServer({
    home,
    env: { TOOLGATE_KEYCHAIN: "file", TOOLGATE_RETRY_BASE_MS: "50" },
    config: {
      tools: { overrides: { fix__echo: { circuit_threshold: 2, circuit_reset_ms: 1500 } } },
      plugins: {
        upstream_settings: { connect_timeout_ms: 60_000, restart_initial_ms: 1000, poll_ms: 200 },
        upstreams: {
          everything: upstreamConfig(npmCommand(EVERYTHING_PACKAGE, "stdio")),
          fix: upstreamConfig(fixtureCommand()),
          broken: { kind: "mcp", command: "/nonexistent/mcp-server" },
        },
      },
    },
  });
  const { url } = server;

  // Every upstream's state shows in /health; the broken one does not stop the others.
  const plugins = await health(url);
  for (const name of ["http", "memory", "everything", "fix", "kg", "remote"]) {
    assertEquals(
      plugins.get(name)?.state,
      "ready",
      `${name}: ${JSON.stringify(plugins.get(name))}`,
    );
  }
  const broken = plugins.get("broken")!;
  assertEquals([broken.state, broken.error_code], ["error", "PLUGIN_INIT_FAILED"]);
  assertEquals(plugins.get("remote")?.upstream?.transport, "http");
  const fixPid = plugins.get("fix")!.upstream!.pid!;
  assert(isAlive(fixPid));

  const names = await toolNames(url);
  for (
    const name of [
      "everything__echo",
      "everything__get-sum",
      "fix__echo",
      "kg__read_graph",
      "remote__add",
      "memory_get",
    ]
  ) {
    assert(names.includes(name), `${name} in ${names}`);
  }

  // REST calls go through the pipeline to the upstreams.
  const echo = await post(`${url}/tools/everything__echo`, { message: "hi" });
  assertEquals(echo.status, 200);
  assertEquals((await echo.json()).content, [{ type: "text", text: "Echo: hi" }]);
  const invalid = await post(`${url}/tools/everything__get-sum`, { a: 1, b: "x" });
  assertEquals(invalid.status, 400);
  const invalidBody = await invalid.json();
  assertEquals(invalidBody.error.code, "TOOL_INPUT_INVALID");
  assertEquals(invalidBody.error.details.fields[0].path, "b");
  const failed = await post(`${url}/tools/fix__fail`, { message: "disk full" });
  assertEquals(failed.status, 502);
  assertEquals((await failed.json()).error.message, "Upstream tool fix/fail failed: disk full");
  const created = await post(`${url}/tools/kg__create_entities`, {
    entities: [{ name: "toolgate", entityType: "project", observations: ["gateway"] }],
  });
  assertEquals(created.status, 200, await created.clone().text());
  const graph = await post(`${url}/tools/kg__read_graph`, {});
  assertStringIncludes(JSON.stringify(await graph.json()), "gateway");
  const sum = await post(`${url}/tools/remote__add`, { a: 40, b: 2 });
  assertEquals((await sum.json()).structuredContent, { sum: 42 });

  // MCP over Streamable HTTP sees the same tools and is told about changes.
  let restartedPid = 0;
  const mcp = new Client({ name: "e2e", version: "1.0.0" });
  let listChanged = 0;
  mcp.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    listChanged++;
  });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  try {
    assertEquals(
      (mcp.getServerCapabilities() as { tools?: { listChanged?: boolean } }).tools?.listChanged,
      true,
    );
    const listed = await mcp.listTools() as { tools: { name: string }[] };
    assert(listed.tools.some((tool) => tool.name === "everything__get-sum"));
    const mcpSum = await mcp.callTool({ name: "everything__get-sum", arguments: { a: 2, b: 3 } });
    assert(!mcpSum.isError, JSON.stringify(mcpSum));
    assertStringIncludes((mcpSum.content as Content)[0].text, "5");

    // Audit log and tool.called deliveries.
    const audit = await runCli(
      ["audit", "list", "--json", "--tool", "everything__echo", "--kind", "tool.call"],
      { home },
    );
    assertEquals(audit.code, 0, audit.stderr);
    const entries = JSON.parse(audit.stdout).entries as {
      tool: string;
      outcome: { ok: boolean };
    }[];
    assertEquals(entries.map((entry) => [entry.tool, entry.outcome.ok]), [[
      "everything__echo",
      true,
    ]]);
    await waitFor(
      () =>
        deliveries(receiver).some((e) =>
          e.type === "tool.called" && e.data.tool_name === "everything__get-sum"
        ),
      "tool.called for everything__get-sum",
    );
    const called = deliveries(receiver).find((e) =>
      e.type === "tool.called" && e.data.tool_name === "everything__echo"
    );
    assertEquals(called?.data.plugin, "everything");
    const pluginError = deliveries(receiver).find((e) =>
      e.type === "plugin.error" && e.data.plugin_name === "broken"
    );
    assertEquals([pluginError?.data.plugin_name, pluginError?.data.error_code], [
      "broken",
      "PLUGIN_INIT_FAILED",
    ]);

    // Kill the fixture upstream: fast failures open the circuit, the restart brings it back.
    Deno.kill(fixPid, "SIGKILL");
    await waitFor(
      async () => (await health(url)).get("fix")?.state === "reconnecting",
      "fix reconnecting",
    );
    for (let i = 0; i < 2; i++) {
      const down = await post(`${url}/tools/fix__echo`, { text: "x" });
      assertEquals(down.status, 502);
      assertEquals((await down.json()).error.code, "PLUGIN_REQUEST_FAILED");
    }
    const open = await post(`${url}/tools/fix__echo`, { text: "x" });
    assertEquals(open.status, 503);
    assertEquals((await open.json()).error.code, "CIRCUIT_OPEN");
    await waitFor(
      async () => (await health(url)).get("fix")?.upstream?.connection === "connected",
      "fix reconnected",
    );
    await waitFor(
      () =>
        deliveries(receiver).some((e) =>
          e.type === "circuit.closed" && e.data.tool_name === "fix__echo"
        ),
      "circuit.closed for fix__echo",
    );
    assert(
      deliveries(receiver).some((e) =>
        e.type === "circuit.opened" && e.data.tool_name === "fix__echo"
      ),
    );
    const back = await post(`${url}/tools/fix__echo`, { text: "back" });
    assertEquals(back.status, 200);
    assertEquals((await back.json()).content[0].text, "echo: back");

    // plugins list shows the running server's live state (published every second).
    const fix = await waitFor(async () => {
      const list = await runCli(["plugins", "list", "--json"], { home });
      assertEquals(list.code, 0, list.stderr);
      const row = (JSON.parse(list.stdout) as PluginJson[]).find((plugin) => plugin.name === "fix");
      return row?.upstream?.restarts === 1 ? row : undefined;
    }, "plugins list to show the restart");
    assertEquals([fix.state, fix.upstream?.restarts, fix.server?.transport], ["ready", 1, "http"]);
    restartedPid = fix.upstream!.pid!;
    assert(restartedPid !== fixPid && isAlive(restartedPid));
    assertStringIncludes(fix.last_error!, "the upstream process was killed by SIGKILL");
    assert(!isAlive(fixPid));

    // Live add, disable and remove by the CLI, while the server runs.
    const before = listChanged;
    const live = await runCli(addArgs("live", fixtureCommand()), { home });
    assertEquals(live.code, 0, live.stderr);
    await waitFor(async () => (await toolNames(url)).includes("live__echo"), "live__echo offered");
    const liveEcho = await post(`${url}/tools/live__echo`, { text: "new" });
    assertEquals((await liveEcho.json()).content[0].text, "echo: new");
    await waitFor(() => listChanged > before, "tools/list_changed over MCP HTTP");
    const livePid = (await health(url)).get("live")!.upstream!.pid!;
    assertEquals((await runCli(["plugins", "disable", "live"], { home })).code, 0);
    await waitFor(
      async () => (await health(url)).get("live")?.state === "disabled",
      "live disabled",
    );
    assert(!(await toolNames(url)).includes("live__echo"));
    await waitFor(() => !isAlive(livePid), "the disabled upstream's process to end");
    assertEquals((await runCli(["plugins", "remove", "live"], { home })).code, 0);
    await waitFor(async () => !(await health(url)).has("live"), "live removed");
  } finally {
    await mcp.close();
  }

  const stopped = await server.stop();
  assertEquals(stopped.code, 0, stopped.stderr);
  assertEquals(stopped.stdout.trim().split("\n").length, 1, stopped.stdout);
  assertStringIncludes(stopped.stderr, "[fix] fixture upstream ready on stdio");
  await waitFor(() => !isAlive(restartedPid), "the upstream processes to end with the server");
});

Deno.test("MCP stdio: fixture, everything and memory upstream tools are listed and called; an upstream's list_changed reaches the client", async () => {
  await using tmp = await tempHome();
  await writeUpstreams(tmp.home, {
    fix: upstreamConfig(fixtureCommand()),
    everything: upstreamConfig(npmCommand(EVERYTHING_PACKAGE, "stdio")),
    kg: upstreamConfig(npmCommand(MEMORY_PACKAGE), {
      MEMORY_FILE_PATH: `${tmp.home}/graph.jsonl`,
    }),
  });
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", "--cached-only", MAIN, "mcp", "start"],
    env: childEnv({ TOOLGATE_HOME: tmp.home, NO_COLOR: "1" }),
    cwd: ROOT,
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Uint8Array) => stderr += new TextDecoder().decode(chunk));
  const client = new Client({ name: "e2e-stdio", version: "1.0.0" });
  const errors: Error[] = [];
  client.onerror = (error: Error) => void errors.push(error);
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    changed++;
  });
  try {
    await client.connect(transport);
    const { tools } = await client.listTools() as { tools: { name: string }[] };
    assert(tools.some((tool) => tool.name === "fix__echo"), JSON.stringify(tools));
    const echo = await client.callTool({ name: "fix__echo", arguments: { text: "stdio" } });
    assertEquals(echo.content, [{ type: "text", text: "echo: stdio" }]);
    const everything = await client.callTool({
      name: "everything__echo",
      arguments: { message: "via stdio" },
    });
    assertEquals(everything.content, [{ type: "text", text: "Echo: via stdio" }]);
    const entities = await client.callTool({
      name: "kg__create_entities",
      arguments: { entities: [{ name: "a", entityType: "t", observations: ["seen over stdio"] }] },
    });
    assert(!entities.isError, JSON.stringify(entities));
    const graph = await client.callTool({ name: "kg__read_graph", arguments: {} });
    assertStringIncludes(JSON.stringify(graph.content), "seen over stdio");
    const bad = await client.callTool({ name: "fix__echo", arguments: {} });
    assertEquals(bad.isError, true);
    assertMatch(
      (bad.content as Content)[0].text,
      /^TOOL_INPUT_INVALID: .*text: Required property is missing/,
    );

    await client.callTool({ name: "fix__add_tool", arguments: { name: "late" } });
    await waitFor(() => changed > 0, "tools/list_changed over stdio");
    const after = await client.listTools() as { tools: { name: string }[] };
    assert(after.tools.some((tool) => tool.name === "fix__late"));
    const late = await client.callTool({ name: "fix__late", arguments: { n: 1 } });
    assertEquals((late.content as Content)[0].text, 'late: {"n":1}');
    assertEquals(errors, [], "non-JSON-RPC output on stdout");
  } finally {
    await client.close();
  }
  assertStringIncludes(stderr, "[fix] fixture upstream ready on stdio");
});

Deno.test("eras cross the gateway: a 2026 client reaches a 2025 upstream, a 2025 client a 2026 upstream", async () => {
  await using tmp = await tempHome();
  const inner = `${tmp.home}/inner`;
  await Deno.mkdir(inner);
  await writeUpstreams(tmp.home, {
    old: upstreamConfig(fixtureCommand()),
    inner: upstreamConfig(
      {
        command: Deno.execPath(),
        args: ["run", "-A", "--cached-only", MAIN, "mcp", "start"],
      },
      { TOOLGATE_HOME: inner, TOOLGATE_KEYCHAIN: "file" },
    ),
  });
  const serverParams = toolgateStdio(tmp.home);
  const modern = new ModernClient(
    { name: "modern", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  await modern.connect(new ModernStdioTransport(serverParams));
  try {
    assertEquals(modern.getNegotiatedProtocolVersion(), "2026-07-28");
    const echo = await modern.callTool({ name: "old__echo", arguments: { text: "to 2025" } });
    assertStringIncludes(JSON.stringify(echo.content), "echo: to 2025");
    await modern.callTool({ name: "inner__memory_set", arguments: { key: "k", value: "v2026" } });
  } finally {
    await modern.close();
  }
  const legacy = new Client({ name: "legacy", version: "1.0.0" });
  await legacy.connect(new StdioClientTransport(serverParams));
  try {
    const got = await legacy.callTool({ name: "inner__memory_get", arguments: { key: "k" } });
    assertStringIncludes(JSON.stringify(got.content), "v2026");
    const plugins = await runCli(["plugins", "list", "--json"], { home: tmp.home });
    const eras = Object.fromEntries(
      (JSON.parse(plugins.stdout) as PluginJson[]).filter((p) => p.upstream).map((p) => [
        p.name,
        (p.upstream as { protocol_version?: string }).protocol_version,
      ]),
    );
    assertEquals(eras, { old: "2025-11-25", inner: "2026-07-28" });
  } finally {
    await legacy.close();
  }
});

Deno.test("prompts, resources and completions of an upstream reach MCP clients of both eras as they are, and are audited", async () => {
  await using tmp = await tempHome();
  await writeUpstreams(tmp.home, {
    everything: upstreamConfig(npmCommand(EVERYTHING_PACKAGE, "stdio")),
  });
  const direct = new ModernClient({ name: "direct", version: "1.0.0" });
  const everything = npmCommand(EVERYTHING_PACKAGE, "stdio");
  await direct.connect(
    new ModernStdioTransport({ ...everything, env: childEnv(), stderr: "ignore" }),
  );
  const serverParams = toolgateStdio(tmp.home);
  const modern = new ModernClient(
    { name: "modern", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  await modern.connect(new ModernStdioTransport(serverParams));
  const legacy = new Client({ name: "legacy", version: "1.0.0" });
  try {
    // Tools: listed as the upstream lists them (title, annotations, outputSchema, icons,
    // _meta), under the gateway's name; a structured result comes back as it is.
    const gatewayTools = new Map(
      (await modern.listTools()).tools.map((tool) => [tool.name, tool]),
    );
    const upstreamTools = (await direct.listTools()).tools;
    assert(upstreamTools.some((tool) => tool.outputSchema && tool.annotations));
    // (`execution` is the 2025 tasks field, which a 2026-07-28 client does not get.)
    for (const { execution: _, ...tool } of upstreamTools) {
      assertEquals(gatewayTools.get(`everything__${tool.name}`), {
        ...tool,
        name: `everything__${tool.name}`,
      });
    }
    const structured = await modern.callTool({
      name: "everything__get-structured-content",
      arguments: { location: "New York" },
    });
    assertEquals(
      structured.structuredContent,
      (await direct.callTool({
        name: "get-structured-content",
        arguments: { location: "New York" },
      }))
        .structuredContent,
    );

    // Prompts: named <plugin>__<prompt>, with the upstream's arguments and messages.
    const { prompts } = await modern.listPrompts();
    const byName = new Map(prompts.map((prompt) => [prompt.name, prompt]));
    const upstreamPrompts = (await direct.listPrompts()).prompts;
    for (const prompt of upstreamPrompts) {
      assertEquals(byName.get(`everything__${prompt.name}`)?.arguments, prompt.arguments);
    }
    const args = { city: "Lisbon", state: "PT" };
    const viaGateway = await modern.getPrompt({ name: "everything__args-prompt", arguments: args });
    const viaDirect = await direct.getPrompt({ name: "args-prompt", arguments: args });
    assertEquals(viaGateway.messages, viaDirect.messages);

    // Resources: the upstream's URIs, listed and read (also through a template).
    const listed = (await modern.listResources()).resources.map((resource) => resource.uri);
    assertEquals(listed, (await direct.listResources()).resources.map((resource) => resource.uri));
    const templates = await modern.listResourceTemplates();
    assertEquals(
      templates.resourceTemplates.map((template) => template.uriTemplate),
      (await direct.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
    );
    const read = await modern.readResource({ uri: listed[0] });
    assertEquals(read.contents, (await direct.readResource({ uri: listed[0] })).contents);
    const dynamic = "demo://resource/dynamic/text/7";
    // Its text names the time it was made (to the second): compare without it.
    const timeless = (contents: unknown) =>
      JSON.stringify(contents).replace(/created at [^"]*/g, "created at <time>");
    assertEquals(
      timeless((await modern.readResource({ uri: dynamic })).contents),
      timeless((await direct.readResource({ uri: dynamic })).contents),
    );
    const missing = await modern.readResource({ uri: "nothing://here" }).then(
      () => undefined,
      (error: Error) => error,
    );
    assertStringIncludes(String(missing?.message), "nothing://here");

    // Completion of a prompt argument, routed to the upstream under its own prompt name.
    const completion = await modern.complete({
      ref: { type: "ref/prompt", name: "everything__completable-prompt" },
      argument: { name: "department", value: "E" },
    });
    assertEquals(
      completion.completion.values,
      (await direct.complete({
        ref: { type: "ref/prompt", name: "completable-prompt" },
        argument: { name: "department", value: "E" },
      })).completion.values,
    );

    // A 2025 client sees the same.
    await legacy.connect(new StdioClientTransport(serverParams));
    const legacyPrompt = await legacy.getPrompt({
      name: "everything__args-prompt",
      arguments: args,
    });
    assertEquals(legacyPrompt.messages, viaDirect.messages);
  } finally {
    await legacy.close();
    await modern.close();
    await direct.close();
  }
  const audit = await runCli(["audit", "list", "--json"], { home: tmp.home });
  const entries = JSON.parse(audit.stdout).entries as {
    kind: string;
    tool: string;
    outcome: { ok: boolean };
  }[];
  assertEquals(
    entries.filter((entry) => entry.kind === "prompt.get").map((entry) => entry.tool),
    ["everything__args-prompt", "everything__args-prompt"],
  );
  const reads = entries.filter((entry) => entry.kind === "resource.read");
  assertEquals(reads.map((entry) => [entry.tool, entry.outcome.ok]).slice(-1), [[
    "nothing://here",
    false,
  ]]);
  assert(reads.some((entry) => entry.tool === "demo://resource/dynamic/text/7"));
});

Deno.test("an upstream tool's progress reaches the MCP client under the client's own progress token", async () => {
  await using tmp = await tempHome();
  await writeUpstreams(tmp.home, { fix: upstreamConfig(fixtureCommand()) });
  const serverParams = toolgateStdio(tmp.home);
  for (const era of ["2026", "2025"]) {
    const updates: { progress: number; total?: number; message?: string }[] = [];
    if (era === "2026") {
      const client = new ModernClient(
        { name: "modern", version: "1.0.0" },
        { versionNegotiation: { mode: "auto" } },
      );
      await client.connect(new ModernStdioTransport(serverParams));
      try {
        await client.callTool(
          {
            name: "fix__sleep",
            arguments: { ms: 150, steps: 3 },
          },
          { onprogress: (update) => void updates.push(update) },
        );
      } finally {
        await client.close();
      }
    } else {
      const client = new Client({ name: "legacy", version: "1.0.0" });
      await client.connect(new StdioClientTransport(serverParams));
      try {
        await client.callTool(
          {
            name: "fix__sleep",
            arguments: { ms: 150, steps: 3 },
          },
          undefined,
          {
            onprogress: (update: { progress: number; total?: number; message?: string }) =>
              void updates.push(update),
          },
        );
      } finally {
        await client.close();
      }
    }
    assertEquals(
      updates.map((update) => [update.progress, update.total, update.message]),
      [[1, 3, "step 1"], [2, 3, "step 2"], [3, 3, "step 3"]],
      era,
    );
  }
});

Deno.test("an upstream tool's log messages reach the MCP caller, filtered by the caller's log level", async () => {
  await using tmp = await tempHome();
  await writeUpstreams(tmp.home, {
    conf: upstreamConfig(conformanceFixtureCommand()),
  });
  const client = new Client({ name: "legacy", version: "1.0.0" });
  const messages: { level: string; data: unknown }[] = [];
  client.setNotificationHandler(
    LoggingMessageNotificationSchema,
    (notification: { params: { level: string; data: unknown } }) => {
      messages.push({ level: notification.params.level, data: notification.params.data });
    },
  );
  await client.connect(new StdioClientTransport(toolgateStdio(tmp.home)));
  try {
    await client.setLoggingLevel("info");
    await client.callTool({ name: "conf__test_tool_with_logging", arguments: {} });
    assertEquals(messages, [
      { level: "info", data: "Tool execution started" },
      { level: "info", data: "Tool processing data" },
      { level: "info", data: "Tool execution completed" },
    ]);
    messages.length = 0;
    await client.setLoggingLevel("error");
    await client.callTool({ name: "conf__test_tool_with_logging", arguments: {} });
    assertEquals(messages, []);
  } finally {
    await client.close();
  }
});
