/**
 * Child processes for the benchmarks: start a process, wait for the line
 * that says it is ready, and stop it (stdin closed, then SIGTERM, then
 * SIGKILL, each bounded). Private to `scripts/bench`.
 *
 * @module
 */
import type { LoadOptions, LoadResult } from "./_load.ts";

/** Absolute path of the repository root. */
export const ROOT = new URL("../../", import.meta.url).pathname;

/** Absolute path of `main.ts`. */
export const MAIN = `${ROOT}main.ts`;

/** Path of a file in `scripts/bench`. */
export function benchFile(name: string): string {
  return new URL(name, import.meta.url).pathname;
}

/** Options of {@linkcode spawnReady}. */
export interface SpawnReadyOptions {
  /** Program. @default the running deno */
  command?: string;
  /** Arguments. */
  args: string[];
  /** Extra environment. */
  env?: Record<string, string>;
  /** Whether the ready line is read from stderr instead of stdout. @default false */
  readyOnStderr?: boolean;
  /**
   * Returns a match once the output so far says the process is ready
   * (called with `""` first: a match then means "do not wait").
   */
  ready: (output: string) => RegExpExecArray | null;
  /** Longest wait for the ready line, in ms. @default 60000 */
  timeoutMs?: number;
  /** Signal sent first on stop; without it, stop closes stdin first. @default none */
  stopSignal?: Deno.Signal;
}

/** A started process. */
export interface ReadyProcess extends AsyncDisposable {
  /** The match of the ready pattern. */
  match: RegExpExecArray;
  /** The child. */
  child: Deno.ChildProcess;
  /** Stops the process (bounded) and returns its collected stderr. */
  stop(): Promise<string>;
}

/**
 * Starts a process and resolves once its output matches `ready`.
 *
 * @throws {Error} when the process exits or times out first (with its output).
 */
export async function spawnReady(options: SpawnReadyOptions): Promise<ReadyProcess> {
  const {
    command = Deno.execPath(),
    args,
    env = {},
    readyOnStderr = false,
    timeoutMs = 60_000,
    stopSignal,
  } = options;
  const child = new Deno.Command(command, {
    args,
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stdout = "";
  let stderr = "";
  let match: RegExpExecArray | null = null;
  let resolveReady: () => void = () => {};
  const readyOrExit = new Promise<void>((resolve) => resolveReady = resolve);
  const pump = async (stream: ReadableStream<Uint8Array>, onStdout: boolean) => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      if (onStdout) stdout = (stdout + chunk).slice(-65536);
      else stderr = (stderr + chunk).slice(-65536);
      if (!match && onStdout !== readyOnStderr) {
        match = options.ready(onStdout ? stdout : stderr);
        if (match) resolveReady();
      }
    }
  };
  match = options.ready("");
  if (match) resolveReady();
  const drained = Promise.all([pump(child.stdout, true), pump(child.stderr, false)]);
  child.status.then(() => resolveReady());
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<void>((resolve) => timer = setTimeout(resolve, timeoutMs));
  await Promise.race([readyOrExit, timedOut]);
  clearTimeout(timer);
  let stopped: Promise<string> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      if (stopSignal) {
        try {
          child.kill(stopSignal);
        } catch { /* exited meanwhile */ }
      }
      await child.stdin.close().catch(() => {});
      if (!await settles(child.status, 3000)) {
        try {
          child.kill("SIGTERM");
        } catch { /* exited meanwhile */ }
        if (!await settles(child.status, 5000)) {
          try {
            child.kill("SIGKILL");
          } catch { /* exited meanwhile */ }
          await child.status;
        }
      }
      await drained;
      return stderr;
    })();
    return stopped;
  };
  if (!match) {
    const err = await stop();
    throw new Error(
      `${command} ${args.join(" ")} was not ready:\nstdout: ${stdout.slice(-2000)}\nstderr: ${
        err.slice(-2000)
      }`,
    );
  }
  return {
    match,
    child,
    stop,
    [Symbol.asyncDispose]: async () => void await stop(),
  };
}

/** Whether `promise` settles within `ms`. */
export async function settles(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => timer = setTimeout(() => resolve(false), ms));
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs a Deno script to completion and parses the JSON it prints last on stdout. */
export async function runJson<T>(args: string[], env: Record<string, string> = {}): Promise<T> {
  const output = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout).trim();
  if (!output.success) {
    throw new Error(
      `deno ${args.join(" ")} failed (${output.code}): ${new TextDecoder().decode(output.stderr)}`,
    );
  }
  return JSON.parse(text.slice(text.lastIndexOf("\n") + 1)) as T;
}

/** A temp dir for one scenario, removed on dispose. */
export async function tempDir(prefix: string): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix: `toolgate-bench-${prefix}-` });
  return {
    path,
    [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }).catch(() => {}),
  };
}

/**
 * Starts `toolgate mcp start --transport http --port 0` with `home` as data
 * dir; `main` is another checkout's `main.ts` (run with that checkout's
 * `deno.json`), e.g. to measure code before a change beside it.
 */
export async function startToolgateHttp(
  home: string,
  env: Record<string, string> = {},
  main: string = MAIN,
): Promise<ReadyProcess & { url: string }> {
  const config = main === MAIN ? [] : ["--config", new URL("deno.json", `file://${main}`).pathname];
  const process = await spawnReady({
    args: [
      "run",
      "-A",
      "--cached-only",
      ...config,
      main,
      "mcp",
      "start",
      "--transport",
      "http",
      "--port",
      "0",
    ],
    env: {
      TOOLGATE_HOME: home,
      TOOLGATE_KEYCHAIN: "file",
      // The bench's receivers listen on 127.0.0.1: the egress policy must be told.
      TOOLGATE_EGRESS_ALLOW: "127.0.0.1/32",
      ...env,
    },
    ready: (out) => /listening on (http:\/\/[^\s]+:\d+) /.exec(out),
    // SIGTERM drains; closing stdin alone does not stop the HTTP server.
    stopSignal: "SIGTERM",
  });
  return Object.assign(process, { url: process.match[1] });
}

/** Starts a Deno script that prints `{"port": n}`; returns its base URL. */
export async function startPortScript(
  args: string[],
  env: Record<string, string> = {},
): Promise<ReadyProcess & { url: string }> {
  const process = await spawnReady({ args, env, ready: (out) => /\{"port":(\d+)\}/.exec(out) });
  return Object.assign(process, { url: `http://127.0.0.1:${process.match[1]}` });
}

/**
 * Runs the load generator (`_load.ts`) in a process of its own, so the
 * server under test keeps its cores' share.
 *
 * @throws {Error} when an answer was not 2xx, or none came.
 */
export async function runLoadProcess(options: LoadOptions): Promise<LoadResult> {
  const result = await runJson<LoadResult>([
    "run",
    "-A",
    "--cached-only",
    benchFile("_load.ts"),
    JSON.stringify(options),
  ]);
  if (result.non_2xx) {
    throw new Error(
      `${result.non_2xx} non-2xx answers from ${options.url}${options.path} (first: ${result.first_bad_status})`,
    );
  }
  if (!result.requests) throw new Error(`No answer from ${options.url}${options.path}`);
  return result;
}
