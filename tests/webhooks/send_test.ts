/**
 * One delivery POST against hostile receivers, through the client that
 * ships (`postWebhook` with the global `fetch` and no proxy): every attempt
 * ends, within its timeout, with a status or an error, and no receiver can
 * make it read without bound. Time is the attempt timeout (milliseconds)
 * against a receiver's pace; nothing sleeps on wall-clock seconds.
 *
 * @module
 */
import { assert, assertEquals } from "../_asserts.ts";
import { postWebhook, type PostWebhookOptions } from "../../src/webhooks/_send.ts";
import { VERSION } from "../../src/version.ts";
import { rawReceiver, type RawReply } from "./_raw_receiver.ts";
import { LOOPBACK_EGRESS } from "./_setup.ts";

const body = new TextEncoder().encode(JSON.stringify({ id: "evt_1", type: "tool.called" }));

function post(url: string, extra: Partial<PostWebhookOptions> = {}) {
  return postWebhook({
    fetch: globalThis.fetch,
    url,
    body,
    eventType: "tool.called",
    deliveryId: "evt_1",
    signature: "sha256=abc",
    timestamp: 1700000000,
    standardSignature: "v1,abc=",
    timeoutMs: 2000,
    egress: LOOPBACK_EGRESS,
    ...extra,
  });
}

/** Writes `text` one byte at a time, `paceMs` apart, until the client goes away. */
async function trickle(reply: RawReply, text: string, paceMs: number): Promise<void> {
  for (const char of text) {
    if (!await reply.write(char)) return;
    await reply.pause(paceMs);
  }
}

const OK_HEAD = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

Deno.test("postWebhook() sends the spec's headers exactly, follows no redirect and reuses the socket", async () => {
  await using receiver = rawReceiver(async (reply, index) => {
    await reply.write(
      index === 0
        ? "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n"
        : OK_HEAD,
    );
  });
  const moved = await post(receiver.url);
  assertEquals([moved.ok, moved.status], [false, 302]);
  const result = await post(receiver.url);
  assertEquals([result.ok, result.status, result.error], [true, 200, undefined]);
  assertEquals(receiver.requests.length, 2); // the redirect was not followed
  assertEquals(receiver.connections, 1);
  const [head, sent] = receiver.requests[1].split("\r\n\r\n");
  const lines = head.split("\r\n");
  assertEquals(lines[0], "POST /hook HTTP/1.1");
  for (
    const line of [
      "Content-Type: application/json",
      "X-Service-Signature: sha256=abc",
      "X-Service-Event: tool.called",
      "X-Service-Delivery: evt_1",
      `X-Service-Version: ${VERSION}`,
      `User-Agent: Service-Webhooks/${VERSION}`,
      "webhook-id: evt_1",
      "webhook-timestamp: 1700000000",
      "webhook-signature: v1,abc=",
      `Content-Length: ${body.byteLength}`,
    ]
  ) {
    assert(lines.includes(line), `missing header line ${line}`);
  }
  assertEquals(sent, new TextDecoder().decode(body));
});

Deno.test("malformed chunked encoding after a 2xx status: delivered, and the socket is not reused", async () => {
  const bodies = [
    "zz\r\nhello\r\n0\r\n\r\n", // not a hex size
    "-5\r\nhello\r\n0\r\n\r\n", // negative
    "5\r\nhelloXX0\r\n\r\n", // no CRLF after the data
    "5;" + "e".repeat(4000) + "\r\nhello\r\n0\r\n\r\n", // a size line without end
    "ffffffffffffffffffff\r\n", // a size past any bound
  ];
  await using receiver = rawReceiver(async (reply, index) => {
    await reply.write(
      `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${bodies[index % bodies.length]}`,
    );
  });
  for (let i = 0; i < bodies.length; i++) {
    const result = await post(receiver.url);
    assertEquals([result.ok, result.status, result.error], [true, 200, undefined], bodies[i]);
  }
  assertEquals(receiver.connections, bodies.length);
});

Deno.test("a malformed or oversized head is an error, never a status", async () => {
  const replies = [
    "HTTP/1.1 200 OK\r\nX-Big: " + "x".repeat(1024 * 1024) + "\r\n\r\n", // a 1 MB header
    "HTTP/1.1 200 OK\r\n" + "X-Many: y\r\n".repeat(20_000), // headers that never end
    "SMTP ready\r\n\r\n",
    "HTTP/1.1 100 Continue\r\n\r\n".repeat(20) + OK_HEAD, // endless interim replies
  ];
  const errors = [
    "Reply headers are too large",
    "Reply headers are too large",
    "Malformed reply status line: SMTP ready",
    "Reply has more than 8 interim (1xx) responses",
  ];
  await using receiver = rawReceiver(async (reply, index) => {
    await reply.write(replies[index]);
    reply.close();
  });
  for (const expected of errors) {
    const result = await post(receiver.url);
    assertEquals([result.ok, result.status, result.error], [false, undefined, expected]);
  }
});

Deno.test("a reply that trickles a byte at a time ends by the attempt timeout", async () => {
  // 10 ms per byte: the head alone would take seconds; the attempt allows 100 ms.
  const slowHead = "HTTP/1.1 200 OK\r\nX-Pad: " + "p".repeat(1000) + "\r\n\r\n";
  await using receiver = rawReceiver((reply) => trickle(reply, slowHead, 10));
  const result = await post(receiver.url, { timeoutMs: 100 });
  assertEquals([result.ok, result.status, result.error], [
    false,
    undefined,
    "Timed out after 100 ms",
  ]);
});

Deno.test("a body that trickles after a 2xx head: delivered once the timeout cuts the read; the socket is closed", async () => {
  await using receiver = rawReceiver(async (reply) => {
    await reply.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
    await trickle(reply, "b".repeat(1000), 10);
  });
  const result = await post(receiver.url, { timeoutMs: 100 });
  assertEquals([result.ok, result.status, result.error], [true, 200, undefined]);
  const again = await post(receiver.url, { timeoutMs: 100 });
  assertEquals(again.status, 200);
  assertEquals(receiver.connections, 2);
});

Deno.test("a receiver that never answers, or sends headers then a body that never ends", async () => {
  await using silent = rawReceiver((reply) => reply.pause(60_000)); // ends when the test closes it
  const quiet = await post(silent.url, { timeoutMs: 50 });
  assertEquals([quiet.ok, quiet.error], [false, "Timed out after 50 ms"]);

  const chunk = "4000\r\n" + "z".repeat(0x4000) + "\r\n";
  await using endless = rawReceiver(async (reply) => {
    await reply.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    while (await reply.write(chunk)) { /* until the client closes */ }
  });
  const chunked = await post(endless.url);
  assertEquals([chunked.ok, chunked.status], [true, 200]);

  await using huge = rawReceiver(async (reply) => {
    await reply.write("HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n");
    while (await reply.write("y".repeat(0x4000))) { /* until the client closes */ }
  });
  const long = await post(huge.url);
  assertEquals([long.ok, long.status], [true, 200]);
});

Deno.test("aborting the signal (dispatcher stop) ends a waiting attempt as aborted", async () => {
  await using silent = rawReceiver((reply) => reply.pause(60_000));
  const controller = new AbortController();
  const posting = post(silent.url, { signal: controller.signal, timeoutMs: 60_000 });
  while (silent.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
  controller.abort();
  const result = await posting;
  assertEquals([result.ok, result.aborted], [false, true]);
});
