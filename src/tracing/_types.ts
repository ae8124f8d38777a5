/**
 * The shapes toolgate's tracing hooks take and give, shared by the hooks
 * (`spans.ts`) and their OpenTelemetry implementation (`_otel.ts`).
 *
 * @module
 */

/** The W3C Trace Context fields (and W3C Baggage) as headers or MCP `_meta` carry them. */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
  baggage?: string;
}

/** What a span is to its trace: see the OpenTelemetry span kinds. */
export type TraceSpanKind = "internal" | "server" | "client" | "producer" | "consumer";

/** Span attribute values toolgate sets. */
export type TraceAttributes = Record<string, string | number | boolean | undefined>;

/** Options of `traced()`. */
export interface TracedOptions {
  /** @default "internal" */
  kind?: TraceSpanKind;
  /** Set when the span starts (`undefined` values are left out). */
  attributes?: TraceAttributes;
  /**
   * The remote parent (an MCP request's `_meta`, a stored event's
   * `traceparent`); when it holds no valid `traceparent` the span's parent
   * is the active span. @default the active span
   */
  parent?: TraceCarrier | string;
  /**
   * Without a valid `parent`, start a new trace instead of joining the
   * active span (background work: a delivery attempt whose event has no
   * stored trace). @default false
   */
  root?: boolean;
}

/** A started span, as the code that runs inside it sees it. */
export interface TraceSpan {
  /** Sets attributes (`undefined` values are left out). */
  set(attributes: TraceAttributes): void;
  /** Marks the span failed with a short error type (an error code, `500`, `timeout`). */
  fail(errorType: string, message?: string): void;
  /** This span as a `traceparent` value, or `undefined` when tracing is off. */
  traceparent(): string | undefined;
}

/** A span started with `startSpan()`: ended by its owner. */
export interface EndableSpan extends TraceSpan {
  /** Ends it; call it once. */
  end(): void;
}
