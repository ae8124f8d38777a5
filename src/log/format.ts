/**
 * The two forms of a log line: JSON (one object per line: `time`, `level`,
 * `logger`, `message`, then the fields, `trace_id` and `span_id` when
 * tracing) and text (`<time> <LEVEL> [<logger>] <message> key=value …`).
 *
 * @module
 */
import type { LogRecord } from "@logtape/logtape";

/** Which form lines take. */
export type LogFormat = "text" | "json";

/** Keys every JSON line has; a field of the same name is written as `field_<name>`. */
const RESERVED = new Set(["time", "level", "logger", "message"]);

const LEVEL_NAMES: Readonly<Record<LogRecord["level"], string>> = {
  trace: "trace",
  debug: "debug",
  info: "info",
  warning: "warn",
  error: "error",
  fatal: "fatal",
};

/** The logger's name: the category without its `toolgate` root. */
function loggerName(record: LogRecord): string {
  const [root, ...rest] = record.category;
  return root === "toolgate" && rest.length ? rest.join(".") : record.category.join(".");
}

function messageText(record: LogRecord): string {
  return record.message.map((part) => typeof part === "string" ? part : String(part)).join("");
}

/** One JSON line (with its newline). */
export function formatJsonLine(record: LogRecord): string {
  const line: Record<string, unknown> = {
    time: new Date(record.timestamp).toISOString(),
    level: LEVEL_NAMES[record.level],
    logger: loggerName(record),
    message: messageText(record),
  };
  for (const [key, value] of Object.entries(record.properties)) {
    if (value === undefined) continue;
    line[RESERVED.has(key) ? `field_${key}` : key] = value;
  }
  return `${JSON.stringify(line, jsonValue)}\n`;
}

/** One text line (with its newline). */
export function formatTextLine(record: LogRecord): string {
  const level = LEVEL_NAMES[record.level].toUpperCase().padEnd(5);
  let line = `${new Date(record.timestamp).toISOString()} ${level} [${loggerName(record)}] ${
    messageText(record)
  }`;
  for (const [key, value] of Object.entries(record.properties)) {
    if (value === undefined) continue;
    line += ` ${key}=${textValue(value)}`;
  }
  return `${line.replaceAll("\n", "\\n")}\n`;
}

function jsonValue(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}

function textValue(value: unknown): string {
  if (typeof value === "string") return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (value instanceof Error) return JSON.stringify(value.message);
  return JSON.stringify(value, jsonValue) ?? String(value);
}
