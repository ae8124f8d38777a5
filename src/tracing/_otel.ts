/**
 * The tracing hooks on the OpenTelemetry API that Deno's built-in support
 * implements: loaded by `spans.ts` only when tracing is on, so a process
 * without `OTEL_DENO` never loads the API. Private to `src/tracing`.
 *
 * @module
 */
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from "@opentelemetry/api";
import { VERSION } from "../version.ts";
import type {
  EndableSpan,
  TraceAttributes,
  TraceCarrier,
  TracedOptions,
  TraceSpan,
  TraceSpanKind,
} from "./_types.ts";

const KINDS: Record<TraceSpanKind, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

let tracer: Tracer | undefined;

function getTracer(): Tracer {
  return tracer ??= trace.getTracer("toolgate", VERSION);
}

const carrierGetter = {
  keys: (carrier: TraceCarrier) => Object.keys(carrier),
  get: (carrier: TraceCarrier, key: string) => {
    const value = carrier[key as keyof TraceCarrier];
    return typeof value === "string" ? value : undefined;
  },
};

const carrierSetter = {
  set: (carrier: Record<string, string>, key: string, value: string) => {
    carrier[key] = value;
  },
};

/** The context a carrier names as parent, or `undefined` when it names none. */
function remoteParent(parent: TraceCarrier | string | undefined): Context | undefined {
  if (parent === undefined) return undefined;
  const carrier = typeof parent === "string" ? { traceparent: parent } : parent;
  if (typeof carrier.traceparent !== "string") return undefined;
  const extracted = propagation.extract(ROOT_CONTEXT, carrier, carrierGetter);
  const span = trace.getSpanContext(extracted);
  return span && isSpanContextValid(span) ? extracted : undefined;
}

function cleanAttributes(attributes: TraceAttributes): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) {
    if (value !== undefined) out[key] = value;
  }
  return out;
}

function handleOf(span: Span): TraceSpan {
  return {
    set(attributes) {
      if (span.isRecording()) span.setAttributes(cleanAttributes(attributes));
    },
    fail(errorType, message) {
      span.setAttribute("error.type", errorType);
      span.setStatus({ code: SpanStatusCode.ERROR, ...(message ? { message } : {}) });
    },
    traceparent() {
      return formatTraceparent(span);
    },
  };
}

function formatTraceparent(span: Span): string | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  if (!isSpanContextValid(span.spanContext())) return undefined;
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
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
  const parent = remoteParent(options.parent) ?? (options.root ? ROOT_CONTEXT : context.active());
  const span = getTracer().startSpan(name, {
    kind: KINDS[options.kind ?? "internal"],
    ...(options.attributes ? { attributes: cleanAttributes(options.attributes) } : {}),
  }, parent);
  const handle = handleOf(span);
  // Tracing off: nothing to propagate, so no context to enter.
  if (!span.isRecording() && !isSpanContextValid(span.spanContext())) return fn(handle);
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn(handle);
    } catch (error) {
      // The type only: an error's message may quote what the tool was given or answered.
      handle.fail(errorTypeOf(error));
      throw error;
    } finally {
      span.end();
    }
  });
}

function errorTypeOf(error: unknown): string {
  if (error && typeof error === "object" && "code" in error && typeof error.code === "string") {
    return error.code;
  }
  return error instanceof Error ? error.name : "Error";
}

/**
 * Starts a span under the active one without making it active: for work
 * that starts nothing of its own (a write that joins a group commit). The
 * caller ends it.
 *
 * @returns `undefined` when the span is not recorded (tracing off, or not sampled): nothing to end.
 */
export function startSpan(name: string, attributes?: TraceAttributes): EndableSpan | undefined {
  const span = getTracer().startSpan(
    name,
    attributes ? { attributes: cleanAttributes(attributes) } : {},
  );
  if (!span.isRecording()) return undefined;
  return Object.assign(handleOf(span), { end: () => span.end() });
}

/**
 * Runs `fn` outside any trace: for background work started on a caller's
 * path (a commit loop shared by many callers) that must not join that
 * caller's trace.
 */
export function untraced<T>(fn: () => T): T {
  return context.with(ROOT_CONTEXT, fn);
}

/** Sets attributes on the active span, if any (`undefined` values are left out). */
export function annotate(attributes: TraceAttributes): void {
  const span = trace.getActiveSpan();
  if (span?.isRecording()) span.setAttributes(cleanAttributes(attributes));
}

/** The ids of the active span, or `undefined` when there is none (tracing off). */
export function activeTraceIds(): { trace_id: string; span_id: string } | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const spanContext = span.spanContext();
  if (!isSpanContextValid(spanContext)) return undefined;
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

/** The active span as a `traceparent` value, or `undefined` when there is none (tracing off). */
export function activeTraceparent(): string | undefined {
  const span = trace.getActiveSpan();
  return span ? formatTraceparent(span) : undefined;
}

/**
 * The active trace context as headers (`traceparent`, `tracestate`,
 * `baggage`) for a request that continues the trace; empty when tracing is off.
 */
export function traceHeaders(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier, carrierSetter);
  return carrier;
}

/** Whether a tracer provider other than the API's no-op is registered (Deno's, with `OTEL_DENO`). */
export function providerRegistered(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) ||
    provider.getDelegateTracer("toolgate") !== undefined;
}
