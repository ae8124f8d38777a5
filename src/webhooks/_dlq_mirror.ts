/**
 * The `dlq.json` file itself, knowing nothing of the store: a JSON array
 * (`JSON.stringify(entries, null, 2)` + newline) that grows in place and is
 * rebuilt through a temp file.
 *
 * - **Append**: the new entries overwrite the array's closing `\n]` (seek,
 *   write, truncate), O(entry) bytes. Only when the file is exactly as this
 *   process last left it (same device, inode, size and mtime), ends as a
 *   complete array, and holds none of the entries' ids; otherwise the append
 *   becomes a rebuild. So the first append of a process, an append after
 *   another process rebuilt the file (`dlq purge`), after a torn write
 *   (kill -9), after a rebuild that already listed the new record, and of a
 *   record failing again (same id, new attempts) all rebuild: no entry is
 *   lost, doubled or stale. The ids in the file are kept in memory for this.
 * - **Rebuild**: entries page by page into `.dlq.json.<uuid>.tmp` (mode 0600),
 *   then rename; one page is serialized at a time, never the whole file.
 * - **Serialized**: within a process, every operation on a directory runs in
 *   one promise chain; across processes, under an exclusive `flock` of
 *   `.dlq.json.lock` (kept, empty, mode 0600). Temp files exist only while
 *   their rebuild holds that lock, so any found under it are leftovers of a
 *   killed rebuild, and are removed before a process's first operation.
 *
 * Why an append cannot hide a torn write: entries are indented, so `\n]`
 * occurs only as the array's own closing bracket (JSON strings hold no raw
 * newline); any prefix of an append's bytes short of that final `\n]` leaves a
 * file that does not end in `}`, white space, `\n]` (an inner array ends in
 * an indented `]`).
 *
 * @module
 */

/** File name of the DLQ mirror in the data directory. */
export const DLQ_FILE = "dlq.json";

/** File whose `flock` serializes mirror writes across processes. */
export const DLQ_LOCK_FILE = `.${DLQ_FILE}.lock`;

/** What the mirror needs of an entry (it writes the rest as is). */
export interface MirrorEntry {
  readonly dlq_id: string;
}

/** Entries a rebuild writes, a page at a time; a page is on disk before the next is asked for. */
export type MirrorPages = () => AsyncIterable<readonly MirrorEntry[]>;

/** What an append did. */
export type AppendOutcome = "appended" | "rebuilt";

const TEMP_NAME =
  /^\.dlq\.json\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/;

/** Bytes read from the end of the file to find where entries are appended. */
const TAIL_BYTES = 4096;

const encoder = new TextEncoder();

/** A name for a rebuild's temp file, `.dlq.json.<uuid>.tmp`. */
export function mirrorTempName(): string {
  return `.${DLQ_FILE}.${crypto.randomUUID()}.tmp`;
}

/** Whether `name` is a temp file of a mirror rebuild (exactly {@linkcode mirrorTempName}'s form). */
export function isMirrorTempName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/** The mirror file as this process last left it. */
interface KnownFile {
  dev: number;
  ino: number | null;
  size: number;
  mtime: number | null;
  /** The `dlq_id`s in the file. */
  ids: Set<string>;
}

function knownFile(info: Deno.FileInfo, ids: Set<string>): KnownFile {
  return {
    dev: info.dev,
    ino: info.ino,
    size: info.size,
    mtime: info.mtime?.getTime() ?? null,
    ids,
  };
}

/** Whether `info` is still the file this process left (nobody replaced or changed it). */
function isUnchanged(known: KnownFile, info: Deno.FileInfo): boolean {
  return known.dev === info.dev && known.ino === info.ino && known.size === info.size &&
    known.mtime === (info.mtime?.getTime() ?? null);
}

interface MirrorState {
  /** The last queued operation; the next one starts when it settles. */
  queue: Promise<unknown>;
  /** The file as this process last left it; unset when this process cannot vouch for it. */
  known?: KnownFile;
  /** Leftover temp files were removed (once per process and directory). */
  swept: boolean;
}

/** Per data directory (as given), the state of this process's mirror writes. */
const mirrors = new Map<string, MirrorState>();

/**
 * Runs `op` after every earlier operation on `dataDir`'s mirror, holding the
 * cross-process lock; the first operation of a process first removes
 * leftover temp files.
 */
function run<T>(
  dataDir: string,
  op: (state: MirrorState) => Promise<T>,
  sweepFirst = true,
): Promise<T> {
  let state = mirrors.get(dataDir);
  if (!state) {
    state = { queue: Promise.resolve(), swept: false };
    mirrors.set(dataDir, state);
  }
  const current = state;
  const result = current.queue.then(() =>
    withLock(dataDir, async () => {
      if (sweepFirst && !current.swept) {
        await sweepTemps(dataDir);
        current.swept = true;
      }
      return await op(current);
    })
  );
  // The chain only orders operations; each caller gets its own outcome.
  current.queue = result.then(() => undefined, () => undefined);
  return result;
}

async function withLock<T>(dataDir: string, fn: () => Promise<T>): Promise<T> {
  const lock = await Deno.open(`${dataDir}/${DLQ_LOCK_FILE}`, {
    write: true,
    create: true,
    mode: 0o600,
  });
  try {
    await lock.lock(true);
    return await fn();
  } finally {
    lock.close();
  }
}

/** Removes temp files of killed rebuilds; the caller holds the lock. */
async function sweepTemps(dataDir: string): Promise<string[]> {
  const removed: string[] = [];
  for await (const entry of Deno.readDir(dataDir)) {
    if (!entry.isFile || !isMirrorTempName(entry.name)) continue;
    await Deno.remove(`${dataDir}/${entry.name}`);
    removed.push(entry.name);
  }
  return removed.sort();
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length;) done += await file.write(bytes.subarray(done));
}

async function readAt(file: Deno.FsFile, offset: number, length: number): Promise<Uint8Array> {
  const buffer = new Uint8Array(length);
  await file.seek(offset, Deno.SeekMode.Start);
  let done = 0;
  while (done < length) {
    const n = await file.read(buffer.subarray(done));
    if (n === null) break;
    done += n;
  }
  return buffer.subarray(0, done);
}

const SPACE = 0x20, TAB = 0x09, LF = 0x0a, CR = 0x0d;
const OPEN = 0x5b, CLOSE = 0x5d, BRACE = 0x7d;

function isSpace(byte: number): boolean {
  return byte === SPACE || byte === LF || byte === CR || byte === TAB;
}

/**
 * Where appended entries go: just after the last entry's `}`, or after the
 * `[` of an empty array. `null` when the file does not end as a complete
 * array of indented entries, `}` then `]` at the start of a line (a torn
 * append, or not this format).
 */
export function appendOffset(
  tail: Uint8Array,
  tailStart: number,
): { offset: number; empty: boolean } | null {
  let i = tail.length - 1;
  while (i >= 0 && isSpace(tail[i])) i--;
  if (i < 0 || tail[i] !== CLOSE) return null;
  let j = i - 1;
  while (j >= 0 && isSpace(tail[j])) j--;
  if (j < 0) return null;
  // Only the array's own `]` starts a line: entries are indented.
  if (tail[j] === BRACE && tail[i - 1] === LF) return { offset: tailStart + j + 1, empty: false };
  if (tail[j] !== OPEN || tailStart !== 0) return null;
  for (let k = 0; k < j; k++) if (!isSpace(tail[k])) return null;
  return { offset: j + 1, empty: true };
}

/** Entries as the elements of `JSON.stringify(array, null, 2)`, comma-separated. */
export function encodeEntries(entries: readonly MirrorEntry[]): string {
  return entries.map((entry) => "  " + JSON.stringify(entry, null, 2).replaceAll("\n", "\n  "))
    .join(",\n");
}

/** Writes the whole file from `pages` through a temp file; the caller holds the lock. */
async function rebuild(dataDir: string, pages: MirrorPages): Promise<KnownFile> {
  const temp = `${dataDir}/${mirrorTempName()}`;
  const file = await Deno.open(temp, { write: true, createNew: true, mode: 0o600 });
  let closed = false;
  try {
    await Deno.chmod(temp, 0o600);
    const ids = new Set<string>();
    await writeAll(file, encoder.encode("["));
    for await (const page of pages()) {
      if (page.length === 0) continue;
      await writeAll(file, encoder.encode((ids.size === 0 ? "\n" : ",\n") + encodeEntries(page)));
      for (const entry of page) ids.add(entry.dlq_id);
    }
    await writeAll(file, encoder.encode(ids.size === 0 ? "]\n" : "\n]\n"));
    const known = knownFile(await file.stat(), ids);
    file.close();
    closed = true;
    await Deno.rename(temp, `${dataDir}/${DLQ_FILE}`);
    return known;
  } catch (error) {
    if (!closed) file.close();
    // The write's own error is the one to report; a temp left behind is swept later.
    await Deno.remove(temp).catch(() => undefined);
    throw error;
  }
}

/** The tail of `file` and where entries would be appended (see {@linkcode appendOffset}). */
async function findAppendOffset(
  file: Deno.FsFile,
  size: number,
): Promise<{ offset: number; empty: boolean } | null> {
  const start = Math.max(0, size - TAIL_BYTES);
  return appendOffset(await readAt(file, start, size - start), start);
}

/** `path` opened, or `null` when there is no such file. */
async function openExisting(path: string, options: Deno.OpenOptions): Promise<Deno.FsFile | null> {
  try {
    return await Deno.open(path, options);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

async function keepPrivate(path: string, info: Deno.FileInfo): Promise<void> {
  if (info.mode !== null && (info.mode & 0o777) !== 0o600) await Deno.chmod(path, 0o600);
}

/**
 * Rewrites `<dataDir>/dlq.json` from `pages`, atomically (temp file, then rename).
 *
 * @param pages Called once the lock is held, so it sees every write committed before.
 */
export function rebuildMirror(dataDir: string, pages: MirrorPages): Promise<void> {
  return run(dataDir, async (state) => {
    state.known = undefined;
    state.known = await rebuild(dataDir, pages);
  });
}

/**
 * Appends `entries` to `<dataDir>/dlq.json` in place, or rebuilds it from
 * `pages` when an append could leave it wrong (see the module doc).
 *
 * @param entries Already in what `pages` lists, so that a rebuild includes them.
 */
export function appendMirror(
  dataDir: string,
  entries: readonly MirrorEntry[],
  pages: MirrorPages,
): Promise<AppendOutcome> {
  const path = `${dataDir}/${DLQ_FILE}`;
  return run(dataDir, async (state) => {
    const known = state.known;
    state.known = undefined;
    const file = await openExisting(path, { read: true, write: true });
    if (!file) {
      state.known = await rebuild(dataDir, pages);
      return "rebuilt";
    }
    try {
      const info = await file.stat();
      const at = known && isUnchanged(known, info) &&
          !entries.some((entry) => known.ids.has(entry.dlq_id))
        ? await findAppendOffset(file, info.size)
        : null;
      if (!known || !at) {
        state.known = await rebuild(dataDir, pages);
        return "rebuilt";
      }
      await keepPrivate(path, info);
      const bytes = encoder.encode((at.empty ? "\n" : ",\n") + encodeEntries(entries) + "\n]\n");
      await file.seek(at.offset, Deno.SeekMode.Start);
      await writeAll(file, bytes);
      await file.truncate(at.offset + bytes.length);
      for (const entry of entries) known.ids.add(entry.dlq_id);
      state.known = knownFile(await file.stat(), known.ids);
      return "appended";
    } finally {
      file.close();
    }
  });
}

/**
 * Rebuilds `<dataDir>/dlq.json` from `pages` if it does not end as a complete
 * array (a torn append); leaves a complete or missing file as it is.
 *
 * @returns Whether the file was rebuilt.
 */
export function repairMirror(dataDir: string, pages: MirrorPages): Promise<boolean> {
  const path = `${dataDir}/${DLQ_FILE}`;
  return run(dataDir, async (state) => {
    const file = await openExisting(path, { read: true });
    if (!file) return false;
    try {
      const info = await file.stat();
      if (await findAppendOffset(file, info.size)) {
        await keepPrivate(path, info);
        return false;
      }
    } finally {
      file.close();
    }
    state.known = undefined;
    state.known = await rebuild(dataDir, pages);
    return true;
  });
}

/**
 * Removes `.dlq.json.<uuid>.tmp` files left in `dataDir` by a rebuild that
 * was killed, under the lock (so never a live rebuild's).
 *
 * @returns The names removed.
 */
export function cleanMirrorTemps(dataDir: string): Promise<string[]> {
  return run(dataDir, async (state) => {
    const removed = await sweepTemps(dataDir);
    state.swept = true;
    return removed;
  }, false);
}
