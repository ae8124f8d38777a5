import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { hashApiKey } from "../../src/auth/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { printed, toolgate } from "./_cli.ts";

/** Every byte of the data directory's files, as Latin-1 text. */
async function dataBytes(home: string): Promise<string> {
  let text = "";
  for await (const entry of Deno.readDir(home)) {
    if (entry.isFile) {
      text += new TextDecoder("latin1").decode(await Deno.readFile(`${home}/${entry.name}`));
    }
  }
  return text;
}

Deno.test("keys create prints the key once and stores its hash only; list never shows it; revoke removes it", async () => {
  await using tmp = await tempHome();
  const server = await toolgate(["servers", "create", "team-a", "--tools", "memory_*"], tmp.home);
  assertEquals(server.code, 0, server.stderr);
  const created = await toolgate(
    [
      "keys",
      "create",
      "--name",
      "ci",
      "--tools",
      "memory_*, http_request",
      "--rate",
      "10/s",
      "--expires",
      "30d",
      "--server",
      "team-a",
    ],
    tmp.home,
  );
  assertEquals(created.code, 0, created.stderr);
  assertMatch(created.stdout, /^tg_[A-Za-z0-9_-]{43}\n$/);
  const key = created.stdout.trim();
  assertStringIncludes(created.stderr, "shown this once");
  assertStringIncludes(created.stderr, "memory_*, http_request");

  const store = await openStore({ dataDir: tmp.home });
  try {
    const record = await store.apiKeys.getByName("ci");
    assertEquals(record?.hash, hashApiKey(key));
    assertEquals(record?.tools, ["memory_*", "http_request"]);
    assertEquals(record?.rate, "10/s");
    assertEquals(record?.server, "team-a");
    assert(Date.parse(record!.expires_at!) > Date.now() + 29 * 86_400_000);
  } finally {
    await store.close();
  }
  assert(!(await dataBytes(tmp.home)).includes(key), "the key is not stored");

  const json = await toolgate(["keys", "list", "--json"], tmp.home);
  assertEquals(json.code, 0, json.stderr);
  const listed = JSON.parse(json.stdout);
  assertEquals(listed.length, 1);
  assertEquals(listed[0].name, "ci");
  assertEquals(listed[0].expired, false);
  assertEquals(listed[0].last_used_at, null);
  assertEquals(listed[0].hash, undefined);
  const human = await toolgate(["keys", "list"], tmp.home);
  assertStringIncludes(human.stdout, "NAME");
  assertStringIncludes(human.stdout, `${key.slice(0, 9)}…`);
  for (const run of [json, human]) {
    assert(!printed(run).includes(key) && !printed(run).includes(hashApiKey(key)));
  }

  const again = await toolgate(["keys", "create", "--name", "ci"], tmp.home);
  assertEquals(again.code, 1);
  assertStringIncludes(again.stderr, "An API key named ci exists");

  const revoked = await toolgate(["keys", "revoke", "ci"], tmp.home);
  assertEquals(revoked.code, 0, revoked.stderr);
  assertStringIncludes(revoked.stdout, "Revoked API key ci");
  const empty = await toolgate(["keys", "list"], tmp.home);
  assertStringIncludes(empty.stdout, "No API keys");
  const gone = await toolgate(["keys", "revoke", "ci"], tmp.home);
  assertEquals(gone.code, 1);
  assertStringIncludes(gone.stderr, 'No API key "ci"');
});

Deno.test("keys create refuses bad input with exit 2 naming the flag, and stores nothing", async () => {
  await using tmp = await tempHome();
  const cases: [string[], string][] = [
    [["--name", "bad name"], "Invalid --name"],
    [["--name", "ci", "--tools", "memory_*,rm -rf"], "Invalid --tools pattern"],
    [["--name", "ci", "--tools", " , "], "Invalid --tools"],
    [["--name", "ci", "--rate", "10/fortnight"], "Invalid --rate"],
    [["--name", "ci", "--rate", "0/s"], "Invalid --rate"],
    [["--name", "ci", "--expires", "yesterday"], "Invalid --expires"],
    [["--name", "ci", "--expires", "2001-01-01T00:00:00Z"], "Invalid --expires"],
    [["--name", "ci", "--server", "a/b"], "Invalid --server"],
    [["--name", "ci", "--server", "nowhere"], "no virtual server of that name"],
  ];
  for (const [args, message] of cases) {
    const run = await toolgate(["keys", "create", ...args], tmp.home);
    assertEquals(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
    assertStringIncludes(run.stderr, message);
    assertEquals(run.stdout, "");
  }
  const listed = await toolgate(["keys", "list", "--json"], tmp.home);
  assertEquals(JSON.parse(listed.stdout), []);
});

Deno.test("keys create --json shows the key once with its record; audit list --caller filters", async () => {
  await using tmp = await tempHome();
  const created = await toolgate(["keys", "create", "--name", "agent", "--json"], tmp.home);
  assertEquals(created.code, 0, created.stderr);
  const body = JSON.parse(created.stdout);
  assertMatch(body.key, /^tg_/);
  assertEquals(body.name, "agent");
  assertEquals(body.tools, null);
  assertEquals(body.hash, undefined);
  const shown = await toolgate(["keys", "show", body.id], tmp.home);
  assertEquals(JSON.parse(shown.stdout).name, "agent");
  assert(!shown.stdout.includes(body.key));

  const call = await toolgate(
    ["tools", "call", "memory_set", "--args", '{"key":"k","value":1}'],
    tmp.home,
  );
  assertEquals(call.code, 0, call.stderr);
  const local = await toolgate(["audit", "list", "--caller", "local", "--json"], tmp.home);
  assertEquals(local.code, 0, local.stderr);
  const entries = JSON.parse(local.stdout).entries;
  assertEquals(entries.length, 1);
  assertEquals(entries[0].caller, { kind: "local" });
  const none = await toolgate(["audit", "list", "--caller", "agent", "--json"], tmp.home);
  assertEquals(JSON.parse(none.stdout).entries, []);
  const table = await toolgate(["audit", "list"], tmp.home);
  assertStringIncludes(table.stdout, "CALLER");
  const bad = await toolgate(["audit", "list", "--caller", " "], tmp.home);
  assertEquals(bad.code, 2);
  assertStringIncludes(bad.stderr, "Invalid --caller");
});
