/**
 * The Prometheus metrics of one server, on a registry of its own (so several
 * servers in one process, as in the tests, never share a series).
 *
 * @module
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** A finished tool call, as the gateway reports it. */
export interface ToolCallObservation {
  tool: string;
  plugin: string;
  /** Entry point: `rest`, `mcp-http`, `mcp-stdio`, `cli`, `webhook`, `api`. */
  source: string;
  /** The error code of a failed call; `undefined` when it succeeded. */
  errorCode?: string;
  /** From the call's start to its answer (audit append included), in ms. */
  durationMs: number;
}

/** One attempt to deliver an outgoing webhook, as the dispatcher reports it. */
export interface DeliveryAttemptObservation {
  webhookId: string;
  /** A 2xx response arrived in time. */
  ok: boolean;
  /** HTTP status, when a response arrived. */
  status?: number;
  /** Until the response headers (or the failure), in ms. */
  durationMs: number;
}

/** An incoming payload's answer, as the incoming router reports it. */
export interface IncomingObservation {
  endpointId: string;
  status: "accepted" | "skipped" | "duplicate" | "rejected";
  /** The error code of a rejected payload. */
  code?: string;
}

/** One audit append, once committed or failed. */
export interface AuditAppendObservation {
  ok: boolean;
  /** From `append()` to the commit (or its failure), in ms. */
  durationMs: number;
}

/** What the scrape-time gauges read. Each part is optional. */
export interface MetricsSources {
  /** Circuits, plugin and upstream states. */
  gateway?: {
    listTools(): { name: string; plugin: string }[];
    /** A `destination` for a tool with a circuit breaker per destination (`http_request`). */
    openCircuits(): { tool_name: string; destination?: string }[];
    listPlugins(): {
      name: string;
      state: string;
      upstream?: { transport: string; connection: string; restarts: number };
    }[];
  };
  /** Deliveries held in memory by this process. */
  dispatcher?: { readonly pending: number };
  /** The readiness check of `/health/ready` (its store probe is shared, at most once a second). */
  readiness?: { check(): Promise<readonly unknown[]> };
  /** Dead-letter records in the store (counted at most every `dlqRefreshMs`). */
  deadLetters?: () => Promise<number>;
  /** Incoming payloads waiting for their handler. */
  incoming?: {
    endpoints(): { id: string }[];
    waiting(endpointId?: string): number;
  };
}

/** Options of {@linkcode ToolgateMetrics}. */
export interface ToolgateMetricsOptions {
  /**
   * Process figures (prom-client's default metrics: CPU, memory, heap, event
   * loop lag, open file descriptors), prefixed `toolgate_`. @default true
   */
  processMetrics?: boolean;
  /** How long a count of the dead-letter queue is reused, in ms. @default 15000 */
  dlqRefreshMs?: number;
  /** Clock for the dead-letter count's age, in ms. @default performance.now */
  now?: () => number;
}

/** The plugin states a `toolgate_plugin_state` series exists for. */
export const PLUGIN_STATES = [
  "initializing",
  "ready",
  "reconnecting",
  "not_configured",
  "error",
  "disabled",
] as const;

/** The upstream connection states a `toolgate_upstream_connection` series exists for. */
export const UPSTREAM_CONNECTIONS = ["connecting", "connected", "reconnecting", "closed"] as const;

const CALL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const DELIVERY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const AUDIT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** `ok`, or the class of a non-2xx status (`4xx`), or `error` when no response came. */
function deliveryOutcome(attempt: DeliveryAttemptObservation): string {
  if (attempt.ok) return "ok";
  if (attempt.status === undefined) return "error";
  return `${Math.floor(attempt.status / 100)}xx`;
}

/**
 * A server's metrics: counters and histograms fed by the `observe*` methods
 * (wired to the gateway, dispatcher, incoming router and audit log), gauges
 * read from {@linkcode MetricsSources} at scrape time.
 *
 * @example
 * ```ts
 * const metrics = new ToolgateMetrics();
 * metrics.observeToolCall({ tool: "echo", plugin: "demo", source: "rest", durationMs: 3 });
 * metrics.watch({ gateway });
 * const text = await metrics.scrape(); // Prometheus text format 0.0.4
 * ```
 */
export class ToolgateMetrics {
  /** The registry; every metric of this server and nothing else. */
  readonly registry: Registry = new Registry();
  #sources: MetricsSources = {};
  #dlqRefreshMs: number;
  #now: () => number;
  #dlq: { count: number; at: number } | undefined;
  #dlqCounting: Promise<void> | undefined;
  #toolCalls: Counter<"tool" | "plugin" | "transport" | "outcome">;
  #toolSeconds: Histogram<"tool" | "transport" | "outcome">;
  #attempts: Counter<"webhook_id" | "outcome">;
  #attemptSeconds: Histogram<"webhook_id">;
  #deadLettered: Counter<"webhook_id">;
  #undeliverable: Counter<"reason">;
  #incoming: Counter<"endpoint_id" | "status" | "code">;
  #auditAppends: Counter<"outcome">;
  #auditSeconds: Histogram;

  /** @param options Process figures and the dead-letter count's refresh. */
  constructor(options: ToolgateMetricsOptions = {}) {
    const { processMetrics = true, dlqRefreshMs = 15_000, now = () => performance.now() } = options;
    if (!(dlqRefreshMs >= 0)) {
      throw new RangeError(`Invalid dlqRefreshMs: ${dlqRefreshMs} is not a number of ms >= 0`);
    }
    this.#dlqRefreshMs = dlqRefreshMs;
    this.#now = now;
    const registers = [this.registry];
    if (processMetrics) collectDefaultMetrics({ register: this.registry, prefix: "toolgate_" });
    this.#toolCalls = new Counter({
      name: "toolgate_tool_calls_total",
      help: "Tool calls answered, by tool, plugin, transport and outcome (ok or the error code)",
      labelNames: ["tool", "plugin", "transport", "outcome"],
      registers,
    });
    this.#toolSeconds = new Histogram({
      name: "toolgate_tool_call_duration_seconds",
      help: "Time from a tool call's start to its answer, audit append included",
      labelNames: ["tool", "transport", "outcome"],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.#attempts = new Counter({
      name: "toolgate_webhook_delivery_attempts_total",
      help: "Outgoing webhook delivery attempts, by webhook and outcome (ok, 3xx, 4xx, 5xx, error)",
      labelNames: ["webhook_id", "outcome"],
      registers,
    });
    this.#attemptSeconds = new Histogram({
      name: "toolgate_webhook_delivery_duration_seconds",
      help: "Time of a delivery attempt until the response headers (or the failure)",
      labelNames: ["webhook_id"],
      buckets: DELIVERY_BUCKETS,
      registers,
    });
    this.#deadLettered = new Counter({
      name: "toolgate_webhook_dead_lettered_total",
      help: "Deliveries this process moved to the dead-letter queue, by webhook",
      labelNames: ["webhook_id"],
      registers,
    });
    this.#undeliverable = new Counter({
      name: "toolgate_webhook_undeliverable_total",
      help: "Deliveries that could not be sent at all, by reason: body_missing (their " +
        "event's stored body was gone: dead-lettered with a reason), secret_unreadable " +
        "(their webhook's signing secret cannot be decrypted with this instance's key: " +
        "dead-lettered with a reason) or webhook_removed (their webhook was removed " +
        "meanwhile: given up)",
      labelNames: ["reason"],
      registers,
    });
    this.#incoming = new Counter({
      name: "toolgate_incoming_payloads_total",
      help: "Incoming webhook payloads, by endpoint and status (accepted, skipped, duplicate, " +
        "rejected with its error code)",
      labelNames: ["endpoint_id", "status", "code"],
      registers,
    });
    this.#auditAppends = new Counter({
      name: "toolgate_audit_appends_total",
      help: "Audit log appends, by outcome (ok, error)",
      labelNames: ["outcome"],
      registers,
    });
    this.#auditSeconds = new Histogram({
      name: "toolgate_audit_append_duration_seconds",
      help: "Time from an audit append to its commit (group commits shared with other appends)",
      buckets: AUDIT_BUCKETS,
      registers,
    });
    this.#scrapeTimeGauges(registers);
  }

  #scrapeTimeGauges(registers: Registry[]): void {
    const sources = () => this.#sources;
    new Gauge({
      name: "toolgate_circuit_open",
      help: "1 while a tool's circuit breaker is open (calls refused), else 0; for a tool " +
        "with a breaker per destination (http_request) also 1 per destination whose circuit " +
        "is open (label destination, at most 100 per tool)",
      labelNames: ["tool", "plugin", "destination"],
      registers,
      collect() {
        const { gateway } = sources();
        this.reset();
        if (!gateway) return;
        const circuits = gateway.openCircuits();
        const open = new Set<string>();
        const destinations = new Map<string, string[]>();
        for (const { tool_name, destination } of circuits) {
          if (destination === undefined) open.add(tool_name);
          else if (destinations.has(tool_name)) destinations.get(tool_name)!.push(destination);
          else destinations.set(tool_name, [destination]);
        }
        for (const tool of gateway.listTools()) {
          this.set({ tool: tool.name, plugin: tool.plugin }, open.has(tool.name) ? 1 : 0);
          for (const destination of destinations.get(tool.name) ?? []) {
            this.set({ tool: tool.name, plugin: tool.plugin, destination }, 1);
          }
        }
      },
    });
    new Gauge({
      name: "toolgate_plugin_state",
      help: "1 for a plugin's current state, 0 for the others",
      labelNames: ["plugin", "state"],
      registers,
      collect() {
        const { gateway } = sources();
        this.reset();
        for (const plugin of gateway?.listPlugins() ?? []) {
          for (const state of PLUGIN_STATES) {
            this.set({ plugin: plugin.name, state }, plugin.state === state ? 1 : 0);
          }
        }
      },
    });
    new Gauge({
      name: "toolgate_upstream_connection",
      help: "1 for an MCP upstream's current connection state, 0 for the others",
      labelNames: ["plugin", "transport", "connection"],
      registers,
      collect() {
        const { gateway } = sources();
        this.reset();
        for (const plugin of gateway?.listPlugins() ?? []) {
          const upstream = plugin.upstream;
          if (!upstream) continue;
          for (const connection of UPSTREAM_CONNECTIONS) {
            this.set(
              { plugin: plugin.name, transport: upstream.transport, connection },
              upstream.connection === connection ? 1 : 0,
            );
          }
        }
      },
    });
    new Gauge({
      name: "toolgate_upstream_restarts",
      help: "Times an MCP upstream was restarted since this server started",
      labelNames: ["plugin"],
      registers,
      collect() {
        const { gateway } = sources();
        this.reset();
        for (const plugin of gateway?.listPlugins() ?? []) {
          if (plugin.upstream) this.set({ plugin: plugin.name }, plugin.upstream.restarts);
        }
      },
    });
    new Gauge({
      name: "toolgate_webhook_deliveries_pending",
      help: "Outgoing deliveries this process holds: scheduled, running or being recorded",
      registers,
      collect() {
        const { dispatcher } = sources();
        this.set(dispatcher?.pending ?? 0);
      },
    });
    new Gauge({
      name: "toolgate_ready",
      help: "1 while this instance can serve calls and deliver (as GET /health/ready), else 0",
      registers,
      async collect() {
        const { readiness } = sources();
        if (readiness) this.set((await readiness.check()).length === 0 ? 1 : 0);
      },
    });
    const deadLetters = () => this.#deadLetters();
    new Gauge({
      name: "toolgate_webhook_dead_letters",
      help: "Records in the dead-letter queue (counted at most every 15 s)",
      registers,
      async collect() {
        const count = await deadLetters();
        if (count !== undefined) this.set(count);
      },
    });
    new Gauge({
      name: "toolgate_incoming_waiting",
      help: "Accepted incoming payloads waiting for their handler, by endpoint",
      labelNames: ["endpoint_id"],
      registers,
      collect() {
        const { incoming } = sources();
        this.reset();
        if (!incoming) return;
        for (const endpoint of incoming.endpoints()) {
          this.set({ endpoint_id: endpoint.id }, incoming.waiting(endpoint.id));
        }
      },
    });
  }

  /** The dead-letter count: reused for `dlqRefreshMs`, then counted again (scrapes meanwhile share it). */
  async #deadLetters(): Promise<number | undefined> {
    const count = this.#sources.deadLetters;
    if (!count) return undefined;
    if (this.#dlq && this.#now() - this.#dlq.at < this.#dlqRefreshMs) return this.#dlq.count;
    this.#dlqCounting ??= count().then(
      (n) => {
        this.#dlq = { count: n, at: this.#now() };
      },
      () => {}, // Keeps the last count; the store's own users report its failures.
    ).finally(() => this.#dlqCounting = undefined);
    await this.#dlqCounting;
    return this.#dlq?.count;
  }

  /**
   * The `observe*` methods, bound, under the names of the options of the
   * gateway (`onCall`), dispatcher (`onAttempt`, `onDeadLetter`), audit log
   * (`onAppend`) and incoming router (`onPayload`).
   */
  get observers(): {
    onCall: (call: ToolCallObservation) => void;
    onAttempt: (attempt: DeliveryAttemptObservation) => void;
    onDeadLetter: (webhookId: string) => void;
    onUndeliverable: (reason: string, count: number) => void;
    onAppend: (append: AuditAppendObservation) => void;
    onPayload: (payload: IncomingObservation) => void;
  } {
    return {
      onCall: (call) => this.observeToolCall(call),
      onAttempt: (attempt) => this.observeDeliveryAttempt(attempt),
      onDeadLetter: (webhookId) => this.observeDeadLetter(webhookId),
      onUndeliverable: (reason, count) => this.#undeliverable.inc({ reason }, count),
      onAppend: (append) => this.observeAuditAppend(append),
      onPayload: (payload) => this.observeIncoming(payload),
    };
  }

  /** Sets what the scrape-time gauges read (merged with what was set before). */
  watch(sources: MetricsSources): void {
    this.#sources = { ...this.#sources, ...sources };
  }

  /** Counts a finished tool call and its duration. */
  observeToolCall(call: ToolCallObservation): void {
    const outcome = call.errorCode ?? "ok";
    this.#toolCalls.inc({
      tool: call.tool,
      plugin: call.plugin,
      transport: call.source,
      outcome,
    });
    this.#toolSeconds.observe(
      { tool: call.tool, transport: call.source, outcome: call.errorCode ? "error" : "ok" },
      call.durationMs / 1000,
    );
  }

  /** Counts a delivery attempt and its duration. */
  observeDeliveryAttempt(attempt: DeliveryAttemptObservation): void {
    this.#attempts.inc({ webhook_id: attempt.webhookId, outcome: deliveryOutcome(attempt) });
    this.#attemptSeconds.observe({ webhook_id: attempt.webhookId }, attempt.durationMs / 1000);
  }

  /** Counts a delivery moved to the dead-letter queue. */
  observeDeadLetter(webhookId: string): void {
    this.#deadLettered.inc({ webhook_id: webhookId });
  }

  /** Counts an incoming payload by its answer. */
  observeIncoming(payload: IncomingObservation): void {
    this.#incoming.inc({
      endpoint_id: payload.endpointId,
      status: payload.status,
      code: payload.code ?? "",
    });
  }

  /** Counts an audit append and its time to commit. */
  observeAuditAppend(append: AuditAppendObservation): void {
    this.#auditAppends.inc({ outcome: append.ok ? "ok" : "error" });
    if (append.ok) this.#auditSeconds.observe(append.durationMs / 1000);
  }

  /** The `Content-Type` of {@linkcode ToolgateMetrics.scrape}'s text. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Every metric in the Prometheus text exposition format 0.0.4. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }
}
