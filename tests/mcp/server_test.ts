import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import type { Gateway } from "../../src/gateway/mod.ts";
import { createMcpServer } from "../../src/mcp/server.ts";
import { testGateway, unconfiguredPlugin } from "../gateway/_fixtures.ts";

/** A promise with its settle functions, for a gateway still starting. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

async function connect(gateway: Gateway | Promise<Gateway>) {
  const { server, detach } = createMcpServer(gateway);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "test", version: "1" });
  await client.connect(clientSide); // initialize
  return {
    client,
    async [Symbol.asyncDispose]() {
      detach();
      await client.close();
      await server.close();
    },
  };
}

async function settles(promise: Promise<unknown>, ms = 50): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = await Promise.race([
    promise.then(() => true, () => true),
    new Promise<false>((resolve) => timer = setTimeout(() => resolve(false), ms)),
  ]);
  clearTimeout(timer);
  return done;
}

Deno.test("initialize is answered while the gateway starts; tool requests wait for it", async () => {
  await using t = await testGateway();
  const starting = deferred<Gateway>();
  await using session = await connect(starting.promise); // resolved: initialize needs no gateway
  assertEquals(session.client.getServerVersion()?.name, "toolgate");
  const listing = session.client.listTools();
  assertEquals(await settles(listing), false, "tools/list answered before the gateway started");
  starting.resolve(t.gateway);
  const { tools } = await listing;
  assert(tools.length > 0);
  assertEquals(
    tools.map((tool: { name: string }) => tool.name),
    t.gateway.listTools().map((tool) => tool.name),
  );
});

Deno.test("when the gateway fails to start, tool requests get the reason as a JSON-RPC error", async () => {
  const starting = deferred<Gateway>();
  await using session = await connect(starting.promise);
  const listing = session.client.listTools();
  starting.reject(new GatewayError("STORE_CORRUPT", "Cannot open /x/toolgate.kv: locked"));
  await assertRejects(() => listing, Error, "Cannot open /x/toolgate.kv: locked");
  await assertRejects(
    () => session.client.callTool({ name: "memory_get", arguments: { key: "k" } }),
    Error,
    "Cannot open /x/toolgate.kv: locked",
  );
});

Deno.test("tools/call of a plugin that is not ready is a tool error with its code; an unknown tool a JSON-RPC error", async () => {
  await using t = await testGateway({ plugins: [unconfiguredPlugin()] });
  await using session = await connect(t.gateway);
  const result = await session.client.callTool({ name: "t1", arguments: {} });
  assertEquals(result.isError, true);
  const [item] = result.content as { type: string; text: string }[];
  assert(
    item.text.startsWith("PLUGIN_NOT_CONFIGURED: Tool t1 is unavailable: Plugin needs_token"),
    item.text,
  );
  const unknown = await assertRejects(
    () => session.client.callTool({ name: "no_such_tool", arguments: {} }),
    McpError,
  );
  // The client puts "MCP error -32602: " in front, once.
  assertEquals(unknown.message, "MCP error -32602: Unknown tool: no_such_tool");
  assertEquals((unknown as McpError).code, -32602);
});

Deno.test("2025 clients may set a log level; built-in tools publish JSON Schema 2020-12 input schemas", async () => {
  await using t = await testGateway();
  await using session = await connect(t.gateway);
  assert(session.client.getServerCapabilities()?.logging, "logging is advertised");
  assertEquals(await session.client.setLoggingLevel("warning"), {});
  const { tools } = await session.client.listTools() as {
    tools: { name: string; inputSchema: Record<string, unknown> }[];
  };
  const echo = tools.find((tool) => tool.name === "echo")!;
  assertEquals(echo.inputSchema.$schema, "https://json-schema.org/draft/2020-12/schema");
  assertEquals(echo.inputSchema.type, "object");
});
