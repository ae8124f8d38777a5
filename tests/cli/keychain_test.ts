import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { createKeychain } from "../../src/keychain/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { printed, toolgate } from "./_cli.ts";

const SECRET = "xoxb-cli-canary-5150";

async function storedValue(home: string, name: string): Promise<string | undefined> {
  const store = await openStore({ dataDir: home });
  try {
    return await createKeychain({ store, dataDir: home, env: { TOOLGATE_KEYCHAIN: "file" } })
      .get(name);
  } finally {
    store.close();
  }
}

Deno.test("keychain set reads stdin, list shows names only, delete removes the secret", async () => {
  await using tmp = await tempHome();
  const set = await toolgate(["keychain", "set", "slack.bot_token"], tmp.home, {
    stdin: `${SECRET}\n`,
  });
  assertEquals(set.code, 0, set.stderr);
  assertEquals(set.stdout, "Stored slack.bot_token (backend: file)\n");
  assert(!printed(set).includes(SECRET));
  assertEquals(await storedValue(tmp.home, "slack.bot_token"), SECRET, "one newline stripped");

  const json = await toolgate(["keychain", "list", "--json"], tmp.home);
  assertEquals(json.code, 0, json.stderr);
  const entries = JSON.parse(json.stdout);
  assertEquals(entries.map((e: { name: string; backend: string }) => [e.name, e.backend]), [
    ["slack.bot_token", "file"],
  ]);
  const human = await toolgate(["keychain", "list"], tmp.home);
  assertStringIncludes(human.stdout, "slack.bot_token");
  assert(!printed(json).includes(SECRET) && !printed(human).includes(SECRET));

  const removed = await toolgate(["keychain", "delete", "slack.bot_token"], tmp.home);
  assertEquals(removed.code, 0, removed.stderr);
  assertEquals(removed.stdout, "Deleted slack.bot_token\n");
  const again = await toolgate(["keychain", "delete", "slack.bot_token"], tmp.home);
  assertEquals(again.code, 1);
  assertEquals(
    again.stderr,
    "toolgate: NOT_FOUND: No secret named slack.bot_token: see toolgate keychain list\n",
  );
  assertEquals(JSON.parse((await toolgate(["keychain", "list", "--json"], tmp.home)).stdout), []);
});

Deno.test("keychain set strips exactly one trailing newline and keeps inner ones", async () => {
  await using tmp = await tempHome();
  const set = await toolgate(["keychain", "set", "github.key"], tmp.home, {
    stdin: "line one\nline two\n\n",
  });
  assertEquals(set.code, 0, set.stderr);
  assertEquals(await storedValue(tmp.home, "github.key"), "line one\nline two\n");
  assertStringIncludes(set.stderr, "warning: no plugin named github is installed");
});

Deno.test("keychain set rejects empty stdin and bad names with exit 2", async () => {
  await using tmp = await tempHome();
  for (const stdin of ["", "\n"]) {
    const run = await toolgate(["keychain", "set", "slack.bot_token"], tmp.home, { stdin });
    assertEquals(run.code, 2);
    assertStringIncludes(
      run.stderr,
      "toolgate: USAGE: Invalid value for slack.bot_token: stdin was empty",
    );
  }
  const bad = await toolgate(["keychain", "set", "Slack"], tmp.home, { stdin: "x" });
  assertEquals(bad.code, 2);
  assertStringIncludes(
    bad.stderr,
    'toolgate: USAGE: Invalid secret name "Slack": expected <plugin>.<key>',
  );
  const missing = await toolgate(["keychain", "set"], tmp.home, { stdin: "x" });
  assertEquals(missing.code, 2);
  assertStringIncludes(missing.stderr, "missing required argument 'name'");
  assertEquals(JSON.parse((await toolgate(["keychain", "list", "--json"], tmp.home)).stdout), []);
});
