/**
 * Baseline MCP server for the `mcp_stateless` scenario: the official SDK v2
 * (`@modelcontextprotocol/server`, the SDK toolgate serves `/mcp` with) on
 * Streamable HTTP, both protocol eras at one endpoint, routed as toolgate
 * routes them, with one tool, `memory_get {key}`, that reads a key from a
 * Deno KV file as toolgate's `memory_get` does (no audit, no events):
 *
 * - 2025: a request with `Mcp-Session-Id` goes to its session's
 *   `WebStandardStreamableHTTPServerTransport` (JSON replies); one that the
 *   SDK's `isLegacyRequest` classifies 2025 opens a session;
 * - 2026-07-28: every other request goes to `createMcpHandler` (one server
 *   instance per request, JSON replies unless something comes first).
 *
 * The POST body is parsed once and handed to either leg, as toolgate does.
 *
 * `deno run -A scripts/bench/_bare_mcp_v2.ts <kv_path>` prints `{"port": n}`
 * and runs until stdin closes.
 *
 * @module
 */
import {
  createMcpHandler,
  isLegacyRequest,
  McpServer,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import { z } from "zod";

const [kvPath] = Deno.args;
const kv = await Deno.openKv(kvPath);

function createServer(): McpServer {
  const server = new McpServer({ name: "bare-v2", version: "1.0.0" });
  server.registerTool("memory_get", {
    description: "Read the JSON value stored under a key",
    inputSchema: z.object({ key: z.string().min(1).max(512) }),
  }, async ({ key }) => {
    const entry = await kv.get(["memory", key]);
    const output = entry.value === null
      ? { key, found: false }
      : { key, found: true, value: entry.value };
    return { content: [{ type: "text", text: JSON.stringify(output) }], structuredContent: output };
  });
  return server;
}

const modern = createMcpHandler(() => createServer(), { legacy: "reject", responseMode: "auto" });
const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();

async function handle(request: Request): Promise<Response> {
  const parsedBody = request.method === "POST" ? await request.json() : undefined;
  const options = parsedBody === undefined ? undefined : { parsedBody };
  const id = request.headers.get("mcp-session-id");
  if (id !== null) {
    const existing = sessions.get(id);
    if (!existing) return new Response("Session not found", { status: 404 });
    return await existing.handleRequest(request, options);
  }
  if (!await isLegacyRequest(request, parsedBody)) return await modern.fetch(request, options);
  const transport: WebStandardStreamableHTTPServerTransport =
    new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (sessionId: string) => void sessions.set(sessionId, transport),
    });
  transport.onclose = () => {
    if (transport.sessionId) sessions.delete(transport.sessionId);
  };
  await createServer().connect(transport);
  return await transport.handleRequest(request, options);
}

const server = Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen: ({ port }) => console.log(JSON.stringify({ port })),
}, handle);
for await (const _ of Deno.stdin.readable) { /* until stdin closes */ }
await modern.close();
await server.shutdown();
kv.close();
