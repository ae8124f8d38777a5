/**
 * Prometheus metrics (`GET /metrics`): a {@linkcode ToolgateMetrics} per
 * server, fed by observers on the gateway, the webhook dispatcher, the
 * incoming router and the audit log, and by gauges read at scrape time.
 * prom-client is loaded only here.
 *
 * @example
 * ```ts
 * const metrics = new ToolgateMetrics();
 * const gateway = new Gateway({ ...options, onCall: (call) => metrics.observeToolCall(call) });
 * metrics.watch({ gateway });
 * const text = await metrics.scrape();
 * ```
 *
 * @module
 */
export { PLUGIN_STATES, ToolgateMetrics, UPSTREAM_CONNECTIONS } from "./metrics.ts";
export type {
  AuditAppendObservation,
  DeliveryAttemptObservation,
  IncomingObservation,
  MetricsSources,
  ToolCallObservation,
  ToolgateMetricsOptions,
} from "./metrics.ts";
