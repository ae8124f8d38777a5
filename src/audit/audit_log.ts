/**
 * The append-only, hash-chained audit log: one appender queue per log with
 * group commit (`_audit_log_appender.ts`, committing through
 * `_audit_log_commit.ts`), paged reads and streaming export
 * (`_audit_log_reader.ts`) and chain verification.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { redact as builtinRedact, type Redactor } from "../redact.ts";
import { activeTraceparent, startSpan } from "../tracing/mod.ts";
import type { EventBus } from "../events/mod.ts";
import type { Store } from "../store/mod.ts";
import type { AuditAppendInput, AuditEntry } from "./entry.ts";
import {
  type AuditVerifyResult,
  verifyAuditChain,
  type VerifyAuditChainOptions,
} from "./verify.ts";
import { AuditAppender, type AuditAppendOptions } from "./_audit_log_appender.ts";
import { AuditCommitter, type AuditOutbox } from "./_audit_log_commit.ts";
import {
  type AuditEntriesOptions,
  type AuditHeadInfo,
  type AuditListOptions,
  type AuditPage,
  AuditReader,
} from "./_audit_log_reader.ts";

export { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, MAX_LIST_SCAN } from "./_audit_log_reader.ts";
export type {
  AuditEntriesOptions,
  AuditHeadInfo,
  AuditListOptions,
  AuditPage,
} from "./_audit_log_reader.ts";
export type { AuditAppendOptions } from "./_audit_log_appender.ts";
export type { AuditAttachedEvent, AuditOutbox } from "./_audit_log_commit.ts";

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
  #appender: AuditAppender;
  #reader: AuditReader;

  /** @param options Store, bus and clock. */
  constructor(options: AuditLogOptions) {
    const { store, bus, outbox, now = Date.now, redact = builtinRedact } = options;
    this.#store = store;
    this.#bus = bus;
    const committer = new AuditCommitter(store, bus, bus ? outbox : undefined, now);
    this.#appender = new AuditAppender(
      store,
      bus,
      redact,
      committer,
      options.onAppend,
      options.onCommit,
    );
    this.#reader = new AuditReader(store);
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
    const appended = this.#appender.append(input, options, trace);
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

  /**
   * Announces an append that is coming (a tool call that started): while
   * announced appends are outstanding and appends arrive concurrently, the
   * appender waits for them, up to a millisecond or two, so that they share
   * one commit. An announcement not made good within 5 ms (`ANNOUNCE_WINDOW_MS`)
   * is withdrawn. Never needed for correctness.
   *
   * @returns Call it once the append was made, or will not be; safe to call twice.
   */
  expect(): () => void {
    return this.#appender.expect();
  }

  /** The head of the chain: seq and hash of the last entry. */
  head(): Promise<AuditHeadInfo> {
    return this.#reader.head();
  }

  /** How far entries were pruned (`toolgate audit prune`), or `null` when never. */
  pruned(): Promise<{ through: number; hash: string } | null> {
    return this.#reader.pruned();
  }

  /**
   * One entry by seq, or `null` when none is stored there.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the stored entry is unreadable.
   */
  get(seq: number): Promise<AuditEntry | null> {
    return this.#reader.get(seq);
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
  entries(options: AuditEntriesOptions = {}): AsyncGenerator<AuditEntry> {
    return this.#reader.entries(options);
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
  list(options: AuditListOptions = {}): Promise<AuditPage> {
    return this.#reader.list(options);
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
  close(): Promise<void> {
    return this.#appender.close();
  }

  /** Same as {@linkcode AuditLog.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
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
