import { assertEquals, assertStringIncludes } from "../_asserts.ts";
import { loadConfig } from "../../src/config/mod.ts";
import { EventBus, type EventEnvelope } from "../../src/events/mod.ts";
import { Gateway } from "../../src/gateway/mod.ts";
import {
  createKeychain,
  KEY_FILE,
  type Keychain,
  secretReaderFor,
} from "../../src/keychain/mod.ts";
import { builtinPlugins } from "../../src/plugins/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { VERSION } from "../../src/version.ts";

/** The built-in plugins hosted as the runtime hosts them: secrets from the data dir's keychain. */
async function builtinGateway(prepare?: (keychain: Keychain, home: string) => Promise<void>) {
  const home = await Deno.makeTempDir({ prefix: "toolgate-lifecycle-" });
  const env = { TOOLGATE_HOME: home, TOOLGATE_KEYCHAIN: "file" };
  const config = await loadConfig({ env, ignoreFile: true });
  const store = await openStore({ dataDir: home });
  // Set-up goes through a keychain of its own, as `toolgate keychain set` would.
  await prepare?.(createKeychain({ store, dataDir: home, env }), home);
  const keychain = createKeychain({ store, dataDir: home, env });
  const bus = new EventBus();
  const events: EventEnvelope[] = [];
  bus.subscribe((event) => void events.push(event));
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: builtinPlugins(),
    secrets: (plugin) => secretReaderFor(keychain, plugin),
    log: () => {},
  });
  return {
    gateway,
    events,
    [Symbol.asyncDispose]: async () => {
      await gateway.stop();
      store.close();
      await Deno.remove(home, { recursive: true });
    },
  };
}

function lifecycle(events: EventEnvelope[]): Record<string, unknown>[] {
  return events
    .filter((e) => e.type === "plugin.ready" || e.type === "plugin.error")
    .map((e) => ({ type: e.type, ...(e.data as Record<string, unknown>) }));
}

Deno.test("built-ins start: http and memory ready, slack not_configured without its token", async () => {
  await using gw = await builtinGateway();
  await gw.gateway.start();
  const [http, memory, slack] = lifecycle(gw.events);
  assertEquals(http, {
    type: "plugin.ready",
    plugin_name: "http",
    tool_count: 1,
    zero_config: true,
    version: VERSION,
  });
  assertEquals(memory, {
    type: "plugin.ready",
    plugin_name: "memory",
    tool_count: 4,
    zero_config: true,
    version: VERSION,
  });
  assertEquals(slack.type, "plugin.error");
  assertEquals(slack.plugin_name, "slack");
  assertEquals(slack.error_code, "PLUGIN_NOT_CONFIGURED");
  assertEquals(slack.state, "not_configured");

  await gw.gateway.announceStarted("stdio");
  const started = gw.events.find((e) => e.type === "server.started");
  assertEquals(started?.data, {
    version: VERSION,
    tool_count: 5,
    plugin_count: 2,
    transport: "stdio",
    zero_config_plugins: 2,
  });
});

Deno.test("a slack.bot_token in the keychain makes slack ready with its two tools", async () => {
  await using gw = await builtinGateway((keychain) =>
    keychain.set("slack.bot_token", "xoxb-lifecycle")
  );
  await gw.gateway.start();
  const slack = lifecycle(gw.events).find((e) => e.plugin_name === "slack");
  assertEquals(slack, {
    type: "plugin.ready",
    plugin_name: "slack",
    tool_count: 2,
    zero_config: false,
    version: VERSION,
  });
  assertEquals(
    gw.gateway.listTools().filter((t) => t.plugin === "slack").map((t) => t.name),
    ["slack_post_message", "slack_list_channels"],
  );
  assertEquals(JSON.stringify(gw.events).includes("xoxb-lifecycle"), false);
});

Deno.test("an unreadable keychain puts slack in state error while the others serve", async () => {
  await using gw = await builtinGateway(async (keychain, home) => {
    await keychain.set("slack.bot_token", "xoxb-lifecycle");
    await Deno.writeFile(`${home}/${KEY_FILE}`, new Uint8Array(3));
  });
  await gw.gateway.start();
  const slack = gw.gateway.listPlugins().find((p) => p.name === "slack")!;
  assertEquals(slack.state, "error");
  assertEquals(slack.error_code, "STORE_CORRUPT");
  assertStringIncludes(slack.error ?? "", "Plugin slack failed to initialize: Cannot ");
  assertEquals((await gw.gateway.call("memory_get", { key: "k" })).output.found, false);
});
