/**
 * What every CLI command gets: I/O, lazily loaded configuration and store,
 * and output helpers.
 *
 * @module
 */
import { type Config, loadConfig, readEnv } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { getLog, type LogFormat, type LoggingOptions } from "../log/mod.ts";
import { decodeSecretKey, openStore, type OpenStoreOptions, type Store } from "../store/mod.ts";
import { loadTracing } from "../tracing/mod.ts";
import { InputCancelledError, readHiddenLine } from "./_hidden_input.ts";

/** The process I/O a command uses; injected so tests can capture it. */
export interface CliIo {
  /** Writes to stdout (no newline added). */
  stdout(text: string): void;
  /** Writes to stderr (no newline added). */
  stderr(text: string): void;
  /** Reads all of stdin as text. */
  readStdin(): Promise<string>;
  /** The environment. */
  env: Record<string, string>;
  /** Whether stderr is a terminal (colour and progress only then). */
  stderrIsTty: boolean;
  /** Whether stdin is a terminal (a person typing, not a pipe or an MCP host). */
  stdinIsTty: boolean;
  /**
   * Reads a secret: from a terminal, after `prompt` on stderr with echo off
   * (one line); otherwise all of stdin.
   *
   * @throws {GatewayError} `USAGE` when the user presses Ctrl-C at the prompt.
   */
  readSecret(prompt: string): Promise<string>;
}

/** The I/O of the real process. */
export function processIo(): CliIo {
  const encoder = new TextEncoder();
  return {
    stdout: (text) => writeAll(Deno.stdout, encoder.encode(text)),
    stderr: (text) => writeAll(Deno.stderr, encoder.encode(text)),
    readStdin: async () => await new Response(Deno.stdin.readable).text(),
    env: readEnv(),
    stderrIsTty: Deno.stderr.isTerminal(),
    stdinIsTty: Deno.stdin.isTerminal(),
    readSecret: async (prompt) => {
      if (!Deno.stdin.isTerminal()) return await new Response(Deno.stdin.readable).text();
      const write = (text: string) => writeAll(Deno.stderr, encoder.encode(text));
      try {
        return await readHiddenLine(Deno.stdin, prompt, write);
      } catch (error) {
        if (error instanceof InputCancelledError) throw usage("Cancelled: nothing was stored");
        throw error;
      }
    },
  };
}

function writeAll(target: { writeSync(p: Uint8Array): number }, bytes: Uint8Array): void {
  let offset = 0;
  while (offset < bytes.length) offset += target.writeSync(bytes.subarray(offset));
}

/** How a configuration opens its store. */
export function storeOptions(config: Config): OpenStoreOptions {
  const { url, pool_max, statement_timeout_ms, connect_timeout_ms } = config.store;
  return {
    dataDir: config.dataDir,
    ...(config.secretKey ? { secretKey: decodeSecretKey(config.secretKey) } : {}),
    url,
    pool: {
      max: pool_max,
      statementTimeoutMs: statement_timeout_ms,
      connectTimeoutMs: connect_timeout_ms,
    },
  };
}

/** Shared state of one CLI invocation. */
export class CliContext {
  readonly io: CliIo;
  #config: Promise<Config> | undefined;
  #store: Promise<Store> | undefined;

  /** @param io The process I/O. */
  constructor(io: CliIo) {
    this.io = io;
  }

  /** The configuration, loaded once. */
  config(): Promise<Config> {
    // Tracing's hooks are switched on (and the OpenTelemetry API loaded) with OTEL_DENO only.
    this.#config ??= loadConfig({ env: this.io.env }).then(async (config) => {
      await loadTracing(config.env);
      return config;
    });
    return this.#config;
  }

  /** The store, opened once; closed by {@linkcode CliContext.close}. */
  store(): Promise<Store> {
    this.#store ??= this.config().then((config) => openStore(storeOptions(config)));
    return this.#store;
  }

  /** Prints a line on stdout. */
  print(line = ""): void {
    this.io.stdout(line + "\n");
  }

  /** Prints a value as JSON on stdout. */
  printJson(value: unknown): void {
    this.io.stdout(JSON.stringify(value, null, 2) + "\n");
  }

  /** The form of log lines this invocation writes (set as it starts). */
  logFormat: LogFormat = "text";
  /** The logger's settings, once configured. */
  logging: LoggingOptions | undefined;

  /** Prints a warning on stderr (a JSON line with `--log-format json`). */
  warn(message: string): void {
    if (this.logFormat === "json") getLog("cli").warn(message);
    else this.io.stderr(`toolgate: warning: ${message}\n`);
  }

  /** Closes what the invocation opened. */
  async close(): Promise<void> {
    if (this.#store) {
      try {
        await (await this.#store).close();
      } catch {
        // The store never opened; its error was already reported.
      }
    }
  }
}

/** Whether `TOOLGATE_DEBUG` asks for debug output: set, and not `0`, `false`, `no` or `off`. */
export function debugEnabled(env: Readonly<Record<string, string | undefined>>): boolean {
  const value = env.TOOLGATE_DEBUG?.trim().toLowerCase();
  return !!value && !["0", "false", "no", "off"].includes(value);
}

/**
 * Reports a failed command on stderr, one line (`toolgate: <CODE>: <message>`),
 * and returns its exit code: a {@linkcode GatewayError}'s own, else 1
 * (`internal error`, with the stack when `TOOLGATE_DEBUG` is set).
 */
export function reportFailure(context: CliContext, error: unknown): number {
  const json = context.logFormat === "json";
  if (error instanceof GatewayError) {
    const message = error.message.startsWith(`${error.code}: `)
      ? error.message.slice(error.code.length + 2)
      : error.message;
    if (json) getLog("cli").error(message, { code: error.code, exit_code: error.exitCode });
    else context.io.stderr(`toolgate: ${error.code}: ${message}\n`);
    return error.exitCode;
  }
  const message = error instanceof Error ? error.message : String(error);
  if (json) {
    getLog("cli").error(`Internal error: ${message}`, {
      code: "INTERNAL",
      ...(debugEnabled(context.io.env) && error instanceof Error ? { stack: error.stack } : {}),
    });
    return 1;
  }
  context.io.stderr(`toolgate: internal error: ${message}\n`);
  if (debugEnabled(context.io.env) && error instanceof Error) {
    context.io.stderr(`${error.stack}\n`);
  }
  return 1;
}

/** A usage error (exit 2) naming the flag and what is accepted. */
export function usage(message: string): GatewayError {
  return new GatewayError("USAGE", message);
}

/**
 * Renders rows as an aligned text table.
 *
 * @param headers Column titles.
 * @param rows Cell text, one array per row.
 */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i])).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}
