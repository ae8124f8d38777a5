import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { httpPlugin, memoryPlugin, slackPlugin } from "../../src/plugins/mod.ts";
import { startFakeSlack } from "./_fake_slack.ts";
import { closedPort, expectCode, pluginGateway } from "./_gateway.ts";

const TOKEN = "xoxb-test-0123456789-abcdef";

function slackGateway(url: string, token: string | null = TOKEN) {
  return pluginGateway([httpPlugin(), memoryPlugin(), slackPlugin()], {
    file: { plugins: { slack: { api_base_url: url } } },
    secrets: token === null ? {} : { slack: { bot_token: token } },
  });
}

/** Everything the gateway said: events and logs. */
function allText(gw: { events: unknown[]; logs: string[] }): string {
  return JSON.stringify(gw.events) + gw.logs.join("\n");
}

Deno.test("without slack.bot_token the plugin is not_configured and the others serve", async () => {
  await using gw = await slackGateway("http://127.0.0.1:9/api", null);
  const states = Object.fromEntries(gw.gateway.listPlugins().map((p) => [p.name, p.state]));
  assertEquals(states, { http: "ready", memory: "ready", slack: "not_configured" });
  const slack = gw.gateway.listPlugins().find((p) => p.name === "slack")!;
  assertEquals(slack.error_code, "PLUGIN_NOT_CONFIGURED");
  assertEquals(slack.zero_config, false);
  const error = gw.events.find((e) => e.type === "plugin.error");
  assertEquals(error?.data.plugin_name, "slack");
  assertEquals(error?.data.error_code, "PLUGIN_NOT_CONFIGURED");
  assertEquals(error?.data.state, "not_configured");
  assert(!gw.gateway.hasTool("slack_post_message"));
  // Its tools answer with the plugin's error and what to do, not as unknown tools.
  const unavailable = await expectCode(
    () => gw.gateway.call("slack_post_message", { channel: "C1", text: "x" }),
    "PLUGIN_NOT_CONFIGURED",
  );
  assertEquals(
    unavailable.message,
    "Tool slack_post_message is unavailable: Plugin slack is not configured: slack.bot_token " +
      "is not set; store it with toolgate keychain set slack.bot_token " +
      "(a running server needs a restart to pick it up)",
  );
  assertEquals(
    slack.error,
    "Plugin slack is not configured: slack.bot_token is not set; " +
      "store it with toolgate keychain set slack.bot_token",
  );
  assertEquals((await gw.gateway.call("memory_get", { key: "k" })).output.found, false);
});

Deno.test("slack_post_message posts JSON with the bearer token and returns channel and ts", async () => {
  await using slack = startFakeSlack(TOKEN);
  await using gw = await slackGateway(slack.url);
  const ready = gw.events.find((e) => e.type === "plugin.ready" && e.data.plugin_name === "slack");
  assertEquals(ready?.data.tool_count, 2);
  assertEquals(ready?.data.zero_config, false);

  const { output } = await gw.gateway.call("slack_post_message", {
    channel: "C001",
    text: "Deployed v1.2",
    thread_ts: "1699999999.000200",
  });
  assertEquals(output, {
    ok: true,
    channel: "C001",
    ts: "1700000000.000100",
    thread_ts: "1699999999.000200",
  });
  assertEquals(slack.requests.length, 1);
  const request = slack.requests[0];
  assertEquals(request.method, "POST");
  assertEquals(request.path, "/api/chat.postMessage");
  assertEquals(request.authorization, `Bearer ${TOKEN}`);
  assertStringIncludes(request.contentType ?? "", "application/json");
  assertEquals(request.body, {
    channel: "C001",
    text: "Deployed v1.2",
    thread_ts: "1699999999.000200",
  });
  assert(!allText(gw).includes(TOKEN), "the token leaked into events or logs");
});

Deno.test("slack_list_channels pages with limit and cursor", async () => {
  await using slack = startFakeSlack(TOKEN);
  await using gw = await slackGateway(slack.url);
  const first = await gw.gateway.call("slack_list_channels", { limit: 2 });
  assertEquals(first.output.count, 2);
  assertEquals(first.output.next_cursor, "2");
  assertEquals((first.output.channels as { name: string }[]).map((c) => c.name), [
    "general",
    "random",
  ]);
  assertEquals((first.output.channels as unknown[])[0], {
    id: "C001",
    name: "general",
    is_private: false,
    is_archived: false,
    is_member: true,
    num_members: 12,
    topic: "general topic",
    purpose: "",
  });
  const second = await gw.gateway.call("slack_list_channels", { limit: 2, cursor: "2" });
  assertEquals((second.output.channels as { id: string }[]).map((c) => c.id), ["C003"]);
  assertEquals(second.output.next_cursor, null);
  assertEquals(slack.requests[0].method, "GET");
  assertEquals(slack.requests[0].query, {
    limit: "2",
    types: "public_channel",
    exclude_archived: "true",
  });
  assertEquals(slack.requests[1].query.cursor, "2");
});

Deno.test("Slack's ok:false answers fail with PLUGIN_REQUEST_FAILED carrying Slack's error", async () => {
  await using slack = startFakeSlack(TOKEN);
  await using gw = await slackGateway(slack.url);
  const notFound = await expectCode(
    () => gw.gateway.call("slack_post_message", { channel: "C404", text: "hi" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(
    notFound.message,
    "Slack chat.postMessage failed: channel_not_found (no such channel, or the bot cannot see it)",
  );
  assertEquals((notFound.details as Record<string, unknown>).slack_error, "channel_not_found");
  const failed = gw.events.find((e) => e.type === "tool.failed");
  assertEquals(failed?.data.error_code, "PLUGIN_REQUEST_FAILED");
  assertEquals(failed?.data.plugin, "slack");

  const echoed = await expectCode(
    () => gw.gateway.call("slack_post_message", { channel: "CECHO", text: "hi" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(echoed.message, "Slack chat.postMessage failed: weird_error_[REDACTED]");
  assert(!allText(gw).includes(TOKEN), "the token leaked into events or logs");
});

Deno.test("a rejected token fails with invalid_auth and never shows the token", async () => {
  await using slack = startFakeSlack(TOKEN);
  await using gw = await slackGateway(slack.url, "xoxb-wrong-token-999");
  const error = await expectCode(
    () => gw.gateway.call("slack_list_channels", {}),
    "PLUGIN_REQUEST_FAILED",
  );
  assertStringIncludes(error.message, "Slack conversations.list failed: invalid_auth (");
  assertStringIncludes(error.message, "toolgate keychain set slack.bot_token");
  assert(!JSON.stringify(error.toJSON()).includes("xoxb-wrong-token-999"));
  assert(!allText(gw).includes("xoxb-wrong-token-999"));
});

Deno.test("HTTP errors, rate limits and unreachable Slack fail with PLUGIN_REQUEST_FAILED", async () => {
  await using slack = startFakeSlack(TOKEN);
  await using gw = await slackGateway(slack.url);
  const http = await expectCode(
    () => gw.gateway.call("slack_post_message", { channel: "C500", text: "hi" }),
    "PLUGIN_REQUEST_FAILED",
  );
  const host = new URL(slack.url).host;
  assertEquals(
    http.message,
    `Slack chat.postMessage failed: HTTP 500 from ${host} with a non-JSON body`,
  );

  const limited = await expectCode(
    () => gw.gateway.call("slack_post_message", { channel: "C429", text: "hi" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(
    limited.message,
    "Slack chat.postMessage failed: ratelimited: Slack is rate limiting this app; retry after 30 s",
  );
  assertEquals((limited.details as Record<string, unknown>).retry_after_s, 30);

  const port = closedPort();
  await using down = await slackGateway(`http://127.0.0.1:${port}/api`);
  const unreachable = await expectCode(
    () => down.gateway.call("slack_post_message", { channel: "C001", text: "hi" }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(
    unreachable.message,
    `Slack chat.postMessage failed: cannot reach 127.0.0.1:${port}: connection refused`,
  );
});

Deno.test("slack tools reject bad arguments with TOOL_INPUT_INVALID", async () => {
  await using slack = startFakeSlack(TOKEN);
  await using gw = await slackGateway(slack.url);
  const missing = await expectCode(
    () => gw.gateway.call("slack_post_message", { channel: "C001" }),
    "TOOL_INPUT_INVALID",
  );
  assertEquals(
    missing.message,
    "Invalid arguments for slack_post_message: text: Invalid input: expected string, received undefined",
  );
  const badTs = await expectCode(
    () => gw.gateway.call("slack_post_message", { channel: "C1", text: "x", thread_ts: "abc" }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(badTs.message, "thread_ts: Invalid thread_ts");
  await expectCode(
    () => gw.gateway.call("slack_list_channels", { limit: 5000 }),
    "TOOL_INPUT_INVALID",
  );
  assertEquals(slack.requests.length, 0, "nothing reached Slack");
});

Deno.test("the token is read on every call, so a new token takes effect at once", async () => {
  await using slack = startFakeSlack(TOKEN);
  const secrets = { bot_token: "xoxb-old" };
  await using gw = await pluginGateway([slackPlugin()], {
    file: { plugins: { slack: { api_base_url: slack.url } } },
    secrets: { slack: secrets },
  });
  await expectCode(() => gw.gateway.call("slack_list_channels", {}), "PLUGIN_REQUEST_FAILED");
  secrets.bot_token = TOKEN;
  assertEquals((await gw.gateway.call("slack_list_channels", {})).output.count, 3);
});
