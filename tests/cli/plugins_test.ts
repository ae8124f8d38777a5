import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { startFakeSlack } from "../plugins/_fake_slack.ts";
import { printed, toolgate } from "./_cli.ts";

const TOKEN = "xoxb-e2e-7d41c0ffee";

interface PluginRow {
  name: string;
  version: string;
  state: string;
  tool_count: number;
  zero_config: boolean;
  error?: string;
  error_code?: string;
}

async function plugins(home: string, env: Record<string, string> = {}): Promise<PluginRow[]> {
  const run = await toolgate(["plugins", "list", "--json"], home, { env });
  assertEquals(run.code, 0, run.stderr);
  return JSON.parse(run.stdout);
}

Deno.test("without a Slack token, plugins list shows slack not_configured while http and memory serve", async () => {
  await using tmp = await tempHome();
  const list = await plugins(tmp.home);
  assertEquals(list.map((p) => [p.name, p.state, p.tool_count, p.zero_config]), [
    ["http", "ready", 1, true],
    ["memory", "ready", 4, true],
    ["slack", "not_configured", 0, false],
  ]);
  assertEquals(list[2].error_code, "PLUGIN_NOT_CONFIGURED");
  assert(list.every((p) => /^\d+\.\d+\.\d+$/.test(p.version)));

  const human = await toolgate(["plugins", "list"], tmp.home);
  assertEquals(human.code, 0, human.stderr);
  assertStringIncludes(human.stdout, "NAME    VERSION  STATE");
  assertStringIncludes(human.stdout, "not_configured");
  assertStringIncludes(human.stdout, "PLUGIN_NOT_CONFIGURED: Plugin slack is not configured");

  const call = await toolgate(
    ["tools", "call", "slack_post_message", "--args", '{"channel": "C001", "text": "hi"}'],
    tmp.home,
  );
  assertEquals(call.code, 1);
  assertStringIncludes(
    call.stderr,
    "toolgate: PLUGIN_NOT_CONFIGURED: Tool slack_post_message is unavailable: Plugin slack is not configured",
  );
  assertStringIncludes(
    call.stderr,
    "Plugin slack is not configured: slack.bot_token is not set; store it with toolgate keychain set slack.bot_token (a running server needs a restart to pick it up)",
  );

  const memory = await toolgate(
    ["tools", "call", "memory_get", "--args", '{"key": "a"}'],
    tmp.home,
  );
  assertEquals(memory.code, 0, memory.stderr);
});

Deno.test("plugins disabled in config.json are listed as disabled with no tools", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ plugins: { disabled: ["http"] } }),
  );
  const list = await plugins(tmp.home);
  assertEquals(list[0].name, "http");
  assertEquals(list[0].state, "disabled");
  assertEquals(list[0].tool_count, 0);
  const call = await toolgate(
    ["tools", "call", "http_request", "--args", '{"url": "http://127.0.0.1:9/"}'],
    tmp.home,
  );
  assertEquals(call.code, 1);
  assertStringIncludes(
    call.stderr,
    "plugin http is disabled in config (remove it from plugins.disabled)",
  );
});

Deno.test("a bot token stored with keychain set via stdin is used by slack_post_message and never printed", async () => {
  await using tmp = await tempHome();
  await using slack = startFakeSlack(TOKEN);
  const env = { TOOLGATE_SLACK_API_URL: slack.url };
  const set = await toolgate(["keychain", "set", "slack.bot_token"], tmp.home, {
    stdin: `${TOKEN}\n`,
    env,
  });
  assertEquals(set.code, 0, set.stderr);

  const list = await plugins(tmp.home, env);
  assertEquals(list.find((p) => p.name === "slack")?.state, "ready");
  assertEquals(list.find((p) => p.name === "slack")?.tool_count, 2);

  const post = await toolgate(
    ["tools", "call", "slack_post_message", "--args", '{"channel": "C001", "text": "Deployed"}'],
    tmp.home,
    { env },
  );
  assertEquals(post.code, 0, post.stderr);
  assertEquals(JSON.parse(post.stdout), { ok: true, channel: "C001", ts: "1700000000.000100" });
  const request = slack.requests.at(-1)!;
  assertEquals(request.path, "/api/chat.postMessage");
  assertEquals(request.authorization, `Bearer ${TOKEN}`);
  assertEquals(request.body, { channel: "C001", text: "Deployed" });

  const notFound = await toolgate(
    ["tools", "call", "slack_post_message", "--args", '{"channel": "C404", "text": "x"}', "--json"],
    tmp.home,
    { env },
  );
  assertEquals(notFound.code, 1);
  assertStringIncludes(
    notFound.stderr,
    "toolgate: PLUGIN_REQUEST_FAILED: Slack chat.postMessage failed: channel_not_found",
  );
  assertEquals(JSON.parse(notFound.stdout).error.details.slack_error, "channel_not_found");

  const channels = await toolgate(["tools", "call", "slack_list_channels"], tmp.home, { env });
  assertEquals(channels.code, 0, channels.stderr);
  assertEquals(JSON.parse(channels.stdout).count, 3);

  for (const run of [set, post, notFound, channels]) {
    assert(!printed(run).includes(TOKEN), "the token was printed");
  }
});

Deno.test("a rejected Slack token fails with invalid_auth; TOOLGATE_SECRET_SLACK_BOT_TOKEN overrides", async () => {
  await using tmp = await tempHome();
  await using slack = startFakeSlack(TOKEN);
  const env = { TOOLGATE_SLACK_API_URL: slack.url };
  const wrong = "xoxb-wrong-31337";
  await toolgate(["keychain", "set", "slack.bot_token"], tmp.home, { stdin: wrong, env });
  const rejected = await toolgate(
    ["tools", "call", "slack_post_message", "--args", '{"channel": "C001", "text": "x"}'],
    tmp.home,
    { env },
  );
  assertEquals(rejected.code, 1);
  assertStringIncludes(
    rejected.stderr,
    "toolgate: PLUGIN_REQUEST_FAILED: Slack chat.postMessage failed: invalid_auth (",
  );
  assert(!printed(rejected).includes(wrong));

  const overridden = await toolgate(
    ["tools", "call", "slack_post_message", "--args", '{"channel": "C001", "text": "x"}'],
    tmp.home,
    { env: { ...env, TOOLGATE_SECRET_SLACK_BOT_TOKEN: TOKEN } },
  );
  assertEquals(overridden.code, 0, overridden.stderr);
  assertEquals(slack.requests.at(-1)?.authorization, `Bearer ${TOKEN}`);
  assert(!printed(overridden).includes(TOKEN));
});
