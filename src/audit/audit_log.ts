/**
 * The append-only, hash-chained audit log: one appender queue per log with
 * group commit, paged reads, streaming export and chain verification.
 *
 * @module
 */
import { DeadlineQueue } from "../deadlines.ts";
import { GatewayError } from "../errors/mod.ts";
import { redact as builtinRedact, type Redactor } from "../redact.ts";
import { activeTraceparent, startSpan, untraced } from "../tracing/mod.ts";
import {
  createEnvelope,
  type EventBus,
  type EventData,
  type EventEnvelope,
  type EventType,
} from "../events/mod.ts";
import type { DeliveryOp, StagedWrites, Store } from "../store/mod.ts";
import type { AuditBytesFilter, AuditRecord, AuditTileWrite } from "../store/mod.ts";
import {
  CANONICAL_START,
  decodeEntry,
  mayContain,
  type PreparedEntry,
  prepareEntry,
  readEntry,
  type SealedEntry,
  sealEntry,
  UnreadableEntryError,
} from "./_codec.ts";
import { type AuditAppendInput, type AuditEntry, GENESIS_HASH } from "./entry.ts";
import { edgeOfChain, treeCost, treeCostBound } from "./_tree_state.ts";
import { TreeEdge } from "./tiles.ts";
import {
  type AuditVerifyResult,
  verifyAuditChain,
  type VerifyAuditChainOptions,
} from "./verify.ts";

/** Default page size of {@linkcode AuditLog.list}. */
export const DEFAULT_LIST_LIMIT = 100;

/** Largest page size of {@linkcode AuditLog.list}. */
export const MAX_LIST_LIMIT = 1000;

/**
 * Most entries one {@linkcode AuditLog.list} call examines when filtering;
 * past it the page is returned short, with `next_after` to continue from.
 */
export const MAX_LIST_SCAN = 10_000;

/**
 * Longest wait for announced appends ({@linkcode AuditLog.expect}) before a
 * commit, in ms (a timer of 1 ms fires after 1 to 2 ms).
 */
const LINGER_MAX_MS = 1;

/**
 * How long an announced append ({@linkcode AuditLog.expect}) may hold back
 * concurrent commits: a slower call (a long HTTP request, say) is withdrawn
 * after this, so it never delays other calls' entries.
 */
const ANNOUNCE_WINDOW_MS = 5;

/** Commits tried for one batch before giving up while other writers keep winning. */
const MAX_COMMIT_ATTEMPTS = 200;

/** Message of the KV error left once the store's own lock retries ran out. */
const LOCKED = /database is (locked|busy)/i;

/** Bytes counted for the head record in a commit. */
const HEAD_BYTES = 200;

/** An event committed with an entry: its outbox records ride in the entry's commit. */
export type AuditAttachedEvent = {
  [T in EventType]: { type: T; data: EventData<T> };
}[EventType];

/** Options of {@linkcode AuditLog.append}. */
export interface AuditAppendOptions {
  /**
   * Events to emit once the entry is committed, before its `audit.written`
   * (the gateway attaches `tool.called`). Their webhook deliveries are
   * written in the entry's commit when an outbox is set. @default []
   */
  events?: readonly AuditAttachedEvent[];
  /**
   * Store writes that must become durable with the entry, in its commit
   * (an incoming payload's queued job). @default none
   */
  writes?: StagedWrites;
}

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

/** Options of {@linkcode createAuditLog}. */
export interface AuditLogOptions {
  /** The store holding the log. The log never closes it. */
  store: Store;
  /** Bus on which `audit.written` is emitted after each entry is committed. @default none */
  bus?: EventBus;
  /**
   * Where the webhook deliveries of `audit.written` and attached events are
   * staged, so that they are written in the entry's own commit instead of a
   * commit per event (needs `bus`). @default none: the bus's subscribers
   * persist them
   */
  outbox?: AuditOutbox;
  /** Clock, in milliseconds since the epoch. @default Date.now */
  now?: () => number;
  /**
   * Redacts each entry's input and outcome before it is written.
   * @default the built-in rules (see {@linkcode redact}); pass the
   * gateway's redactor to add `config.redact.patterns`
   */
  redact?: Redactor;
  /**
   * Told of every append once committed (`ok`) or failed, with the time from
   * `append()` to then in ms (metrics). @default none
   */
  onAppend?: (append: { ok: boolean; durationMs: number }) => void;
  /** Told after each commit of entries (the checkpointer). @default none */
  onCommit?: () => void;
}

/** The head of the chain. */
export interface AuditHeadInfo {
  /** Seq of the last entry; 0 for an empty log. */
  head_seq: number;
  /** `entry_hash` of the last entry; {@linkcode GENESIS_HASH} for an empty log. */
  head_hash: string;
}

/** Filters of {@linkcode AuditLog.entries} and {@linkcode AuditLog.list}. */
export interface AuditEntriesOptions {
  /** Only entries with a seq above this one. @default 0 */
  after?: number;
  /** Only entries of this tool. @default all */
  tool?: string;
  /** Only entries of this kind. @default all */
  kind?: string;
  /**
   * Only entries whose caller has this name or id (an API key's), or this
   * kind (`admin`, `local`, `key`, `oauth`). @default all
   */
  caller?: string;
  /** Only entries written at or after this time (a `Date`, ISO string or epoch ms). @default all */
  since?: Date | string | number;
}

/** Options of {@linkcode AuditLog.list}. */
export interface AuditListOptions extends AuditEntriesOptions {
  /** Most entries returned, 1 to {@linkcode MAX_LIST_LIMIT}. @default 100 */
  limit?: number;
  /**
   * Most entries examined, 1 to {@linkcode MAX_LIST_SCAN}: with filters, a
   * page ends there even when short (`next_after` says where to go on).
   * @default MAX_LIST_SCAN
   */
  maxScan?: number;
}

/** One page of {@linkcode AuditLog.list}. */
export interface AuditPage {
  /** Matching entries in seq order. */
  entries: AuditEntry[];
  /** Pass as `after` to read the next page; `null` when the end of the log was reached. */
  next_after: number | null;
}

interface Pending {
  prepared: PreparedEntry;
  /** `performance.now()` at `append()`, when {@linkcode AuditLogOptions.onAppend} is set. */
  at: number;
  events: readonly AuditAttachedEvent[];
  /** The appender's span (`traceparent`): the parent of its events' deliveries. */
  trace: string | undefined;
  writes: StagedWrites | undefined;
  resolve(entry: AuditEntry): void;
  reject(error: unknown): void;
}

/** What one commit wrote. */
interface Written {
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

function parseSince(since: Date | string | number): number {
  const ms = since instanceof Date
    ? since.getTime()
    : typeof since === "number"
    ? since
    : Date.parse(since);
  if (!Number.isFinite(ms)) {
    throw new GatewayError("USAGE", `Invalid since "${String(since)}": use an ISO 8601 time`);
  }
  return ms;
}

function checkSeq(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new GatewayError("USAGE", `Invalid ${name} ${value}: use a whole number of 0 or more`);
  }
  return value;
}

function decodeStored(record: AuditRecord): AuditEntry {
  try {
    if (!record.bytes) throw new UnreadableEntryError("a part is missing or is not bytes");
    return readEntry(record.bytes);
  } catch (error) {
    if (!(error instanceof UnreadableEntryError)) throw error;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Audit entry ${record.seq} is unreadable: ${error.message}; run toolgate audit verify`,
      { details: { seq: record.seq } },
    );
  }
}

/**
 * The audit log of a store.
 *
 * Appends go through one in-process queue: every append waiting when a commit
 * starts joins it (group commit), up to the Deno KV limits per commit. Each
 * commit checks the head's versionstamp, so several logs on one KV file, in
 * one process or many, never fork the chain or reuse a seq; a writer that
 * loses the race re-reads the head, re-seals its batch and retries.
 *
 * After each commit, `audit.written` is emitted for each entry in seq order,
 * and {@linkcode AuditLog.append} resolves once its event's emit promise has
 * settled: the webhook dispatcher persists deliveries inside its listener,
 * so a resolved append means both the entry and its deliveries are durable.
 * The appender does not wait for emission before its next commit.
 */
export class AuditLog {
  #store: Store;
  #bus: EventBus | undefined;
  #outbox: AuditOutbox | undefined;
  #now: () => number;
  #redact: Redactor;
  #queue: Pending[] = [];
  #draining: Promise<void> | null = null;
  #emitting = new Set<Promise<void>>();
  #chain: ChainState | null = null;
  #lastSeq = 0;
  #closed = false;
  /** Appends announced by {@linkcode AuditLog.expect} and not yet made. */
  #expected = 0;
  /** Withdraws announcements after {@linkcode ANNOUNCE_WINDOW_MS}, on one timer. */
  #announcements = new DeadlineQueue(ANNOUNCE_WINDOW_MS, { ref: false });
  #onExpectedDone: (() => void) | undefined;
  #onAppend: AuditLogOptions["onAppend"];
  #onCommit: (() => void) | undefined;

  /** @param options Store, bus and clock. */
  constructor(options: AuditLogOptions) {
    const { store, bus, outbox, now = Date.now, redact = builtinRedact } = options;
    this.#store = store;
    this.#bus = bus;
    this.#outbox = bus ? outbox : undefined;
    this.#now = now;
    this.#redact = redact;
    this.#onAppend = options.onAppend;
    this.#onCommit = options.onCommit;
  }

  /**
   * Whether {@linkcode AuditLog.append} emits the events attached to an entry
   * (on the log's bus), so the caller need not emit them itself.
   */
  get publishesEvents(): boolean {
    return this.#bus !== undefined;
  }

  /**
   * Appends an entry. The input is validated and redacted at once; the entry
   * joins the next commit.
   *
   * @returns The entry as stored, once it is committed (and its
   * `audit.written` event emitted).
   * @throws {GatewayError} `INTERNAL` for a malformed input or a store
   * failure, `UNAVAILABLE` when the log is closed, `STORE_CORRUPT` when the
   * stored head is unreadable or behind the stored entries.
   *
   * @example
   * ```ts
   * const entry = await log.append({
   *   kind: "tool.call",
   *   tool: "echo",
   *   session_id: "s1",
   *   input: { text: "hi" },
   *   outcome: { ok: true, latency_ms: 3 },
   * });
   * entry.seq; // 1
   * ```
   */
  append(input: AuditAppendInput, options: AuditAppendOptions = {}): Promise<AuditEntry> {
    // Its events continue the caller's trace (their deliveries are children of the caller's span).
    const trace = activeTraceparent();
    const span = startSpan("audit.append", { "toolgate.audit.kind": input.kind });
    const appended = this.#append(input, options, trace);
    // Not recorded (tracing off): nothing to watch on the append's path.
    if (!span) return appended;
    appended.then((entry) => {
      span.set({ "toolgate.audit.seq": entry.seq });
      span.end();
    }, (error) => {
      span.fail(error instanceof GatewayError ? error.code : "Error");
      span.end();
    });
    return appended;
  }

  #append(
    input: AuditAppendInput,
    options: AuditAppendOptions,
    trace: string | undefined,
  ): Promise<AuditEntry> {
    if (this.#closed) {
      for (const event of options.events ?? []) this.#track(this.#emitAttached(event));
      return Promise.reject(
        new GatewayError("UNAVAILABLE", "Cannot write audit entry: the audit log is closed"),
      );
    }
    let prepared: PreparedEntry;
    try {
      prepared = prepareEntry(input, this.#redact);
    } catch (error) {
      for (const event of options.events ?? []) this.#track(this.#emitAttached(event));
      return Promise.reject(error);
    }
    return new Promise<AuditEntry>((resolve, reject) => {
      this.#queue.push({
        prepared,
        at: this.#onAppend ? performance.now() : 0,
        events: options.events ?? [],
        trace,
        writes: options.writes,
        resolve,
        reject,
      });
      // One loop commits for every caller: it joins none of their traces.
      this.#draining ??= untraced(() => this.#drain());
    });
  }

  /**
   * Announces an append that is coming (a tool call that started): while
   * announced appends are outstanding and appends arrive concurrently, the
   * appender waits for them, up to a millisecond or two, so that they share
   * one commit. An announcement not made good within {@linkcode ANNOUNCE_WINDOW_MS}
   * is withdrawn. Never needed for correctness.
   *
   * @returns Call it once the append was made, or will not be; safe to call twice.
   */
  expect(): () => void {
    this.#expected++;
    let done = false;
    let withdraw = () => {};
    const settle = () => {
      if (done) return;
      done = true;
      withdraw();
      if (--this.#expected === 0) this.#onExpectedDone?.();
    };
    withdraw = this.#announcements.add(settle);
    return settle;
  }

  /** Waits until no announced append is outstanding, at most {@linkcode LINGER_MAX_MS}. */
  async #awaitExpected(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve) => {
      this.#onExpectedDone = resolve;
      timer = setTimeout(resolve, LINGER_MAX_MS);
    });
    clearTimeout(timer);
    this.#onExpectedDone = undefined;
  }

  /** The head of the chain: seq and hash of the last entry. */
  async head(): Promise<AuditHeadInfo> {
    const { head } = await this.#store.audit.readHead();
    return { head_seq: head?.seq ?? 0, head_hash: head?.hash ?? GENESIS_HASH };
  }

  /** How far entries were pruned (`toolgate audit prune`), or `null` when never. */
  pruned(): Promise<{ through: number; hash: string } | null> {
    return this.#store.audit.readPruned();
  }

  /**
   * One entry by seq, or `null` when none is stored there.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the stored entry is unreadable.
   */
  async get(seq: number): Promise<AuditEntry | null> {
    const record = await this.#store.audit.readRecord(checkSeq(seq, "seq"));
    return record ? decodeStored(record) : null;
  }

  /**
   * Streams matching entries in seq order, one KV page at a time, to the end
   * of the log (entries appended meanwhile included): what
   * `toolgate audit export` writes out.
   *
   * @throws {GatewayError} `USAGE` for a bad filter, `STORE_CORRUPT` at an
   * unreadable entry.
   *
   * @example
   * ```ts
   * for await (const entry of log.entries({ tool: "echo" })) console.log(JSON.stringify(entry));
   * ```
   */
  async *entries(options: AuditEntriesOptions = {}): AsyncGenerator<AuditEntry> {
    for await (const item of this.#scan(options, await this.#start(options))) {
      if (item.matches) yield item.entry;
    }
  }

  /**
   * One page of entries, for `GET /audit` and `toolgate audit list`. Pages
   * by seq: pass `next_after` back as `after`. With filters, at most
   * `maxScan` entries (default {@linkcode MAX_LIST_SCAN}) are examined per call, so a page can be
   * short while `next_after` is not `null`.
   *
   * @throws {GatewayError} `USAGE` for a bad limit or filter,
   * `STORE_CORRUPT` at an unreadable entry.
   */
  async list(options: AuditListOptions = {}): Promise<AuditPage> {
    const { limit = DEFAULT_LIST_LIMIT, maxScan = MAX_LIST_SCAN } = options;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new GatewayError(
        "USAGE",
        `Invalid limit ${limit}: use a whole number from 1 to ${MAX_LIST_LIMIT}`,
      );
    }
    if (!Number.isInteger(maxScan) || maxScan < 1 || maxScan > MAX_LIST_SCAN) {
      throw new GatewayError(
        "USAGE",
        `Invalid maxScan ${maxScan}: use a whole number from 1 to ${MAX_LIST_SCAN}`,
      );
    }
    const { tool, kind, caller, since } = options;
    const filtered = tool !== undefined || kind !== undefined || caller !== undefined ||
      since !== undefined;
    const after = await this.#start(options);
    const entries: AuditEntry[] = [];
    if (!filtered) {
      const pages = { first: Math.max(16, limit), then: 1000 };
      for await (const item of this.#scan(options, after, pages)) {
        if (item.matches) entries.push(item.entry);
        if (entries.length === limit || entries.length === maxScan) {
          return { entries, next_after: item.seq };
        }
      }
      return { entries, next_after: null };
    }
    // The `maxScan` entries after `after` at most (seqs have no gaps), read a
    // page at a time: 4 × limit first (a filter that matches often fills the
    // page from it), then twice as many each time.
    const bound = after + maxScan;
    const pages = {
      first: Math.max(16, Math.min(4 * limit, maxScan)),
      then: Math.max(16, Math.min(1000, maxScan)),
      before: bound + 1,
    };
    for await (const item of this.#scan(options, after, pages)) {
      if (!item.matches) continue;
      entries.push(item.entry);
      if (entries.length === limit) return { entries, next_after: item.seq };
    }
    const { head } = await this.#store.audit.readHead();
    return { entries, next_after: (head?.seq ?? 0) > bound ? bound : null };
  }

  /**
   * Verifies the whole chain, streaming (see {@linkcode verifyAuditChain}).
   *
   * @returns `{ok: true, count}` or the first bad seq with its reason.
   */
  verify(options: VerifyAuditChainOptions = {}): Promise<AuditVerifyResult> {
    return verifyAuditChain(this.#store, options);
  }

  /**
   * Stops accepting appends and waits until every pending one is committed
   * and its event emitted. Does not close the store. Safe to call twice.
   */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#draining) await this.#draining;
    await Promise.all(this.#emitting);
  }

  /** Same as {@linkcode AuditLog.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Where a scan starts: after `after`, or past the entries older than `since`. */
  async #start(options: AuditEntriesOptions): Promise<number> {
    const after = checkSeq(options.after ?? 0, "after");
    if (options.since === undefined) return after;
    return Math.max(after, await this.#lastSeqBefore(parseSince(options.since), after));
  }

  async *#scan(
    options: AuditEntriesOptions,
    after: number,
    pages?: { first: number; then: number; before?: number },
  ): AsyncGenerator<
    { seq: number; matches: true; entry: AuditEntry } | { seq: number; matches: false }
  > {
    const { tool, kind, caller } = options;
    const since = options.since === undefined ? undefined : parseSince(options.since);
    // Canonical bytes lacking a filter's member are skipped without parsing
    // them (on PostgreSQL, without reading them).
    const needles = [
      ...(tool === undefined ? [] : [`"tool":${JSON.stringify(tool)}`]),
      ...(kind === undefined ? [] : [`"kind":${JSON.stringify(kind)}`]),
      ...(caller === undefined ? [] : [JSON.stringify(caller)]),
    ];
    const skip = needles.length ? { prefix: CANONICAL_START, needles } : undefined;
    for await (const page of this.#pages(after, pages, skip)) {
      for (const record of page) {
        if (needles.length && record.bytes && !mayContain(record.bytes, needles)) {
          yield { seq: record.seq, matches: false };
          continue;
        }
        const entry = decodeStored(record);
        const matches = (tool === undefined || entry.tool === tool) &&
          (kind === undefined || entry.kind === kind) &&
          (caller === undefined || callerMatches(entry, caller)) &&
          (since === undefined || Date.parse(entry.timestamp) >= since);
        yield matches ? { seq: entry.seq, matches, entry } : { seq: entry.seq, matches };
      }
    }
  }

  /**
   * Stored entries after `after` (and before `sizes.before`), a page at a
   * time: the first of `sizes.first` parts, each next one twice as large up
   * to `sizes.then`.
   */
  async *#pages(
    after: number,
    sizes?: { first: number; then: number; before?: number },
    skip?: AuditBytesFilter,
  ): AsyncGenerator<AuditRecord[]> {
    const before = sizes?.before;
    if (!sizes || sizes.first >= sizes.then) {
      yield* this.#store.audit.pages({ after, before, pageSize: sizes?.then, skip });
      return;
    }
    let from = after;
    for (let size = sizes.first; size < sizes.then; size = Math.min(sizes.then, size * 2)) {
      const pages = this.#store.audit.pages({ after: from, before, pageSize: size, skip });
      const page = await pages.next();
      await pages.return(undefined);
      const last = page.done ? undefined : page.value.at(-1)?.seq;
      if (last === undefined) return;
      yield page.value;
      from = last;
    }
    yield* this.#store.audit.pages({ after: from, before, pageSize: sizes.then, skip });
  }

  /**
   * Binary search for the last seq written before `since` (timestamps never
   * decrease along the chain), so a `since` filter skips old entries without
   * reading them. Falls back to `after` at any entry it cannot read.
   */
  async #lastSeqBefore(since: number, after: number): Promise<number> {
    const { head } = await this.#store.audit.readHead();
    let low = after + 1;
    let high = (head?.seq ?? 0) + 1;
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      const record = await this.#store.audit.readRecord(middle);
      if (!record?.bytes) return after;
      let timestamp: number;
      try {
        timestamp = Date.parse(readEntry(record.bytes).timestamp);
      } catch (error) {
        if (error instanceof UnreadableEntryError) return after;
        throw error;
      }
      if (!(timestamp >= since)) low = middle + 1;
      else high = middle;
    }
    return low - 1;
  }

  async #drain(): Promise<void> {
    // Let the rest of the current burst of appends join the first commit.
    await Promise.resolve();
    try {
      let concurrent = false;
      while (this.#queue.length) {
        // Appends are arriving concurrently and more are announced: wait for
        // them (briefly) so that they share the next commit: fewer, larger
        // commits under load. A lone sequential caller never waits here.
        if (concurrent && this.#expected > 0) await this.#awaitExpected();
        const batch = this.#takeBatch();
        concurrent = batch.length > 1;
        await this.#commitBatch(batch);
      }
    } finally {
      this.#draining = null;
    }
  }

  /** Takes the longest run of the queue that fits one commit (at least one entry). */
  #takeBatch(): Pending[] {
    let mutations = 1;
    let bytes = HEAD_BYTES;
    let count = 0;
    for (const pending of this.#queue) {
      const cost = this.#store.audit.entryCost(pending.prepared.maxBytes);
      const extra = pending.writes?.cost;
      const addedMutations = cost.mutations + (extra?.mutations ?? 0);
      const addedBytes = cost.bytes + (extra?.bytes ?? 0);
      // The tree's tiles of the batch, at most, beside the entries.
      const tree = treeCostBound(this.#store, count + 1);
      if (
        count > 0 &&
        (mutations + addedMutations + tree.mutations >
            this.#store.audit.limits.commitMaxMutations ||
          bytes + addedBytes + tree.bytes > this.#store.audit.limits.commitMaxBytes)
      ) break;
      mutations += addedMutations;
      bytes += addedBytes;
      count++;
    }
    return this.#queue.splice(0, count);
  }

  async #commitBatch(batch: Pending[]): Promise<void> {
    let written: Written;
    try {
      written = await this.#write(batch);
    } catch (error) {
      this.#chain = null;
      const failure = error instanceof GatewayError
        ? error
        : LOCKED.test((error as Error)?.message ?? "")
        ? new GatewayError(
          "UNAVAILABLE",
          "Cannot write audit entry: other processes kept the database locked",
          { cause: error },
        )
        : new GatewayError("INTERNAL", "Cannot write audit entry: the store failed", {
          cause: error,
        });
      this.#observe(batch, false);
      for (const pending of batch) {
        // The call happened even if its entry could not be written: its events still go out.
        for (const event of pending.events) this.#track(this.#emitAttached(event));
        pending.reject(failure);
      }
      return;
    }
    const { sealed, envelopes, committed } = written;
    // Entries that did not fit this commit go first in the next one.
    if (sealed.length < batch.length) this.#queue.unshift(...batch.slice(sealed.length));
    committed?.();
    this.#onCommit?.();
    this.#observe(batch.slice(0, sealed.length), true);
    for (const [index, { entry }] of sealed.entries()) {
      const pending = batch[index];
      if (!this.#bus) {
        pending.resolve(entry);
        continue;
      }
      const bus = this.#bus;
      // The bus never rejects (listener errors are reported by the bus); either
      // way the entry is committed, so the append succeeds.
      const emitted = Promise.all(envelopes[index].map((envelope) => bus.publish(envelope)));
      this.#track(emitted.then(() => pending.resolve(entry), () => pending.resolve(entry)));
    }
  }

  #observe(batch: readonly Pending[], ok: boolean): void {
    if (!this.#onAppend) return;
    const now = performance.now();
    for (const pending of batch) this.#onAppend({ ok, durationMs: now - pending.at });
  }

  #emitAttached(event: AuditAttachedEvent): Promise<unknown> {
    return this.#bus?.emit(event.type, event.data as never) ?? Promise.resolve();
  }

  #track(work: Promise<unknown>): void {
    const settled = work.then(() => {}, () => {});
    this.#emitting.add(settled);
    settled.then(() => this.#emitting.delete(settled));
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
  async #write(batch: Pending[]): Promise<Written> {
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

/**
 * Creates the audit log of a store.
 *
 * @example
 * ```ts
 * const store = await openStore({ dataDir });
 * const log = createAuditLog({ store, bus });
 * await log.append({ kind: "tool.call", tool: "echo", input: {}, outcome: { ok: true, latency_ms: 1 } });
 * console.log(await log.verify()); // { ok: true, count: 1, ... }
 * await log.close();
 * await store.close();
 * ```
 */
export function createAuditLog(options: AuditLogOptions): AuditLog {
  return new AuditLog(options);
}

/** Whether an entry's caller has the name, id or kind `caller`. */
function callerMatches(entry: AuditEntry, caller: string): boolean {
  const who = entry.caller;
  if (!who) return false;
  return who.name === caller || who.id === caller || who.kind === caller;
}
