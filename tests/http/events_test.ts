import { Validator } from "@seriousme/openapi-schema-validator";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import {
  ALL_EVENT_TYPES,
  type DefaultEventType,
  EVENT_TYPES,
  type EventData,
} from "../../src/events/mod.ts";
import { eventsRoutes, type EventsRoutesOptions, serveHttp } from "../../src/http/mod.ts";
import { testGateway } from "../gateway/_fixtures.ts";
import { httpConfig, postJson, testApp, type TestAppOptions } from "./_fixtures.ts";

/** One parsed SSE block: its fields, or the comment lines. */
interface Frame {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  comments: string[];
}

/** Reads SSE blocks from a response body (no reconnection logic: just the wire). */
class FrameReader {
  #reader: ReadableStreamDefaultReader<string>;
  #buffer = "";
  #ended = false;

  constructor(response: Response) {
    this.#reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** The next block, or `undefined` when the stream ended. */
  async next(): Promise<Frame | undefined> {
    for (;;) {
      const end = this.#buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        const frame: Frame = { comments: [] };
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) frame.comments.push(line.slice(1).trim());
          else {
            const colon = line.indexOf(":");
            const field = line.slice(0, colon) as "id" | "event" | "data" | "retry";
            frame[field] = line.slice(colon + 1).replace(/^ /, "");
          }
        }
        return frame;
      }
      if (this.#ended) return undefined;
      const { done, value } = await this.#reader.read();
      if (done) this.#ended = true;
      else this.#buffer += value;
    }
  }

  /** The next block that carries an event (skips comments). */
  async nextEvent(): Promise<Frame | undefined> {
    for (;;) {
      const frame = await this.next();
      if (frame === undefined || frame.event !== undefined) return frame;
    }
  }

  /** Whether the stream ends (reading past any remaining blocks). */
  async ends(): Promise<boolean> {
    while (await this.next() !== undefined) {
      // Drain.
    }
    return this.#ended;
  }

  async cancel(): Promise<void> {
    await this.#reader.cancel();
  }
}

const SAMPLE: { [T in DefaultEventType]: EventData<T> } = {
  "tool.called": {
    tool_name: "echo",
    plugin: "test",
    input: {},
    output: {},
    latency_ms: 1,
    session_id: "ses_1",
  },
  "tool.failed": {
    tool_name: "flaky",
    plugin: "test",
    error: "Upstream unreachable",
    error_code: "PLUGIN_REQUEST_FAILED",
    circuit_state: "closed",
    attempt: 1,
  },
  "plugin.ready": { plugin_name: "test", tool_count: 5, zero_config: true, version: "1.2.3" },
  "plugin.error": {
    plugin_name: "slack",
    error: "Not configured",
    error_code: "PLUGIN_NOT_CONFIGURED",
    state: "not_configured",
  },
  "circuit.opened": {
    tool_name: "flaky",
    plugin: "test",
    failure_count: 2,
    threshold: 2,
    reset_after_ms: 1000,
  },
  "circuit.closed": { tool_name: "flaky", plugin: "test", downtime_ms: 1000 },
  "audit.written": {
    seq: 1,
    entry_hash: `sha256:${"a".repeat(64)}`,
    previous_hash: `sha256:${"0".repeat(64)}`,
    tool: "echo",
    chain_intact: true,
  },
  "server.started": {
    version: "0.1.0",
    tool_count: 5,
    plugin_count: 1,
    transport: "http",
    zero_config_plugins: 1,
  },
};

function eventsApp(options: EventsRoutesOptions = {}, app: TestAppOptions = {}) {
  return testApp({ ...app, routes: [eventsRoutes(options)] });
}

async function connect(
  t: Awaited<ReturnType<typeof eventsApp>>,
  path = "/events",
  headers: Record<string, string> = {},
): Promise<Response> {
  const response = await t.app.request(path, { headers });
  assertEquals(response.status, 200);
  assertEquals(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
  assertEquals(response.headers.get("cache-control"), "no-cache, no-transform");
  return response;
}

async function open(
  t: Awaited<ReturnType<typeof eventsApp>>,
  path = "/events",
  headers: Record<string, string> = {},
): Promise<FrameReader> {
  return new FrameReader(await connect(t, path, headers));
}

Deno.test("GET /events streams every event type as id, event and the envelope JSON", async () => {
  await using t = await eventsApp();
  const stream = await open(t);
  const opening = await stream.next();
  assertEquals(opening, { retry: "1000", comments: ["toolgate events"] });

  const response = await postJson(t.app, "/tools/echo", { message: "hi" });
  assertEquals(response.status, 200);
  await response.body?.cancel();
  const called = await stream.nextEvent();
  assertEquals(called?.event, "tool.called");
  const envelope = JSON.parse(called!.data!);
  assertEquals(called!.id, envelope.id);
  assertMatch(envelope.id, /^evt_[0-9a-z]{26}$/);
  assertEquals(envelope.type, "tool.called");
  assertMatch(envelope.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assertEquals(envelope.data.tool_name, "echo");
  assertEquals(envelope.data.output, { echoed: "hi" });

  for (const type of EVENT_TYPES) await t.gateway.bus.emit(type, SAMPLE[type]);
  for (const type of EVENT_TYPES) {
    const frame = await stream.nextEvent();
    assertEquals(frame?.event, type);
    assertEquals(JSON.parse(frame!.data!).data, SAMPLE[type]);
  }
  await stream.cancel();
});

Deno.test("GET /events?types= keeps only the named types; an unknown type is 400 naming the valid ones", async () => {
  await using t = await eventsApp();
  const stream = await open(t, "/events?types=circuit.opened,%20tool.failed");
  for (const type of EVENT_TYPES) await t.gateway.bus.emit(type, SAMPLE[type]);
  assertEquals((await stream.nextEvent())?.event, "tool.failed");
  assertEquals((await stream.nextEvent())?.event, "circuit.opened");
  await t.gateway.bus.emit("server.started", SAMPLE["server.started"]);
  await t.gateway.bus.emit("tool.failed", SAMPLE["tool.failed"]);
  assertEquals((await stream.nextEvent())?.event, "tool.failed");
  await stream.cancel();

  for (const query of ["types=tool.called,tool.complete", "types=", "types=,"]) {
    const response = await t.app.request(`/events?${query}`);
    assertEquals(response.status, 400, query);
    const body = await response.json();
    assertEquals(body.error.code, "USAGE");
    assertStringIncludes(body.error.message, `valid types are ${EVENT_TYPES.join(", ")}`);
    assertEquals(body.error.details.valid, [...ALL_EVENT_TYPES]);
  }
  const unknown = await (await t.app.request("/events?types=tool.complete")).json();
  assertMatch(unknown.error.message, /^Invalid types: unknown event type tool\.complete; /);
});

Deno.test("GET /events needs the bearer token when one is set", async () => {
  await using t = await eventsApp({}, { env: { TOOLGATE_API_TOKEN: "s3cret" } });
  for (const headers of [{}, { authorization: "Bearer wrong" }] as Record<string, string>[]) {
    const response = await t.app.request("/events", { headers });
    assertEquals(response.status, 401);
    assertEquals((await response.json()).error.code, "UNAUTHORIZED");
  }
  const stream = await open(t, "/events", { authorization: "Bearer s3cret" });
  await t.gateway.bus.emit("server.started", SAMPLE["server.started"]);
  assertEquals((await stream.nextEvent())?.event, "server.started");
  await stream.cancel();
});

Deno.test("GET /events sends keep-alive comments on an idle stream", async () => {
  await using t = await eventsApp({ keepAliveMs: 10 });
  const stream = await open(t);
  await stream.next();
  assertEquals(await stream.next(), { comments: ["keep-alive"] });
  assertEquals(await stream.next(), { comments: ["keep-alive"] });
  await stream.cancel();
});

Deno.test("GET /events drops a client that falls behind, without slowing the others", async () => {
  await using t = await eventsApp({ maxBufferedEvents: 5 });
  const slowResponse = await connect(t); // its body is not read until the end
  const fast = await open(t);
  await fast.next();
  for (let i = 0; i < 20; i++) {
    await t.gateway.bus.emit("tool.called", { ...SAMPLE["tool.called"], latency_ms: i });
    const frame = await fast.nextEvent();
    assertEquals(JSON.parse(frame!.data!).data.latency_ms, i);
  }
  const slow = new FrameReader(slowResponse);
  const error = await slow.next();
  assertEquals(error?.event, "error");
  assertEquals(error?.id, undefined, "the error carries no id, so Last-Event-ID stays put");
  const data = JSON.parse(error!.data!);
  assertEquals(data.reason, "overflow");
  assertEquals(data.buffered_events, 5);
  assertMatch(data.message, /fell behind by more than 5 events.*reconnect with Last-Event-ID/);
  assert(await slow.ends(), "the slow stream is closed");

  await t.gateway.bus.emit("tool.failed", SAMPLE["tool.failed"]);
  assertEquals((await fast.nextEvent())?.event, "tool.failed");
  await fast.cancel();
});

Deno.test("GET /events replays the events after Last-Event-ID, filtered", async () => {
  await using t = await eventsApp({ replayEvents: 3 });
  // A client connected once: events are kept for replay from then on.
  const first = await open(t, "/events");
  await first.next();
  await first.cancel();
  const ids: string[] = [];
  for (const type of ["tool.called", "tool.failed", "audit.written", "tool.called"] as const) {
    ids.push((await t.gateway.bus.emit(type, SAMPLE[type]))!.id);
  }
  const resumed = await open(t, "/events?types=tool.called,tool.failed", {
    "last-event-id": ids[1],
  });
  await resumed.next();
  assertEquals((await resumed.nextEvent())?.id, ids[3]);
  await t.gateway.bus.emit("tool.failed", SAMPLE["tool.failed"]);
  assertEquals((await resumed.nextEvent())?.event, "tool.failed");
  await resumed.cancel();

  const tooOld = await open(t, "/events", { "last-event-id": ids[0] });
  await tooOld.next();
  assertEquals(await tooOld.next(), {
    comments: [`replay unavailable: ${ids[0]} is not among the last 3 events`],
  });
  await tooOld.cancel();
});

Deno.test("GET /events keeps no events for replay before its first client", async () => {
  await using t = await eventsApp({ replayEvents: 3 });
  const before = (await t.gateway.bus.emit("tool.called", SAMPLE["tool.called"]))!.id;
  const stream = await open(t, "/events", { "last-event-id": before });
  await stream.next();
  assertEquals(await stream.next(), {
    comments: [`replay unavailable: ${before} is not among the last 0 events`],
  });
  const after = (await t.gateway.bus.emit("tool.failed", SAMPLE["tool.failed"]))!.id;
  assertEquals((await stream.nextEvent())?.id, after);
  await stream.cancel();
});

Deno.test("GET /events streams end when shutdown begins; new ones get 503", async () => {
  await using t = await eventsApp();
  const stream = await open(t);
  await t.gateway.bus.emit("server.started", SAMPLE["server.started"]);
  t.lifecycle.beginDrain();
  assertEquals((await stream.nextEvent())?.event, "server.started");
  assertEquals(await stream.next(), { comments: ["server shutting down"] });
  assert(await stream.ends());
  const refused = await t.app.request("/events");
  assertEquals(refused.status, 503);
  assertEquals((await refused.json()).error.code, "UNAVAILABLE");
});

Deno.test("GET /events is described in /openapi.json as text/event-stream", async () => {
  await using t = await eventsApp();
  const doc = await (await t.app.request("/openapi.json")).json();
  assertEquals(await new Validator().validate(structuredClone(doc)), { valid: true });
  const operation = doc.paths["/events"].get;
  assertEquals(operation.operationId, "streamEvents");
  assert(operation.responses["200"].content["text/event-stream"]);
  assertEquals(
    operation.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`),
    ["query:types", "header:Last-Event-ID"],
  );
  assert(operation.responses["400"] && operation.responses["503"]);
});

Deno.test("GET /events cuts a stream that does not read its last bytes within the grace period", async () => {
  await using t = await eventsApp({ closeGraceMs: 20 });
  const stuck = await connect(t); // never read while shutting down
  for (let i = 0; i < 3; i++) await t.gateway.bus.emit("audit.written", SAMPLE["audit.written"]);
  t.lifecycle.beginDrain();
  await new Promise((resolve) => setTimeout(resolve, 40));
  const reader = stuck.body!.getReader();
  let failure: unknown;
  try {
    while (!(await reader.read()).done) {
      // The queue was dropped: the read fails.
    }
  } catch (error) {
    failure = error;
  }
  assertMatch(String(failure), /the client did not read/);
});

Deno.test("serveHttp() shutdown ends open /events streams promptly", async () => {
  const config = await httpConfig({ server: { port: 0 } });
  await using t = await testGateway({ config, plugins: [] });
  let listening!: (url: string) => void;
  const address = new Promise<string>((resolve) => listening = resolve);
  const server = serveHttp({
    gateway: t.gateway,
    config,
    routes: [eventsRoutes()],
    onListen: ({ url }) => listening(url),
    log: () => {},
  });
  const url = await address;
  const stream = new FrameReader(await fetch(`${url}/events`));
  await stream.next();
  await t.gateway.bus.emit("server.started", SAMPLE["server.started"]);
  assertEquals((await stream.nextEvent())?.event, "server.started");
  const started = performance.now();
  await server.shutdown();
  assert(performance.now() - started < 1500, "shutdown did not wait for the stream");
  assertEquals(await stream.next(), { comments: ["server shutting down"] });
  assert(await stream.ends());
});

Deno.test("GET /events sends an opt-in type only to a stream that names it", async () => {
  await using t = await eventsApp();
  const all = await open(t, "/events");
  const named = await open(t, "/events?types=tool.quarantined,tool.failed");
  const quarantined = {
    tool_name: "fix__echo",
    plugin: "fix",
    kind: "tool" as const,
    status: "changed" as const,
    changed: ["description"],
    pinned_sha256: "a".repeat(64),
    offered_sha256: "b".repeat(64),
  };
  await t.gateway.bus.emit("tool.quarantined", quarantined);
  await t.gateway.bus.emit("tool.failed", SAMPLE["tool.failed"]);
  assertEquals((await all.nextEvent())?.event, "tool.failed");
  const first = await named.nextEvent();
  assertEquals(first?.event, "tool.quarantined");
  assertEquals(JSON.parse(first!.data!).data, quarantined);
  assertEquals((await named.nextEvent())?.event, "tool.failed");
  await all.cancel();
  await named.cancel();
});
