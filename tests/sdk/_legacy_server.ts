/**
 * A 2025-only MCP server (the official SDK 1.x, which knows neither
 * `server/discover` nor revision 2026-07-28), standing for an older toolgate
 * in the SDKs' fallback tests:
 * `deno run -A --cached-only tests/sdk/_legacy_server.ts [mode]`.
 *
 * Modes: `stdio` (the default; answers `server/discover` with Method not
 * found, as SDK 1.x does), `stdio-strict` (exits when the first request is
 * not `initialize`, as some 2025 servers do), `stdio-silent` (never answers
 * a request received before `initialize`), `stdio-unsupported` (answers
 * `server/discover` with `-32022` listing only 2025-11-25), `http`.
 *
 * Tools:
 * - `echo {text}` → text `echo: <text>` and `structuredContent: {text}`
 * - `methods` → the JSON-RPC methods this server received so far, in order
 *   (as JSON text and `structuredContent: {methods}`)
 *
 * In `http` mode it serves Streamable HTTP with sessions at `/mcp` on
 * 127.0.0.1, port 0, and prints `listening on http://127.0.0.1:<port>` on
 * stdout; SIGTERM stops it.
 *
 * @module
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  type JSONRPCMessage,
  ListToolsRequestSchema,
  McpError,
  type MessageExtraInfo,
} from "@modelcontextprotocol/sdk/types.js";

/** Every JSON-RPC method received, in order (all connections). */
const received: string[] = [];

function record(message: unknown): void {
  for (const item of Array.isArray(message) ? message : [message]) {
    const method = (item as { method?: unknown } | null)?.method;
    if (typeof method === "string") received.push(method);
  }
}

function createServer(): Server {
  const server = new Server(
    { name: "legacy-fixture", version: "0.9.0" },
    { capabilities: { tools: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [
      {
        name: "echo",
        description: "Echoes the text",
        inputSchema: { type: "object", properties: { text: { type: "string" } } },
      },
      {
        name: "methods",
        description: "The JSON-RPC methods received so far",
        inputSchema: { type: "object" },
      },
    ],
  }));
  server.setRequestHandler(
    CallToolRequestSchema,
    (request: { params: { name: string; arguments?: Record<string, unknown> } }) => {
      const args = request.params.arguments ?? {};
      switch (request.params.name) {
        case "echo":
          return {
            content: [{ type: "text", text: `echo: ${args.text}` }],
            structuredContent: { text: args.text },
          };
        case "methods":
          return {
            content: [{ type: "text", text: JSON.stringify(received) }],
            structuredContent: { methods: [...received] },
          };
        default:
          throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
      }
    },
  );
  return server;
}

async function serveStdio(mode: string): Promise<void> {
  const transport = new StdioServerTransport();
  await createServer().connect(transport);
  const dispatch = transport.onmessage;
  let initialized = false;
  transport.onmessage = (message: JSONRPCMessage, extra?: MessageExtraInfo) => {
    record(message);
    const { method, id } = message as { method?: string; id?: string | number };
    if (method === "initialize") initialized = true;
    if (!initialized && method !== undefined && id !== undefined) {
      if (mode === "stdio-strict") Deno.exit(3);
      if (mode === "stdio-silent") return;
    }
    if (mode === "stdio-unsupported" && method === "server/discover" && id !== undefined) {
      void transport.send({
        jsonrpc: "2.0",
        id,
        error: {
          code: -32022,
          message: "Unsupported protocol version: 2026-07-28",
          data: { supported: ["2025-11-25"], requested: "2026-07-28" },
        },
      });
      return;
    }
    dispatch?.(message, extra);
  };
}

function serveHttp(): void {
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ port }) => console.log(`listening on http://127.0.0.1:${port}`),
  }, async (request) => {
    if (new URL(request.url).pathname !== "/mcp") return new Response(null, { status: 404 });
    if (request.method === "POST") record(await request.clone().json().catch(() => null));
    const id = request.headers.get("mcp-session-id");
    if (id !== null) {
      const transport = sessions.get(id);
      if (!transport) return new Response("Session not found", { status: 404 });
      return await transport.handleRequest(request);
    }
    const transport: WebStandardStreamableHTTPServerTransport =
      new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (sessionId: string) => void sessions.set(sessionId, transport),
      });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await createServer().connect(transport);
    return await transport.handleRequest(request);
  });
  Deno.addSignalListener("SIGTERM", () => void server.shutdown().then(() => Deno.exit(0)));
}

if (import.meta.main) {
  const mode = Deno.args[0] ?? "stdio";
  if (mode === "http") serveHttp();
  else await serveStdio(mode);
}
