/**
 * Runs the real `toolgate mcp start --transport http` process on port 0 for
 * end-to-end tests: parses the printed address, collects output, stops it
 * with a signal and waits for it to exit.
 *
 * @module
 */
import { LOOPBACK_ALLOW, MAIN, ROOT } from "../_helpers.ts";

/** Options of {@linkcode startHttpServer}. */
export interface StartHttpServerOptions {
  /** `TOOLGATE_HOME` (a temp dir the caller removes). */
  home: string;
  /** `config.json` content written to the data dir. @default none */
  config?: Record<string, unknown>;
  /** Extra environment (e.g. `TOOLGATE_API_TOKEN`). */
  env?: Record<string, string>;
  /** Extra CLI arguments after `mcp start --transport http --port 0`. */
  args?: string[];
}

/** A running server process. */
export interface HttpServerProcess extends AsyncDisposable {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  url: string;
  /** Port it listens on. */
  port: number;
  /** The first stdout line (the listening line). */
  banner: string;
  /** Sends a signal and waits for exit; returns the exit code and all output. */
  stop(signal?: Deno.Signal): Promise<{ code: number; stdout: string; stderr: string }>;
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) text += chunk;
  return text;
}

/**
 * Starts the server and resolves once it printed its address.
 *
 * @throws {Error} when the process exits before listening (with its stderr).
 */
export async function startHttpServer(options: StartHttpServerOptions): Promise<HttpServerProcess> {
  if (options.config) {
    await Deno.writeTextFile(`${options.home}/config.json`, JSON.stringify(options.config));
  }
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--cached-only",
      MAIN,
      "mcp",
      "start",
      "--transport",
      "http",
      "--port",
      "0",
      ...options.args ?? [],
    ],
    cwd: ROOT,
    env: {
      TOOLGATE_HOME: options.home,
      NO_COLOR: "1",
      // Test receivers listen on 127.0.0.1: the egress policy must be told.
      TOOLGATE_EGRESS_ALLOW: LOOPBACK_ALLOW,
      ...options.env,
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = collect(child.stderr);
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let stdout = "";
  let banner: string | undefined;
  while (banner === undefined) {
    const { done, value } = await lines.read();
    if (done) break;
    stdout += value;
    const newline = stdout.indexOf("\n");
    if (newline >= 0) banner = stdout.slice(0, newline);
  }
  const rest = (async () => {
    for (;;) {
      const { done, value } = await lines.read();
      if (done) return;
      stdout += value;
    }
  })();
  if (banner === undefined) {
    const status = await child.status;
    await rest;
    throw new Error(`server exited with ${status.code} before listening:\n${await stderr}`);
  }
  const match = /listening on (http:\/\/[^\s]+:(\d+)) /.exec(banner);
  if (!match) {
    child.kill("SIGKILL");
    await child.status;
    await rest;
    throw new Error(`unexpected banner: ${banner}\n${await stderr}`);
  }
  let stopped: Promise<{ code: number; stdout: string; stderr: string }> | undefined;
  const stop = (signal: Deno.Signal = "SIGTERM") => {
    stopped ??= (async () => {
      try {
        child.kill(signal);
      } catch {
        // Already exited.
      }
      const status = await child.status;
      await rest;
      return { code: status.code, stdout, stderr: await stderr };
    })();
    return stopped;
  };
  return {
    url: match[1],
    port: Number(match[2]),
    banner,
    stop,
    [Symbol.asyncDispose]: async () => {
      await stop("SIGKILL");
    },
  };
}

/**
 * Sends one raw HTTP/1.1 request (so `Host` can be anything) and returns
 * the status code and body.
 */
export async function rawRequest(
  port: number,
  request: { method?: string; path: string; host: string; headers?: Record<string, string> },
): Promise<{ status: number; body: string }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const head = [
      `${request.method ?? "GET"} ${request.path} HTTP/1.1`,
      `Host: ${request.host}`,
      "Connection: close",
      ...Object.entries(request.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
      "",
      "",
    ].join("\r\n");
    await conn.write(new TextEncoder().encode(head));
    const text = await new Response(conn.readable).text();
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
    return { status, body: text.slice(text.indexOf("\r\n\r\n") + 4) };
  } catch (error) {
    conn.close();
    throw error;
  }
}
