import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { testCertificates } from "../_tls.ts";
import { EgressPolicy } from "../../src/egress/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { Http1Client } from "../../src/webhooks/_http1.ts";

const body = new TextEncoder().encode(JSON.stringify({ id: "evt_1", type: "tool.called" }));
const headers = { "Content-Type": "application/json", "X-Service-Event": "tool.called" };

/**
 * What a scripted server does with request `index` of connection
 * `connection`; `total` counts the requests of every connection.
 */
type Script = (
  connection: number,
  index: number,
  total: number,
) => { reply: string; close?: boolean; piece?: number } | "hang";

/**
 * A raw TCP server on 127.0.0.1 that reads each request (head and
 * Content-Length body) and writes the scripted bytes back.
 */
function scriptedServer(script: Script) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const requests: string[] = [];
  const serving = (async () => {
    let connection = 0;
    for await (const conn of listener) {
      conns.add(conn);
      void serveConn(conn, connection++).catch(() => {}).finally(() => conns.delete(conn));
    }
  })();
  async function serveConn(conn: Deno.Conn, connection: number) {
    const buffer = new Uint8Array(65536);
    let text = "";
    for (let index = 0;; index++) {
      let end: number;
      while ((end = text.indexOf("\r\n\r\n")) < 0) {
        const read = await conn.read(buffer);
        if (read === null) return;
        text += new TextDecoder().decode(buffer.subarray(0, read));
      }
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      while (text.length < end + 4 + length) {
        const read = await conn.read(buffer);
        if (read === null) return;
        text += new TextDecoder().decode(buffer.subarray(0, read));
      }
      requests.push(text.slice(0, end + 4 + length));
      text = text.slice(end + 4 + length);
      const step = script(connection, index, requests.length - 1);
      if (step === "hang") return; // keeps the socket open, never answers
      const bytes = new TextEncoder().encode(step.reply);
      const piece = step.piece ?? bytes.length;
      for (let at = 0; at < bytes.length; at += piece) {
        await conn.write(bytes.subarray(at, at + piece));
        if (piece < bytes.length) await new Promise((r) => setTimeout(r, 1));
      }
      if (step.close) {
        conn.close();
        return;
      }
    }
  }
  return {
    url: new URL(`http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}/hook?x=1`),
    requests,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch { /* closed */ }
      }
      await serving.catch(() => {});
    },
  };
}

Deno.test("keep-alive: many POSTs share one socket; statuses and bodies of every framing are read", async () => {
  const statuses = [200, 204, 500, 404, 202];
  let served = 0;
  const remotePorts = new Set<number>();
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request, info) => {
      remotePorts.add(info.remoteAddr.port);
      const text = await request.text();
      assertEquals(JSON.parse(text).id, "evt_1");
      assertEquals(request.headers.get("x-service-event"), "tool.called");
      assertEquals(new URL(request.url).search, "?x=1");
      const status = statuses[served++ % statuses.length];
      if (status === 204) return new Response(null, { status });
      if (served % 2) return new Response("x".repeat(3000), { status }); // Content-Length
      const stream = new ReadableStream({ // chunked
        start(controller) {
          controller.enqueue(new TextEncoder().encode("a".repeat(1000)));
          controller.enqueue(new TextEncoder().encode("b".repeat(5000)));
          controller.close();
        },
      });
      return new Response(stream, { status });
    },
  );
  using client = new Http1Client();
  const url = new URL(`http://127.0.0.1:${server.addr.port}/hook?x=1`);
  const got: number[] = [];
  for (let i = 0; i < 20; i++) got.push(await client.post(url, headers, body));
  assertEquals(got, Array.from({ length: 20 }, (_, i) => statuses[i % statuses.length]));
  assertEquals(client.connections, 1);
  assertEquals(remotePorts.size, 1);
});

Deno.test("a request carries Host, Content-Length, the headers and the exact body", async () => {
  await using server = scriptedServer(() => ({
    reply: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
  }));
  using client = new Http1Client();
  assertEquals(await client.post(server.url, headers, body), 200);
  const [request] = server.requests;
  const [head, sent] = request.split("\r\n\r\n");
  const lines = head.split("\r\n");
  assertEquals(lines[0], "POST /hook?x=1 HTTP/1.1");
  assertEquals(lines.slice(1), [
    `Host: ${server.url.host}`,
    `Content-Length: ${body.byteLength}`,
    "Content-Type: application/json",
    "X-Service-Event: tool.called",
  ]);
  assertEquals(sent, new TextDecoder().decode(body));
});

Deno.test("reply header names match in any case; keep-alive by HTTP/1.0 rules; a header value outside ASCII goes as UTF-8", async () => {
  const replies = [
    "HTTP/1.1 503 Busy\r\nCONTENT-length: 0\r\nretry-AFTER:  7 \r\n\r\n",
    "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\ncontent-LENGTH: 2\r\n\r\nok",
    "HTTP/1.1 201 Created\r\nTransfer-ENCODING: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "HTTP/1.0 204 No Content\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
  ];
  await using server = scriptedServer((_c, _i, total) => ({ reply: replies[total] }));
  using client = new Http1Client();
  assertEquals(await client.send(server.url, headers, body), { status: 503, retryAfter: "7" });
  const noted = { ...headers, "X-Note": "café ✓" };
  assertEquals(await client.send(server.url, noted, body), { status: 200 });
  assertEquals(await client.send(server.url, headers, body), { status: 201 });
  assertEquals(await client.send(server.url, headers, body), { status: 204 });
  assertEquals(await client.send(server.url, headers, body), { status: 200 });
  // The first three replies kept the socket; HTTP/1.0 without keep-alive ended it.
  assertEquals(client.connections, 2);
  const [head, sent] = server.requests[1].split("\r\n\r\n");
  assert(head.split("\r\n").includes("X-Note: café ✓"), head);
  assertEquals(sent, new TextDecoder().decode(body));
});

Deno.test("interim 1xx replies are skipped; close-delimited bodies and Connection: close end the socket", async () => {
  await using server = scriptedServer((_connection, _index, total) =>
    total === 0
      ? { reply: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n" }
      : total === 1
      ? { reply: "HTTP/1.1 200 OK\r\n\r\nbody until close", close: true }
      : { reply: "HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 0\r\n\r\n" }
  );
  using client = new Http1Client();
  assertEquals(await client.post(server.url, headers, body), 202);
  assertEquals(await client.post(server.url, headers, body), 200);
  assertEquals(client.connections, 1);
  assertEquals(await client.post(server.url, headers, body), 201); // a new socket
  assertEquals(await client.post(server.url, headers, body), 201); // and another
  assertEquals(client.connections, 3);
});

Deno.test("a reply in small pieces, with a head over the read buffer and a chunked body, keeps the socket", async () => {
  const pad = "X-Pad: " + "p".repeat(6000) + "\r\n";
  const chunked = "HTTP/1.1 200 OK\r\n" + pad + "Transfer-Encoding: chunked\r\n\r\n" +
    "5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n";
  await using server = scriptedServer((_connection, _index, total) =>
    total === 0
      ? { reply: chunked, piece: 97 }
      : { reply: "HTTP/1.1 204 No Content\r\n\r\n", piece: 3 }
  );
  using client = new Http1Client();
  assertEquals(await client.post(server.url, headers, body), 200);
  assertEquals(await client.post(server.url, headers, body), 204);
  assertEquals(client.connections, 1);
});

Deno.test("a kept-alive socket the server closed is replaced and the POST sent once more", async () => {
  // Connection 0 answers its first request, then closes without a reply to the next.
  await using server = scriptedServer((connection, index) =>
    connection === 0 && index === 1
      ? { reply: "", close: true }
      : { reply: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" }
  );
  using client = new Http1Client();
  assertEquals(await client.post(server.url, headers, body), 200);
  assertEquals(await client.post(server.url, headers, body), 200);
  assertEquals(client.connections, 2);
});

Deno.test("a malformed reply, a head cut short and a refused connection are errors; a body cut short only costs the socket", async () => {
  await using garbage = scriptedServer(() => ({ reply: "SMTP ready\r\n\r\n" }));
  await using cutHead = scriptedServer(() => ({
    reply: "HTTP/1.1 200 OK\r\nContent-",
    close: true,
  }));
  await using cutBody = scriptedServer(() => ({
    reply: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
    close: true,
  }));
  using client = new Http1Client();
  await assertRejects(
    () => client.post(garbage.url, headers, body),
    Error,
    "Malformed reply status line: SMTP ready",
  );
  await assertRejects(
    () => client.post(cutHead.url, headers, body),
    Error,
    "Connection closed in the middle of the reply",
  );
  assertEquals(await client.post(cutBody.url, headers, body), 200);
  assertEquals(await client.post(cutBody.url, headers, body), 200);
  assertEquals(client.connections, 4); // the cut body's socket was not reused
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  await assertRejects(() => client.post(new URL(`http://127.0.0.1:${port}/`), headers, body));
});

Deno.test("no receiver makes the client read without bound: a 1 MB header, an endless body, a huge one", async () => {
  const replies = [
    "HTTP/1.1 200 OK\r\nX-Big: " + "x".repeat(1024 * 1024) + "\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
    ("4000\r\n" + "z".repeat(0x4000) + "\r\n").repeat(64),
    "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + "y".repeat(1024 * 1024),
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" +
    "X-Trailer: t\r\n".repeat(10_000),
    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
  ];
  await using server = scriptedServer((_connection, _index, total) => ({ reply: replies[total] }));
  using client = new Http1Client();
  await assertRejects(
    () => client.post(server.url, headers, body),
    Error,
    "Reply headers are too large",
  );
  // The head limit is 64 KiB; the read buffer stops at twice that.
  assert(client.received <= 2 * 64 * 1024, `read ${client.received} bytes of a 1 MB header`);
  for (let i = 1; i < replies.length; i++) {
    const before = client.received;
    assertEquals(await client.post(server.url, headers, body), 200);
    const read = client.received - before;
    assert(read <= 2 * 64 * 1024 + 4096, `reply ${i}: read ${read} of ${replies[i].length} bytes`);
  }
  // None of those sockets was kept: each reply needed a new one.
  assertEquals(client.connections, replies.length);
});

Deno.test("aborting the signal ends a POST that gets no reply, with the signal's reason", async () => {
  await using server = scriptedServer(() => "hang");
  using client = new Http1Client();
  const controller = new AbortController();
  const posting = client.post(server.url, headers, body, controller.signal);
  while (server.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
  controller.abort(new Error("timed out"));
  await assertRejects(() => posting, Error, "timed out");
});

Deno.test("https: the reply comes over TLS, verified against the trusted CA, on a kept-alive socket", async () => {
  await using tmp = await tempHome();
  const pair = await testCertificates(tmp.home);
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert: pair.cert, key: pair.key, onListen() {} },
    async (request) => new Response(`got ${(await request.arrayBuffer()).byteLength}`),
  );
  const url = new URL(`https://localhost:${server.addr.port}/hook`);
  using trusting = new Http1Client({ caCerts: [pair.ca] });
  using untrusting = new Http1Client();
  assertEquals(await trusting.post(url, headers, body), 200);
  assertEquals(await trusting.post(url, headers, body), 200);
  assertEquals(trusting.connections, 1);
  const error = await assertRejects(() => untrusting.post(url, headers, body));
  assert(error instanceof Error);
});

Deno.test("with an egress policy, https goes to the checked address and verifies the URL's host", async () => {
  await using tmp = await tempHome();
  const pair = await testCertificates(tmp.home, ["pinned.test"]);
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert: pair.cert, key: pair.key, onListen() {} },
    (request) => new Response(`host ${request.headers.get("host")}`),
  );
  // pinned.test resolves nowhere but through the policy's lookup: a request
  // that arrives proves the socket went to the address the policy checked.
  const lookups: string[] = [];
  const egress = new EgressPolicy({
    allow: ["127.0.0.1/32"],
    lookup: (host) => {
      lookups.push(host);
      return Promise.resolve([{ address: "127.0.0.1", family: 4 }]);
    },
  });
  const url = new URL(`https://pinned.test:${server.addr.port}/hook`);
  using client = new Http1Client({ caCerts: [pair.ca] });
  assertEquals(await client.post(url, headers, body, undefined, egress), 200);
  assertEquals(await client.post(url, headers, body, undefined, egress), 200);
  assertEquals(lookups, ["pinned.test"], "a kept-alive socket is not resolved again");
  // The same name checked against loopback without the allowance is refused before connecting.
  const strict = new EgressPolicy({
    lookup: () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]),
  });
  const refused = await assertRejects(() => client.post(url, headers, body, undefined, strict));
  assert(refused instanceof GatewayError && refused.code === "EGRESS_DENIED", String(refused));
  assertEquals(client.connections, 1);
});
