/**
 * A local OTLP/HTTP endpoint for tests: receives the spans a process exports
 * (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`) on 127.0.0.1, port 0, and keeps
 * them in the shape the OTLP JSON encoding gives them.
 *
 * @module
 */
import { until } from "../_helpers.ts";

/** One exported span, its ids as hex strings. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** `""` for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
  /** The scope (tracer) that made it: `toolgate`, or `deno` for the runtime's own spans. */
  scope: string;
}

/** The OTel span kinds by name, as the JSON encoding numbers them. */
export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}

function valueOf(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  return JSON.stringify(value);
}

/** A running OTLP/HTTP receiver; `await using` closes it. */
export class OtlpReceiver implements AsyncDisposable {
  readonly spans: ReceivedSpan[] = [];
  /** Requests it got that were not JSON trace exports (content type and path). */
  readonly others: string[] = [];
  #server: Deno.HttpServer<Deno.NetAddr>;

  constructor() {
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (request) => this.#handle(request),
    );
  }

  /** `http://127.0.0.1:<port>`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  get endpoint(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  /**
   * The variables that make a Deno process export its traces here as JSON,
   * quickly, and nothing else (no console logs, no metrics before exit).
   */
  get env(): Record<string, string> {
    return {
      OTEL_DENO: "true",
      OTEL_EXPORTER_OTLP_ENDPOINT: this.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "toolgate-test",
      OTEL_DENO_CONSOLE: "ignore",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_METRIC_EXPORT_INTERVAL: "600000",
    };
  }

  async #handle(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    const type = request.headers.get("content-type") ?? "";
    if (path !== "/v1/traces" || !type.includes("json")) {
      this.others.push(`${request.method} ${path} ${type}`);
      await request.body?.cancel();
      return Response.json({});
    }
    const body = await request.json() as {
      resourceSpans?: {
        scopeSpans?: {
          scope?: { name?: string };
          spans?: {
            traceId: string;
            spanId: string;
            parentSpanId?: string;
            name: string;
            kind: number;
            attributes?: { key: string; value: AnyValue }[];
            status?: { code?: number; message?: string };
          }[];
        }[];
      }[];
    };
    for (const resource of body.resourceSpans ?? []) {
      for (const scope of resource.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          this.spans.push({
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId ?? "",
            name: span.name,
            kind: span.kind,
            attributes: Object.fromEntries(
              (span.attributes ?? []).map(({ key, value }) => [key, valueOf(value)]),
            ),
            status: { code: span.status?.code ?? 0, message: span.status?.message },
            scope: scope.scope?.name ?? "",
          });
        }
      }
    }
    return Response.json({});
  }

  /** The first span `match` accepts, once it arrived (within the default wait). */
  async span(what: string, match: (span: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
    let found: ReceivedSpan | undefined;
    await until(() => (found = this.spans.find(match)) !== undefined, what);
    return found!;
  }

  /** The spans of one trace that arrived so far. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.#server.shutdown();
  }
}
