/**
 * A throwaway PostgreSQL server for tests: a fresh cluster in a temp dir,
 * listening on a free port of 127.0.0.1 only, with trust authentication, and
 * removed whole when the test is done.
 *
 * It uses the PostgreSQL installed on the machine (Debian's `postgresql`
 * package; `.ci/run` installs it). As root, `initdb` and `postgres` refuse to
 * run, so they run as the `postgres` user that package creates.
 *
 * @example
 * ```ts
 * await using pg = await startPostgres();
 * const sql = postgres(pg.url);
 * ```
 *
 * @module
 */

/** Options of {@linkcode startPostgres}. */
export interface StartPostgresOptions {
  /** The database created for the test. @default "toolgate_test" */
  database?: string;
  /**
   * Extra server settings, as `postgresql.conf` would have them
   * (`{ max_connections: "20" }`). They cannot override where the server
   * listens.
   * @default {}
   */
  settings?: Record<string, string>;
  /** Longest wait for any one step (init, start, create, stop), in ms. @default 60000 */
  timeoutMs?: number;
}

/** A running throwaway PostgreSQL server. */
export interface ThrowawayPostgres extends AsyncDisposable {
  /** Connection URL of the created database (`postgres://postgres@127.0.0.1:<port>/<database>`). */
  readonly url: string;
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number;
  /** The database created for the test. */
  readonly database: string;
  /** Stops the server at once (`pg_ctl stop -m immediate`) and removes its dir; idempotent. */
  stop(): Promise<void>;
  /**
   * Stops the server at once (`pg_ctl stop -m immediate`, as a crash would),
   * keeping its files, runs `whileDown`, then starts it again on the same port
   * (also when `whileDown` throws). Clients connected before see their
   * connections dropped; the database and its data are still there afterwards.
   *
   * @param whileDown what to do while nothing listens on the port
   * @throws {Error} when the server was stopped for good, or does not start again
   *   in time (with its log)
   */
  restart(whileDown?: () => unknown): Promise<void>;
}

/** The PostgreSQL superuser of the throwaway cluster, and the OS user it runs as under root. */
const SUPERUSER = "postgres";

/** Attempts at finding a free port, should another process take the one picked first. */
const PORT_ATTEMPTS = 3;

/** Where Debian's packages put the server programs, one dir per major version. */
const DEBIAN_ROOT = "/usr/lib/postgresql";

/** Programs the helper runs, all from one PostgreSQL installation. */
const PROGRAMS = ["initdb", "pg_ctl", "createdb"] as const;

type Program = (typeof PROGRAMS)[number];

const INSTALL_HINT =
  "install Debian's postgresql package (sudo apt-get install -y postgresql; .ci/run does it)";

/**
 * Starts a throwaway PostgreSQL server and creates one database on it.
 *
 * @param options what to create and how long to wait
 * @returns the server; dispose of it (or call `stop()`) to stop it and remove its files
 * @throws {Error} when PostgreSQL is not installed, when running as root without a
 *   `postgres` user, or when the server does not start in time (with its log)
 */
export async function startPostgres(
  options: StartPostgresOptions = {},
): Promise<ThrowawayPostgres> {
  const { database = "toolgate_test", settings = {}, timeoutMs = 60_000 } = options;
  if (!/^[a-z_][a-z0-9_]*$/.test(database)) {
    throw new Error(
      `Cannot start the test PostgreSQL: database name ${database} is not a plain identifier`,
    );
  }
  if (!(timeoutMs > 0)) {
    throw new Error(
      `Cannot start the test PostgreSQL: timeoutMs must be positive, got ${timeoutMs}`,
    );
  }
  for (const key of Object.keys(settings)) {
    if (!/^[a-z_][a-z0-9_.]*$/.test(key) || LISTEN_SETTINGS.has(key)) {
      throw new Error(`Cannot start the test PostgreSQL: setting ${key} cannot be given`);
    }
  }
  const programs = await findPrograms();
  const owner = await runAs();

  const dir = await Deno.makeTempDir({ prefix: "toolgate-pg-" });
  const data = `${dir}/data`;
  const log = `${dir}/postgres.log`;
  const run = (program: Program, args: string[]) =>
    runProgram(programs[program], args, { owner, cwd: dir, timeoutMs });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await stopCluster(programs, owner, dir, timeoutMs);
  };
  const start = async (port: number) => {
    try {
      await run("pg_ctl", [
        "start",
        "--pgdata",
        data,
        "--log",
        log,
        "--wait",
        "--timeout",
        seconds(timeoutMs),
        "-o",
        `-p ${port}`,
      ]);
    } catch (error) {
      const text = await Deno.readTextFile(log).catch(() => "");
      throw Object.assign(
        new Error(`${(error as Error).message}\n--- postgres.log ---\n${tail(text)}`),
        { portTaken: /could not bind|address already in use/i.test(text) },
      );
    }
  };
  try {
    if (owner) await Deno.chown(dir, owner.uid, owner.gid);
    await run("initdb", [
      "--pgdata",
      data,
      "--username",
      SUPERUSER,
      "--auth-local",
      "trust",
      "--auth-host",
      "trust",
      "--encoding",
      "UTF8",
      "--locale",
      "C",
      // A throwaway cluster: its files need not reach the disk before it starts.
      "--no-sync",
      "--no-instructions",
    ]);
    await Deno.writeTextFile(
      `${data}/postgresql.conf`,
      "\n# toolgate tests: loopback only\n" + confLines({
        ...settings,
        listen_addresses: "127.0.0.1",
        unix_socket_directories: dir,
      }),
      { append: true },
    );

    let port = 0;
    for (let attempt = 1;; attempt++) {
      port = freePort();
      try {
        await start(port);
        break;
      } catch (error) {
        if (!(error as { portTaken?: boolean }).portTaken || attempt === PORT_ATTEMPTS) {
          throw error;
        }
        await Deno.remove(log);
      }
    }

    await run("createdb", [
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--username",
      SUPERUSER,
      database,
    ]);
    const url = `postgres://${SUPERUSER}@127.0.0.1:${port}/${database}`;
    const restart = async (whileDown?: () => unknown) => {
      if (stopped) throw new Error("Cannot restart the test PostgreSQL: it was stopped for good");
      await stopServer(programs.pg_ctl, owner, dir, timeoutMs);
      try {
        await whileDown?.();
      } finally {
        await start(port);
      }
    };
    return { url, port, database, stop, restart, [Symbol.asyncDispose]: stop };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}

/** Settings the helper decides itself: the server listens on loopback only. */
const LISTEN_SETTINGS = new Set(["listen_addresses", "port", "unix_socket_directories"]);

/** `postgresql.conf` lines, each value quoted. */
function confLines(settings: Record<string, string>): string {
  return Object.entries(settings)
    .map(([key, value]) => `${key} = '${value.replaceAll("'", "''")}'\n`)
    .join("");
}

/**
 * Stops the cluster at once, if it runs, and removes its dir. When `pg_ctl stop`
 * fails, the postmaster it started is ended by its pid before the error is reported.
 */
async function stopCluster(
  programs: Record<Program, string>,
  owner: Owner | undefined,
  dir: string,
  timeoutMs: number,
): Promise<void> {
  const data = `${dir}/data`;
  try {
    const pidFile = await Deno.readTextFile(`${data}/postmaster.pid`).catch(() => undefined);
    if (pidFile === undefined) return;
    try {
      await stopServer(programs.pg_ctl, owner, dir, timeoutMs);
    } catch (error) {
      const pid = Number(pidFile.split("\n")[0]);
      if (pid > 0) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* already gone */ }
      }
      throw error;
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Stops the server at once (`pg_ctl stop -m immediate`), keeping its files. */
function stopServer(
  pgCtl: string,
  owner: Owner | undefined,
  dir: string,
  timeoutMs: number,
): Promise<void> {
  return runProgram(
    pgCtl,
    [
      "stop",
      "--pgdata",
      `${dir}/data`,
      "--mode",
      "immediate",
      "--wait",
      "--timeout",
      seconds(timeoutMs),
    ],
    { owner, cwd: dir, timeoutMs },
  );
}

/** The OS user the server programs run as: `postgres` under root, else this process's own. */
interface Owner {
  uid: number;
  gid: number;
}

/** Under root, the `postgres` user; otherwise `undefined` (run as this process's user). */
async function runAs(): Promise<Owner | undefined> {
  if (Deno.uid() !== 0) return undefined;
  const uid = Number(await stdoutOf("id", ["-u", SUPERUSER]));
  const gid = Number(await stdoutOf("id", ["-g", SUPERUSER]));
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) {
    throw new Error(
      `Cannot start the test PostgreSQL: initdb refuses to run as root, and there is no ${SUPERUSER} user to run it as: ${INSTALL_HINT}, which creates that user`,
    );
  }
  return { uid, gid };
}

/**
 * The paths of the programs, all from one installation: `pg_config --bindir`,
 * else the newest `/usr/lib/postgresql/<major>/bin`, else `PATH`.
 */
async function findPrograms(): Promise<Record<Program, string>> {
  const dirs: string[] = [];
  const bindir = await stdoutOf("pg_config", ["--bindir"]);
  if (bindir) dirs.push(bindir);
  const majors: number[] = [];
  try {
    for await (const entry of Deno.readDir(DEBIAN_ROOT)) {
      if (/^\d+$/.test(entry.name)) majors.push(Number(entry.name));
    }
  } catch { /* not Debian's layout */ }
  dirs.push(...majors.sort((a, b) => b - a).map((major) => `${DEBIAN_ROOT}/${major}/bin`));
  for (const dir of dirs) {
    const paths = PROGRAMS.map((name) => `${dir}/${name}`);
    if ((await Promise.all(paths.map(isFile))).every(Boolean)) {
      return Object.fromEntries(PROGRAMS.map((name, i) => [name, paths[i]])) as Record<
        Program,
        string
      >;
    }
  }
  const found: Partial<Record<Program, string>> = {};
  const path = (Deno.env.get("PATH") ?? "").split(":").filter(Boolean);
  for (const name of PROGRAMS) {
    for (const dir of path) {
      if (await isFile(`${dir}/${name}`)) {
        found[name] = `${dir}/${name}`;
        break;
      }
    }
  }
  const missing = PROGRAMS.filter((name) => !found[name]).join(", ");
  if (missing) {
    throw new Error(
      `Cannot start the test PostgreSQL: ${missing} not found in pg_config --bindir, ${DEBIAN_ROOT}/*/bin or PATH: ${INSTALL_HINT}`,
    );
  }
  return found as Record<Program, string>;
}

/** The trimmed output of a command that succeeds, else `undefined` (also when it is missing). */
async function stdoutOf(command: string, args: string[]): Promise<string | undefined> {
  try {
    const out = await new Deno.Command(command, { args, stdout: "piped", stderr: "null" }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  } catch {
    return undefined;
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

/** A port that was free on 127.0.0.1 a moment ago. */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/** Runs one PostgreSQL program with a clean environment; throws with its output when it fails. */
async function runProgram(
  program: string,
  args: string[],
  { owner, cwd, timeoutMs }: { owner: Owner | undefined; cwd: string; timeoutMs: number },
): Promise<void> {
  const name = program.split("/").pop();
  const what = `Test PostgreSQL: ${name === "pg_ctl" ? `pg_ctl ${args[0]}` : name}`;
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), timeoutMs);
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(program, {
      args,
      cwd,
      // None of the caller's PG* variables (PGDATA, PGPORT, PGOPTIONS…) may steer it.
      clearEnv: true,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", LC_ALL: "C", PGCONNECT_TIMEOUT: "10" },
      ...owner,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: timeout.signal,
    }).output();
  } catch (error) {
    throw new Error(`${what} did not run: ${(error as Error).message}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
  if (!output.success) {
    const decoder = new TextDecoder();
    const text = `${decoder.decode(output.stdout)}${decoder.decode(output.stderr)}`;
    const how = timeout.signal.aborted
      ? `did not finish within ${timeoutMs} ms`
      : `exited with ${output.code}`;
    throw new Error(`${what} ${how}: ${tail(text)}`);
  }
}

/** A timeout for pg_ctl's `--timeout`, in whole seconds. */
function seconds(ms: number): string {
  return String(Math.ceil(ms / 1000));
}

/** The last lines of a log, enough to see why. */
function tail(text: string, lines = 30): string {
  return text.trim().split("\n").slice(-lines).join("\n");
}
