/**
 * Shared test helpers: temp data dirs and running the real CLI process.
 *
 * @module
 */

/** Absolute path of the repository root. */
export const ROOT = new URL("..", import.meta.url).pathname;

/** Absolute path of `main.ts`. */
export const MAIN = `${ROOT}main.ts`;

/**
 * `TOOLGATE_EGRESS_ALLOW` of the processes tests start: their receivers
 * listen on 127.0.0.1, which the egress policy refuses unless allowed.
 */
export const LOOPBACK_ALLOW = "127.0.0.1/32";

/**
 * The environment of a child process a test starts: this process's own (its
 * `DENO_DIR`, `HOME`, `PATH`, proxy and CA variables) with `extra` on top.
 * `Deno.Command` inherits it by itself; the MCP SDK's `StdioClientTransport`
 * passes only a few variables unless given this.
 */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { ...Deno.env.toObject(), ...extra };
}

/** A temporary data dir for `TOOLGATE_HOME`, removed by the returned disposer. */
export async function tempHome(): Promise<{ home: string } & AsyncDisposable> {
  const home = await Deno.makeTempDir({ prefix: "toolgate-test-" });
  return {
    home,
    [Symbol.asyncDispose]: () => Deno.remove(home, { recursive: true }).catch(() => {}),
  };
}

/** Result of a CLI run. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options of {@linkcode runCli}. */
export interface RunCliOptions {
  /** `TOOLGATE_HOME`. */
  home: string;
  /** Text written to stdin. */
  stdin?: string;
  /** Extra environment. */
  env?: Record<string, string>;
  /** Working directory. @default ROOT */
  cwd?: string;
  /** Script to run instead of `main.ts` (the bundle). */
  script?: string;
}

/** Runs `toolgate <args>` as a real process and collects its output. */
export async function runCli(args: string[], options: RunCliOptions): Promise<CliRun> {
  const script = options.script ?? MAIN;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", "--cached-only", "--unstable-kv", script, ...args],
    cwd: options.cwd ?? ROOT,
    env: {
      TOOLGATE_HOME: options.home,
      TOOLGATE_KEYCHAIN: "file",
      NO_COLOR: "1",
      // Test receivers listen on 127.0.0.1: the egress policy must be told.
      TOOLGATE_EGRESS_ALLOW: LOOPBACK_ALLOW,
      ...options.env,
    },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  if (options.stdin !== undefined) await writer.write(new TextEncoder().encode(options.stdin));
  await writer.close();
  const output = await child.output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

/** An MCP `initialize` request (JSON-RPC id 1) as a raw client sends it. */
export function initializeRequest(clientName = "raw"): Record<string, unknown> {
  return {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: clientName, version: "1" },
    },
  };
}

/** Polls `check` every 5 ms until it holds; fails naming `what` after `ms`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 10_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** How an MCP client starts `toolgate mcp start` (stdio) on the data dir `home`. */
export function toolgateStdio(home: string) {
  return {
    command: Deno.execPath(),
    args: ["run", "-A", "--cached-only", MAIN, "mcp", "start"],
    env: childEnv({ TOOLGATE_HOME: home, NO_COLOR: "1", TOOLGATE_EGRESS_ALLOW: LOOPBACK_ALLOW }),
    cwd: ROOT,
    stderr: "pipe" as const,
  };
}
