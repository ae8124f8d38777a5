/**
 * OpenTelemetry traces: toolgate's own spans (a tool call, its audit append,
 * each webhook delivery attempt, an incoming payload, an upstream request)
 * and W3C Trace Context propagation, on Deno's built-in OpenTelemetry
 * support. Switched on with the standard variables (`OTEL_DENO=true`,
 * `OTEL_EXPORTER_OTLP_ENDPOINT`, ...) and {@linkcode loadTracing} at
 * start-up; off, every function here returns at once, and
 * `@opentelemetry/api` is not even loaded.
 *
 * @example
 * ```ts
 * import { traced, traceHeaders } from "./src/tracing/mod.ts";
 * await traced("webhook.deliver", { kind: "client", parent: event.traceparent }, async (span) => {
 *   const headers = { ...traceHeaders() }; // traceparent of this span
 *   span.set({ "http.response.status_code": 204 });
 * });
 * ```
 *
 * @module
 */
export {
  activeTraceIds,
  activeTraceparent,
  annotate,
  type EndableSpan,
  loadTracing,
  startSpan,
  switchOffTracing,
  type TraceAttributes,
  type TraceCarrier,
  traceCarrierOf,
  traced,
  type TracedOptions,
  traceHeaders,
  type TraceSpan,
  type TraceSpanKind,
  untraced,
} from "./spans.ts";
