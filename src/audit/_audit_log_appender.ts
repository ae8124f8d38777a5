/**
 * Appending to the audit log: one in-process queue whose waiting appends
 * join one commit (group commit), the announcements that let concurrent
 * calls share it, and the events emitted once an entry is committed.
 *
 * @module
 */
import { DeadlineQueue } from "../deadlines.ts";
import { GatewayError } from "../errors/mod.ts";
import type { EventBus } from "../events/mod.ts";
import type { Redactor } from "../redact.ts";
import { untraced } from "../tracing/mod.ts";
import type { StagedWrites, Store } from "../store/mod.ts";
import { type PreparedEntry, prepareEntry } from "./_codec.ts";
import type { AuditAppendInput, AuditEntry } from "./entry.ts";
import { treeCostBound } from "./_tree_state.ts";
import {
  type AuditAttachedEvent,
  type AuditCommitter,
  HEAD_BYTES,
  type Pending,
  type Written,
} from "./_audit_log_commit.ts";

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

/** Message of the KV error left once the store's own lock retries ran out. */
const LOCKED = /database is (locked|busy)/i;

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

/** The appends of one audit log, committed in batches by one drain loop. */
export class AuditAppender {
  #store: Store;
  #bus: EventBus | undefined;
  #redact: Redactor;
  #committer: AuditCommitter;
  #queue: Pending[] = [];
  #draining: Promise<void> | null = null;
  #emitting = new Set<Promise<void>>();
  #closed = false;
  /** Appends announced by {@linkcode AuditLog.expect} and not yet made. */
  #expected = 0;
  /** Withdraws announcements after {@linkcode ANNOUNCE_WINDOW_MS}, on one timer. */
  #announcements = new DeadlineQueue(ANNOUNCE_WINDOW_MS, { ref: false });
  #onExpectedDone: (() => void) | undefined;
  #onAppend: ((append: { ok: boolean; durationMs: number }) => void) | undefined;
  #onCommit: (() => void) | undefined;

  /**
   * @param store The store holding the log (its commit limits).
   * @param bus Where committed entries' events are published, if anywhere.
   * @param redact Redacts each entry's input and outcome.
   * @param committer Writes each batch.
   * @param onAppend Told of every append once committed or failed (metrics).
   * @param onCommit Told after each commit of entries (the checkpointer).
   */
  constructor(
    store: Store,
    bus: EventBus | undefined,
    redact: Redactor,
    committer: AuditCommitter,
    onAppend: ((append: { ok: boolean; durationMs: number }) => void) | undefined,
    onCommit: (() => void) | undefined,
  ) {
    this.#store = store;
    this.#bus = bus;
    this.#redact = redact;
    this.#committer = committer;
    this.#onAppend = onAppend;
    this.#onCommit = onCommit;
  }

  /**
   * Validates and redacts `input` at once and queues it for the next commit.
   *
   * @param trace The appender's span (`traceparent`), the parent of its events' deliveries.
   * @returns The entry as stored, once it is committed (and its events emitted).
   */
  append(
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

  /**
   * Stops accepting appends and waits until every pending one is committed
   * and its event emitted. Does not close the store. Safe to call twice.
   */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#draining) await this.#draining;
    await Promise.all(this.#emitting);
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
      written = await this.#committer.write(batch);
    } catch (error) {
      this.#committer.forget();
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
}
