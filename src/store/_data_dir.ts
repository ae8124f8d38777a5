/**
 * The data directory every store keeps its files in (the KV database, the
 * `dlq.json` mirror, `keychain.key`), whichever adapter holds the data. It is
 * private to its owner: the directory 0700, every file in it 0600.
 *
 * @module
 */
import { getLog, lineSink } from "../log/mod.ts";
import { GatewayError } from "../errors/mod.ts";

/** Options of {@linkcode ensureDataDir}. */
export interface EnsureDataDirOptions {
  /**
   * Where a mode that was fixed is reported.
   * @default a line on stderr
   */
  log?: (message: string) => void;
}

/**
 * Creates the data directory with mode 0700 when missing; when it exists,
 * makes it private again: the directory 0700 and each file directly in it
 * without group or other permissions (0644 becomes 0600), whoever created
 * it. Symbolic links and subdirectories are left alone. Does nothing to modes
 * on Windows.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when the path cannot be read or is
 * not a directory, or when a mode cannot be changed (the directory or a file
 * belongs to another user): the message names the path and the command that
 * fixes it.
 */
export async function ensureDataDir(
  dataDir: string,
  options: EnsureDataDirOptions = {},
): Promise<void> {
  const { log = lineSink(getLog("store")) } = options;
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(dataDir);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot read data directory ${dataDir}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    await Deno.mkdir(dataDir, { recursive: true, mode: 0o700 });
    await Deno.chmod(dataDir, 0o700);
    return;
  }
  if (!info.isDirectory) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Data directory ${dataDir} is not a directory: move the file away or set TOOLGATE_HOME`,
    );
  }
  if (Deno.build.os === "windows") return;
  await makePrivate(dataDir, info, 0o700, log);
  for await (const entry of Deno.readDir(dataDir)) {
    if (!entry.isFile) continue;
    const path = `${dataDir}/${entry.name}`;
    let file: Deno.FileInfo;
    try {
      file = await Deno.lstat(path);
    } catch (error) {
      // A temp file another process renamed or removed meanwhile.
      if (error instanceof Deno.errors.NotFound) continue;
      throw error;
    }
    if (file.isFile) await makePrivate(path, file, file.mode! & 0o700, log);
  }
}

/**
 * Creates an empty file with mode 0600 unless `path` exists. SQLite gives the
 * `-wal` and `-shm` files it creates the mode of the database file, so a KV
 * file created this way keeps all three private whatever the umask.
 */
export async function createPrivateFile(path: string): Promise<void> {
  try {
    await Deno.writeFile(path, new Uint8Array(), { createNew: true, mode: 0o600 });
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) return;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot create ${path}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (Deno.build.os !== "windows") await Deno.chmod(path, 0o600);
}

/**
 * Writes `data` to `path` (mode 0600) unless a file is there, never
 * replacing one, not even of a process writing at the same moment: the
 * bytes go to a temporary file first, and `link()` fails on an existing
 * path. Readers never see a half-written file.
 *
 * @returns Whether this call wrote it (`false`: another file was there).
 */
export async function writeFileOnce(path: string, data: Uint8Array): Promise<boolean> {
  const temp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeFile(temp, data, { mode: 0o600, createNew: true });
    if (Deno.build.os !== "windows") await Deno.chmod(temp, 0o600);
    await Deno.link(temp, path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) return false;
    throw error;
  } finally {
    await Deno.remove(temp).catch(() => {});
  }
}

/** Removes group and other permissions from `path`, whose mode should become `mode`. */
async function makePrivate(
  path: string,
  info: Deno.FileInfo,
  mode: number,
  log: (message: string) => void,
): Promise<void> {
  const current = info.mode! & 0o777;
  if ((current & 0o077) === 0) return;
  try {
    await Deno.chmod(path, mode);
  } catch (error) {
    throw new GatewayError("STORE_CORRUPT", refusal(path, info, mode, error), { cause: error });
  }
  log(`${path} was readable by other users (mode ${octal(current)}): changed to ${octal(mode)}`);
}

function refusal(path: string, info: Deno.FileInfo, mode: number, error: unknown): string {
  const what = info.isDirectory ? "data directory" : "data file";
  const reason = (error as Error).message;
  const uid = Deno.uid();
  const chmod = `chmod ${octal(mode).slice(1)} ${path}`;
  if (uid !== null && info.uid !== null && info.uid !== uid) {
    return `Cannot make ${what} ${path} private (mode ${octal(info.mode! & 0o777)}): ` +
      `it belongs to uid ${info.uid}, not to this user (uid ${uid}); ` +
      `run: sudo chown ${uid} ${path} && ${chmod}, or set TOOLGATE_HOME to a directory of your own`;
  }
  return `Cannot make ${what} ${path} private (mode ${octal(info.mode! & 0o777)}): ${reason}; ` +
    `run: ${chmod}`;
}

function octal(mode: number): string {
  return `0${mode.toString(8).padStart(3, "0")}`;
}
