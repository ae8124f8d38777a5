/**
 * Types of tools, results and events as the toolgate server sends them.
 *
 * @module
 */

/** A tool on offer. */
export interface Tool {
  /** Unique tool name, e.g. `http_request`. */
  name: string;
  /** What the tool does. */
  description?: string;
  /** JSON Schema of the arguments object. */
  inputSchema: Record<string, unknown>;
}

/** One item of a result's `content`; toolgate sends `{type: "text", text}`. */
export interface ContentItem {
  [key: string]: unknown;
  /** `text` for toolgate's tools. */
  type: string;
  /** The tool's output as JSON text (for `type: "text"`). */
  text?: string;
}

/** A successful tool call's result (MCP `CallToolResult`). */
export interface ToolResult {
  /** The output as JSON text in `content[0].text`. */
  content: ContentItem[];
  /** The output object. */
  structuredContent?: Record<string, unknown>;
  /** Never `true` here: failed calls throw a `ToolgateError`. */
  isError?: boolean;
}

/** `tool.called`: a tool execution completed successfully. */
export interface ToolCalledData {
  tool_name: string;
  plugin: string;
  input: Record<string, unknown>;
  output: Record<string, unknown>;
  /** Milliseconds. */
  latency_ms: number;
  session_id: string;
}

/** `tool.failed`: a tool threw an error or timed out (one per failed attempt). */
export interface ToolFailedData {
  tool_name: string;
  plugin: string;
  error: string;
  error_code: string;
  /** e.g. `closed`, `open`. */
  circuit_state: string;
  /** 1-based attempt within the call. */
  attempt: number;
}

/** `plugin.ready`: a plugin initialized and registered its tools. */
export interface PluginReadyData {
  plugin_name: string;
  tool_count: number;
  zero_config: boolean;
  version: string;
}

/** `plugin.error`: a plugin failed to initialize or is not configured. */
export interface PluginErrorData {
  plugin_name: string;
  error: string;
  error_code: string;
  /** e.g. `not_configured`. */
  state: string;
}

/** `circuit.opened`: a tool's circuit breaker opened after repeated failures. */
export interface CircuitOpenedData {
  tool_name: string;
  plugin: string;
  failure_count: number;
  threshold: number;
  /** Milliseconds. */
  reset_after_ms: number;
}

/** `circuit.closed`: a tool's circuit breaker reset. */
export interface CircuitClosedData {
  tool_name: string;
  plugin: string;
  /** Milliseconds. */
  downtime_ms: number;
}

/** `audit.written`: an entry was appended to the audit log. */
export interface AuditWrittenData {
  seq: number;
  /** `sha256:<hex>`. */
  entry_hash: string;
  /** `sha256:<hex>`. */
  previous_hash: string;
  tool: string;
  chain_intact: boolean;
}

/** `server.started`: the server finished initialization. */
export interface ServerStartedData {
  version: string;
  tool_count: number;
  plugin_count: number;
  /** `stdio` or `http`. */
  transport: string;
  zero_config_plugins: number;
}

/**
 * `tool.complete` (SDK only): fires after every tool call, made by any
 * client. Built from `tool.called` (`ok: true`, with `latency_ms`,
 * `output`, `session_id`, …) and `tool.failed` (`ok: false`, with
 * `error_code`, `error`, `attempt`, `circuit_state`, …); `tool` names the
 * tool. The event keeps the id and timestamp of the event it came from.
 */
export type ToolCompleteData =
  | ({ tool: string; ok: true } & ToolCalledData)
  | ({ tool: string; ok: false } & ToolFailedData);

/** The `data` of each event name. */
export interface EventDataMap {
  "tool.called": ToolCalledData;
  "tool.failed": ToolFailedData;
  "plugin.ready": PluginReadyData;
  "plugin.error": PluginErrorData;
  "circuit.opened": CircuitOpenedData;
  "circuit.closed": CircuitClosedData;
  "audit.written": AuditWrittenData;
  "server.started": ServerStartedData;
  "tool.complete": ToolCompleteData;
}

/** One of the server's 8 event types. */
export type ServerEventType = Exclude<keyof EventDataMap, "tool.complete">;

/** The 8 event types the server emits. */
export const SERVER_EVENT_TYPES: readonly ServerEventType[] = [
  "tool.called",
  "tool.failed",
  "plugin.ready",
  "plugin.error",
  "circuit.opened",
  "circuit.closed",
  "audit.written",
  "server.started",
];

/** What `on()` accepts: an event type, `tool.complete`, or `*` (every server event). */
export type EventName = keyof EventDataMap | "*";

/** An event envelope: `{id, type, timestamp, data}`. */
export interface ToolgateEvent<T extends keyof EventDataMap = keyof EventDataMap> {
  /** `evt_…`; the same as the webhook delivery id. */
  id: string;
  type: T;
  /** ISO 8601 UTC with milliseconds. */
  timestamp: string;
  data: EventDataMap[T];
}

/** Any of the server's events (what a `*` handler receives). */
export type ServerEvent = { [T in ServerEventType]: ToolgateEvent<T> }[ServerEventType];

/** The event a handler for `name` receives. */
export type EventFor<N extends EventName> = N extends keyof EventDataMap ? ToolgateEvent<N>
  : ServerEvent;

/** A handler registered with `on()`; errors it throws go to `onError`. */
export type EventHandler<N extends EventName> = (event: EventFor<N>) => void | Promise<void>;
