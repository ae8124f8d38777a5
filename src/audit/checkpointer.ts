/**
 * Makes the log's signed checkpoints: at most one per interval while
 * entries arrive, and one at shutdown. Each new one is stored as the latest
 * (what `GET /audit/checkpoint` serves, shared by every instance), appended
 * to a history file outside the store, and POSTed to the configured sinks,
 * retried like webhook deliveries (1, 2, 4, 8, 16 × the base, plus jitter);
 * a newer checkpoint replaces one still waiting for its retry. So a store
 * rewritten or emptied later is caught by what was published before.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { GatewayError } from "../errors/mod.ts";
import type { Log } from "../log/mod.ts";
import type { AuditCheckpoint, Store } from "../store/mod.ts";
import { formatCheckpoint } from "./checkpoint.ts";
import { loadLogKeys, type LogKeys } from "./log_key.ts";
import { NoteError, openNote, signNote } from "./signed_note.ts";
import { storedTiles } from "./stored_tiles.ts";
import { TiledTree } from "./tiles.ts";

/** Retry delays of a sink, in units of the base: as webhook deliveries. */
const SINK_RETRY_UNITS = [1, 2, 4, 8, 16];

/** Where checkpoints are POSTed. */
export interface CheckpointSink {
  url: string;
  headers?: Readonly<Record<string, string>>;
}

/** Options of {@linkcode startCheckpointer}. */
export interface CheckpointerOptions {
  /** The store holding the log, its keys and the latest checkpoint. */
  store: Store;
  /** The log's name: each checkpoint's origin line, and a new key's name. */
  origin: string;
  /** Shortest time between checkpoints, in ms. @default 1000 */
  intervalMs?: number;
  /** The history file each new checkpoint is appended to (JSON lines). @default none */
  historyFile?: string;
  /** Where each new checkpoint is POSTed. @default [] */
  sinks?: readonly CheckpointSink[];
  /** Sends to the sinks (the egress policy's fetch). Needed with sinks. */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** Unit of the sinks' retry schedule, in ms. @default 1000 */
  retryBaseMs?: number;
  /** Where failures are told. @default none */
  log?: Log;
  /** Clock, epoch ms. @default Date.now */
  now?: () => number;
}

/** One line of the history file. */
export interface CheckpointHistoryLine {
  size: number;
  /** When it was made (ISO 8601). */
  time: string;
  /** The signed checkpoint. */
  note: string;
}

/** A sink's delivery waiting for its retry. */
interface SinkRetry {
  note: string;
  attempt: number;
  timer: ReturnType<typeof setTimeout>;
}

/** Makes, stores and publishes the log's checkpoints. */
export class Checkpointer {
  #options: CheckpointerOptions;
  #store: Store;
  #keys: LogKeys;
  #tree: TiledTree;
  #intervalMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #lastAt = -Infinity;
  #making: Promise<AuditCheckpoint | null> | undefined;
  #closed = false;
  #retries = new Map<string, SinkRetry>();
  #sending = new Set<Promise<void>>();

  /**
   * @param options What to checkpoint and where to publish.
   * @param keys The log's keys, loaded.
   */
  constructor(options: CheckpointerOptions, keys: LogKeys) {
    const { store, intervalMs = 1000, sinks = [] } = options;
    if (!Number.isInteger(intervalMs) || intervalMs < 0) {
      throw new GatewayError("INTERNAL", `Invalid intervalMs ${intervalMs}: use 0 or more`);
    }
    if (sinks.length && !options.fetch) {
      throw new GatewayError("INTERNAL", "Checkpoint sinks need a fetch");
    }
    this.#options = options;
    this.#store = store;
    this.#keys = keys;
    this.#intervalMs = intervalMs;
    this.#tree = new TiledTree(storedTiles(store));
  }

  /** The log's keys (the current one signs). */
  get keys(): LogKeys {
    return this.#keys;
  }

  /** The log's name (each checkpoint's origin line). */
  get origin(): string {
    return this.#options.origin;
  }

  /** The latest stored checkpoint (whichever instance made it), or `null`. */
  latest(): Promise<AuditCheckpoint | null> {
    return this.#store.audit.readCheckpoint();
  }

  /**
   * Tells of new entries: a checkpoint follows within the interval (at
   * once when the last one is older).
   */
  notify(): void {
    if (this.#closed || this.#timer !== undefined) return;
    const now = this.#now();
    const wait = Math.max(0, this.#lastAt + this.#intervalMs - now);
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.checkpoint().catch((error) => {
        this.#options.log?.warn("Cannot make an audit checkpoint", { error: String(error) });
      });
    }, wait);
    Deno.unrefTimer(timer as unknown as number);
    this.#timer = timer;
  }

  /**
   * Makes a checkpoint of the tree as stored now, unless the latest stored
   * one already covers it.
   *
   * @returns The new checkpoint, or `null` when none was needed.
   */
  checkpoint(): Promise<AuditCheckpoint | null> {
    // One at a time: a call while one is made waits for it, then makes its own.
    const previous = this.#making ?? Promise.resolve(null);
    const making = previous.catch(() => null).then(() => this.#make());
    this.#making = making;
    making.finally(() => {
      if (this.#making === making) this.#making = undefined;
    }).catch(() => {});
    return making;
  }

  async #make(): Promise<AuditCheckpoint | null> {
    this.#lastAt = this.#now();
    const { head } = await this.#store.audit.readHead();
    const size = head?.tree ?? 0;
    const latest = await this.#store.audit.readCheckpoint();
    if (latest && latest.size >= size) return null;
    const root = await this.#tree.root(size);
    await this.#reloadKeys();
    const signers = [this.#keys.signer];
    // The first checkpoint after a rotation is signed by the old key too: it vouches for the new.
    if (latest && this.#keys.previous && !await this.#signedByCurrent(latest.note)) {
      signers.push(this.#keys.previous);
    }
    const note = await signNote(
      formatCheckpoint({ origin: this.#options.origin, size, root }),
      signers,
    );
    const checkpoint = { size, note };
    if (!await this.#store.audit.putCheckpoint(checkpoint)) return null;
    await this.#appendHistory(checkpoint);
    for (const sink of this.#options.sinks ?? []) this.#send(sink, note, 0);
    return checkpoint;
  }

  /** Loads the keys again when another process rotated them. */
  async #reloadKeys(): Promise<void> {
    const [current] = await this.#store.audit.readKeys();
    if (current && current.id !== this.#keys.currentId) {
      this.#keys = await loadLogKeys({ store: this.#store, name: this.#options.origin });
    }
  }

  async #signedByCurrent(note: string): Promise<boolean> {
    try {
      await openNote(note, [this.#keys.verifiers[0]]);
      return true;
    } catch (error) {
      if (error instanceof NoteError) return false;
      throw error;
    }
  }

  async #appendHistory(checkpoint: AuditCheckpoint): Promise<void> {
    const file = this.#options.historyFile;
    if (!file) return;
    const line: CheckpointHistoryLine = {
      size: checkpoint.size,
      time: new Date(this.#now()).toISOString(),
      note: checkpoint.note,
    };
    try {
      await Deno.writeTextFile(file, `${JSON.stringify(line)}\n`, {
        append: true,
        create: true,
        mode: 0o600,
      });
    } catch (error) {
      this.#options.log?.error("Cannot append the audit checkpoint to its history file", {
        file,
        error: String(error),
      });
    }
  }

  #send(sink: CheckpointSink, note: string, attempt: number): void {
    const pending = this.#retries.get(sink.url);
    if (pending) {
      clearTimeout(pending.timer);
      this.#retries.delete(sink.url);
    }
    const sending = this.#post(sink, note).then((ok) => {
      if (ok || this.#closed) return;
      if (attempt >= SINK_RETRY_UNITS.length) {
        this.#options.log?.warn("Gave up publishing an audit checkpoint to a sink", {
          url: sink.url,
          attempts: attempt + 1,
        });
        return;
      }
      // A newer checkpoint sent meanwhile replaces this one.
      if (this.#retries.has(sink.url)) return;
      const base = this.#options.retryBaseMs ?? 1000;
      const delay = SINK_RETRY_UNITS[attempt] * base * (1 + Math.random() * 0.1);
      const timer = setTimeout(() => {
        this.#retries.delete(sink.url);
        this.#send(sink, note, attempt + 1);
      }, delay);
      Deno.unrefTimer(timer as unknown as number);
      this.#retries.set(sink.url, { note, attempt, timer });
    });
    this.#sending.add(sending);
    sending.finally(() => this.#sending.delete(sending));
  }

  async #post(sink: CheckpointSink, note: string): Promise<boolean> {
    try {
      const response = await this.#options.fetch!(sink.url, {
        method: "POST",
        headers: { "content-type": "text/plain; charset=utf-8", ...sink.headers },
        body: Buffer.from(note, "utf8"),
        signal: AbortSignal.timeout(10_000),
      });
      await response.body?.cancel();
      if (response.ok) return true;
      this.#options.log?.warn("An audit checkpoint sink refused the checkpoint", {
        url: sink.url,
        status: response.status,
      });
    } catch (error) {
      this.#options.log?.warn("Cannot publish an audit checkpoint to a sink", {
        url: sink.url,
        error: String(error),
      });
    }
    return false;
  }

  #now(): number {
    return (this.#options.now ?? Date.now)();
  }

  /**
   * Makes the last checkpoint (at shutdown), waits for the sinks' sends in
   * flight and drops their retries. Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    try {
      await this.checkpoint();
    } catch (error) {
      this.#options.log?.warn("Cannot make the last audit checkpoint", { error: String(error) });
    }
    await Promise.all(this.#sending);
    for (const retry of this.#retries.values()) clearTimeout(retry.timer);
    this.#retries.clear();
  }
}

/**
 * Loads (or, at first start, makes) the log's signing key and returns the
 * checkpointer.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when the stored key cannot be opened.
 */
export async function startCheckpointer(options: CheckpointerOptions): Promise<Checkpointer> {
  const keys = await loadLogKeys({ store: options.store, name: options.origin, now: options.now });
  return new Checkpointer(options, keys);
}
