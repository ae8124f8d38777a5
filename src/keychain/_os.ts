/**
 * OS keychain backends driven through their command-line tools:
 * `secret-tool` (libsecret, Linux) and `security` (macOS). Values go through
 * stdin, never argv.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";

/** Name of an OS keychain backend. */
export type OsBackendName = "secret-tool" | "security";

/** What the keychain needs from an OS keychain. */
export interface OsBackend {
  /** The backend's name. */
  readonly name: OsBackendName;
  /** Why the backend cannot be used here, or `undefined` when it can. */
  unavailableReason(): Promise<string | undefined>;
  /** Stores (creates or replaces) a value. */
  store(name: string, value: string): Promise<void>;
  /** Reads a value; `undefined` when absent. */
  lookup(name: string): Promise<string | undefined>;
  /** Removes a value; absent is fine. */
  remove(name: string): Promise<void>;
}

/** The service attribute under which toolgate files its secrets. */
export const SERVICE = "toolgate";

const PROBE_TIMEOUT_MS = 3000;
const RUN_TIMEOUT_MS = 15_000;

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Finds an executable on `PATH` (from the injected environment). */
export async function findExecutable(
  command: string,
  env: Readonly<Record<string, string>>,
): Promise<string | undefined> {
  const separator = Deno.build.os === "windows" ? ";" : ":";
  for (const dir of (env.PATH ?? "").split(separator)) {
    if (!dir) continue;
    const path = `${dir}/${command}`;
    try {
      const info = await Deno.stat(path);
      if (info.isFile && (info.mode === null || (info.mode & 0o111) !== 0)) return path;
    } catch {
      // Not in this directory; try the next one.
    }
  }
  return undefined;
}

async function run(
  path: string,
  args: string[],
  env: Readonly<Record<string, string>>,
  stdin: string | undefined,
  timeoutMs: number,
): Promise<RunResult> {
  const child = new Deno.Command(path, {
    args,
    env: { ...env },
    clearEnv: true,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    try {
      await writer.write(new TextEncoder().encode(stdin));
      await writer.close();
    } catch (error) {
      // The tool exited before reading its input; its exit status and stderr say why.
      if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
    }
  }
  const output = await child.output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr).trim(),
  };
}

function failed(backend: string, action: string, name: string, detail: string): GatewayError {
  return new GatewayError(
    "STORE_CORRUPT",
    `Cannot ${action} keychain entry ${name} with ${backend}: ${detail || "it failed"}`,
  );
}

/** Runs one OS tool found on the injected `PATH`. */
class CommandRunner {
  readonly command: OsBackendName;
  #env: Readonly<Record<string, string>>;
  #path: Promise<string | undefined> | undefined;
  #reason: Promise<string | undefined> | undefined;

  constructor(command: OsBackendName, env: Readonly<Record<string, string>>) {
    this.command = command;
    this.#env = env;
  }

  /** The tool's path, or `undefined` when it is not on `PATH`. */
  locate(): Promise<string | undefined> {
    this.#path ??= findExecutable(this.command, this.#env);
    return this.#path;
  }

  /** Runs the tool; `stdin` is written to its standard input. */
  async run(args: string[], stdin?: string, timeoutMs = RUN_TIMEOUT_MS): Promise<RunResult> {
    const path = await this.locate();
    if (!path) {
      throw new GatewayError(
        "CONFIG_INVALID",
        `Keychain backend ${this.command} is not available: it was not found on PATH`,
      );
    }
    return await run(path, args, this.#env, stdin, timeoutMs);
  }

  /**
   * Why the tool cannot be used: absent from `PATH`, or `probe` says so.
   * Memoized: the probe runs once.
   */
  unavailableReason(probe: () => Promise<string | undefined>): Promise<string | undefined> {
    this.#reason ??= (async () => {
      if (!(await this.locate())) return `${this.command} was not found on PATH`;
      try {
        return await probe();
      } catch (error) {
        return `${this.command} did not answer: ${(error as Error).message}`;
      }
    })();
    return this.#reason;
  }
}

/** libsecret's `secret-tool` (GNOME Keyring, KWallet via the Secret Service API). */
export class SecretToolBackend implements OsBackend {
  readonly name = "secret-tool" as const;
  #tool: CommandRunner;

  /** @param env The environment (`PATH`, D-Bus address) the tool runs with. */
  constructor(env: Readonly<Record<string, string>>) {
    this.#tool = new CommandRunner(this.name, env);
  }

  unavailableReason(): Promise<string | undefined> {
    return this.#tool.unavailableReason(async () => {
      // A lookup that matches nothing exits 1 silently; without a secret service it complains.
      const result = await this.#tool.run(
        ["lookup", "service", SERVICE, "probe", "1"],
        undefined,
        PROBE_TIMEOUT_MS,
      );
      if ((result.code === 0 || result.code === 1) && result.stderr === "") return undefined;
      return `no D-Bus secret service answered (${result.stderr || `exit ${result.code}`})`;
    });
  }

  async store(name: string, value: string): Promise<void> {
    const result = await this.#tool.run(
      ["store", `--label=toolgate ${name}`, "service", SERVICE, "name", name],
      value,
    );
    if (result.code !== 0) throw failed(this.name, "store", name, result.stderr);
  }

  async lookup(name: string): Promise<string | undefined> {
    const result = await this.#tool.run(["lookup", "service", SERVICE, "name", name]);
    if (result.code === 0) return result.stdout;
    if (result.code === 1 && result.stderr === "") return undefined;
    throw failed(this.name, "read", name, result.stderr);
  }

  async remove(name: string): Promise<void> {
    const result = await this.#tool.run(["clear", "service", SERVICE, "name", name]);
    if (result.code !== 0 && result.stderr !== "") {
      throw failed(this.name, "delete", name, result.stderr);
    }
  }
}

/** Marks values stored with `security` (kept ASCII so they print unchanged). */
const SECURITY_PREFIX = "toolgate:b64:";
/** `security` exit status for "item not found". */
const SECURITY_NOT_FOUND = 44;

function toBase64(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function fromBase64(encoded: string): string {
  const binary = atob(encoded);
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

/** macOS `security` (the login keychain). */
export class SecurityBackend implements OsBackend {
  readonly name = "security" as const;
  #tool: CommandRunner;

  /** @param env The environment (`PATH`) the tool runs with. */
  constructor(env: Readonly<Record<string, string>>) {
    this.#tool = new CommandRunner(this.name, env);
  }

  unavailableReason(): Promise<string | undefined> {
    return this.#tool.unavailableReason(async () => {
      if (Deno.build.os !== "darwin") return "security is the macOS keychain tool";
      const result = await this.#tool.run(["list-keychains"], undefined, PROBE_TIMEOUT_MS);
      return result.code === 0 ? undefined : `security failed: ${result.stderr}`;
    });
  }

  async store(name: string, value: string): Promise<void> {
    // Interactive mode reads the command from stdin, so the value is never in argv.
    const command = `add-generic-password -U -s ${SERVICE} -a ${name} -l toolgate:${name} -w ${
      SECURITY_PREFIX + toBase64(value)
    }\n`;
    const result = await this.#tool.run(["-i"], command);
    if (result.code !== 0 || result.stderr !== "") {
      throw failed(this.name, "store", name, result.stderr);
    }
  }

  async lookup(name: string): Promise<string | undefined> {
    const result = await this.#tool.run(["find-generic-password", "-s", SERVICE, "-a", name, "-w"]);
    if (result.code === SECURITY_NOT_FOUND) return undefined;
    if (result.code !== 0) throw failed(this.name, "read", name, result.stderr);
    const stored = result.stdout.replace(/\n$/, "");
    if (!stored.startsWith(SECURITY_PREFIX)) return stored;
    return fromBase64(stored.slice(SECURITY_PREFIX.length));
  }

  async remove(name: string): Promise<void> {
    const result = await this.#tool.run(["delete-generic-password", "-s", SERVICE, "-a", name]);
    if (result.code !== 0 && result.code !== SECURITY_NOT_FOUND) {
      throw failed(this.name, "delete", name, result.stderr);
    }
  }
}
