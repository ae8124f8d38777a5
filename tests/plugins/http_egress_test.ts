/**
 * `http_request` and the egress policy: loopback, private and metadata
 * addresses refused by default (also behind a DNS name and on a redirect),
 * toolgate's own address refused always, the connection made to the checked
 * address, and refusals never counted by the circuit breaker.
 *
 * @module
 */
import { assertEquals, assertMatch } from "../_asserts.ts";
import { EgressPolicy } from "../../src/egress/mod.ts";
import { httpPlugin } from "../../src/plugins/mod.ts";
import { expectCode, pluginGateway } from "./_gateway.ts";

/** A server on 127.0.0.1 that echoes what it got and redirects where told (`/to?u=`). */
function startUpstream() {
  const hits: { path: string; host: string | null; loop: string | null }[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    hits.push({
      path: url.pathname,
      host: req.headers.get("host"),
      loop: req.headers.get("x-toolgate-loop"),
    });
    if (url.pathname === "/to") {
      return new Response(null, { status: 302, headers: { location: url.searchParams.get("u")! } });
    }
    return Response.json({ ok: true });
  });
  return {
    base: `http://127.0.0.1:${server.addr.port}`,
    port: server.addr.port,
    hits,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test("http_request refuses 127.0.0.1 by default with EGRESS_DENIED naming the fix; the breaker never counts it", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], {
    file: { tools: { circuit_threshold: 2 } },
  });
  for (let i = 0; i < 4; i++) {
    const error = await expectCode(
      () => gw.gateway.call("http_request", { url: `${upstream.base}/x` }),
      "EGRESS_DENIED",
    );
    assertMatch(error.message, /Refused to connect to 127\.0\.0\.1: it is a loopback address/);
    assertMatch(
      error.message,
      /add "127\.0\.0\.1\/32" to egress\.allow in config\.json or to TOOLGATE_EGRESS_ALLOW/,
    );
  }
  assertEquals(upstream.hits, [], "no request was made");
  const failed = gw.events.filter((e) => e.type === "tool.failed");
  assertEquals(failed.length, 4);
  for (const event of failed) {
    assertEquals(event.data.error_code, "EGRESS_DENIED");
    assertEquals(event.data.circuit_state, "closed");
  }
  assertEquals(gw.events.filter((e) => e.type === "circuit.opened"), []);
  const metadata = await expectCode(
    () => gw.gateway.call("http_request", { url: "http://169.254.169.254/latest/meta-data/" }),
    "EGRESS_DENIED",
  );
  assertMatch(metadata.message, /a cloud metadata address/);
});

Deno.test("http_request refuses a DNS name that resolves to 127.0.0.1 (localhost)", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()]);
  const error = await expectCode(
    () => gw.gateway.call("http_request", { url: `http://localhost:${upstream.port}/x` }),
    "EGRESS_DENIED",
  );
  assertMatch(error.message, /\(localhost resolves to (127\.0\.0\.1|::1)\)/);
  assertMatch(error.message, /add "localhost" or "(127\.0\.0\.1\/32|::1\/128)"/);
  assertEquals(upstream.hits, []);
});

Deno.test("http_request checks every redirect hop: a redirect to a private or metadata address is refused", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], {
    file: { egress: { allow: ["127.0.0.1/32"] } },
  });
  const followed = await gw.gateway.call("http_request", {
    url: `${upstream.base}/to?u=${encodeURIComponent(`${upstream.base}/json`)}`,
  });
  assertEquals(followed.output.status, 200);
  for (const target of ["http://10.0.0.1/admin", "http://[::ffff:169.254.169.254]/latest"]) {
    const error = await expectCode(
      () =>
        gw.gateway.call("http_request", {
          url: `${upstream.base}/to?u=${encodeURIComponent(target)}`,
        }),
      "EGRESS_DENIED",
    );
    assertMatch(error.message, /^Redirect 1 \(to .*\) refused: Refused to connect to /);
    assertEquals((error.details as Record<string, unknown>).redirect, 1);
  }
});

Deno.test("allowed_hosts narrows but does not open: a listed private host still needs egress.allow", async () => {
  await using upstream = startUpstream();
  await using gw = await pluginGateway([httpPlugin()], {
    file: { plugins: { http: { allowed_hosts: ["127.0.0.1"] } } },
  });
  await expectCode(
    () => gw.gateway.call("http_request", { url: `${upstream.base}/x` }),
    "EGRESS_DENIED",
  );
  assertEquals(upstream.hits, []);
});

Deno.test("http_request connects to the checked address (a name only the policy resolves) and sends the loop marker", async () => {
  await using upstream = startUpstream();
  const egress = new EgressPolicy({
    allow: ["pinned.invalid"],
    marker: "dep_marker",
    lookup: () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]),
  });
  await using gw = await pluginGateway([httpPlugin({ egress })]);
  const { output } = await gw.gateway.call("http_request", {
    url: `http://pinned.invalid:${upstream.port}/x`,
  });
  assertEquals(output.status, 200);
  assertEquals(upstream.hits, [{
    path: "/x",
    host: `pinned.invalid:${upstream.port}`,
    loop: "dep_marker",
  }]);
});

Deno.test("http_request never reaches toolgate's own listening address, even with loopback allowed", async () => {
  await using upstream = startUpstream();
  const egress = new EgressPolicy({ allow: ["127.0.0.0/8", "localhost"] });
  egress.listen({ hostname: "127.0.0.1", port: upstream.port });
  await using gw = await pluginGateway([httpPlugin({ egress })]);
  for (const url of [`${upstream.base}/tools/memory_set`, `http://localhost:${upstream.port}/`]) {
    const error = await expectCode(() => gw.gateway.call("http_request", { url }), "EGRESS_DENIED");
    assertMatch(error.message, /toolgate's own listening address \(127\.0\.0\.1:\d+\)/);
  }
  assertEquals(upstream.hits, []);
});
