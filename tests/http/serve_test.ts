import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { assert, assertEquals, assertMatch, assertThrows } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { serveHttp } from "../../src/http/mod.ts";
import { testGateway } from "../gateway/_fixtures.ts";
import { gatePlugin, httpConfig } from "./_fixtures.ts";

Deno.test("serveHttp() refuses to bind beyond loopback without TOOLGATE_API_TOKEN", async () => {
  const config = await httpConfig({ server: { host: "0.0.0.0", port: 0 } });
  await using t = await testGateway({ config, plugins: [] });
  const error = assertThrows(() => serveHttp({ gateway: t.gateway, config }));
  assert(error instanceof GatewayError);
  assertEquals(error.code, "CONFIG_INVALID");
  assertMatch(error.message, /Refusing to bind 0\.0\.0\.0: set TOOLGATE_API_TOKEN/);
});

Deno.test("serveHttp() shutdown drains in-flight requests, ends MCP streams and sessions", async () => {
  const gate = gatePlugin();
  const config = await httpConfig({ server: { port: 0 } });
  await using t = await testGateway({ config, plugins: [gate] });
  let listening!: (url: string) => void;
  const address = new Promise<string>((resolve) => listening = resolve);
  const server = serveHttp({ gateway: t.gateway, config, onListen: ({ url }) => listening(url) });
  const url = await address;
  assertMatch(url, /^http:\/\/127\.0\.0\.1:\d+$/);

  const client = new Client({ name: "drain-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  assertEquals(server.mcp.size, 1);

  const inFlight = fetch(`${url}/tools/gate`, { method: "POST" });
  await gate.entered;
  const stopped = server.shutdown();
  assert(server.lifecycle.draining);
  gate.release();
  const response = await inFlight;
  assertEquals(response.status, 200);
  assertEquals((await response.json()).structuredContent, { released: true });
  await stopped;
  await server.finished;
  assertEquals(server.mcp.size, 0);
  await client.close();
});
