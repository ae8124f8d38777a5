/**
 * The plugin and tool definitions plugins export, and what the gateway hands
 * them at run time.
 *
 * @module
 */
import type { z } from "zod";
import type { Config } from "../config/mod.ts";
import type { EventData } from "../events/mod.ts";
import type { GatewayError } from "../errors/mod.ts";
import type { PinKind, Store } from "../store/mod.ts";
import type { TraceCarrier } from "../tracing/mod.ts";
import type { AuditCaller, Caller } from "./caller.ts";

/** Reads a plugin's credentials (keychain, then `TOOLGATE_SECRET_<PLUGIN>_<KEY>`). */
export interface SecretReader {
  /** The secret `<plugin>.<key>`, or `undefined` when it is not set. */
  get(key: string): Promise<string | undefined>;
}

/** What a plugin receives at initialization and on every call. */
export interface PluginContext {
  /** The resolved configuration. */
  config: Config;
  /** The data directory's store (plugins with state keep it here). */
  store: Store;
  /** The plugin's own credentials. */
  secrets: SecretReader;
  /** Writes a line to the log (stderr); never pass secrets. */
  log(message: string): void;
  /** Replaces the plugin's tools (dynamic plugins such as MCP upstreams). */
  setTools(tools: ToolDefinition[]): void;
  /** Replaces the plugin's prompts and resources (MCP upstreams); `undefined`: none. */
  setCatalog(source: CatalogSource | undefined): void;
  /** Reports that a resource the plugin was asked to watch changed (`CatalogSource.subscribe`). */
  resourceUpdated(uri: string): void;
  /** Pinning of upstream definitions; `undefined`: off. */
  pins?: PinGuard;
}

/** What a tool receives on each call. */
export interface ToolContext extends PluginContext {
  /** Aborted when the call times out or the caller goes away. */
  signal: AbortSignal;
  /** The caller's session id (MCP session, or a generated one). */
  sessionId: string;
  /** Reports progress to the caller, when it asked for it. */
  progress?: (update: ProgressUpdate) => void;
  /** Passes a log message on to the caller (who filters it by its log level). */
  logMessage?: (message: LogMessage) => void;
  /** How to ask the caller for input (MCP elicitation, sampling, roots), when its client can answer. */
  input?: CallerInput;
  /** The entry point of the call (`rest`, `mcp-http`, `webhook`, …). */
  source?: string;
}

/** A tool's output: a JSON object (it becomes `output` in `tool.called`). */
export type ToolOutput = Record<string, unknown>;

/** One tool a plugin offers. */
export interface ToolDefinition {
  /** Unique tool name (`snake_case`, letters, digits, `_`, `-`, `.`). */
  name: string;
  /** What the tool does, for clients and models. */
  description: string;
  /** zod schema of the arguments object. */
  input: z.ZodType<Record<string, unknown>>;
  /**
   * JSON Schema of the arguments, when it does not come from `input`
   * (tools proxied from MCP upstreams). @default z.toJSONSchema(input)
   */
  inputJsonSchema?: Record<string, unknown>;
  /**
   * What MCP clients see of the tool beside its name, description and input
   * schema (`title`, `annotations`, `outputSchema`, `icons`, `execution`,
   * `_meta`): an upstream's tool as the upstream listed it. @default none
   */
  mcpListing?: Record<string, unknown>;
  /** Safe to retry (`retries` in config applies only then). @default false */
  idempotent?: boolean;
  /** Per-tool timeout in ms. @default config.tools.timeout_ms */
  timeoutMs?: number;
  /**
   * The output already is a client-facing tool result (`{content,
   * structuredContent?}`, e.g. proxied from an MCP upstream): clients get its
   * content as is instead of the output as JSON text. @default false
   */
  rawResult?: boolean;
  /**
   * The destination a call goes to, from its validated arguments (e.g.
   * `https://api.example.com:443`), for a tool that keeps one circuit breaker
   * per destination: a call counts towards its destination's breaker only,
   * and an open circuit refuses calls to that destination only. Called once
   * per call, before it runs; it must be cheap and must not throw.
   * `undefined`: the call counts towards the tool's own breaker.
   * @default none: one breaker for the tool
   */
  breakerKey?(args: Record<string, unknown>): string | undefined;
  /**
   * Runs the tool with validated arguments.
   *
   * @throws {GatewayError} with a code (e.g. `PLUGIN_REQUEST_FAILED`);
   * anything else becomes `TOOL_EXECUTION_FAILED`.
   */
  execute(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput>;
}

/** A plugin: a named, versioned group of tools. */
export interface PluginDefinition {
  /** Unique plugin name. */
  name: string;
  /** Plugin version, `<major>.<minor>.<patch>`. */
  version: string;
  /** One line about the plugin. */
  description?: string;
  /** Needs no credentials or configuration. */
  zeroConfig: boolean;
  /**
   * Keychain keys the plugin needs (`bot_token` for `slack.bot_token`): one
   * not set → state `not_configured`, with a message naming it.
   * @default []
   */
  secrets?: readonly string[];
  /**
   * Whether the plugin has what it needs beyond {@linkcode PluginDefinition.secrets};
   * `false` → state `not_configured`.
   */
  isConfigured?(context: PluginContext): boolean | Promise<boolean>;
  /** Prepares the plugin; throwing → state `error`. */
  initialize?(context: PluginContext): void | Promise<void>;
  /** Releases resources on shutdown. */
  dispose?(): void | Promise<void>;
  /** Static tools (dynamic plugins call `context.setTools`). */
  tools: ToolDefinition[];
  /**
   * Hosted but not started: state `disabled` (e.g. an MCP upstream turned off
   * with `toolgate plugins disable`). @default false
   */
  disabled?: boolean;
  /** Live state of the upstream server a proxy plugin connects to (MCP upstreams). */
  upstreamStatus?(): UpstreamStatus;
  /**
   * Whether a tool of this name may be one of the plugin's once it is ready,
   * for a plugin whose tools are not known before then and whose names carry
   * no `<plugin>__` prefix (an MCP upstream with `prefix: false`). Its
   * error is then what a call of such a name gets meanwhile.
   * @default only its declared tools and the `<plugin>__` prefix
   */
  mayOffer?(name: string): boolean;
  /**
   * Why a tool of this name that the plugin holds back is refused (e.g.
   * `TOOL_QUARANTINED`: its upstream changed it since it was pinned), for a
   * ready plugin that does not list it. @default none held back
   */
  withheld?(name: string): GatewayError | undefined;
}

/** A tool call as policies see it (see {@linkcode PolicyGuard}). */
export interface PolicyCall {
  tool: string;
  plugin: string;
  /** The tool's MCP annotations, as it lists them. */
  annotations?: Record<string, unknown>;
  caller?: Caller;
  /** The virtual server it comes through. */
  server?: string;
  /** `rest`, `mcp`, `cli`, `webhook`. */
  transport: string;
  args: Record<string, unknown>;
}

/** The rule that decided a call. */
export interface PolicyDecision {
  /** The rule's name. */
  policy: string;
  source: "config" | "store";
  effect: "allow" | "deny" | "require_approval";
  /** SHA-256 (hex) of the rule's canonical JSON: its version. */
  sha256: string;
  reason?: string;
  /** `require_approval`: the caller confirms. */
  approver?: "caller";
  /** `require_approval`: who may approve (caller selectors). */
  approvers?: readonly string[];
  /** `require_approval`: how long it waits, in ms. */
  timeoutMs?: number;
}

/** Policies (config `policies` and `toolgate policies add`): what decides a call before it runs. */
export interface PolicyGuard {
  /** Whether any rule is set. */
  readonly active: boolean;
  /** The rule that decides `call`, or `undefined`: allowed. */
  decide(call: PolicyCall): PolicyDecision | undefined;
}

/** One upstream definition as pinning sees it (see {@linkcode PinGuard}). */
export interface PinSubject {
  kind: PinKind;
  /** The upstream's own name of it (a resource template: its `uriTemplate`). */
  name: string;
  /** The name clients see (`<plugin>__<tool>`). */
  exposed: string;
  /** Its listing as the upstream gave it (the pinned fields are taken from it). */
  listing: Record<string, unknown>;
}

/**
 * Pinning of upstream definitions (`plugins.upstream_settings.pinning`):
 * what a proxy plugin may offer of what its upstream lists.
 */
export interface PinGuard {
  /**
   * Checks what `plugin`'s upstream offers now against the pins, pinning
   * what is new (or holding it, under `approve`) and quarantining what
   * changed. @returns The refusal of each subject held back, by its
   * exposed name; the others may be offered.
   */
  admit(plugin: string, offered: readonly PinSubject[]): Promise<Map<string, GatewayError>>;
  /**
   * Calls `listener` after the pins changed (a decision, here or on another
   * instance); a decision made here waits for its listeners. @returns Unsubscribes.
   */
  onChange(listener: () => Promise<void> | void): () => void;
}

/** Connection state of a proxy plugin's upstream server. */
export type UpstreamConnectionState = "connecting" | "connected" | "reconnecting" | "closed";

/** Live state of the upstream server of a proxy plugin (shown as `upstream`). */
export interface UpstreamStatus {
  /** Upstream protocol. */
  kind: "mcp";
  /** `stdio` (a child process) or `http` (Streamable HTTP). */
  transport: "stdio" | "http";
  /** Where it is declared: `config.json` or `toolgate plugins add`. */
  source: "config" | "cli";
  /** Connection state; `reconnecting` while restarts back off. */
  connection: UpstreamConnectionState;
  /** Process id of a stdio upstream while it runs. */
  pid?: number;
  /** Reconnections after the first connection. */
  restarts: number;
  /** The upstream's name and version from its handshake. */
  server?: { name: string; version: string };
  /** The MCP revision agreed with it: `2026-07-28`, or a 2025 one after the `initialize` handshake. */
  protocol_version?: string;
  /** Last connection or transport error (kept after recovery). */
  last_error?: string;
  /** When `last_error` happened (ISO 8601 UTC). */
  last_error_at?: string;
  /** When the next reconnection attempt starts (ISO 8601 UTC), while reconnecting. */
  next_attempt_at?: string;
}

/**
 * Lifecycle state of a plugin. `reconnecting`: a ready proxy plugin whose
 * upstream is down; its tools fail fast with `PLUGIN_REQUEST_FAILED` until it
 * is back.
 */
export type PluginState =
  | "initializing"
  | "ready"
  | "reconnecting"
  | "not_configured"
  | "error"
  | "disabled";

/** A plugin's status as shown by `plugins list` and `/health`. */
export interface PluginStatus {
  name: string;
  version: string;
  state: PluginState;
  tool_count: number;
  zero_config: boolean;
  error?: string;
  error_code?: string;
  /** Last runtime error of a proxy plugin's upstream (kept after recovery). */
  last_error?: string;
  /** Live state of a proxy plugin's upstream server. */
  upstream?: UpstreamStatus;
}

/** A tool as listed to clients. */
export interface ToolInfo {
  name: string;
  description: string;
  plugin: string;
  inputSchema: Record<string, unknown>;
  /** For MCP clients only (see {@linkcode ToolDefinition.mcpListing}). */
  mcpListing?: Record<string, unknown>;
}

/** A circuit that is open, as `/health`, the metrics and the console show it. */
export interface OpenCircuit {
  tool_name: string;
  plugin: string;
  /**
   * The destination whose circuit is open, for a tool with one breaker per
   * destination (see {@linkcode ToolDefinition.breakerKey}); absent when the
   * tool's own circuit is open.
   */
  destination?: string;
  /** When it closes (ISO 8601 UTC). */
  closes_at: string;
}

/** Who called a tool. */
export interface CallOptions {
  /** Session id for events and audit. @default a new id */
  sessionId?: string;
  /** Aborts the call (client went away). */
  signal?: AbortSignal;
  /** Entry point, recorded in the audit log (`rest`, `mcp`, `cli`, `webhook`). */
  source?: string;
  /**
   * Who is calling: a call outside its tool patterns is refused with
   * `FORBIDDEN` (and audited); recorded in the audit entry as `caller`.
   * @default none recorded, every tool allowed (the local caller)
   */
  caller?: Caller;
  /** Told how far the tool got, when it reports it (an MCP client's progress token). */
  onProgress?: (update: ProgressUpdate) => void;
  /** Told the log messages the tool sends while it runs (an MCP upstream's `notifications/message`). */
  onLogMessage?: (message: LogMessage) => void;
  /**
   * Answers the tool's requests for input (an MCP upstream's elicitation,
   * sampling or roots request) by asking the caller. The time spent waiting
   * for the answer does not count toward the tool's timeout.
   */
  input?: CallerInput;
  /**
   * The trace the call continues (an MCP request's `_meta`, an incoming
   * payload's span): its span's parent. @default the active span
   */
  trace?: TraceCarrier | string;
  /**
   * An approval that lets the call run (a server's runner of approved calls
   * passes it, claimed): checked against the call instead of asking again.
   */
  approval?: HeldApproval;
  /**
   * How long the call may wait in this request for someone else's approval,
   * in ms (REST `?wait=`; MCP waits until the approval's timeout). @default 0
   */
  approvalWaitMs?: number;
}

/** An approval a call runs under (`apr_…`). */
export interface HeldApproval {
  id: string;
}

/** A call a policy holds for approval. */
export interface HeldCall {
  tool: string;
  plugin: string;
  args: Record<string, unknown>;
  caller?: Caller;
  transport: string;
  server?: string;
}

/** Approvals (`require_approval` rules): what holds a call until a person decides. */
export interface ApprovalGate {
  /**
   * Holds `call` until it may run. @returns The approval it runs under.
   * @throws {GatewayError} `APPROVAL_REQUIRED` (pending past the wait, or the
   * caller must confirm and cannot be asked), `APPROVAL_DENIED`, `APPROVAL_EXPIRED`.
   */
  hold(
    call: HeldCall,
    decision: PolicyDecision,
    options: {
      waitMs: number;
      signal?: AbortSignal;
      onProgress?: (update: ProgressUpdate) => void;
      input?: CallerInput;
    },
  ): Promise<HeldApproval>;
  /** @throws {GatewayError} `APPROVAL_REQUIRED` when `approval` does not let `call` run. */
  check(approval: HeldApproval, call: HeldCall, decision: PolicyDecision): void;
  /** Records how the approved call ended. */
  finish(
    approval: HeldApproval,
    outcome: { output: Record<string, unknown> } | { error: GatewayError },
  ): Promise<void>;
}

/** How a request's caller can be asked for input, when it can (what plugins are handed). */
export interface CallerInput {
  /** Asks the caller (elicitation, sampling, roots). */
  ask?: AskCaller;
  /** Which of those the caller answers: what a 2026 upstream is told the client can do. */
  capabilities?: InputCapabilities;
}

/** The MCP client capabilities that say which requests for input a client answers. */
export interface InputCapabilities {
  elicitation?: Record<string, unknown>;
  sampling?: Record<string, unknown>;
  roots?: Record<string, unknown>;
}

/** What a tool may ask its caller mid-call: MCP's client requests. */
export type InputMethod = "elicitation/create" | "sampling/createMessage" | "roots/list";

/** One request for the caller's input (an MCP `inputRequests` entry). */
export interface InputRequest {
  method: InputMethod;
  params?: Record<string, unknown>;
}

/**
 * Asks the caller the given requests (keyed as the tool chose) and resolves
 * with the caller's answer to each, under the same keys.
 *
 * @throws {GatewayError} when the caller cannot answer (its client lacks the
 * capability), does not answer in time (`CANCELLED`), or goes away.
 */
export type AskCaller = (
  requests: Record<string, InputRequest>,
  signal: AbortSignal,
) => Promise<Record<string, unknown>>;

/** A log message of MCP (`notifications/message` params). */
export interface LogMessage {
  level: "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency";
  data: unknown;
  logger?: string;
}

/** How far a tool got (MCP `notifications/progress` without the token). */
export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
}

/** A successful tool call. */
export interface CallResult {
  tool: string;
  plugin: string;
  output: ToolOutput;
  latency_ms: number;
  /** The output is a client-facing tool result (see {@linkcode ToolDefinition.rawResult}). */
  rawResult?: boolean;
  /**
   * The signed receipt of the call's audit entry (`{log, seq, entry_hash,
   * timestamp, signature}`), when receipts are on.
   */
  receipt?: Readonly<Record<string, unknown>>;
}

/** The audit entry of a call, as a receipt covers it. */
export interface AuditedEntry {
  seq: number;
  entry_hash: string;
  timestamp: string;
}

/** Signs the receipt of an audit entry (the audit log's key). */
export type ReceiptSigner = (entry: AuditedEntry) => Readonly<Record<string, unknown>>;

/** Where the pipeline records calls: the audit log. */
export interface AuditSink {
  /**
   * Appends durably; resolves once committed. A sink that
   * {@linkcode AuditSink.publishesEvents} also emits `options.events` once
   * the entry is committed (their webhook deliveries in the same commit).
   */
  append(
    entry: {
      kind: string;
      tool: string;
      session_id?: string;
      caller?: AuditCaller;
      input: unknown;
      outcome: Record<string, unknown>;
    },
    options?: { events?: readonly { type: "tool.called"; data: EventData<"tool.called"> }[] },
  ): Promise<unknown>;
  /** Whether `append` emits the attached events itself. @default false */
  readonly publishesEvents?: boolean;
  /**
   * Announces an append that is coming, so concurrent ones can share a
   * commit; the returned function is called once it was made or will not be.
   * @default none
   */
  expect?(): () => void;
}

/** A prompt as a plugin offers it. */
export interface PromptEntry {
  /** The gateway's name of the prompt (`<plugin>__<prompt>` for an upstream's). */
  name: string;
  /** The plugin's own name of it (what its `completion/complete` knows). */
  ownName: string;
  /** What clients see in `prompts/list` besides the name (description, arguments, title, icons, `_meta`). */
  info: Record<string, unknown>;
  /** Gets the prompt with its arguments (`prompts/get` upstream), asking the caller what the plugin needs. */
  get(
    args: Record<string, string>,
    signal: AbortSignal,
    input?: CallerInput,
  ): Promise<Record<string, unknown>>;
  /**
   * Why the plugin holds the prompt back (`TOOL_QUARANTINED`: pinning): it is
   * not listed, and a get is refused with this. @default offered
   */
  withheld?: GatewayError;
}

/** What one plugin offers beside its tools. */
export interface CatalogSource {
  /** Its prompts. */
  prompts: PromptEntry[];
  /** Its resources as listed (each with `uri`). */
  resources: Record<string, unknown>[];
  /** Its resource templates as listed (each with `uriTemplate`). */
  templates: Record<string, unknown>[];
  /** Reads a resource (`resources/read` upstream); a missing one throws `NOT_FOUND`. */
  read(uri: string, signal: AbortSignal, input?: CallerInput): Promise<Record<string, unknown>>;
  /** Completes a prompt or template argument (`completion/complete` upstream). */
  complete?(params: CompleteParams, signal: AbortSignal): Promise<Record<string, unknown>>;
  /**
   * Asks to be told when a resource changes (`resources/subscribe`, or a
   * 2026-07-28 `subscriptions/listen`, upstream); the plugin then reports
   * updates with `PluginContext.resourceUpdated`. Absent: no subscriptions.
   */
  subscribe?(uri: string): Promise<void>;
  /** Stops the updates of a resource. */
  unsubscribe?(uri: string): Promise<void>;
}

/** `completion/complete` params: the prompt (by the plugin's own name) or template, and the argument. */
export interface CompleteParams {
  ref: { type: "ref/prompt"; name: string } | { type: "ref/resource"; uri: string };
  argument: { name: string; value: string };
  context?: { arguments?: Record<string, string> };
}
