/**
 * The TypeScript SDK against a 2025-only server (tests/sdk/_legacy_server.ts,
 * official SDK 1.x): it probes with `server/discover`, falls back to the
 * 2025 `initialize` handshake on the same connection, and calls tools.
 *
 * @module
 */
import { ToolgateClient, ToolgateError } from "../../sdk/typescript/mod.ts";
import { assert, assertEquals, assertMatch, assertRejects, assertThrows } from "../_asserts.ts";
import { ROOT } from "../_helpers.ts";

const FIXTURE = `${ROOT}tests/sdk/_legacy_server.ts`;

function stdioClient(mode: string, options: { protocol?: "auto" | "2026-07-28" } = {}) {
  return new ToolgateClient({
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", FIXTURE, mode],
    cwd: ROOT,
    stderr: "ignore",
    timeoutMs: 2_000,
    ...options,
  });
}

/** The methods the fixture received, through its `methods` tool. */
async function methodsSeen(client: ToolgateClient): Promise<string[]> {
  const result = await client.callTool("methods");
  return (result.structuredContent as { methods: string[] }).methods;
}

/** The fixture in `http` mode on port 0. */
async function startLegacyHttp(): Promise<AsyncDisposable & { url: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", FIXTURE, "http"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let banner = "";
  while (!banner.includes("\n")) {
    const { done, value } = await reader.read();
    if (done) break;
    banner += value;
  }
  reader.releaseLock();
  const url = /listening on (http:\/\/\S+)/.exec(banner)?.[1];
  return {
    url: url ?? "http://127.0.0.1:1",
    async [Symbol.asyncDispose]() {
      child.kill("SIGTERM");
      await child.status;
      await child.stdout.cancel().catch(() => {});
    },
  };
}

Deno.test("TS SDK over stdio falls back to 2025 with a server that does not know server/discover", async () => {
  await using client = stdioClient("stdio");
  await client.connect();
  assertEquals(client.protocolVersion, "2025-11-25");
  const echo = await client.callTool("echo", { text: "old" });
  assertEquals(echo.content[0].text, "echo: old");
  assertEquals((await client.listTools()).map((tool) => tool.name), ["echo", "methods"]);
  // The probe and the handshake went to the same process, in that order.
  assertEquals((await methodsSeen(client)).slice(0, 3), [
    "server/discover",
    "initialize",
    "notifications/initialized",
  ]);
});

Deno.test("TS SDK over stdio starts a server again when it exits on the probe, and speaks 2025", async () => {
  await using client = stdioClient("stdio-strict");
  await client.connect();
  assertEquals(client.protocolVersion, "2025-11-25");
  assertEquals((await methodsSeen(client)).slice(0, 2), [
    "initialize",
    "notifications/initialized",
  ]);
});

Deno.test("TS SDK over stdio falls back to 2025 when the probe gets no answer, or -32022 naming 2025 only", async () => {
  for (const mode of ["stdio-silent", "stdio-unsupported"]) {
    await using client = stdioClient(mode);
    await client.connect();
    assertEquals(client.protocolVersion, "2025-11-25", mode);
    assertEquals((await client.callTool("echo", { text: mode })).content[0].text, `echo: ${mode}`);
  }
});

Deno.test("TS SDK over HTTP falls back to a 2025 session with a 2025-only server", async () => {
  await using server = await startLegacyHttp();
  await using client = new ToolgateClient({ baseUrl: server.url });
  await client.connect();
  assertEquals(client.protocolVersion, "2025-11-25");
  assertMatch(client.sessionId ?? "", /^[0-9a-f-]{36}$/);
  assertEquals((await client.callTool("echo", { text: "http" })).content[0].text, "echo: http");
  const seen = await methodsSeen(client);
  assertEquals(seen.slice(0, 2), ["server/discover", "initialize"]);
  await client.disconnect();
});

Deno.test("TS SDK with protocol 2026-07-28 refuses a 2025-only server on both transports", async () => {
  await using server = await startLegacyHttp();
  for (
    const client of [
      stdioClient("stdio", { protocol: "2026-07-28" }),
      new ToolgateClient({ baseUrl: server.url, protocol: "2026-07-28" }),
    ]
  ) {
    const error = await assertRejects(() => client.connect(), ToolgateError);
    assertEquals(error.code, "MCP_ERROR", error.message);
    assertMatch(error.message, /2026-07-28/);
    assert(!client.connected);
    await client.disconnect();
  }
  const usage = assertThrows(
    () => new ToolgateClient({ baseUrl: server.url, protocol: "2024" as "2025" }),
    'Invalid protocol "2024"',
  );
  assertEquals((usage as ToolgateError).code, "USAGE");
});
