import {
  ReconnectingEventStream,
  type SseMessage,
  SseParser,
  type ToolgateError,
} from "../../sdk/typescript/mod.ts";
import { assert, assertEquals } from "../_asserts.ts";
import { Collector } from "./_collector.ts";

Deno.test("SseParser handles CRLF, CR and LF split anywhere, comments, multi-line data and retry", () => {
  const wire =
    ': hello\r\nretry: 2500\r\nid: 1\r\nevent: tool.called\r\ndata: {"a":\r\ndata: 1}\r\n\r\n' +
    "data: plain\r\rid: 2\nevent: x\ndata:no-space\n\nid\ndata: cleared id\n\n";
  const expected: SseMessage[] = [
    { event: "tool.called", data: '{"a":\n1}', lastEventId: "1" },
    { event: "message", data: "plain", lastEventId: "1" },
    { event: "x", data: "no-space", lastEventId: "2" },
    { event: "message", data: "cleared id", lastEventId: "" },
  ];
  for (const size of [1, 2, 3, 7, wire.length]) {
    const parser = new SseParser();
    const messages: SseMessage[] = [];
    for (let i = 0; i < wire.length; i += size) {
      messages.push(...parser.push(wire.slice(i, i + size)));
    }
    assertEquals(messages, expected, `chunks of ${size}`);
    assertEquals(parser.retryMs, 2500);
  }
});

Deno.test("ReconnectingEventStream reconnects with Last-Event-ID and stops on 401", async () => {
  const lastIds: (string | null)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const last = request.headers.get("last-event-id");
    lastIds.push(last);
    if (lastIds.length === 3) {
      return Response.json({ error: { code: "UNAUTHORIZED", message: "Unauthorized" } }, {
        status: 401,
      });
    }
    const id = last === null ? "evt_1" : "evt_2";
    // One event, then the server ends the stream (as on overflow or shutdown).
    return new Response(`retry: 5\nid: ${id}\nevent: tool.called\ndata: {}\n\n`, {
      headers: { "content-type": "text/event-stream" },
    });
  });
  const messages = new Collector<SseMessage>();
  const errors = new Collector<ToolgateError>();
  const stream = new ReconnectingEventStream({
    url: `http://127.0.0.1:${server.addr.port}/events`,
    headers: { authorization: "Bearer t" },
    onMessage: messages.push,
    onError: errors.push,
    reconnectDelayMs: 5,
  });
  try {
    stream.start();
    await stream.ready;
    await errors.until("the 401", (error) => error.code === "UNAUTHORIZED");
    assertEquals(messages.items.map((m) => m.lastEventId), ["evt_1", "evt_2"]);
    assertEquals(lastIds, [null, "evt_1", "evt_2"]);
    assertEquals(stream.lastEventId, "evt_2");
  } finally {
    await stream.close();
    await server.shutdown();
  }
});

Deno.test("ReconnectingEventStream keeps retrying an unreachable server, then connects", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  const errors = new Collector<ToolgateError>();
  const stream = new ReconnectingEventStream({
    url: `http://127.0.0.1:${port}/events`,
    onMessage: () => {},
    onError: errors.push,
    reconnectDelayMs: 5,
    maxReconnectDelayMs: 20,
  });
  stream.start();
  await errors.until("two connection failures", () => errors.items.length >= 2);
  assert(errors.items.every((error) => error.code === "CONNECTION_FAILED"));
  const server = Deno.serve(
    { hostname: "127.0.0.1", port, onListen: () => {} },
    () => new Response(": open\n\n", { headers: { "content-type": "text/event-stream" } }),
  );
  try {
    await stream.ready;
  } finally {
    await stream.close();
    await server.shutdown();
  }
});
