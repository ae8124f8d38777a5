/**
 * Keeps the DLQ mirror (`dlq.json`) in step with the store while the
 * dispatcher runs: dead letters appended in place, rewrites coalesced, and
 * the check after a crash or a takeover. Private to `src/webhooks`.
 *
 * @module
 */
import type { Store } from "../store/mod.ts";
import {
  appendDlqMirror,
  cleanDlqMirrorTemps,
  DLQ_FILE,
  type DlqEntry,
  writeDlqMirror,
} from "./dlq.ts";
import type { Lifecycle } from "./_lifecycle.ts";

/** Writes the DLQ mirror of one data directory, one rewrite at a time. */
export class DlqMirrorWriter {
  #store: Store;
  #dataDir: string;
  #life: Lifecycle;
  #running = false;
  #dirty = false;

  constructor(store: Store, dataDir: string, life: Lifecycle) {
    this.#store = store;
    this.#dataDir = dataDir;
    this.#life = life;
  }

  /** Rewrites the mirror where the store has dead letters or a mirror file exists. */
  async sync(): Promise<void> {
    await cleanDlqMirrorTemps(this.#dataDir);
    const hasRecords = await this.#store.deliveries.countDlq() > 0;
    const hasFile = await Deno.stat(`${this.#dataDir}/${DLQ_FILE}`).then(
      () => true,
      (error) => {
        if (error instanceof Deno.errors.NotFound) return false;
        throw error;
      },
    );
    if (hasRecords || hasFile) this.rewrite();
  }

  /** Appends a dead letter's entry in the background (rebuilt where the file needs it). */
  append(entry: DlqEntry): void {
    this.#life.background(appendDlqMirror(this.#store, [entry], this.#dataDir));
  }

  /** Rewrites the whole mirror in the background; calls meanwhile make one more rewrite. */
  rewrite(): void {
    if (this.#running) {
      this.#dirty = true;
      return;
    }
    this.#running = true;
    this.#life.background((async () => {
      try {
        do {
          this.#dirty = false;
          await writeDlqMirror(this.#store, this.#dataDir);
        } while (this.#dirty);
      } finally {
        this.#running = false;
      }
    })());
  }
}
