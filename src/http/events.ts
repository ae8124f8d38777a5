/**
 * `GET /events`: the gateway's events as Server-Sent Events, one envelope
 * per SSE event (`id: <envelope id>`, `event: <type>`, `data: <envelope
 * JSON>`), optionally filtered with `?types=a,b`. The SDKs' `on()` reads it.
 *
 * One bus subscription per app fans each event out to every stream, JSON
 * encoded once. Each stream has its own bounded buffer: a client that falls
 * too far behind is dropped (its buffer discarded, a final `event: error`
 * sent) so it never slows the server or other clients. The last events are
 * kept for a reconnecting client's `Last-Event-ID`. Streams end when the
 * server starts shutting down.
 *
 * @module
 */
import { z } from "@hono/zod-openapi";
import { GatewayError } from "../errors/mod.ts";
import {
  ALL_EVENT_TYPES,
  describeEventTypes,
  type EventEnvelope,
  isDefaultEventType,
  isEventType,
} from "../events/mod.ts";
import type { Caller } from "../gateway/caller.ts";
import type { Gateway } from "../gateway/mod.ts";
import { errorResponses } from "./errors.ts";
import type { RouteMount, ToolgateApp } from "./types.ts";

/** Options of {@linkcode eventsRoutes}. */
export interface EventsRoutesOptions {
  /** Interval of the `: keep-alive` comment on an idle stream, in ms. @default 15000 */
  keepAliveMs?: number;
  /** Most events buffered for one client before it is dropped. @default 1000 */
  maxBufferedEvents?: number;
  /** Most bytes buffered for one client before it is dropped. @default 8388608 (8 MiB) */
  maxBufferedBytes?: number;
  /** Events kept for `Last-Event-ID` replay (0: no replay). @default 1000 */
  replayEvents?: number;
  /** Most bytes kept for replay. @default 8388608 (8 MiB) */
  replayBytes?: number;
  /**
   * How long a stream that is ending (shutdown, overflow) may take to flush
   * its last bytes before the connection is cut, in ms. @default 2000
   */
  closeGraceMs?: number;
}

const encoder = new TextEncoder();
const KEEP_ALIVE = encoder.encode(": keep-alive\n\n");
const SHUTDOWN = encoder.encode(": server shutting down\n\n");

/** Headers of every event stream. */
const STREAM_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
};

/** One SSE frame of an envelope. Envelope JSON has no raw newlines, so one `data:` line. */
function frameOf(envelope: EventEnvelope): Uint8Array {
  return encoder.encode(
    `id: ${envelope.id}\nevent: ${envelope.type}\ndata: ${JSON.stringify(envelope)}\n\n`,
  );
}

/** A frame in a client's queue. */
interface Queued {
  bytes: Uint8Array;
  /** An event (counts towards `maxBufferedEvents`), not a comment. */
  event: boolean;
}

/** Limits of one stream. */
interface StreamLimits {
  keepAliveMs: number;
  maxBufferedEvents: number;
  maxBufferedBytes: number;
  closeGraceMs: number;
}

/**
 * One client's stream: a queue the response body pulls from. Writes never
 * wait; a queue past its limits ends the stream instead.
 */
class EventStream {
  readonly body: ReadableStream<Uint8Array>;
  /** Who is listening (its tool patterns filter tool events). */
  caller: Caller | undefined;
  readonly types: ReadonlySet<string> | undefined;
  #limits: StreamLimits;
  #detach: () => void;
  #controller!: ReadableStreamDefaultController<Uint8Array>;
  #queue: Queued[] = [];
  #queuedEvents = 0;
  #queuedBytes = 0;
  /** Resolves the pending `pull` (the body waits for data). */
  #wake: (() => void) | undefined;
  #ending = false;
  #done = false;
  #keepAlive: ReturnType<typeof setInterval>;
  #grace: ReturnType<typeof setTimeout> | undefined;

  constructor(
    types: ReadonlySet<string> | undefined,
    limits: StreamLimits,
    detach: () => void,
  ) {
    this.types = types;
    this.#limits = limits;
    this.#detach = detach;
    this.body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.#controller = controller;
      },
      pull: (controller) => this.#pull(controller),
      cancel: () => this.#finish(),
    }, { highWaterMark: 0 });
    this.#keepAlive = setInterval(() => {
      if (this.#queue.length === 0) this.#push(KEEP_ALIVE, false);
    }, limits.keepAliveMs);
  }

  /** Whether the stream wants events of `type`. */
  wants(type: string): boolean {
    // Opt-in types only when named.
    return this.types === undefined ? isDefaultEventType(type) : this.types.has(type);
  }

  /** Queues a frame without any limit check (the opening and replay). */
  write(bytes: Uint8Array, event: boolean): void {
    this.#push(bytes, event);
  }

  /** Queues an event frame; a client past its limits is dropped instead. */
  send(bytes: Uint8Array): void {
    if (this.#ending) return;
    const { maxBufferedEvents, maxBufferedBytes } = this.#limits;
    if (
      this.#queue.length > 0 &&
      (this.#queuedEvents + 1 > maxBufferedEvents ||
        this.#queuedBytes + bytes.byteLength > maxBufferedBytes)
    ) {
      const message = `Event stream closed: the client fell behind by more than ` +
        `${maxBufferedEvents} events or ${maxBufferedBytes} bytes; reconnect with Last-Event-ID`;
      const data = JSON.stringify({
        reason: "overflow",
        message,
        buffered_events: this.#queuedEvents,
        buffered_bytes: this.#queuedBytes,
      });
      this.end(encoder.encode(`event: error\ndata: ${data}\n\n`), true);
      return;
    }
    this.#push(bytes, true);
  }

  /**
   * Ends the stream after `last` (and, unless `discard`, what is queued);
   * the connection is cut if that takes longer than the grace period.
   */
  end(last: Uint8Array, discard: boolean): void {
    if (this.#ending || this.#done) return;
    this.#ending = true;
    clearInterval(this.#keepAlive);
    this.#detach();
    if (discard) {
      this.#queue = [];
      this.#queuedEvents = 0;
      this.#queuedBytes = 0;
    }
    this.#push(last, false);
    if (this.#done) return;
    this.#grace = setTimeout(() => {
      this.#finish();
      try {
        this.#controller.error(new Error("Event stream closed: the client did not read"));
      } catch {
        // Already closed by the client.
      }
    }, this.#limits.closeGraceMs);
  }

  #push(bytes: Uint8Array, event: boolean): void {
    if (this.#done) return;
    if (this.#wake) {
      const wake = this.#wake;
      this.#wake = undefined;
      this.#controller.enqueue(bytes);
      wake();
      if (this.#ending) this.#close();
      return;
    }
    this.#queue.push({ bytes, event });
    this.#queuedBytes += bytes.byteLength;
    if (event) this.#queuedEvents++;
  }

  #pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> | void {
    const next = this.#queue.shift();
    if (next === undefined) {
      return new Promise<void>((resolve) => this.#wake = resolve);
    }
    this.#queuedBytes -= next.bytes.byteLength;
    if (next.event) this.#queuedEvents--;
    controller.enqueue(next.bytes);
    if (this.#ending && this.#queue.length === 0) this.#close();
  }

  #close(): void {
    this.#finish();
    try {
      this.#controller.close();
    } catch {
      // Already closed or cancelled by the client.
    }
  }

  /** Releases timers and the subscription (client gone, or the stream ended). */
  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    clearInterval(this.#keepAlive);
    clearTimeout(this.#grace);
    this.#queue = [];
    this.#wake?.();
    this.#wake = undefined;
    this.#detach();
  }
}

/** A recently emitted event, kept for replay. */
interface Recent {
  id: string;
  type: string;
  /** The tool the event is about (`tool_name`, or `tool` of `audit.written`), if any. */
  tool: string | undefined;
  bytes: Uint8Array;
}

/** The tool an event is about, if any: what an API key's patterns filter on. */
function toolOf(envelope: EventEnvelope): string | undefined {
  const data = envelope.data as Record<string, unknown> | undefined;
  const tool = data?.tool_name ?? data?.tool;
  return typeof tool === "string" ? tool : undefined;
}

/**
 * Whether a caller sees an event: those about tools it may not call (outside
 * its patterns or its virtual server) are left out.
 */
function visible(gateway: Gateway, caller: Caller | undefined, tool: string | undefined): boolean {
  return tool === undefined || gateway.offers(caller, tool);
}

/** Parses `?types=a,b`. @throws {GatewayError} `USAGE` naming the valid types. */
function parseTypes(raw: string | undefined): ReadonlySet<string> | undefined {
  if (raw === undefined) return undefined;
  const names = raw.split(",").map((name) => name.trim()).filter((name) => name !== "");
  const unknown = names.filter((name) => !isEventType(name));
  if (names.length === 0 || unknown.length > 0) {
    const what = names.length === 0
      ? "it names no event type"
      : `unknown event type${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}`;
    throw new GatewayError(
      "USAGE",
      `Invalid types: ${what}; valid types are ${describeEventTypes()}`,
      { details: { unknown, valid: ALL_EVENT_TYPES } },
    );
  }
  return new Set(names);
}

function positive(name: string, value: number, zeroAllowed = false): number {
  if (!Number.isInteger(value) || value < (zeroAllowed ? 0 : 1)) {
    throw new RangeError(
      `Invalid ${name}: ${value} is not a ${zeroAllowed ? "non-negative" : "positive"} integer`,
    );
  }
  return value;
}

const QuerySchema = z.object({
  types: z.string().optional().openapi({
    description:
      `Comma-separated event types to receive (default: the 8). One of ${describeEventTypes()}; an unknown type is 400 \`USAGE\` naming the valid ones.`,
    example: "tool.called,tool.failed",
  }),
});

const HeadersSchema = z.object({
  "Last-Event-ID": z.string().optional().openapi({
    description: "Resume after this event id: the events since then are replayed first when " +
      "the server still holds them (the last 1000), else a comment says replay is unavailable",
    example: "evt_01jd4x5m3k8q9r2t6v7w8y9z0a",
  }),
});

function registerEventsDoc(app: ToolgateApp): void {
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/events",
    operationId: "streamEvents",
    tags: ["events"],
    summary: "Stream events (Server-Sent Events)",
    description: "One SSE event per envelope `{id, type, timestamp, data}`: `id:` is the " +
      "envelope id, `event:` its type, `data:` the envelope JSON on one line. A `: keep-alive` " +
      "comment comes every 15 s on an idle stream. A client that falls too far behind (1000 " +
      "events or 8 MiB buffered) gets a final `event: error` with `data: {reason: " +
      '"overflow", message}` and the stream closes; reconnect with `Last-Event-ID`. The stream ' +
      "ends with a `: server shutting down` comment on shutdown. Events are best effort; " +
      "webhooks are the durable, retried channel.",
    request: { query: QuerySchema, headers: HeadersSchema },
    responses: {
      200: {
        description: "The event stream",
        content: {
          "text/event-stream": {
            schema: z.string().openapi({
              example: 'id: evt_01jd4x5m3k8q9r2t6v7w8y9z0a\nevent: tool.called\ndata: {"id":' +
                '"evt_01jd4x5m3k8q9r2t6v7w8y9z0a","type":"tool.called","timestamp":' +
                '"2025-01-01T00:00:00.000Z","data":{"tool_name":"memory_get","plugin":' +
                '"memory","input":{"key":"k"},"output":{"key":"k","found":false},' +
                '"latency_ms":3,"session_id":"ses_1"}}\n\n',
            }),
          },
        },
      },
      ...errorResponses([400, 401, 403, 503]),
    },
  });
}

/**
 * Mounts `GET /events` (and its OpenAPI description) on the app. The mount
 * subscribes to `gateway.bus` at once (so replay holds `server.started`)
 * and ends every stream when `lifecycle.signal` aborts.
 *
 * @throws {RangeError} when a limit is not a positive integer.
 * @example
 * ```ts
 * const server = serveHttp({ gateway, config, routes: [eventsRoutes()] });
 * // curl -N http://127.0.0.1:7821/events?types=tool.called,tool.failed
 * ```
 */
export function eventsRoutes(options: EventsRoutesOptions = {}): RouteMount {
  const {
    keepAliveMs = 15_000,
    maxBufferedEvents = 1000,
    maxBufferedBytes = 8 * 1024 * 1024,
    replayEvents = 1000,
    replayBytes = 8 * 1024 * 1024,
    closeGraceMs = 2000,
  } = options;
  const limits: StreamLimits = {
    keepAliveMs: positive("keepAliveMs", keepAliveMs),
    maxBufferedEvents: positive("maxBufferedEvents", maxBufferedEvents),
    maxBufferedBytes: positive("maxBufferedBytes", maxBufferedBytes),
    closeGraceMs: positive("closeGraceMs", closeGraceMs),
  };
  positive("replayEvents", replayEvents, true);
  positive("replayBytes", replayBytes, true);

  return function mountEvents(app, { gateway, lifecycle }) {
    const streams = new Set<EventStream>();
    const recent: Recent[] = [];
    let recentBytes = 0;
    // Only a client that was connected has a Last-Event-ID to resume from, so
    // events are kept for replay from the first connection on: a server
    // nobody streams from does not serialize every event for nothing.
    let keeping = false;

    const forward = (envelope: EventEnvelope) => {
      if (!keeping) return;
      const bytes = frameOf(envelope);
      const tool = toolOf(envelope);
      if (replayEvents > 0) {
        recent.push({ id: envelope.id, type: envelope.type, tool, bytes });
        recentBytes += bytes.byteLength;
        while (recent.length > replayEvents || (recent.length > 1 && recentBytes > replayBytes)) {
          recentBytes -= recent.shift()!.bytes.byteLength;
        }
      }
      for (const stream of streams) {
        if (stream.wants(envelope.type) && visible(gateway, stream.caller, tool)) {
          stream.send(bytes);
        }
      }
    };
    const unsubscribe = gateway.bus.subscribe(forward);
    // Events of the other instances sharing the store (PostgreSQL).
    const unsubscribeRemote = gateway.store.changes.subscribeEvents((json) => {
      let envelope: EventEnvelope;
      try {
        envelope = JSON.parse(json);
      } catch {
        return; // Not an envelope: nothing any client could use.
      }
      if (typeof envelope?.id === "string" && typeof envelope.type === "string") forward(envelope);
    });
    lifecycle.signal.addEventListener("abort", () => {
      unsubscribe();
      unsubscribeRemote();
      for (const stream of [...streams]) stream.end(SHUTDOWN, false);
    }, { once: true });

    registerEventsDoc(app);
    app.get("/events", (c) => {
      const types = parseTypes(c.req.query("types"));
      if (lifecycle.draining) {
        throw new GatewayError(
          "UNAVAILABLE",
          "Event stream unavailable: the server is shutting down",
        );
      }
      keeping = true;
      const stream: EventStream = new EventStream(types, limits, () => streams.delete(stream));
      // An API key sees the events of the tools it may call, and the others (plugins, webhooks).
      stream.caller = c.get("caller");
      stream.write(encoder.encode("retry: 1000\n: toolgate events\n\n"), false);
      const lastEventId = c.req.header("last-event-id")?.trim();
      if (lastEventId) {
        const index = recent.findIndex((event) => event.id === lastEventId);
        if (index < 0) {
          stream.write(
            encoder.encode(
              `: replay unavailable: ${lastEventId.replace(/[\r\n]/g, "")} is not among the ` +
                `last ${recent.length} events\n\n`,
            ),
            false,
          );
        } else {
          for (const event of recent.slice(index + 1)) {
            if (stream.wants(event.type) && visible(gateway, stream.caller, event.tool)) {
              stream.write(event.bytes, true);
            }
          }
        }
      }
      streams.add(stream);
      return new Response(stream.body, { status: 200, headers: STREAM_HEADERS });
    });
  };
}
