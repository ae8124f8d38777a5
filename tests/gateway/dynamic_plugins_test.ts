import { z } from "zod";
import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import {
  type PluginContext,
  type PluginDefinition,
  type ToolDefinition,
  toToolResult,
  type UpstreamStatus,
} from "../../src/gateway/mod.ts";
import { testGateway, testPlugin } from "./_fixtures.ts";

function tool(name: string, execute: ToolDefinition["execute"]): ToolDefinition {
  return { name, description: name, input: z.object({}), execute };
}

/** A plugin whose tools are set at run time and whose upstream state is switchable. */
function dynamicPlugin(name: string, upstream: { connection: UpstreamStatus["connection"] }) {
  const state = { failing: false, context: undefined as PluginContext | undefined, disposed: 0 };
  const definition: PluginDefinition = {
    name,
    version: "1.0.0",
    zeroConfig: true,
    tools: [],
    initialize(context) {
      state.context = context;
      context.setTools([
        tool(
          `${name}__a`,
          () =>
            state.failing
              ? Promise.reject(new GatewayError("PLUGIN_REQUEST_FAILED", "Upstream down: gone"))
              : Promise.resolve({ ok: true }),
        ),
      ]);
    },
    dispose() {
      state.disposed++;
    },
    upstreamStatus: () => ({
      kind: "mcp",
      transport: "stdio",
      source: "cli",
      connection: upstream.connection,
      restarts: 0,
      ...(upstream.connection === "reconnecting" ? { last_error: "process exited" } : {}),
    }),
  };
  return { definition, state };
}

Deno.test("addPlugin() hosts a plugin while serving: plugin.ready, its tools, a tool-list change", async () => {
  await using t = await testGateway();
  let changes = 0;
  t.gateway.onToolsChanged(() => changes++);
  t.events.length = 0;
  const { definition } = dynamicPlugin("up", { connection: "connected" });
  const status = await t.gateway.addPlugin(definition);
  assertEquals([status.state, status.tool_count], ["ready", 1]);
  assertEquals(changes, 1);
  assertEquals(t.events.map((e) => e.type), ["plugin.ready"]);
  assertEquals((await t.gateway.call("up__a", {})).output, { ok: true });
  await assertRejects(() => t.gateway.addPlugin(definition), GatewayError, "a plugin of that name");
});

Deno.test("removePlugin() withdraws the tools, disposes the plugin and tells listeners", async () => {
  await using t = await testGateway();
  const { definition, state } = dynamicPlugin("up", { connection: "connected" });
  await t.gateway.addPlugin(definition);
  let changes = 0;
  t.gateway.onToolsChanged(() => changes++);
  assertEquals(await t.gateway.removePlugin("up"), true);
  assertEquals([t.gateway.hasTool("up__a"), changes, state.disposed], [false, 1, 1]);
  assertEquals(t.gateway.listPlugins().map((p) => p.name), ["test"]);
  assertEquals(await t.gateway.removePlugin("up"), false);
});

Deno.test("an open circuit survives setTools() re-registering the same tool", async () => {
  await using t = await testGateway({
    file: { tools: { circuit_threshold: 1, circuit_reset_ms: 60_000 } },
  });
  const { definition, state } = dynamicPlugin("up", { connection: "connected" });
  await t.gateway.addPlugin(definition);
  state.failing = true;
  await assertRejects(() => t.gateway.call("up__a", {}), GatewayError, "Upstream down");
  state.context!.setTools([tool("up__a", () => Promise.resolve({ ok: true }))]);
  const error = await assertRejects(() => t.gateway.call("up__a", {}), GatewayError);
  assertEquals((error as GatewayError).code, "CIRCUIT_OPEN");
  assertEquals(t.gateway.openCircuits().map((c) => c.tool_name), ["up__a"]);
});

Deno.test("a ready plugin whose upstream is reconnecting is listed as reconnecting with its last error", async () => {
  const upstream = { connection: "connected" as UpstreamStatus["connection"] };
  await using t = await testGateway({
    plugins: [testPlugin(), dynamicPlugin("up", upstream).definition],
  });
  assertEquals(t.gateway.listPlugins()[1].state, "ready");
  upstream.connection = "reconnecting";
  const status = t.gateway.listPlugins()[1];
  assertEquals([status.state, status.last_error], ["reconnecting", "process exited"]);
  assertEquals(status.upstream?.connection, "reconnecting");
});

Deno.test("a plugin marked disabled is hosted with state disabled and not initialized", async () => {
  const { definition, state } = dynamicPlugin("up", { connection: "closed" });
  await using t = await testGateway({ plugins: [{ ...definition, disabled: true }] });
  assertEquals(t.gateway.listPlugins()[0].state, "disabled");
  assert(state.context === undefined);
  assertEquals(t.events.length, 0);
});

Deno.test("toToolResult() passes the content of raw results through", () => {
  const result = toToolResult({
    tool: "up__a",
    plugin: "up",
    output: { content: [{ type: "text", text: "hi" }], structuredContent: { n: 1 } },
    latency_ms: 1,
    rawResult: true,
  });
  assertEquals(result, { content: [{ type: "text", text: "hi" }], structuredContent: { n: 1 } });
});
