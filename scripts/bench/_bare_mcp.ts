/**
 * Baseline MCP server for the MCP scenarios: the official SDK's `McpServer`
 * with one tool, `memory_get {key}`, that reads a key from a Deno KV file as
 * toolgate's `memory_get` does (no audit, no events, no breaker).
 *
 * - `deno run -A scripts/bench/_bare_mcp.ts stdio <kv_path> [commit]`: stdio
 *   transport. With `commit`, each call also writes one record in its own
 *   Deno KV commit before it answers (`_bare_audit.ts`): the least a durably
 *   audited call can cost, the floor of toolgate's sequential stdio figure.
 * - `deno run -A scripts/bench/_bare_mcp.ts http <kv_path> [commit|json]`: Streamable
 *   HTTP on `/mcp` with `WebStandardStreamableHTTPServerTransport`, stateful
 *   (one transport per `Mcp-Session-Id`), the SDK's default SSE replies; with
 *   `json`, JSON replies (`enableJsonResponse`) as toolgate answers. Prints
 *   `{"port": n}` and runs until stdin closes.
 *
 * @module
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { z } from "zod";
import { BareAuditLog } from "./_bare_audit.ts";

const [mode, kvPath, extra] = Deno.args;
const kv = await Deno.openKv(kvPath);
const audit = extra === "commit" ? new BareAuditLog(kv) : undefined;

function createServer(): McpServer {
  const server = new McpServer({ name: "bare", version: "1.0.0" });
  server.registerTool("memory_get", {
    description: "Read the JSON value stored under a key",
    inputSchema: { key: z.string().min(1).max(512) },
  }, async ({ key }: { key: string }) => {
    const entry = await kv.get(["memory", key]);
    const output = entry.value === null
      ? { key, found: false }
      : { key, found: true, value: entry.value };
    await audit?.append("memory_get", { key });
    return { content: [{ type: "text", text: JSON.stringify(output) }], structuredContent: output };
  });
  return server;
}

if (mode === "stdio") {
  await createServer().connect(new StdioServerTransport());
} else {
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ port }) => console.log(JSON.stringify({ port })),
  }, async (request) => {
    const id = request.headers.get("mcp-session-id");
    const existing = id === null ? undefined : sessions.get(id);
    if (existing) return await existing.handleRequest(request);
    if (id !== null) return new Response("Session not found", { status: 404 });
    const transport: WebStandardStreamableHTTPServerTransport =
      new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        enableJsonResponse: extra === "json",
        onsessioninitialized: (sessionId: string) => void sessions.set(sessionId, transport),
      });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await createServer().connect(transport);
    return await transport.handleRequest(request);
  });
  for await (const _ of Deno.stdin.readable) { /* until stdin closes */ }
  await server.shutdown();
}
