/**
 * The process's log settings: `--log-format text|json` and `--log-level`
 * (any command; they win), else `TOOLGATE_LOG_FORMAT` and
 * `TOOLGATE_LOG_LEVEL`, else text at `info`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import {
  configureLogging,
  isLogLevel,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
} from "../log/mod.ts";
import type { CliContext } from "./context.ts";

/** The resolved settings. */
export interface LogSettings {
  format: LogFormat;
  level: LogLevel;
}

/** Flags as commander parsed them. */
export interface LogFlags {
  logFormat?: string;
  logLevel?: string;
}

function pick(
  flag: string | undefined,
  variable: string | undefined,
  names: { flag: string; variable: string },
  accepted: readonly string[],
  fallback: string,
): string {
  const given = flag ?? variable?.trim();
  if (given === undefined || given === "") return fallback;
  const value = given.toLowerCase();
  if (accepted.includes(value)) return value;
  const where = flag !== undefined ? names.flag : names.variable;
  throw new GatewayError(
    flag !== undefined ? "USAGE" : "CONFIG_INVALID",
    `Invalid ${where} "${given}": expected one of ${accepted.join(", ")}, e.g. ${where}${
      flag !== undefined ? " " : "="
    }${accepted[accepted.length - 1]}`,
  );
}

/**
 * The settings of `flags` and the environment.
 *
 * @throws {GatewayError} `USAGE` for a bad flag, `CONFIG_INVALID` for a bad variable.
 */
export function logSettings(flags: LogFlags, env: Record<string, string | undefined>): LogSettings {
  const format = pick(
    flags.logFormat,
    env.TOOLGATE_LOG_FORMAT,
    { flag: "--log-format", variable: "TOOLGATE_LOG_FORMAT" },
    LOG_FORMATS,
    "text",
  ) as LogFormat;
  const level = pick(
    flags.logLevel,
    env.TOOLGATE_LOG_LEVEL,
    { flag: "--log-level", variable: "TOOLGATE_LOG_LEVEL" },
    // `warning` is accepted for `warn`.
    [...LOG_LEVELS, "warning"],
    "info",
  );
  return { format, level: isLogLevel(level) ? level : "warn" };
}

/** Configures the process's logger for this invocation: lines go to the context's stderr. */
export function configureCliLogging(context: CliContext, settings: LogSettings): void {
  context.logging = { ...settings, write: (line) => context.io.stderr(line) };
  configureLogging(context.logging);
  context.logFormat = settings.format;
}

/** Adds the config's `redact.patterns` to the logger's rules, once the config is read. */
export function redactLogsWith(context: CliContext, patterns: readonly string[]): void {
  if (!patterns.length || !context.logging) return;
  context.logging = { ...context.logging, redactPatterns: patterns };
  configureLogging(context.logging);
}
