/**
 * The toolgate TypeScript SDK: call toolgate's tools from Deno or Node 20
 * over MCP (stdio or Streamable HTTP, built on the official MCP SDK v2 client),
 * subscribe to its events over HTTP, and verify its webhook signatures.
 *
 * - {@linkcode ToolgateClient}: `connect()`, `listTools()`,
 *   `callTool(name, args)`, `on(event, handler)` (HTTP only), `disconnect()`;
 *   `protocolVersion` tells the MCP revision negotiated (`"2026-07-28"` with
 *   toolgate, a 2025 revision with an older server).
 * - {@linkcode ToolgateError}: every failure, with the server's stable `code`.
 * - {@linkcode verifySignature}: checks `X-Service-Signature` on a receiver.
 *
 * `on("tool.complete", …)` fires after every tool call made by any client:
 * `event.data.tool` names the tool and `event.data.ok` tells success. It is
 * built from the server's `tool.called` (`ok: true`, with `latency_ms`,
 * `output`, `session_id`) and `tool.failed` (`ok: false`, with `error_code`,
 * `error`, `attempt`, `circuit_state`) events; a tool with retries
 * configured yields one `ok: false` per failed attempt.
 *
 * @example
 * ```ts
 * import { ToolgateClient, ToolgateError } from "./sdk/typescript/mod.ts";
 *
 * const client = new ToolgateClient({ baseUrl: "http://127.0.0.1:7821" });
 * await client.connect();
 * client.on("circuit.opened", (event) => console.warn(`${event.data.tool_name} is failing`));
 * try {
 *   const result = await client.callTool("http_request", { url: "https://example.com" });
 *   console.log(result.structuredContent?.status);
 * } catch (error) {
 *   if (error instanceof ToolgateError) console.error(error.code, error.message);
 * }
 * await client.disconnect();
 * ```
 *
 * @module
 */
export { SDK_VERSION, ToolgateClient } from "./client.ts";
export type {
  CallOptions,
  CommonClientOptions,
  HttpConnectionOptions,
  ProtocolChoice,
  StdioConnectionOptions,
  ToolgateClientOptions,
} from "./client.ts";
export { errorFromHttp, errorFromResult, ToolgateError } from "./errors.ts";
export type { ClientErrorCode, ToolgateErrorOptions } from "./errors.ts";
export { verifySignature } from "./signature.ts";
export { ReconnectingEventStream, SseParser } from "./sse.ts";
export type { EventStreamOptions, SseMessage } from "./sse.ts";
export { SERVER_EVENT_TYPES } from "./types.ts";
export type {
  AuditWrittenData,
  CircuitClosedData,
  CircuitOpenedData,
  ContentItem,
  EventDataMap,
  EventFor,
  EventHandler,
  EventName,
  PluginErrorData,
  PluginReadyData,
  ServerEvent,
  ServerEventType,
  ServerStartedData,
  Tool,
  ToolCalledData,
  ToolCompleteData,
  ToolFailedData,
  ToolgateEvent,
  ToolResult,
} from "./types.ts";
