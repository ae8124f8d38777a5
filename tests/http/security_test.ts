import { assert, assertEquals, assertMatch, assertThrows } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import type { Gateway } from "../../src/gateway/mod.ts";
import { createApp } from "../../src/http/app.ts";
import { isLoopback, isLoopbackHost, isLoopbackOrigin, secretsEqual } from "../../src/http/mod.ts";
import { httpConfig, postJson, testApp } from "./_fixtures.ts";

const TOKEN = "tg-test-token-0123456789";

async function status(response: Response): Promise<number> {
  await response.body?.cancel();
  return response.status;
}

async function code(response: Response): Promise<string> {
  return ((await response.json()) as { error: { code: string } }).error.code;
}

Deno.test("Host other than loopback is refused with 403 on /tools, /mcp and /health", async () => {
  await using t = await testApp();
  for (const path of ["/tools", "/mcp", "/health", "/openapi.json"]) {
    const response = await t.app.request(path, { headers: { host: "evil.example" } });
    assertEquals(response.status, 403, path);
    assertEquals(await code(response), "FORBIDDEN");
  }
  const post = await postJson(t.app, "/tools/echo", { message: "x" }, { host: "evil.example:80" });
  assertEquals(post.status, 403);
  assertMatch((await post.json()).error.message, /Host "evil.example:80" is not allowed/);
  const mcp = await t.app.request("/mcp", {
    method: "POST",
    headers: {
      host: "evil.example",
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: "{}",
  });
  assertEquals(await status(mcp), 403);
});

Deno.test("loopback Host names are accepted with or without a port", async () => {
  await using t = await testApp();
  for (
    const host of [
      "localhost",
      "localhost:7821",
      "127.0.0.1:1",
      "[::1]:65535",
      "[::1]",
      "LOCALHOST",
    ]
  ) {
    assertEquals(await status(await t.app.request("/tools", { headers: { host } })), 200, host);
  }
  for (const host of ["localhost.evil.example", "127.0.0.1.nip.io", "::1", "0.0.0.0:7821"]) {
    assertEquals(await status(await t.app.request("/tools", { headers: { host } })), 403, host);
  }
});

Deno.test("Origin must be loopback or in server.cors_origins", async () => {
  await using t = await testApp({ file: { server: { cors_origins: ["https://app.example"] } } });
  const ok = [
    "http://localhost:3000",
    "https://127.0.0.1",
    "http://[::1]:8080",
    "https://app.example",
  ];
  for (const origin of ok) {
    assertEquals(await status(await t.app.request("/tools", { headers: { origin } })), 200, origin);
  }
  const bad = [
    "https://evil.example",
    "null",
    "http://localhost.evil.example",
    "file://",
    "https://app.example/",
  ];
  for (const origin of bad) {
    const response = await t.app.request("/tools", { headers: { origin } });
    assertEquals(response.status, 403, origin);
    assertEquals(await code(response), "FORBIDDEN");
  }
});

Deno.test("CORS headers only for configured origins; preflight succeeds without a token", async () => {
  await using t = await testApp({
    file: { server: { cors_origins: ["https://app.example"] } },
    env: { TOOLGATE_API_TOKEN: TOKEN },
  });
  const preflight = await t.app.request("/tools/echo", {
    method: "OPTIONS",
    headers: {
      origin: "https://app.example",
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization, content-type",
    },
  });
  assert(preflight.status === 204 || preflight.status === 200, `status ${preflight.status}`);
  assertEquals(preflight.headers.get("access-control-allow-origin"), "https://app.example");
  assertMatch(preflight.headers.get("access-control-allow-headers") ?? "", /Authorization/i);
  await preflight.body?.cancel();
  const get = await t.app.request("/tools", {
    headers: { origin: "https://app.example", authorization: `Bearer ${TOKEN}` },
  });
  assertEquals(get.headers.get("access-control-allow-origin"), "https://app.example");
  assertMatch(get.headers.get("access-control-expose-headers") ?? "", /Mcp-Session-Id/);
  assertEquals(await status(get), 200);
});

Deno.test("without cors_origins no CORS headers are sent", async () => {
  await using t = await testApp();
  const response = await t.app.request("/tools", { headers: { origin: "http://localhost:3000" } });
  assertEquals(response.headers.get("access-control-allow-origin"), null);
  assertEquals(await status(response), 200);
});

Deno.test("a non-loopback bind skips the Host check", async () => {
  await using t = await testApp({
    file: { server: { host: "0.0.0.0" } },
    env: { TOOLGATE_API_TOKEN: TOKEN },
  });
  const response = await t.app.request("/tools", {
    headers: { host: "gateway.internal:7821", authorization: `Bearer ${TOKEN}` },
  });
  assertEquals(await status(response), 200);
});

Deno.test("bearer token: none or wrong → 401 on REST, /mcp and /openapi.json; /health is open", async () => {
  await using t = await testApp({ env: { TOOLGATE_API_TOKEN: TOKEN } });
  const cases: [string, RequestInit][] = [
    ["/tools", {}],
    ["/tools/echo", { method: "POST" }],
    ["/openapi.json", {}],
    ["/mcp", { method: "POST" }],
    ["/mcp", {}],
    ["/nope", {}],
  ];
  for (const [path, init] of cases) {
    for (
      const authorization of [
        undefined,
        "Bearer wrong",
        `Bearer ${TOKEN}x`,
        `Basic ${TOKEN}`,
        "Bearer",
      ]
    ) {
      const headers = authorization ? { authorization } : undefined;
      const response = await t.app.request(path, { ...init, headers });
      assertEquals(response.status, 401, `${path} ${authorization}`);
      assertEquals(response.headers.get("www-authenticate"), 'Bearer realm="toolgate"');
      assertEquals(await code(response), "UNAUTHORIZED");
    }
  }
  const health = await t.app.request("/health");
  assertEquals(await status(health), 200);
  const ok = await t.app.request("/tools", { headers: { authorization: `Bearer ${TOKEN}` } });
  assertEquals(await status(ok), 200);
  const lower = await t.app.request("/openapi.json", {
    headers: { authorization: `bearer ${TOKEN}` },
  });
  assertEquals(await status(lower), 200);
});

Deno.test("public paths skip the token and the Host check but not the Origin check", async () => {
  await using t = await testApp({
    env: { TOOLGATE_API_TOKEN: TOKEN },
    file: { incoming: { body_limit_bytes: 16 } },
    isPublicPath: (path) => path.startsWith("/hooks/"),
    routes: [
      (app) => app.post("/hooks/:name", (c) => c.json({ accepted: c.req.param("name") }, 202)),
    ],
  });
  const response = await t.app.request("/hooks/github", {
    method: "POST",
    headers: { host: "abc.tunnel.example" },
    body: "{}",
  });
  assertEquals(response.status, 202);
  assertEquals(await response.json(), { accepted: "github" });
  // Public paths enforce incoming.body_limit_bytes in their own handler (the
  // incoming router counts and logs each rejection), not in the app's middleware.
  const big = await t.app.request("/hooks/github", { method: "POST", body: "x".repeat(17) });
  assertEquals(big.status, 202, "the app leaves public paths' body limit to their handler");
  const origin = await t.app.request("/hooks/github", {
    method: "POST",
    headers: { origin: "https://evil.example" },
  });
  assertEquals(await status(origin), 403);
});

Deno.test("secretsEqual() compares by value, whatever the lengths", () => {
  assert(secretsEqual("abc", "abc"));
  assert(!secretsEqual("abc", "abd"));
  assert(!secretsEqual("abc", "abcd"));
  assert(!secretsEqual("", "a"));
});

Deno.test("loopback helpers recognise binds, Host values and Origins", () => {
  assert(isLoopback("127.0.0.1") && isLoopback("::1") && isLoopback("localhost"));
  assert(isLoopback("127.1.2.3"));
  assert(!isLoopback("0.0.0.0") && !isLoopback("192.168.1.2") && !isLoopback("::"));
  assert(isLoopbackHost("[::1]:7821") && !isLoopbackHost("[::1]x"));
  assert(isLoopbackOrigin("http://localhost") && !isLoopbackOrigin("ws://localhost"));
});

Deno.test("TOOLGATE_BENCH_LAYERS_OFF may switch request checks off only on loopback", async () => {
  for (const layers of ["identity", "http_checks"]) {
    const config = await httpConfig({ server: { host: "0.0.0.0" } }, {
      TOOLGATE_BENCH_LAYERS_OFF: layers,
      TOOLGATE_API_TOKEN: "t".repeat(32),
    });
    const error = assertThrows(
      () => createApp({ gateway: {} as Gateway, config }),
      "allowed only on a loopback address",
    );
    assert(error instanceof GatewayError);
    assertEquals(error.code, "CONFIG_INVALID");
  }
});
