/**
 * Logs: one logger for the whole process, on `@logtape/logtape`. Every line
 * has a time, a level, the logger (the part of toolgate that wrote it), a
 * message and fields, with the trace and span ids of the active span when
 * tracing is on, and secrets redacted by the audit log's rules. Lines go to
 * stderr, as JSON (`--log-format json`, `TOOLGATE_LOG_FORMAT`) or text; stdout
 * stays the stdio transport's, for JSON-RPC only.
 *
 * Parts of toolgate take a {@linkcode LogLike}: a {@linkcode Log} from
 * {@linkcode getLog}, or a plain `(message) => void` (tests collect lines so).
 *
 * @example
 * ```ts
 * import { configureLogging, getLog } from "./src/log/mod.ts";
 * configureLogging({ format: "json", level: "info" });
 * getLog("webhooks").warn("Delivery failed", { webhook_id: "wh_1", status: 500 });
 * // {"time":"…","level":"warn","logger":"webhooks","message":"Delivery failed","webhook_id":"wh_1","status":500}
 * ```
 *
 * @module
 */
import { configureSync, getLogger, type LogRecord, type Sink } from "@logtape/logtape";
import { createRedactor, type Redactor } from "../redact.ts";
import { activeTraceIds } from "../tracing/mod.ts";
import { formatJsonLine, formatTextLine, type LogFormat } from "./format.ts";

export type { LogFormat };

/** Levels, lowest first. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;

/** A level. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The forms a line can take. */
export const LOG_FORMATS: readonly LogFormat[] = ["text", "json"];

/** Fields of a line. */
export type LogFields = Record<string, unknown>;

/** A logger of one part of toolgate. */
export interface Log {
  /** Details for finding a fault. */
  debug(message: string, fields?: LogFields): void;
  /** What happened (started, connected, changed). */
  info(message: string, fields?: LogFields): void;
  /** Something failed and toolgate goes on. */
  warn(message: string, fields?: LogFields): void;
  /** Something failed that needs a person. */
  error(message: string, fields?: LogFields): void;
}

/** A {@linkcode Log}, or a function that takes every line's message. */
export type LogLike = Log | ((message: string) => void);

/** Options of {@linkcode configureLogging}. */
export interface LoggingOptions {
  /** The form of lines. @default "text" */
  format?: LogFormat;
  /** The lowest level written. @default "info" */
  level?: LogLevel;
  /** Where lines go. @default stderr, written synchronously */
  write?: (line: string) => void;
  /** Extra value patterns to redact (config `redact.patterns`). @default none */
  redactPatterns?: readonly string[];
}

const TO_LOGTAPE = { debug: "debug", info: "info", warn: "warning", error: "error" } as const;

const encoder = new TextEncoder();

let configured = false;

function writeStderr(line: string): void {
  const bytes = encoder.encode(line);
  let written = 0;
  while (written < bytes.length) written += Deno.stderr.writeSync(bytes.subarray(written));
}

function sinkOf(format: LogFormat, write: (line: string) => void, redactor: Redactor): Sink {
  const formatLine = format === "json" ? formatJsonLine : formatTextLine;
  return (record: LogRecord) => {
    const ids = activeTraceIds();
    const properties = redactor(ids ? { ...record.properties, ...ids } : record.properties);
    const message = record.message.map((part) => redactor(part));
    try {
      write(formatLine({ ...record, message, properties }));
    } catch {
      // stderr closed: a log line is not worth a crash.
    }
  };
}

/**
 * Sets where and how lines are written, for the whole process (again: the
 * new settings replace the old).
 *
 * @throws {RangeError} for an unknown format or level.
 */
export function configureLogging(options: LoggingOptions = {}): void {
  const { format = "text", level = "info", write = writeStderr, redactPatterns = [] } = options;
  if (!LOG_FORMATS.includes(format)) {
    throw new RangeError(`Invalid log format "${format}": expected text or json`);
  }
  if (!LOG_LEVELS.includes(level)) {
    throw new RangeError(`Invalid log level "${level}": expected ${LOG_LEVELS.join(", ")}`);
  }
  configureSync({
    reset: true,
    sinks: { stderr: sinkOf(format, write, createRedactor({ patterns: redactPatterns })) },
    loggers: [
      { category: ["toolgate"], lowestLevel: TO_LOGTAPE[level], sinks: ["stderr"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: ["stderr"] },
    ],
  });
  configured = true;
}

/**
 * The logger of one part of toolgate (`webhooks`, `gateway`, `http`, …).
 * Before {@linkcode configureLogging}, the first line configures the
 * defaults (text, info, stderr).
 */
export function getLog(name: string): Log {
  const logger = getLogger(["toolgate", ...name.split(".")]);
  const emit = (level: LogLevel, message: string, fields: LogFields = {}) => {
    if (!configured) configureLogging();
    const target = TO_LOGTAPE[level];
    if (!logger.isEnabledFor(target)) return;
    logger.emit({
      timestamp: Date.now(),
      level: target,
      message: [message],
      rawMessage: message,
      properties: fields,
    });
  };
  return {
    debug: (message, fields) => emit("debug", message, fields),
    info: (message, fields) => emit("info", message, fields),
    warn: (message, fields) => emit("warn", message, fields),
    error: (message, fields) => emit("error", message, fields),
  };
}

/** A {@linkcode Log} of a {@linkcode LogLike}: a function gets every message, whatever its level. */
export function toLog(like: LogLike): Log {
  if (typeof like !== "function") return like;
  const line = (message: string) => like(message);
  return { debug: line, info: line, warn: line, error: line };
}

/**
 * A line sink (`(message) => void`) writing at `level` to `log`: for parts
 * that take one (their messages carry no level).
 */
export function lineSink(log: Log, level: LogLevel = "warn"): (message: string) => void {
  return (message) => log[level](message);
}

/** Whether `value` names a level. */
export function isLogLevel(value: string): value is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(value);
}
