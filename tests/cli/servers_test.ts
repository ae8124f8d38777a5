import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { toolgate } from "./_cli.ts";

Deno.test("servers create, list, show, update and remove a virtual server in the store", async () => {
  await using tmp = await tempHome();
  const created = await toolgate(
    ["servers", "create", "team-a", "--tools", "memory_*, github__*", "--description", "agents"],
    tmp.home,
  );
  assertEquals(created.code, 0, created.stderr);
  assertStringIncludes(created.stdout, "Created virtual server team-a at /mcp/team-a");
  const again = await toolgate(["servers", "create", "team-a", "--tools", "*"], tmp.home);
  assertEquals(again.code, 1);
  assertStringIncludes(again.stderr, "A virtual server named team-a exists");

  const listed = await toolgate(["servers", "list"], tmp.home);
  assertEquals(listed.code, 0, listed.stderr);
  assertStringIncludes(listed.stdout, "NAME");
  assertStringIncludes(listed.stdout, "memory_*,github__*");
  const shown = JSON.parse((await toolgate(["servers", "show", "team-a"], tmp.home)).stdout);
  assertEquals(shown.name, "team-a");
  assertEquals(shown.source, "store");
  assertEquals(shown.tools, ["memory_*", "github__*"]);
  assertEquals(shown.description, "agents");

  const updated = await toolgate(
    ["servers", "update", "team-a", "--tools", "http_request", "--description", "", "--json"],
    tmp.home,
  );
  assertEquals(updated.code, 0, updated.stderr);
  const record = JSON.parse(updated.stdout);
  assertEquals(record.tools, ["http_request"]);
  assertEquals(record.description, null);
  assert(record.updated_at >= record.created_at);

  const removed = await toolgate(["servers", "remove", "team-a"], tmp.home);
  assertEquals(removed.code, 0, removed.stderr);
  assertEquals(JSON.parse((await toolgate(["servers", "list", "--json"], tmp.home)).stdout), []);
  const missing = await toolgate(["servers", "remove", "team-a"], tmp.home);
  assertEquals(missing.code, 1);
  assertStringIncludes(missing.stderr, "No virtual server named team-a");
});

Deno.test("servers refuses bad input with exit 2 naming the flag, and stores nothing", async () => {
  await using tmp = await tempHome();
  const cases: [string[], string][] = [
    [["create", "team/a", "--tools", "*"], "Invalid name"],
    [["create", "team-a", "--tools", "rm -rf"], "Invalid --tools pattern"],
    [["create", "team-a", "--tools", " , "], "Invalid --tools"],
    [["create", "team-a", "--tools", "*", "--description", "x".repeat(1025)], "--description"],
    [["update", "team-a"], "Nothing to update"],
  ];
  for (const [args, message] of cases) {
    const run = await toolgate(["servers", ...args], tmp.home);
    assertEquals(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
    assertStringIncludes(run.stderr, message);
  }
  assertEquals(JSON.parse((await toolgate(["servers", "list", "--json"], tmp.home)).stdout), []);
});

Deno.test("servers: a name config defines is config's (create, update and remove refused); bad config names its key", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ servers: { ops: { tools: ["http_request"], description: "from config" } } }),
  );
  for (const args of [["create", "ops", "--tools", "*"], ["update", "ops", "--tools", "*"]]) {
    const run = await toolgate(["servers", ...args], tmp.home);
    assertEquals(run.code, 1, run.stderr);
    assertStringIncludes(run.stderr, "it is defined in config (servers.ops)");
  }
  const removed = await toolgate(["servers", "remove", "ops"], tmp.home);
  assertEquals(removed.code, 1);
  assertStringIncludes(removed.stderr, "defined in config");
  const listed = JSON.parse((await toolgate(["servers", "list", "--json"], tmp.home)).stdout);
  assertEquals(listed, [{
    name: "ops",
    source: "config",
    tools: ["http_request"],
    description: "from config",
  }]);

  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ servers: { "a/b": { tools: ["*"] }, ok: { tools: [] } } }),
  );
  const bad = await toolgate(["servers", "list"], tmp.home);
  assertEquals(bad.code, 1, bad.stderr);
  assertStringIncludes(bad.stderr, "servers.a/b");
  assertStringIncludes(bad.stderr, "servers.ok.tools");
});
