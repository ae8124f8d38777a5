/**
 * MCP upstreams for tests: the fixture server (stdio or Streamable HTTP) and
 * the reference servers from npm (`server-everything`, `server-memory`), run
 * with Deno at pinned versions.
 *
 * @module
 */
import type { UpstreamSpec } from "../../src/plugins/mcp/mod.ts";
import { npmServerArgs } from "../../scripts/npm_servers.ts";
import { ROOT } from "../_helpers.ts";

export { EVERYTHING_PACKAGE, MEMORY_PACKAGE } from "../../scripts/npm_servers.ts";

/** Path of the fixture upstream. */
export const FIXTURE = `${ROOT}tests/plugins/_fixtures/mcp_upstream.ts`;

/** Path of the fixture upstream offering what the conformance scenarios call by name. */
export const CONFORMANCE_FIXTURE = `${ROOT}tests/plugins/_fixtures/conformance_upstream.ts`;

/** `deno` arguments that run a fixture script under the project's config, from the cache. */
function fixtureArgs(script: string, ...args: string[]): string[] {
  return ["run", "-A", "--cached-only", "--config", `${ROOT}deno.json`, script, ...args];
}

/** Command and arguments that run the fixture upstream over stdio. */
export function fixtureCommand(): { command: string; args: string[] } {
  return { command: Deno.execPath(), args: fixtureArgs(FIXTURE, "stdio") };
}

/** Command and arguments that run the conformance fixture upstream over stdio. */
export function conformanceFixtureCommand(): { command: string; args: string[] } {
  return { command: Deno.execPath(), args: fixtureArgs(CONFORMANCE_FIXTURE) };
}

/** Command and arguments that run a locked npm MCP server with Deno, from the cache. */
export function npmCommand(pkg: string, ...args: string[]): { command: string; args: string[] } {
  return { command: Deno.execPath(), args: npmServerArgs(pkg, ...args) };
}

/** A stdio upstream spec. */
export function stdioSpec(
  name: string,
  run: { command: string; args: string[] },
  extra: Partial<UpstreamSpec> = {},
): UpstreamSpec {
  return {
    name,
    source: "config",
    command: run.command,
    args: run.args,
    env: {},
    headers: {},
    enabled: true,
    ...extra,
  };
}

/** The fixture upstream served over Streamable HTTP in its own process. */
export interface HttpFixture extends AsyncDisposable {
  /** `http://127.0.0.1:<port>/mcp`. */
  url: string;
  /** Its process id. */
  pid: number;
  /** Kills it (SIGKILL) and waits for exit. */
  kill(): Promise<void>;
}

/** Starts the fixture upstream in `http` mode (on `port`, default any) and waits for its address. */
export async function startHttpFixture(port = 0): Promise<HttpFixture> {
  const child = new Deno.Command(Deno.execPath(), {
    args: fixtureArgs(FIXTURE, "http"),
    env: { PORT: String(port) },
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  let match: RegExpExecArray | null = null;
  while (!match) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
    match = /listening on (http:\/\/\S+)/.exec(text);
  }
  const drained = (async () => {
    while (!(await reader.read()).done) { /* drain */ }
  })();
  let killed: Promise<void> | undefined;
  const kill = () => {
    killed ??= (async () => {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already exited.
      }
      await child.status;
      await drained;
    })();
    return killed;
  };
  if (!match) {
    await kill();
    throw new Error(`fixture upstream did not start: ${text}`);
  }
  return { url: match[1], pid: child.pid, kill, [Symbol.asyncDispose]: kill };
}

/** Whether a process is alive. */
export function isAlive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` every 20 ms until it is truthy or `timeoutMs` passes. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
