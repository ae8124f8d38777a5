/**
 * An agent-side script using the toolgate TypeScript SDK.
 *
 * Over HTTP (a running `toolgate mcp start --transport http`):
 * `TOOLGATE_URL=http://127.0.0.1:7821 deno run -A examples/agent.ts`
 *
 * Over stdio (starts its own server with `deno run -A main.ts mcp start`):
 * `deno run -A examples/agent.ts`
 *
 * Set `TOOLGATE_API_TOKEN` when the server has one.
 *
 * @module
 */
import { ToolgateClient, ToolgateError } from "../sdk/typescript/mod.ts";

function makeClient(): ToolgateClient {
  const baseUrl = Deno.env.get("TOOLGATE_URL");
  if (baseUrl) return new ToolgateClient({ baseUrl, token: Deno.env.get("TOOLGATE_API_TOKEN") });
  return new ToolgateClient({
    command: Deno.execPath(),
    args: ["run", "-A", new URL("../main.ts", import.meta.url).pathname, "mcp", "start"],
    stderr: "ignore",
  });
}

if (import.meta.main) {
  await using client = makeClient();
  await client.connect();
  if (client.transport === "http") {
    client.on("tool.complete", (event) => {
      const outcome = event.data.ok ? `${event.data.latency_ms} ms` : event.data.error_code;
      console.log(`event: ${event.data.tool} finished: ${outcome}`);
    });
    await client.eventsReady();
  }

  const tools = await client.listTools();
  console.log(`${tools.length} tools: ${tools.map((tool) => tool.name).join(", ")}`);

  await client.callTool("memory_set", { key: "agent:last_run", value: { by: "agent.ts" } });
  const result = await client.callTool("memory_get", { key: "agent:last_run" });
  console.log(`memory_get -> ${result.content[0].text}`);

  try {
    await client.callTool("memory_get", {}); // missing the required key
  } catch (error) {
    if (!(error instanceof ToolgateError)) throw error;
    console.log(`expected failure: ${error.code}: ${error.message}`);
  }
  await new Promise((resolve) => setTimeout(resolve, 200)); // let the last events arrive
}
