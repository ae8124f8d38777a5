/**
 * Resource subscriptions through toolgate: a client of either era watches
 * an upstream's resource (2025 `resources/subscribe`, 2026-07-28
 * `subscriptions/listen`), and the upstream's `notifications/resources/updated`
 * reach it; the upstream is a 2026 fixture or the 2025 reference server.
 *
 * @module
 */
import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StreamableHTTPClientTransport as ModernHttpTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdioTransport } from "@modelcontextprotocol/client/stdio";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { assertEquals } from "../_asserts.ts";
import { tempHome, toolgateStdio } from "../_helpers.ts";
import {
  conformanceFixtureCommand,
  EVERYTHING_PACKAGE,
  npmCommand,
  waitFor,
} from "../plugins/_upstreams.ts";
import { startHttpServer } from "./_http_server.ts";

const CONFIG = {
  plugins: {
    upstream_settings: { connect_timeout_ms: 60_000 },
    upstreams: {
      conf: { kind: "mcp", ...conformanceFixtureCommand() },
      everything: { kind: "mcp", ...npmCommand(EVERYTHING_PACKAGE, "stdio") },
    },
  },
};

const TEXT = "test://static-text";
const BINARY = "test://static-binary";

/** A 2025 client that records the URIs of the updates it gets. */
function legacyClient(updates: string[]): Client {
  const client = new Client({ name: "legacy", version: "1.0.0" });
  client.setNotificationHandler(
    ResourceUpdatedNotificationSchema,
    (notification: { params: { uri: string } }) => void updates.push(notification.params.uri),
  );
  return client;
}

/** A 2026-07-28 client that records the URIs of the updates it gets. */
function modernClient(updates: string[]): ModernClient {
  const client = new ModernClient(
    { name: "modern", version: "1.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  client.setNotificationHandler(
    "notifications/resources/updated",
    (notification) => void updates.push(notification.params.uri),
  );
  return client;
}

/**
 * Watches TEXT and BINARY, has the fixture update both, then stops watching
 * TEXT and has it update both again: TEXT's second update must not arrive.
 */
async function watchAndUnwatch(
  updates: string[],
  watch: (uri: string) => Promise<() => Promise<void>>,
  call: (name: string, args: Record<string, unknown>) => Promise<unknown>,
): Promise<void> {
  const stopText = await watch(TEXT);
  await watch(BINARY);
  await call("conf__update_resource", { uri: TEXT });
  await call("conf__update_resource", { uri: BINARY });
  await waitFor(() => updates.length >= 2, "both updates arrive", 10_000);
  await stopText();
  await call("conf__update_resource", { uri: TEXT });
  await call("conf__update_resource", { uri: BINARY });
  await waitFor(() => updates.length >= 3, "the watched resource's update arrives", 10_000);
  assertEquals(updates.toSorted(), [BINARY, BINARY, TEXT]);
}

Deno.test("resource updates of a 2026 upstream reach a 2025 client that subscribed, over stdio and HTTP, and stop after it unsubscribes", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home, config: CONFIG });
  for (const transport of ["stdio", "http"]) {
    const updates: string[] = [];
    const client = legacyClient(updates);
    await client.connect(
      transport === "stdio"
        ? new StdioClientTransport(toolgateStdio(tmp.home))
        : new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)),
    );
    try {
      assertEquals(client.getServerCapabilities()?.resources?.subscribe, true);
      await watchAndUnwatch(
        updates,
        async (uri) => {
          await client.subscribeResource({ uri });
          return async () => void await client.unsubscribeResource({ uri });
        },
        (name, args) => client.callTool({ name, arguments: args }),
      );
    } finally {
      await client.close();
    }
  }
});

Deno.test("resource updates reach a 2026 client on its subscriptions/listen stream, over HTTP and stdio", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home, config: CONFIG });
  for (const transport of ["http", "stdio"]) {
    const updates: string[] = [];
    const client = modernClient(updates);
    await client.connect(
      transport === "stdio"
        ? new ModernStdioTransport(toolgateStdio(tmp.home))
        : new ModernHttpTransport(new URL(`${server.url}/mcp`)),
    );
    try {
      assertEquals(client.getNegotiatedProtocolVersion(), "2026-07-28");
      const listening = await client.listen({ resourceSubscriptions: [TEXT] });
      // The stream is acknowledged before toolgate's own subscription upstream is open:
      // updates sent before then are not seen, so both are sent until one arrives.
      await waitFor(async () => {
        await client.callTool({ name: "conf__update_resource", arguments: { uri: BINARY } });
        await client.callTool({ name: "conf__update_resource", arguments: { uri: TEXT } });
        await new Promise((resolve) => setTimeout(resolve, 100));
        return updates.length > 0;
      }, `${transport}: the update arrives`);
      assertEquals(new Set(updates), new Set([TEXT]), transport);
      await listening.close();
    } finally {
      await client.close();
    }
  }
});

Deno.test("the reference everything server's resource updates reach a subscribed 2025 client through toolgate", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(`${tmp.home}/config.json`, JSON.stringify(CONFIG));
  const updates: string[] = [];
  const client = legacyClient(updates);
  await client.connect(new StdioClientTransport(toolgateStdio(tmp.home)));
  try {
    const { resources } = await client.listResources();
    const uri = resources.find((resource: { uri: string }) =>
      resource.uri.startsWith("demo://")
    )!.uri;
    await client.subscribeResource({ uri });
    // Its simulated updates come every 5 s, for what its session subscribed to.
    await client.callTool({ name: "everything__toggle-subscriber-updates", arguments: {} });
    await waitFor(() => updates.length >= 1, "an update of the everything server arrives", 15_000);
    assertEquals(updates[0], uri);
  } finally {
    await client.close();
  }
});

Deno.test("a 2026 client on a virtual server without the upstream hears no updates of its resources", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({
    home: tmp.home,
    config: { ...CONFIG, servers: { notes: { tools: ["memory_*"] } } },
  });
  const seen: string[] = [];
  const hidden: string[] = [];
  const control = modernClient(seen);
  const outside = modernClient(hidden);
  await control.connect(new ModernHttpTransport(new URL(`${server.url}/mcp`)));
  await outside.connect(new ModernHttpTransport(new URL(`${server.url}/mcp/notes`)));
  try {
    const listening = await control.listen({ resourceSubscriptions: [TEXT] });
    const notListening = await outside.listen({ resourceSubscriptions: [TEXT] });
    await waitFor(async () => {
      await control.callTool({ name: "conf__update_resource", arguments: { uri: TEXT } });
      await new Promise((resolve) => setTimeout(resolve, 100));
      return seen.length > 0;
    }, "the update reaches the client that may see the resource");
    // One more update after the control saw one: the outside stream had every chance to get it.
    await control.callTool({ name: "conf__update_resource", arguments: { uri: TEXT } });
    await waitFor(() => seen.length > 1, "the second update reaches the control");
    assertEquals(hidden, [], "the virtual server's client heard of a resource it cannot see");
    await listening.close();
    await notListening.close();
  } finally {
    await control.close();
    await outside.close();
  }
});
