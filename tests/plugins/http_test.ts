import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { httpPlugin } from "../../src/plugins/mod.ts";
import { isHostAllowed } from "../../src/plugins/http/mod.ts";
import { closedPort, expectCode, pluginGateway } from "./_gateway.ts";

/** The test upstreams listen on 127.0.0.1: the egress policy must allow it. */
const LOOPBACK = { egress: { allow: ["127.0.0.1/32"] } };

interface Upstream extends AsyncDisposable {
  base: string;
  port: number;
  hits: string[];
  /** Resolves when the client stopped reading /endless. */
  endlessCancelled: Promise<void>;
}

/** A TCP server on 127.0.0.1 that accepts connections and never answers. */
function startSilent(): { url: string; port: number } & AsyncDisposable {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const accepting = (async () => {
    try {
      for await (const conn of listener) conns.push(conn);
    } catch (error) {
      if (!(error instanceof Deno.errors.BadResource)) throw error;
    }
  })();
  const { port } = listener.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${port}/slow`,
    port,
    [Symbol.asyncDispose]: async () => {
      listener.close();
      for (const conn of conns) conn.close();
      await accepting;
    },
  };
}

/** A local upstream on 127.0.0.1, port 0. */
function startUpstream(): Upstream {
  const hits: string[] = [];
  const cancelled = Promise.withResolvers<void>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    hits.push(`${req.method} ${url.pathname}`);
    const body = await req.text();
    switch (url.pathname) {
      case "/json":
        return Response.json({ hello: "world", n: 1 }, { headers: { "x-upstream": "yes" } });
      case "/echo":
        return Response.json({
          method: req.method,
          body,
          content_type: req.headers.get("content-type"),
          user_agent: req.headers.get("user-agent"),
          authorization: req.headers.get("authorization"),
          custom: req.headers.get("x-custom"),
        });
      case "/missing":
        return new Response("not here", { status: 404, headers: { "content-type": "text/plain" } });
      case "/binary":
        return new Response(new Uint8Array([0, 1, 2, 250, 255]), {
          headers: { "content-type": "application/octet-stream" },
        });
      case "/endless": {
        const piece = new TextEncoder().encode("0123456789".repeat(100));
        return new Response(
          new ReadableStream({
            pull(controller) {
              controller.enqueue(piece);
            },
            cancel() {
              cancelled.resolve();
            },
          }),
          { headers: { "content-type": "text/plain" } },
        );
      }
      case "/redirect":
        return new Response(null, { status: 302, headers: { location: "/json" } });
      case "/post-redirect":
        return new Response(null, { status: 303, headers: { location: "/echo" } });
      case "/loop":
        return new Response(null, { status: 302, headers: { location: "/loop" } });
      case "/offsite":
        return new Response(null, {
          status: 302,
          headers: { location: `http://localhost:${url.port}/json` },
        });
      default:
        return new Response("?", { status: 400 });
    }
  });
  const port = server.addr.port;
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    hits,
    endlessCancelled: cancelled.promise,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test("http_request GETs JSON: status, headers, body text and parsed json", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const { output } = await gw.gateway.call("http_request", { url: `${upstream.base}/json` });
  assertEquals(output.status, 200);
  assertEquals(output.body, '{"hello":"world","n":1}');
  assertEquals(output.json, { hello: "world", n: 1 });
  assertEquals(output.truncated, false);
  assertEquals(output.body_encoding, "utf-8");
  assertEquals((output.headers as Record<string, string>)["x-upstream"], "yes");
  assertEquals(output.url, `${upstream.base}/json`);
});

Deno.test("http_request sends json and text bodies, headers and a toolgate User-Agent", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const json = await gw.gateway.call("http_request", {
    method: "POST",
    url: `${upstream.base}/echo`,
    json: { a: [1, 2] },
    headers: { "X-Custom": "c1" },
  });
  const seen = json.output.json as Record<string, unknown>;
  assertEquals(seen.method, "POST");
  assertEquals(seen.body, '{"a":[1,2]}');
  assertEquals(seen.content_type, "application/json");
  assertEquals(seen.custom, "c1");
  assertMatch(String(seen.user_agent), /^toolgate\/\d+\.\d+\.\d+$/);

  const text = await gw.gateway.call("http_request", {
    method: "PUT",
    url: `${upstream.base}/echo`,
    body: "plain words",
    headers: { "content-type": "text/plain" },
  });
  assertEquals((text.output.json as Record<string, unknown>).body, "plain words");
  assertEquals((text.output.json as Record<string, unknown>).method, "PUT");
});

Deno.test("http_request returns a non-2xx status as a result, not an error", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const { output } = await gw.gateway.call("http_request", { url: `${upstream.base}/missing` });
  assertEquals(output.status, 404);
  assertEquals(output.body, "not here");
  assert(!("json" in output));
  assertEquals(gw.events.filter((e) => e.type === "tool.failed").length, 0);
});

Deno.test("http_request reads only up to max_body_bytes and marks the body truncated", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], {
    file: {
      ...LOOPBACK,
      plugins: { http: { max_body_bytes: 2500 } },
    },
  });
  const { output } = await gw.gateway.call("http_request", { url: `${upstream.base}/endless` });
  assertEquals(output.truncated, true);
  assertEquals(output.size_bytes, 2500);
  assertEquals((output.body as string).length, 2500);
  // The body never ends: the call returned, and the upstream saw the client stop reading.
  await upstream.endlessCancelled;
});

Deno.test("http_request returns non-text bodies as base64", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const { output } = await gw.gateway.call("http_request", { url: `${upstream.base}/binary` });
  assertEquals(output.body_encoding, "base64");
  assertEquals(output.body, btoa(String.fromCharCode(0, 1, 2, 250, 255)));
});

Deno.test("http_request follows redirects by default, and not when told", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const followed = await gw.gateway.call("http_request", { url: `${upstream.base}/redirect` });
  assertEquals(followed.output.status, 200);
  assertEquals(followed.output.url, `${upstream.base}/json`);
  assertEquals(followed.output.redirects, 1);

  const seeOther = await gw.gateway.call("http_request", {
    method: "POST",
    url: `${upstream.base}/post-redirect`,
    json: { x: 1 },
  });
  assertEquals((seeOther.output.json as Record<string, unknown>).method, "GET");
  assertEquals((seeOther.output.json as Record<string, unknown>).body, "");

  const manual = await gw.gateway.call("http_request", {
    url: `${upstream.base}/redirect`,
    follow_redirects: false,
  });
  assertEquals(manual.output.status, 302);
  assertEquals((manual.output.headers as Record<string, string>).location, "/json");

  const loop = await expectCode(
    () => gw.gateway.call("http_request", { url: `${upstream.base}/loop` }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(
    loop.message,
    `Request to 127.0.0.1:${upstream.port} failed: more than 10 redirects`,
  );
});

Deno.test("http_request to an unreachable port fails with PLUGIN_REQUEST_FAILED naming the host", async () => {
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const port = closedPort();
  const error = await expectCode(
    () => gw.gateway.call("http_request", { url: `http://127.0.0.1:${port}/x?token=abc` }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(error.message, `Request to 127.0.0.1:${port} failed: connection refused`);
  assert(!error.message.includes("token=abc"), "the query string is not echoed");
  const failed = gw.events.find((e) => e.type === "tool.failed");
  assertEquals(failed?.data.error_code, "PLUGIN_REQUEST_FAILED");
  assertEquals(failed?.data.plugin, "http");
});

Deno.test("http_request fails with PLUGIN_REQUEST_FAILED when timeout_ms passes", async () => {
  await using silent = startSilent();
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const error = await expectCode(
    () => gw.gateway.call("http_request", { url: silent.url, timeout_ms: 50 }),
    "PLUGIN_REQUEST_FAILED",
  );
  assertEquals(
    error.message,
    `Request to 127.0.0.1:${silent.port} failed: no response within timeout_ms 50 ms`,
  );
});

Deno.test("http_request past the tool timeout fails with TOOL_TIMEOUT", async () => {
  await using silent = startSilent();
  await using gw = await pluginGateway([httpPlugin()], {
    file: {
      ...LOOPBACK,
      tools: { overrides: { http_request: { timeout_ms: 50 } } },
    },
  });
  await expectCode(
    () => gw.gateway.call("http_request", { url: silent.url }),
    "TOOL_TIMEOUT",
  );
});

Deno.test("allowed_hosts rejects other hosts before any request, including redirect targets", async () => {
  await using upstream = startUpstream();
  await using blocked = await pluginGateway([httpPlugin()], {
    file: {
      ...LOOPBACK,
      plugins: { http: { allowed_hosts: ["api.example.com", "*.example.org"] } },
    },
  });
  const error = await expectCode(
    () => blocked.gateway.call("http_request", { url: `${upstream.base}/json` }),
    "TOOL_INPUT_INVALID",
  );
  assertEquals(
    error.message,
    `Invalid url for http_request: the url host 127.0.0.1:${upstream.port} is not in plugins.http.allowed_hosts (api.example.com, *.example.org)`,
  );
  assertEquals(upstream.hits, [], "no request was made");

  await using allowed = await pluginGateway([httpPlugin()], {
    file: {
      ...LOOPBACK,
      plugins: { http: { allowed_hosts: ["127.0.0.1"] } },
    },
  });
  const ok = await allowed.gateway.call("http_request", { url: `${upstream.base}/json` });
  assertEquals(ok.output.status, 200);
  const offsite = await expectCode(
    () => allowed.gateway.call("http_request", { url: `${upstream.base}/offsite` }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(offsite.message, `a redirect (302) host localhost:${upstream.port} is not`);
});

Deno.test("isHostAllowed() matches names, host:port and *.domain wildcards", () => {
  const allowed = ["api.github.com", "localhost:8080", "*.example.com"];
  const check = (url: string) => isHostAllowed(new URL(url), allowed);
  assert(check("https://api.github.com/x"));
  assert(check("https://API.GitHub.com/x"));
  assert(check("http://localhost:8080/"));
  assert(!check("http://localhost:9090/"));
  assert(check("https://a.b.example.com/"));
  assert(!check("https://example.com/"));
  assert(!check("https://evil-example.com/"));
  assert(!check("https://github.com/"));
  assert(isHostAllowed(new URL("https://anything.test"), []));
});

Deno.test("http_request rejects bad input with TOOL_INPUT_INVALID naming the field", async () => {
  await using gw = await pluginGateway([httpPlugin()], { file: LOOPBACK });
  const cases: [Record<string, unknown>, string][] = [
    [{}, "url: Invalid input: expected string, received undefined"],
    [{ url: "not a url" }, "url: Invalid URL: expected http://… or https://…"],
    [{ url: "ftp://example.com/f" }, "url: Invalid URL: only http and https are supported"],
    [{ url: "http://x.test", method: "FETCH" }, "method: Invalid option"],
    [{ url: "http://x.test", body: "b" }, "body: A GET request cannot have a body"],
    [
      { url: "http://x.test", method: "POST", body: "b", json: {} },
      "body: Give either json or body, not both",
    ],
    [{ url: "http://x.test", timeout_ms: "5" }, "timeout_ms: Invalid input: expected number"],
    [{ url: "http://x.test", headers: { "bad name": "v" } }, "headers.bad name: Invalid header"],
  ];
  for (const [args, expected] of cases) {
    const error = await expectCode(
      () => gw.gateway.call("http_request", args),
      "TOOL_INPUT_INVALID",
    );
    assertStringIncludes(error.message, "Invalid arguments for http_request: ");
    assertStringIncludes(error.message, expected);
  }
});
