/**
 * Structured logs of the real server process: with `--log-format json`
 * every stderr line is one JSON object with `time`, `level`, `logger` and
 * `message` (and the trace and span ids of the call that wrote it when
 * tracing is on); stdout of the stdio transport stays JSON-RPC only.
 */
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { initializeRequest, runCli, tempHome } from "../_helpers.ts";
import { OtlpReceiver } from "../tracing/_otlp_receiver.ts";
import { startHttpServer } from "./_http_server.ts";

interface LogLine {
  time: string;
  level: string;
  logger: string;
  message: string;
  [field: string]: unknown;
}

/** Every non-empty line of `text` parsed as a log line (failing on the first that is not one). */
function parseLines(text: string): LogLine[] {
  return text.split("\n").filter((line) => line.trim() !== "").map((line) => {
    let value: LogLine;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`not a JSON line: ${line}`);
    }
    assertMatch(value.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, line);
    assert(["debug", "info", "warn", "error"].includes(value.level), line);
    assertEquals(typeof value.logger, "string", line);
    assertEquals(typeof value.message, "string", line);
    return value;
  });
}

Deno.test("http server with --log-format json: every stderr line is a JSON log line, with trace ids inside a call", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const deadPort = (dead.addr as Deno.NetAddr).port;
  dead.close();
  const server = await startHttpServer({
    home: tmp.home,
    args: ["--log-format", "json"],
    env: { ...otlp.env, TOOLGATE_LOG_LEVEL: "debug" },
    config: {
      tools: { overrides: { http_request: { circuit_threshold: 1, circuit_reset_ms: 60_000 } } },
    },
  });
  const response = await fetch(`${server.url}/tools/http_request`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ url: `http://127.0.0.1:${deadPort}/x`, method: "GET" }),
  });
  await response.body?.cancel();
  const { code, stderr } = await server.stop("SIGTERM");
  assertEquals(code, 0, stderr);
  const lines = parseLines(stderr);
  const listening = lines.find((line) => line.message.startsWith("Listening on "));
  assertEquals([listening?.logger, listening?.url], ["http", server.url]);
  const opened = lines.find((line) => line.message.startsWith("circuit opened for http_request"));
  assert(opened, stderr);
  assertEquals([opened.level, opened.logger, opened.tool], ["warn", "gateway", "http_request"]);
  assertMatch(String(opened.trace_id), /^[0-9a-f]{32}$/);
  assertMatch(String(opened.span_id), /^[0-9a-f]{16}$/);
  const slack = lines.find((line) => line.plugin === "slack");
  assertEquals(slack?.state, "not_configured");
  assert(
    lines.some((line) => line.logger === "server" && line.message.startsWith("Shutting down")),
  );
});

Deno.test("stdio with TOOLGATE_LOG_FORMAT=json: stdout carries only JSON-RPC, stderr only JSON log lines", async () => {
  await using tmp = await tempHome();
  const requests = [
    initializeRequest(),
    { jsonrpc: "2.0", method: "notifications/initialized" },
    { jsonrpc: "2.0", id: 2, method: "tools/list" },
  ];
  // The session ends when stdin does, after the answers.
  const { code, stdout, stderr } = await runCli(["mcp", "start"], {
    home: tmp.home,
    env: { TOOLGATE_LOG_FORMAT: "json" },
    stdin: requests.map((request) => JSON.stringify(request)).join("\n") + "\n",
  });
  assertEquals(code, 0, stderr);
  assert(stdout.includes('"id":2'), stdout);
  for (const line of stdout.split("\n").filter((l) => l.trim())) {
    assertEquals(JSON.parse(line).jsonrpc, "2.0", line);
  }
  const lines = parseLines(stderr);
  assert(lines.some((line) => line.plugin === "slack"), stderr);
});
