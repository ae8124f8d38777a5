/**
 * The gateway as an MCP server (official SDK): tools/list and tools/call go
 * to the gateway's registry and pipeline. Used by the stdio and Streamable
 * HTTP transports alike.
 *
 * @module
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../errors/mod.ts";
import { type Gateway, toErrorResult, toToolResult } from "../gateway/mod.ts";
import { newId } from "../ids.ts";
import { VERSION } from "../version.ts";

/** Options of {@linkcode createMcpServer}. */
export interface McpServerOptions {
  /** Session id reported in events and audit; for HTTP the MCP session id. */
  sessionId?: () => string | undefined;
  /** Entry point name recorded in the audit log. @default "mcp" */
  source?: string;
}

/**
 * Creates an MCP server bound to the gateway. The caller connects it to a
 * transport and closes it.
 *
 * @param gateway The gateway, or a promise of it: the server then answers
 * `initialize` at once, and `tools/list` and `tools/call` once the gateway is
 * there (with an error when the promise rejects).
 * @returns The server and a function that detaches it from the gateway.
 */
export function createMcpServer(
  gateway: Gateway | Promise<Gateway>,
  options: McpServerOptions = {},
): { server: Server; detach: () => void } {
  const { source = "mcp" } = options;
  let ready = gateway instanceof Promise ? undefined : gateway;
  const starting = ready ? undefined : Promise.resolve(gateway).then((started) => {
    ready = started;
    return started;
  });
  // Reported to the client by the handler that awaits it.
  starting?.catch(() => {});
  const fallbackSession = newId("ses");
  const server = new Server(
    { name: "toolgate", version: VERSION },
    {
      capabilities: { tools: { listChanged: true } },
      instructions:
        "toolgate hosts plugins whose tools are listed here; every call is audited and circuit-protected.",
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: (ready ?? await starting!).listTools().map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: { type: "object", ...tool.inputSchema } as {
        type: "object";
        [key: string]: unknown;
      },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (
    request: CallToolRequest,
    extra: { sessionId?: string; signal: AbortSignal },
  ): Promise<CallToolResult> => {
    const { name, arguments: args } = request.params;
    const gateway = ready ?? await starting!;
    if (!gateway.hasTool(name)) {
      // A tool of a plugin that is not ready: its error, as a tool result.
      const unavailable = gateway.unavailable(name);
      if (unavailable) return toErrorResult(unavailable);
      throw new JsonRpcError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    try {
      const result = await gateway.call(name, args ?? {}, {
        sessionId: options.sessionId?.() ?? extra.sessionId ?? fallbackSession,
        signal: extra.signal,
        source,
      });
      return toToolResult(result);
    } catch (error) {
      if (error instanceof GatewayError) return toErrorResult(error);
      throw error;
    }
  });
  const notify = () => {
    server.sendToolListChanged().catch(() => {
      // Not connected yet or already closed: the client lists tools on connect.
    });
  };
  let detached = false;
  let detachGateway = () => {};
  const attach = (attached: Gateway) => {
    if (!detached) detachGateway = attached.onToolsChanged(notify);
  };
  if (ready) attach(ready);
  else starting!.then(attach, () => {});
  const detach = () => {
    detached = true;
    detachGateway();
  };
  return { server, detach };
}

/**
 * A JSON-RPC error whose message goes on the wire as it is. The SDK's
 * `McpError` puts `MCP error <code>: ` in front of its message, and clients
 * add that prefix once more when they read the error.
 */
class JsonRpcError extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}
