/**
 * Wire schemas of the 8 event types and the envelope (spec §2.3, §6), and
 * of the opt-in types (`approval.requested`, `approval.decided`,
 * `tool.quarantined`): sent only to webhooks that name them in their
 * events, and on `/events` only when asked for by name.
 *
 * @module
 */
import { z } from "zod";

/** `tool.called`: a tool execution completed successfully. */
export const ToolCalledDataSchema = z.object({
  tool_name: z.string(),
  plugin: z.string(),
  input: z.record(z.string(), z.unknown()),
  output: z.record(z.string(), z.unknown()),
  latency_ms: z.number().int().min(0),
  session_id: z.string(),
});

/** `tool.failed`: a tool threw an error or timed out. */
export const ToolFailedDataSchema = z.object({
  tool_name: z.string(),
  plugin: z.string(),
  error: z.string(),
  error_code: z.string(),
  circuit_state: z.string(),
  attempt: z.number().int().min(1),
});

/** `plugin.ready`: a plugin initialized and registered its tools. */
export const PluginReadyDataSchema = z.object({
  plugin_name: z.string(),
  tool_count: z.number().int().min(0),
  zero_config: z.boolean(),
  version: z.string(),
});

/** `plugin.error`: a plugin failed to initialize or is not configured. */
export const PluginErrorDataSchema = z.object({
  plugin_name: z.string(),
  error: z.string(),
  error_code: z.string(),
  state: z.string(),
});

/** `circuit.opened`: a circuit breaker opened after repeated failures. */
export const CircuitOpenedDataSchema = z.object({
  tool_name: z.string(),
  plugin: z.string(),
  failure_count: z.number().int().min(0),
  threshold: z.number().int().min(1),
  reset_after_ms: z.number().int().min(0),
});

/** `circuit.closed`: a circuit breaker reset. */
export const CircuitClosedDataSchema = z.object({
  tool_name: z.string(),
  plugin: z.string(),
  downtime_ms: z.number().int().min(0),
});

/** `audit.written`: an entry was appended to the audit log. */
export const AuditWrittenDataSchema = z.object({
  seq: z.number().int().min(1),
  entry_hash: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  previous_hash: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  tool: z.string(),
  chain_intact: z.boolean(),
});

/** `server.started`: the server finished initialization. */
export const ServerStartedDataSchema = z.object({
  version: z.string(),
  tool_count: z.number().int().min(0),
  plugin_count: z.number().int().min(0),
  transport: z.string(),
  zero_config_plugins: z.number().int().min(0),
});

/** The `data` schema of each event type. */
export const EVENT_DATA_SCHEMAS = {
  "tool.called": ToolCalledDataSchema,
  "tool.failed": ToolFailedDataSchema,
  "plugin.ready": PluginReadyDataSchema,
  "plugin.error": PluginErrorDataSchema,
  "circuit.opened": CircuitOpenedDataSchema,
  "circuit.closed": CircuitClosedDataSchema,
  "audit.written": AuditWrittenDataSchema,
  "server.started": ServerStartedDataSchema,
} as const;

const CallerSchema = z.object({
  kind: z.string(),
  id: z.string().optional(),
  name: z.string().optional(),
});

/** `approval.requested` (opt-in): a policy holds a call until a person decides. */
export const ApprovalRequestedDataSchema = z.object({
  approval_id: z.string(),
  tool_name: z.string(),
  plugin: z.string(),
  caller: CallerSchema,
  policy: z.string(),
  reason: z.string().nullable(),
  approvers: z.array(z.string()),
  args_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  expires_at: z.string(),
  url: z.string(),
});

/** `approval.decided` (opt-in): a held call was approved or denied. */
export const ApprovalDecidedDataSchema = z.object({
  approval_id: z.string(),
  tool_name: z.string(),
  status: z.enum(["approved", "denied"]),
  decided_by: z.string(),
  reason: z.string().nullable(),
  decided_at: z.string(),
});

/** `tool.quarantined` (opt-in): an upstream changed a pinned definition, or offers a new one held. */
export const ToolQuarantinedDataSchema = z.object({
  tool_name: z.string(),
  plugin: z.string(),
  kind: z.enum(["tool", "prompt", "resource_template"]),
  status: z.enum(["changed", "new", "rejected"]),
  changed: z.array(z.string()),
  pinned_sha256: z.string().nullable(),
  offered_sha256: z.string().nullable(),
});

/** The `data` schema of each opt-in event type. */
export const OPT_IN_EVENT_DATA_SCHEMAS = {
  "approval.requested": ApprovalRequestedDataSchema,
  "approval.decided": ApprovalDecidedDataSchema,
  "tool.quarantined": ToolQuarantinedDataSchema,
} as const;

/** The `data` schema of every event type. */
export const ALL_EVENT_DATA_SCHEMAS = { ...EVENT_DATA_SCHEMAS, ...OPT_IN_EVENT_DATA_SCHEMAS };

/** One of the 8 default event types. */
export type DefaultEventType = keyof typeof EVENT_DATA_SCHEMAS;

/** The 8 event types, in documentation order: the default set. */
export const EVENT_TYPES = Object.keys(EVENT_DATA_SCHEMAS) as DefaultEventType[];

/** The opt-in event types: only those who name them get them. */
export const OPT_IN_EVENT_TYPES = Object.keys(OPT_IN_EVENT_DATA_SCHEMAS) as EventType[];

/** Every event type: the 8, then the opt-in ones. */
export const ALL_EVENT_TYPES: readonly EventType[] = [...EVENT_TYPES, ...OPT_IN_EVENT_TYPES];

/** One of the event types (the 8 and the opt-in ones). */
export type EventType = keyof typeof ALL_EVENT_DATA_SCHEMAS;

/** The `data` of an event of type `T`. */
export type EventData<T extends EventType> = z.infer<(typeof ALL_EVENT_DATA_SCHEMAS)[T]>;

/** Whether `type` is one of the 8 default types (not opt-in). */
export function isDefaultEventType(type: string): boolean {
  return Object.hasOwn(EVENT_DATA_SCHEMAS, type);
}

/** The valid types, for messages: `a, b, … (opt-in: x, y)`. */
export function describeEventTypes(): string {
  return `${EVENT_TYPES.join(", ")} (opt-in, only when named: ${OPT_IN_EVENT_TYPES.join(", ")})`;
}

/** Type of the ping sent by `webhooks test`; never emitted otherwise. */
export const TEST_EVENT_TYPE = "webhook.test";

/** Schema of an event type name (the 8 and the opt-in ones). */
export const EventTypeSchema = z.enum(ALL_EVENT_TYPES as [EventType, ...EventType[]]);

/** The envelope every outgoing event uses. */
export const EventEnvelopeSchema = z.object({
  id: z.string().regex(/^evt_[0-9a-z]+$/),
  type: z.string(),
  timestamp: z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
  data: z.record(z.string(), z.unknown()),
});

/** An event envelope. */
export type EventEnvelope<T extends string = string> = {
  id: string;
  type: T;
  timestamp: string;
  data: T extends EventType ? EventData<T> : Record<string, unknown>;
};

/** Whether `name` is an event type (one of the 8 or an opt-in one). */
export function isEventType(name: string): name is EventType {
  return Object.hasOwn(ALL_EVENT_DATA_SCHEMAS, name);
}
