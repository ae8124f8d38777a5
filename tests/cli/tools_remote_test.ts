/**
 * `tools list` and `tools call` use the running HTTP server of the same data
 * directory (found through the plugin states it publishes, or `--url`)
 * instead of starting the plugins in-process, and fall back to in-process
 * when none answers or it refuses the CLI.
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { conformanceFixtureCommand } from "../plugins/_upstreams.ts";
import { startHttpServer } from "../e2e/_http_server.ts";

/** The `outcome.source` of the last audit entry: `rest` through the server, `cli` in-process. */
async function lastSource(home: string): Promise<string> {
  const listed = await runCli(["audit", "list", "--json"], { home });
  assertEquals(listed.code, 0, listed.stderr);
  return JSON.parse(listed.stdout).entries.at(-1).outcome.source;
}

function upstreamConfig() {
  const { command, args } = conformanceFixtureCommand();
  return {
    plugins: {
      upstreams: {
        one: { kind: "mcp", command, args },
        two: { kind: "mcp", command, args },
      },
    },
  };
}

Deno.test("with a server running, tools list and tools call go through it; without, in-process", async () => {
  await using tmp = await tempHome();
  const home = tmp.home;
  const server = await startHttpServer({ home, config: upstreamConfig() });
  try {
    const listed = await runCli(["tools", "list", "--json"], { home });
    assertEquals(listed.code, 0, listed.stderr);
    const names = (JSON.parse(listed.stdout) as { name: string; plugin: string }[]).map((t) =>
      t.name
    );
    assert(names.some((name) => name.startsWith("one__")), names.join(" "));
    assert(names.some((name) => name.startsWith("two__")), names.join(" "));
    const called = await runCli(
      ["tools", "call", "memory_set", "--args", '{"key": "k", "value": 1}', "--json"],
      { home },
    );
    assertEquals(called.code, 0, called.stderr);
    const result = JSON.parse(called.stdout);
    assertEquals([result.tool, result.plugin, result.output.key], ["memory_set", "memory", "k"]);
    assertEquals(await lastSource(home), "rest");
    // An upstream tool's result comes as the upstream gave it.
    const echoed = await runCli(["tools", "call", "one__test_simple_text"], { home });
    assertEquals(echoed.code, 0, echoed.stderr);
    assertEquals(JSON.parse(echoed.stdout).content[0].type, "text");
    // Errors keep their code and exit status.
    const missing = await runCli(["tools", "call", "nope"], { home });
    assertEquals(missing.code, 1);
    assertStringIncludes(missing.stderr, "toolgate: TOOL_NOT_FOUND: ");
    const bad = await runCli(["tools", "call", "memory_set", "--args", '{"key": 5}'], { home });
    assertEquals(bad.code, 2, bad.stderr);
    assertStringIncludes(bad.stderr, "TOOL_INPUT_INVALID");
  } finally {
    await server.stop();
  }
  // The server withdrew its state: the CLI calls in-process again.
  const alone = await runCli(
    ["tools", "call", "memory_get", "--args", '{"key": "k"}'],
    { home },
  );
  assertEquals(alone.code, 0, alone.stderr);
  assertEquals(await lastSource(home), "cli");
});

Deno.test("a server that needs its API token: used with TOOLGATE_API_TOKEN, else in-process with a note", async () => {
  await using tmp = await tempHome();
  const home = tmp.home;
  const token = "remote-token-0123456789";
  await using server = await startHttpServer({ home, env: { TOOLGATE_API_TOKEN: token } });
  const without = await runCli(["tools", "call", "memory_set", "--args", '{"key":"a","value":1}'], {
    home,
  });
  assertEquals(without.code, 0, without.stderr);
  assertStringIncludes(without.stderr, "needs its API token");
  assertEquals(await lastSource(home), "cli");
  const withToken = await runCli(
    ["tools", "call", "memory_set", "--args", '{"key":"b","value":2}'],
    { home, env: { TOOLGATE_API_TOKEN: token } },
  );
  assertEquals(withToken.code, 0, withToken.stderr);
  assertEquals(await lastSource(home), "rest");
  assert(server.url);
});

Deno.test("--url names the server; one that does not answer is UNAVAILABLE, exit 1", async () => {
  await using tmp = await tempHome();
  await using other = await tempHome();
  await using server = await startHttpServer({ home: other.home });
  const listed = await runCli(["tools", "list", "--url", server.url], { home: tmp.home });
  assertEquals(listed.code, 0, listed.stderr);
  assertStringIncludes(listed.stdout, "memory_set");
  const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (dead.addr as Deno.NetAddr).port;
  dead.close();
  const refused = await runCli(["tools", "list", "--url", `http://127.0.0.1:${port}`], {
    home: tmp.home,
  });
  assertEquals(refused.code, 1);
  assertStringIncludes(refused.stderr, "toolgate: UNAVAILABLE: Cannot use the server at");
  const malformed = await runCli(["tools", "list", "--url", "ftp://x"], { home: tmp.home });
  assertEquals(malformed.code, 2);
});
