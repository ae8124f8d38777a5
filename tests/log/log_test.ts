/**
 * The logger: both line forms, levels, fields, redaction by the audit log's
 * rules, and the settings of flags and variables.
 */
import { assertEquals, assertMatch, assertStringIncludes, assertThrows } from "../_asserts.ts";
import { configureLogging, getLog, lineSink, toLog } from "../../src/log/mod.ts";
import { logSettings } from "../../src/cli/logging.ts";
import type { GatewayError } from "../../src/errors/mod.ts";

function capture(options: Parameters<typeof configureLogging>[0] = {}): string[] {
  const lines: string[] = [];
  configureLogging({ ...options, write: (line) => lines.push(line) });
  return lines;
}

Deno.test("json lines carry time, level, logger, message and the fields; reserved names are kept apart", () => {
  const lines = capture({ format: "json" });
  getLog("webhooks").warn("Delivery failed", { webhook_id: "wh_1", status: 500, message: "x" });
  assertEquals(lines.length, 1);
  assertEquals(lines[0].endsWith("\n"), true);
  const line = JSON.parse(lines[0]);
  assertMatch(line.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assertEquals(line, {
    time: line.time,
    level: "warn",
    logger: "webhooks",
    message: "Delivery failed",
    webhook_id: "wh_1",
    status: 500,
    field_message: "x",
  });
});

Deno.test("text lines carry the time, the level, the logger and key=value fields on one line", () => {
  const lines = capture({ format: "text" });
  getLog("gateway").info("circuit closed\nafter 5 ms", { tool: "echo", note: "two words" });
  assertMatch(
    lines[0],
    /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO {2}\[gateway\] circuit closed\\nafter 5 ms tool=echo note="two words"\n$/,
  );
});

Deno.test("lines below the level are dropped", () => {
  const lines = capture({ format: "json", level: "warn" });
  const log = getLog("x");
  log.debug("d");
  log.info("i");
  log.warn("w");
  log.error("e");
  assertEquals(lines.map((line) => JSON.parse(line).level), ["warn", "error"]);
});

Deno.test("secrets are redacted in messages and fields, by the built-in rules and configured patterns", () => {
  const lines = capture({ format: "json", redactPatterns: ["emp-\\d{6}"] });
  getLog("http").warn("Upstream refused Bearer abcdefghijklmnop.qrstuvwx for emp-123456", {
    api_key: "tg_secret_value",
    url: "https://user:hunter2@example.com/x?access_token=t0k3n",
  });
  const text = lines[0];
  for (const secret of ["abcdefghijklmnop", "emp-123456", "tg_secret_value", "hunter2", "t0k3n"]) {
    assertEquals(text.includes(secret), false, `${secret} in ${text}`);
  }
  assertStringIncludes(text, "[REDACTED]");
});

Deno.test("a plain function takes every line; lineSink writes at its level", () => {
  const seen: string[] = [];
  const log = toLog((message) => seen.push(message));
  log.info("a");
  log.error("b");
  assertEquals(seen, ["a", "b"]);
  const lines = capture({ format: "json" });
  lineSink(getLog("store"), "error")("disk full");
  assertEquals([JSON.parse(lines[0]).level, JSON.parse(lines[0]).message], ["error", "disk full"]);
});

Deno.test("settings: flags win over variables; bad values name the flag or the variable", () => {
  assertEquals(logSettings({}, {}), { format: "text", level: "info" });
  assertEquals(logSettings({}, { TOOLGATE_LOG_FORMAT: "JSON", TOOLGATE_LOG_LEVEL: "warning" }), {
    format: "json",
    level: "warn",
  });
  assertEquals(
    logSettings({ logFormat: "text", logLevel: "debug" }, { TOOLGATE_LOG_FORMAT: "json" }),
    { format: "text", level: "debug" },
  );
  const flag = assertThrows(() => logSettings({ logLevel: "loud" }, {})) as GatewayError;
  assertEquals(flag.code, "USAGE");
  assertStringIncludes(flag.message, '--log-level "loud"');
  const variable = assertThrows(() =>
    logSettings({}, { TOOLGATE_LOG_FORMAT: "xml" })
  ) as GatewayError;
  assertEquals(variable.code, "CONFIG_INVALID");
  assertStringIncludes(variable.message, "TOOLGATE_LOG_FORMAT");
  assertThrows(() => configureLogging({ format: "xml" as never }), "Invalid log format");
  configureLogging();
});
