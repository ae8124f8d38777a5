/**
 * toolgate's own spans, on the OpenTelemetry API that Deno's built-in
 * support implements (`OTEL_DENO=true`). The hooks here do nothing until
 * {@linkcode loadTracing} finds tracing on; then they hand over to
 * `_otel.ts`, loaded only then. With tracing off every hook returns at once:
 * no span object, no context, and the API is never loaded.
 *
 * @module
 */
import type {
  EndableSpan,
  TraceAttributes,
  TraceCarrier,
  TracedOptions,
  TraceSpan,
} from "./_types.ts";

export type {
  EndableSpan,
  TraceAttributes,
  TraceCarrier,
  TracedOptions,
  TraceSpan,
  TraceSpanKind,
} from "./_types.ts";

/** The hooks' implementation, once {@linkcode loadTracing} found tracing on. */
let otel: typeof import("./_otel.ts") | undefined;

/** The span handle while the hooks do nothing. */
const NO_SPAN: TraceSpan = {
  set() {},
  fail() {},
  traceparent: () => undefined,
};

/**
 * Switches the hooks on when `env` turns Deno's tracing on (`OTEL_DENO`) and
 * a tracer provider is registered; loads the OpenTelemetry API only then.
 * Call it once at start-up, before traced work.
 *
 * @param env The process environment (the config's `env`).
 */
export async function loadTracing(env: Readonly<Record<string, string>>): Promise<void> {
  const flag = env.OTEL_DENO?.trim().toLowerCase();
  if (!flag || flag === "false" || flag === "0") return;
  const implementation = await import("./_otel.ts");
  if (implementation.providerRegistered()) otel = implementation;
}

/**
 * Switches every hook of this process off, for a benchmark that measures
 * what the hooks cost (`TOOLGATE_BENCH_LAYERS_OFF=tracing`).
 */
export function switchOffTracing(): void {
  otel = undefined;
}

/**
 * Runs `fn` inside a new span, the active span while it runs. A throw marks
 * the span failed (`error.type`: a `GatewayError`'s code, else the error's
 * name; not its message) and is rethrown; the span ends when `fn` settles.
 *
 * @example
 * ```ts
 * const output = await traced("execute_tool echo", { attributes: { "gen_ai.tool.name": "echo" } },
 *   (span) => run());
 * ```
 */
export function traced<T>(
  name: string,
  options: TracedOptions,
  fn: (span: TraceSpan) => Promise<T>,
): Promise<T> {
  return otel ? otel.traced(name, options, fn) : fn(NO_SPAN);
}

/**
 * Starts a span under the active one without making it active: for work
 * that starts nothing of its own (a write that joins a group commit). The
 * caller ends it.
 *
 * @returns `undefined` when the span is not recorded (tracing off, or not sampled): nothing to end.
 */
export function startSpan(name: string, attributes?: TraceAttributes): EndableSpan | undefined {
  return otel?.startSpan(name, attributes);
}

/**
 * Runs `fn` outside any trace: for background work started on a caller's
 * path (a commit loop shared by many callers) that must not join that
 * caller's trace.
 */
export function untraced<T>(fn: () => T): T {
  return otel ? otel.untraced(fn) : fn();
}

/** Sets attributes on the active span, if any (`undefined` values are left out). */
export function annotate(attributes: TraceAttributes): void {
  otel?.annotate(attributes);
}

/** The ids of the active span, or `undefined` when there is none (tracing off). */
export function activeTraceIds(): { trace_id: string; span_id: string } | undefined {
  return otel?.activeTraceIds();
}

/** The active span as a `traceparent` value, or `undefined` when there is none (tracing off). */
export function activeTraceparent(): string | undefined {
  return otel?.activeTraceparent();
}

/**
 * The active trace context as headers (`traceparent`, `tracestate`,
 * `baggage`) for a request that continues the trace; empty when tracing is off.
 */
export function traceHeaders(): Record<string, string> {
  return otel ? otel.traceHeaders() : {};
}

/**
 * The trace fields of an MCP request's `_meta` (SEP-414: `traceparent`,
 * `tracestate`, `baggage`), or `undefined` when it has no `traceparent`.
 */
export function traceCarrierOf(meta: unknown): TraceCarrier | undefined {
  if (!meta || typeof meta !== "object") return undefined;
  const { traceparent, tracestate, baggage } = meta as Record<string, unknown>;
  if (typeof traceparent !== "string") return undefined;
  return {
    traceparent,
    ...(typeof tracestate === "string" ? { tracestate } : {}),
    ...(typeof baggage === "string" ? { baggage } : {}),
  };
}
