/**
 * The endpoints' payload logs (the newest payloads and what became of
 * them): noted in memory, off the request's path, and written on the next
 * poll. Private to `src/webhooks`.
 *
 * @module
 */
import type { IncomingLogEntry, Store } from "../store/mod.ts";
import { INCOMING_LOG_SIZE } from "../store/mod.ts";

/** A payload's outcome as {@linkcode PayloadLog.note} takes it. */
export type PayloadOutcome =
  & Omit<IncomingLogEntry, "id" | "endpoint_id" | "received_at" | "updated_at">
  & { at?: unknown };

/** Payload log entries not yet written, by endpoint then entry id (the newest 20 each). */
export class PayloadLog {
  #store: Store;
  #log: (message: string) => void;
  #now: () => number;
  #payloads = new Map<string, Map<string, IncomingLogEntry>>();

  /**
   * @param store Where the entries are written.
   * @param log Where a failed write is said.
   * @param now Clock in ms.
   */
  constructor(store: Store, log: (message: string) => void, now: () => number) {
    this.#store = store;
    this.#log = log;
    this.#now = now;
  }

  /**
   * Notes a payload's latest outcome for the endpoint's payload log
   * (written on the next poll, off the request's path); only the newest
   * {@linkcode INCOMING_LOG_SIZE} per endpoint are kept meanwhile.
   */
  note(endpointId: string, id: string, receivedAt: string, outcome: PayloadOutcome): void {
    const { at: _at, ...fields } = outcome;
    let entries = this.#payloads.get(endpointId);
    if (!entries) this.#payloads.set(endpointId, entries = new Map());
    entries.delete(id);
    entries.set(id, {
      id,
      endpoint_id: endpointId,
      received_at: receivedAt,
      updated_at: new Date(this.#now()).toISOString(),
      ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)),
    } as IncomingLogEntry);
    if (entries.size > INCOMING_LOG_SIZE) {
      let oldest: string | undefined;
      for (const key of entries.keys()) if (oldest === undefined || key < oldest) oldest = key;
      entries.delete(oldest!);
    }
  }

  /** Writes the noted payload log entries. */
  async flush(): Promise<void> {
    if (!this.#payloads.size) return;
    const entries = [...this.#payloads.values()].flatMap((byId) => [...byId.values()]);
    this.#payloads.clear();
    try {
      await this.#store.incoming.logPayloads(entries);
    } catch (error) {
      this.#log(`incoming: cannot write the payload log: ${(error as Error).message}`);
    }
  }
}
