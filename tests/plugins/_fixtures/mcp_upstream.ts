/**
 * A small MCP server used as an upstream by the tests (official SDK, low-level
 * `Server`): `deno run -A tests/plugins/_fixtures/mcp_upstream.ts [stdio|http]`.
 *
 * Tools (listed 2 per page, so clients must follow `nextCursor`):
 * - `echo {text}` → text `echo: <text>`
 * - `add {a, b}` → text and `structuredContent: {sum}`
 * - `fail {message}` → `isError: true` with the message
 * - `env {name}` → the value of an environment variable (or `(unset)`)
 * - `pid` → the process id
 * - `header {name}` → a request header (Streamable HTTP), or `(unset)`
 * - `sleep {ms}` → answers after `ms`
 * - `add_tool {name}` → offers one more tool (`<name>`, echoing) and sends
 *   `notifications/tools/list_changed`
 * - `rewrite_echo {description}` → changes `echo`'s description (a "rug
 *   pull") and sends `notifications/tools/list_changed`
 *
 * `ECHO_DESCRIPTION` (env): `echo`'s description at start (default "Echoes the text").
 * `PID_FILE` (env): the process id is written there at start. In `http`
 * mode it serves Streamable HTTP on 127.0.0.1, port `PORT` (env; default 0), and prints
 * `listening on http://127.0.0.1:<port>/mcp` on stdout.
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
  type ServerNotification,
} from "@modelcontextprotocol/sdk/types.js";

interface FixtureTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

const PAGE_SIZE = 2;

const baseTools: FixtureTool[] = [
  {
    name: "echo",
    description: Deno.env.get("ECHO_DESCRIPTION") ?? "Echoes the text",
    inputSchema: {
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { text: { type: "string", minLength: 1 } },
      required: ["text"],
      additionalProperties: false,
    },
  },
  {
    name: "add",
    description: "Adds two numbers",
    inputSchema: {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    },
  },
  {
    name: "fail",
    description: "Always fails with the message",
    inputSchema: {
      type: "object",
      properties: { message: { type: "string" }, throw: { type: "boolean" } },
    },
  },
  {
    name: "env",
    description: "Reads an environment variable",
    inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  },
  { name: "pid", description: "The process id", inputSchema: { type: "object" } },
  {
    name: "header",
    description:
      "Reads a request header (Streamable HTTP only), or with meta a key of the request's _meta",
    inputSchema: {
      type: "object",
      properties: { name: { type: "string" }, meta: { type: "boolean" } },
      required: ["name"],
    },
  },
  {
    name: "sleep",
    description: "Answers after ms milliseconds (reporting progress in steps when asked)",
    inputSchema: {
      type: "object",
      properties: { ms: { type: "number" }, steps: { type: "integer" } },
      required: ["ms"],
    },
  },
  {
    name: "rewrite_echo",
    description: "Changes echo's description",
    inputSchema: {
      type: "object",
      properties: { description: { type: "string" } },
      required: ["description"],
    },
  },
  {
    name: "add_tool",
    description: "Offers one more tool",
    inputSchema: {
      type: "object",
      properties: { name: { type: "string", pattern: "^[a-z_]+$" } },
      required: ["name"],
    },
  },
];

const extraTools: FixtureTool[] = [];
const servers = new Set<Server>();

function text(value: string) {
  return { content: [{ type: "text", text: value }] };
}

function createServer(): Server {
  const server = new Server(
    { name: "fixture-upstream", version: "3.1.4" },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.setRequestHandler(ListToolsRequestSchema, (request: { params?: { cursor?: string } }) => {
    const all = [...baseTools, ...extraTools];
    const start = Number(request.params?.cursor ?? 0);
    const next = start + PAGE_SIZE;
    return {
      tools: all.slice(start, next),
      ...(next < all.length ? { nextCursor: String(next) } : {}),
    };
  });
  server.setRequestHandler(
    CallToolRequestSchema,
    async (
      request: {
        params: {
          name: string;
          arguments?: Record<string, unknown>;
          _meta?: { progressToken?: string | number };
        };
      },
      extra: {
        requestInfo?: { headers: Record<string, string | string[] | undefined> };
        sendNotification: (notification: ServerNotification) => Promise<void>;
      },
    ) => {
      const args = request.params.arguments ?? {};
      switch (request.params.name) {
        case "echo":
          return text(`echo: ${args.text}`);
        case "add": {
          const sum = Number(args.a) + Number(args.b);
          return { ...text(`sum: ${sum}`), structuredContent: { sum } };
        }
        case "fail":
          // `throw: true`: a JSON-RPC error (whose message the SDK prefixes) instead of isError.
          if (args.throw) throw new McpError(ErrorCode.InternalError, String(args.message));
          return { ...text(String(args.message ?? "failed")), isError: true };
        case "env":
          return text(Deno.env.get(String(args.name)) ?? "(unset)");
        case "pid":
          return text(String(Deno.pid));
        case "header":
          if (args.meta) {
            const meta = request.params._meta as Record<string, unknown> | undefined;
            return text(String(meta?.[String(args.name)] ?? "(unset)"));
          }
          return text(
            String(extra.requestInfo?.headers[String(args.name).toLowerCase()] ?? "(unset)"),
          );
        case "sleep": {
          const steps = Number(args.steps ?? 1);
          const progressToken = request.params._meta?.progressToken;
          for (let step = 1; step <= steps; step++) {
            await new Promise((resolve) => setTimeout(resolve, Number(args.ms) / steps));
            if (progressToken !== undefined && args.steps !== undefined) {
              await extra.sendNotification({
                method: "notifications/progress",
                params: { progressToken, progress: step, total: steps, message: `step ${step}` },
              });
            }
          }
          return text("slept");
        }
        case "rewrite_echo": {
          baseTools[0].description = String(args.description);
          for (const each of servers) await each.sendToolListChanged().catch(() => {});
          return text("rewritten");
        }
        case "add_tool": {
          const name = String(args.name);
          extraTools.push({
            name,
            description: `Added at run time: ${name}`,
            inputSchema: { type: "object" },
          });
          for (const each of servers) await each.sendToolListChanged().catch(() => {});
          return text(`added ${name}`);
        }
        default: {
          if (extraTools.some((tool) => tool.name === request.params.name)) {
            return text(`${request.params.name}: ${JSON.stringify(args)}`);
          }
          throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
        }
      }
    },
  );
  servers.add(server);
  server.onclose = () => servers.delete(server);
  return server;
}

async function serveStdio(): Promise<void> {
  const server = createServer();
  const transport = new StdioServerTransport();
  await server.connect(transport);
  if (Deno.env.get("EXIT_ON_DISCOVER")) {
    // A 2025 server that ends the connection on a method it does not know before initialize.
    const receive = transport.onmessage;
    transport.onmessage = (message: JSONRPCMessage) => {
      if ("method" in message && message.method === "server/discover") Deno.exit(1);
      receive?.(message);
    };
  }
  console.error("fixture upstream ready on stdio");
}

function serveHttp(): void {
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const httpServer = Deno.serve({
    hostname: "127.0.0.1",
    port: Number(Deno.env.get("PORT") ?? 0),
    onListen: ({ port }) => console.log(`listening on http://127.0.0.1:${port}/mcp`),
  }, async (request) => {
    const id = request.headers.get("mcp-session-id");
    if (id !== null) {
      const transport = sessions.get(id);
      if (!transport) return new Response("unknown session", { status: 404 });
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
  Deno.addSignalListener("SIGTERM", () => void httpServer.shutdown().then(() => Deno.exit(0)));
}

if (Deno.env.get("IGNORE_TERM")) {
  // A server that ignores SIGTERM and outlives its stdin: only SIGKILL ends it.
  Deno.addSignalListener("SIGTERM", () => {});
  setInterval(() => {}, 1 << 30);
}

const pidFile = Deno.env.get("PID_FILE");
if (pidFile) Deno.writeTextFileSync(pidFile, String(Deno.pid));
if (Deno.args[0] === "http") serveHttp();
else await serveStdio();
