/**
 * Committing a batch of audit entries: sealing it on the stored head of the
 * chain with the Merkle tree's tiles and the outbox records of its events,
 * cut to fit one store commit, retrying when another writer moved the head.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import {
  createEnvelope,
  type EventBus,
  type EventData,
  type EventEnvelope,
  type EventType,
} from "../events/mod.ts";
import type { AuditTileWrite, DeliveryOp, StagedWrites, Store } from "../store/mod.ts";
import {
  decodeEntry,
  type PreparedEntry,
  type SealedEntry,
  sealEntry,
  UnreadableEntryError,
} from "./_codec.ts";
import { type AuditEntry, GENESIS_HASH } from "./entry.ts";
import { edgeOfChain, treeCost } from "./_tree_state.ts";
import { TreeEdge } from "./tiles.ts";

/** Commits tried for one batch before giving up while other writers keep winning. */
const MAX_COMMIT_ATTEMPTS = 200;

/** Bytes counted for the head record in a commit. */
export const HEAD_BYTES = 200;

/** An event committed with an entry: its outbox records ride in the entry's commit. */
export type AuditAttachedEvent = {
  [T in EventType]: { type: T; data: EventData<T> };
}[EventType];

/**
 * Writes webhook deliveries of events in the audit log's commits: the
 * dispatcher's {@linkcode AuditOutbox.stage}.
 */
export interface AuditOutbox {
  /**
   * Outbox ops for `events`, or `undefined` when no webhook wants them.
   * `committed` is called once the commit that carried `ops` succeeded.
   */
  stage(events: readonly EventEnvelope<EventType>[]): {
    ops: DeliveryOp[];
    bumpVersion: boolean;
    committed(versionstamp: string): void;
  } | undefined;
}

/** An append waiting in the queue for its commit. */
export interface Pending {
  prepared: PreparedEntry;
  /** `performance.now()` at `append()`, when `AuditLogOptions.onAppend` is set. */
  at: number;
  events: readonly AuditAttachedEvent[];
  /** The appender's span (`traceparent`): the parent of its events' deliveries. */
  trace: string | undefined;
  writes: StagedWrites | undefined;
  resolve(entry: AuditEntry): void;
  reject(error: unknown): void;
}

/** What one commit wrote. */
export interface Written {
  sealed: SealedEntry[];
  /** Per sealed entry: its attached events, then its `audit.written`. */
  envelopes: EventEnvelope<EventType>[][];
  committed: (() => void) | undefined;
}

/** What the appender knows of the stored chain. */
interface ChainState {
  headVersionstamp: string | null;
  seq: number;
  hash: string;
  timestampMs: number;
  tailVersionstamps: string[];
  /** Whether the stored entry at `seq` still matches the head and its own hash. */
  intact: boolean;
  /** The right edge of the Merkle tree over the chain (`seq` leaves). */
  edge: TreeEdge;
}

const EMPTY_CHAIN: ChainState = {
  headVersionstamp: null,
  seq: 0,
  hash: GENESIS_HASH,
  timestampMs: 0,
  tailVersionstamps: [],
  intact: true,
  edge: TreeEdge.empty(),
};

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Writes batches of entries onto the stored chain; what it knows of the chain is its own. */
export class AuditCommitter {
  #store: Store;
  #bus: EventBus | undefined;
  #outbox: AuditOutbox | undefined;
  #now: () => number;
  #chain: ChainState | null = null;
  #lastSeq = 0;

  /**
   * @param store The store holding the log.
   * @param bus Whose enabled events get envelopes in the commit, if any.
   * @param outbox Where those events' webhook deliveries are staged, if anywhere.
   * @param now Clock of the entries' timestamps, in milliseconds since the epoch.
   */
  constructor(
    store: Store,
    bus: EventBus | undefined,
    outbox: AuditOutbox | undefined,
    now: () => number,
  ) {
    this.#store = store;
    this.#bus = bus;
    this.#outbox = outbox;
    this.#now = now;
  }

  /** Forgets the chain (after a failed commit): the next batch reads it again from the store. */
  forget(): void {
    this.#chain = null;
  }

  /** Envelopes of a sealed entry: its attached events, then its `audit.written`. */
  #envelopes(
    pending: Pending,
    entry: AuditEntry,
    intact: boolean,
    now: number,
  ): EventEnvelope<EventType>[] {
    const bus = this.#bus;
    if (!bus) return [];
    const out: EventEnvelope<EventType>[] = [];
    for (const event of pending.events) {
      if (bus.isEnabled(event.type)) {
        out.push(
          createEnvelope(event.type, event.data as never, now, pending.trace) as EventEnvelope<
            EventType
          >,
        );
      }
    }
    if (bus.isEnabled("audit.written")) {
      out.push(createEnvelope(
        "audit.written",
        {
          seq: entry.seq,
          entry_hash: entry.entry_hash,
          previous_hash: entry.previous_hash,
          tool: entry.tool,
          chain_intact: intact,
        },
        now,
        pending.trace,
      ) as EventEnvelope<EventType>);
    }
    return out;
  }

  /**
   * Seals the batch on the current head and commits it, with the outbox
   * records of its events, retrying lost races. A batch whose records do not
   * fit one commit is cut: only the first entries are written (at least one).
   */
  async write(batch: Pending[]): Promise<Written> {
    for (let attempt = 1;; attempt++) {
      const chain = this.#chain ?? await this.#readChain();
      const timestampMs = Math.max(this.#now(), chain.timestampMs);
      const timestamp = new Date(timestampMs).toISOString();
      let seq = chain.seq;
      let hash = chain.hash;
      let sealed = batch.map((pending) => {
        const result = sealEntry(pending.prepared, ++seq, hash, timestamp);
        hash = result.entry.entry_hash;
        return result;
      });
      const eventTime = this.#bus?.now() ?? Date.now();
      let envelopes = sealed.map(({ entry }, index) =>
        this.#envelopes(batch[index], entry, index === 0 ? chain.intact : true, eventTime)
      );
      const hashes = sealed.map(({ entry }) => entry.entry_hash);
      let tree = chain.edge.extendEntries(hashes);
      let staged = this.#outbox?.stage(envelopes.flat());
      while (staged && !this.#fits(sealed, staged.ops, batch, tree.tiles)) {
        if (sealed.length === 1) {
          staged = undefined; // Too many deliveries for one commit: the bus's subscribers write them.
          break;
        }
        const keep = Math.ceil(sealed.length / 2);
        sealed = sealed.slice(0, keep);
        envelopes = envelopes.slice(0, keep);
        tree = chain.edge.extendEntries(hashes.slice(0, keep));
        staged = this.#outbox?.stage(envelopes.flat());
      }
      const last = sealed[sealed.length - 1].entry;
      const versionstamp = await this.#store.audit.commit(
        {
          headVersionstamp: chain.headVersionstamp,
          tailSeq: chain.seq,
          tailVersionstamps: chain.tailVersionstamps,
        },
        sealed.map(({ entry, bytes }) => ({ seq: entry.seq, bytes })),
        { seq: last.seq, hash: last.entry_hash, timestamp, tree: last.seq },
        staged && { ops: staged.ops, bumpVersion: staged.bumpVersion },
        batch.slice(0, sealed.length).flatMap((pending) => pending.writes ?? []),
        tree.tiles,
      );
      if (versionstamp !== null) {
        const lastParts =
          this.#store.audit.entryCost(sealed[sealed.length - 1].bytes.length).mutations;
        this.#chain = {
          headVersionstamp: versionstamp,
          seq: last.seq,
          hash: last.entry_hash,
          timestampMs,
          tailVersionstamps: new Array<string>(lastParts).fill(versionstamp),
          intact: true,
          edge: tree.edge,
        };
        this.#lastSeq = last.seq;
        const done = staged;
        return {
          sealed,
          envelopes,
          committed: done && (() => done.committed(versionstamp)),
        };
      }
      // Another writer committed first: re-read the head and re-seal.
      this.#chain = null;
      if (attempt >= MAX_COMMIT_ATTEMPTS) {
        throw new GatewayError(
          "UNAVAILABLE",
          `Cannot write audit entry: other writers kept moving the head (${attempt} attempts)`,
        );
      }
      if (attempt > 2) await sleep(Math.random() * Math.min(attempt, 20));
    }
  }

  /**
   * Whether the entries, their staged writes (`batch`, in the same order) and
   * the delivery ops fit one commit of the store.
   */
  #fits(
    sealed: readonly SealedEntry[],
    ops: readonly DeliveryOp[],
    batch: Pending[],
    tiles: readonly AuditTileWrite[],
  ): boolean {
    const extra = this.#store.deliveries.opsCost(ops);
    const tree = treeCost(this.#store, tiles);
    let mutations = 1 + extra.mutations + tree.mutations;
    let bytes = HEAD_BYTES + extra.bytes + tree.bytes;
    const { commitMaxMutations, commitMaxBytes, commitMaxKeyBytes, keyBytesPerMutation } =
      this.#store.audit.limits;
    let keyBytes = keyBytesPerMutation + extra.keyBytes + tree.keyBytes;
    for (const [index, { bytes: entryBytes }] of sealed.entries()) {
      const cost = this.#store.audit.entryCost(entryBytes.length);
      const writes = batch[index].writes?.cost;
      mutations += cost.mutations + (writes?.mutations ?? 0);
      bytes += cost.bytes + (writes?.bytes ?? 0);
      keyBytes += cost.mutations * keyBytesPerMutation + (writes?.keyBytes ?? 0);
    }
    return mutations <= commitMaxMutations && bytes <= commitMaxBytes &&
      keyBytes <= commitMaxKeyBytes;
  }

  async #readChain(): Promise<ChainState> {
    for (;;) {
      const chain = await this.#readChainOnce();
      if (chain) return chain;
    }
  }

  /** The stored chain, or `null` when it moved while its tree was being built. */
  async #readChainOnce(): Promise<ChainState | null> {
    const state = await this.#store.audit.readChainState(this.#lastSeq);
    const { head, tail } = state;
    if (!head) return EMPTY_CHAIN;
    const tailVersionstamps = tail?.versionstamps ?? [];
    const built = await edgeOfChain(this.#store, {
      head,
      headVersionstamp: state.headVersionstamp,
      tailVersionstamps,
    });
    if (!built.edge) return null;
    const headVersionstamp = built.headVersionstamp;
    this.#lastSeq = head.seq;
    let intact = false;
    if (tail?.bytes) {
      try {
        const { entry, hashMatches } = decodeEntry(tail.bytes);
        intact = hashMatches && entry.seq === head.seq && entry.entry_hash === head.hash;
      } catch (error) {
        // An unreadable tail leaves `intact` false; the chain still continues from the head.
        if (!(error instanceof UnreadableEntryError)) throw error;
      }
    }
    const timestampMs = Date.parse(head.timestamp);
    return {
      headVersionstamp,
      seq: head.seq,
      hash: head.hash,
      timestampMs: Number.isFinite(timestampMs) ? timestampMs : 0,
      tailVersionstamps,
      intact,
      edge: built.edge,
    };
  }
}
