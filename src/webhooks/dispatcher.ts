/**
 * The outgoing webhook dispatcher: subscribes to the event bus, persists each
 * event and its deliveries in the store (the durable outbox) before the
 * emitter continues, and makes the attempts, with retries, backoff and the
 * dead-letter queue.
 *
 * Memory is bounded: a sending process holds at most `windowSize` pending
 * deliveries, each claimed in the store (`claimDue`), and claims more, in
 * due-time order, as it finishes them. Deliveries beyond the window wait in
 * the store. Where the store shares work (PostgreSQL) every instance sends,
 * each what it claimed; otherwise (Deno KV) the one process holding the
 * delivery lease sends and the others only record.
 *
 * @module
 */
import {
  type Config,
  DEFAULT_AUTO_DISABLE_AFTER,
  DEFAULT_RETRY_AFTER_MAX_MS,
} from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import {
  envelopeTraceparent,
  type EventBus,
  type EventEnvelope,
  type EventType,
  isDefaultEventType,
} from "../events/mod.ts";
import { derivedId, newId } from "../ids.ts";
import {
  type AttemptRecord,
  DELIVERY_LOG_SIZE,
  type DeliveryLogEntry,
  type DeliveryOp,
  type DeliveryOutcome,
  type DeliveryRecord,
  type DeliveryWriter,
  type DisabledReason,
  type DlqRecord,
  fanoutDeliveries,
  type FanoutRecord,
  type ListedOutgoingWebhook,
  newDlqId,
  newLogEntryId,
  type OutboxEvent,
  type OutgoingWebhook,
  type Store,
  type StoredDelivery,
} from "../store/mod.ts";
import { appendDlqMirror, cleanDlqMirrorTemps, DLQ_FILE, dlqEntry, writeDlqMirror } from "./dlq.ts";
import { OutcomeBatch } from "./_outcomes.ts";
import { Schedule } from "./_schedule.ts";
import { type FetchLike, postWebhookTraced, type SendResult } from "./_send.ts";
import { WebhookSigner } from "./signer.ts";
import { nextRetryDelayMs, parseRetryAfter } from "./retry_policy.ts";
import { EgressPolicy } from "../egress/mod.ts";

/**
 * Largest age, in ms, of the registrations read an attempt relies on (also
 * bounded by `poll_ms` and half of `retry_base_ms`): a webhook removed at
 * least this long before an attempt never receives it.
 */
export const MAX_REGISTRATION_AGE_MS = 50;

/**
 * Longest wait, in ms, of the record of an attempt's outcome for others to
 * share its commit while other attempts still run (once every running attempt
 * waits for its record, they are written at once): at 20 deliveries per tool
 * call this turns 20 commits into one, written right after the burst instead
 * of 10 ms later, which keeps the store free for the tool calls themselves.
 */
export const OUTCOME_LINGER_MS = 10;

/** The parts of {@linkcode Config} the dispatcher reads. */
export interface DispatcherConfig extends Pick<Config, "dataDir" | "events"> {
  /** `auto_disable_after` and `retry_after_max_ms` take their config defaults when left out. */
  webhooks:
    & Omit<Config["webhooks"], "auto_disable_after" | "retry_after_max_ms">
    & Partial<Pick<Config["webhooks"], "auto_disable_after" | "retry_after_max_ms">>;
}

/** Options of {@linkcode createDispatcher}. */
export interface DispatcherOptions {
  /** Store holding registrations, the outbox and the DLQ. */
  store: Store;
  /** Bus whose events are delivered. */
  bus: EventBus;
  /** `webhooks.retry_base_ms`, `webhooks.timeout_ms`, `webhooks.poll_ms`, `events.disabled`, `dataDir`. */
  config: DispatcherConfig;
  /** Fetch used for attempts. @default globalThis.fetch */
  fetch?: FetchLike;
  /**
   * Checks every attempt's receiver (profile `public`; see `src/egress`). A
   * refused attempt is a failed attempt like any other (its error starts
   * `EGRESS_DENIED:`): retried on the schedule, then dead-lettered.
   * @default a policy with an empty allow-list
   */
  egress?: EgressPolicy;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Source of jitter in [0, 1). @default Math.random */
  random?: () => number;
  /** Attempts in flight at once. @default 64 */
  concurrency?: number;
  /** Attempts in flight at once to one webhook, so a slow receiver cannot take every slot. @default 16 */
  perWebhookConcurrency?: number;
  /**
   * Most pending deliveries held in memory (claimed); the rest wait in the
   * store and are claimed, earliest due first, as these finish.
   * @default 1024
   */
  windowSize?: number;
  /**
   * How far ahead deliveries are claimed and kept in memory, in ms; a retry
   * due later is given back to the store until then.
   * @default max(4 × poll_ms, 1000)
   */
  claimHorizonMs?: number;
  /** How long `stop()` waits for in-flight attempts before aborting them. @default min(timeout_ms, 5000) */
  stopTimeoutMs?: number;
  /** Where background failures and dead-lettered deliveries are reported. @default console.error */
  onError?: (error: unknown) => void;
  /**
   * `deliver` sends and retries; `record` only persists the deliveries of
   * this process's events and signals them to the process that delivers
   * (a running server polls the deliveries version). One-shot CLI commands
   * use `record`, so only one process per data directory sends.
   * @default "deliver"
   */
  mode?: "deliver" | "record";
  /** Told of every attempt that got an outcome (metrics). @default none */
  onAttempt?: (attempt: AttemptObservation) => void;
  /** Told of every delivery moved to the dead-letter queue, by webhook id (metrics). @default none */
  onDeadLetter?: (webhookId: string) => void;
  /**
   * Told of deliveries that could not be sent at all (metrics), by reason:
   * `body_missing` (their event's stored body is gone: dead-lettered with a
   * reason) or `webhook_removed` (their webhook was removed meanwhile: given up).
   * @default none
   */
  onUndeliverable?: (reason: UndeliverableReason, count: number) => void;
}

/** Why deliveries could not be sent at all (see {@linkcode DispatcherOptions.onUndeliverable}). */
export type UndeliverableReason = "body_missing" | "webhook_removed" | "secret_unreadable";

/** Something wrong with the store that `/health` reports (the instance is degraded). */
export interface DeliveryProblem {
  /**
   * Stable code: `DELIVERY_BODY_MISSING` (deliveries whose event body was
   * gone) or `WEBHOOK_SECRET_UNREADABLE` (webhooks whose signing secret this
   * process cannot decrypt: their deliveries are dead-lettered).
   */
  code: "DELIVERY_BODY_MISSING" | "WEBHOOK_SECRET_UNREADABLE";
  message: string;
  /** Deliveries affected since start. */
  count: number;
  /** ISO-8601 time it was first seen. */
  since: string;
}

/** A delivery attempt as {@linkcode DispatcherOptions.onAttempt} is told of it. */
export interface AttemptObservation {
  webhookId: string;
  /** A 2xx response arrived in time. */
  ok: boolean;
  /** HTTP status, when a response arrived. */
  status?: number;
  /** Until the response headers (or the failure), in ms. */
  durationMs: number;
}

/** A running dispatcher. */
export interface Dispatcher {
  /** Loads registrations, subscribes to the bus and claims the first page of due deliveries. */
  start(): Promise<void>;
  /** Unsubscribes, clears timers, waits (bounded) for in-flight attempts and gives its claims back; pending records stay in the store. */
  stop(): Promise<void>;
  /** Resolves once no delivery is held, running or due in the store (when sending), and background writes are done. */
  whenIdle(): Promise<void>;
  /** Deliveries pending in memory (scheduled, running or being recorded). */
  readonly pending: number;
  /** Problems of the store this process met since it started (`/health` reports them). */
  problems(): DeliveryProblem[];
  /**
   * Resolves once the start-up check is done: pending deliveries whose event
   * body is missing dead-lettered (see {@linkcode DispatcherOptions.onUndeliverable}).
   */
  whenChecked(): Promise<OrphanReport>;
  /**
   * The registered webhooks that are disabled, as of the last registrations
   * read (at most `poll_ms` old while running).
   */
  disabledWebhooks(): DisabledWebhook[];
  /**
   * Prepares the outbox records of events another writer commits (the audit
   * log puts `tool.called` and `audit.written` deliveries in the commit of
   * the entry), so an event costs no commit of its own. Call
   * `committed(versionstamp)` once that commit succeeded, then emit the same
   * envelopes on the bus (the dispatcher skips them there). Nothing happens
   * when the commit fails or `committed` is never called.
   *
   * @returns `undefined` when no registered webhook wants any of the events.
   */
  stage(events: readonly EventEnvelope<EventType>[]): StagedDeliveries | undefined;
}

/** What the start-up check found: deliveries whose event body was missing, all dead-lettered. */
export interface OrphanReport {
  /** Dead-lettered with the body recovered from another dead letter of the same event (replayable). */
  recovered: number;
  /** Dead-lettered without a body: nothing kept it, they cannot be replayed. */
  lost: number;
}

/** A disabled outgoing webhook: which, why and since when. */
export interface DisabledWebhook {
  id: string;
  reason: DisabledReason;
  /** ISO-8601 time it was disabled. */
  at: string;
  detail?: string;
}

/** Outbox records of events, to be written in someone else's commit. */
export interface StagedDeliveries {
  /** Plain delivery ops: each event and its pending deliveries. */
  ops: DeliveryOp[];
  /** Whether the commit must bump the deliveries version (record mode). */
  bumpVersion: boolean;
  /** Tells the dispatcher the commit succeeded, with its versionstamp. */
  committed(versionstamp: string): void;
}

interface Hook {
  record: ListedOutgoingWebhook;
  /** Its keys, imported on first use after each registration load that changed its secrets. */
  signer?: WebhookSigner;
  /** Its dead-letter streak as last stored, when known (a delivery resets a non-zero one). */
  streak?: number;
  /** Being disabled by this process (a 410 or the streak): no second update. */
  disabling?: boolean;
}

/** Whether two registrations sign with the same secrets (a loaded signer can be kept). */
function sameSecrets(a: OutgoingWebhook, b: OutgoingWebhook): boolean {
  const pa = a.previous_secrets ?? [];
  const pb = b.previous_secrets ?? [];
  return a.secret === b.secret && pa.length === pb.length &&
    pa.every((p, i) => p.secret === pb[i].secret && p.expires_at === pb[i].expires_at);
}

/** What this process knows of an event's fan-out record (it alone rewrites it). */
interface Fanout {
  record: Omit<FanoutRecord, "webhook_ids">;
  /** The webhook ids the stored record lists. */
  ids: Set<string>;
}

interface CachedEvent {
  event: OutboxEvent;
  /** Versionstamp of the stored event record, guarding its collection. */
  versionstamp: string;
  /** Deliveries in memory that use it. */
  refs: number;
  /** Its fan-out record, while one is stored. */
  fanout: Fanout | null;
}

interface BuiltEvent {
  outbox: OutboxEvent;
  fanout: FanoutRecord;
  ops: DeliveryOp[];
}

interface Pending {
  key: string;
  record: DeliveryRecord;
  /** Versionstamp of the record's last write (of the fan-out record while `fanout`). */
  versionstamp: string;
  /** Stored as an entry of its event's fan-out record, not as a record of its own. */
  fanout: boolean;
  event: CachedEvent;
}

const encoder = new TextEncoder();

/** Shortest life of the delivery lease and of claims without renewal (renewed every poll). */
const LEASE_MIN_TTL_MS = 5000;

/** Claims are made in pages of at least this many deliveries (or the window, if smaller). */
const MIN_CLAIM_PAGE = 64;

/** Deliveries given back to the store that a dispatcher remembers (about 100 bytes each). */
const MAX_EVICTED_KNOWN = 100_000;

/** Events whose lost deliveries one page of the start-up check dead-letters. */
const ORPHAN_CHECK_PAGE = 256;

/** Pages the start-up check reads at most (a page whose writes fail is read again). */
const ORPHAN_CHECK_MAX_PAGES = 1000;

/** The DLQ id of a delivery dead-lettered for a lost body: the same for every process. */
async function orphanDlqId(record: DeliveryRecord): Promise<string> {
  const seed = new Uint8Array(
    await crypto.subtle.digest(
      "SHA-256",
      encoder.encode(`lost ${record.event_id}/${record.webhook_id}`),
    ),
  );
  return derivedId("dlq", Date.parse(record.created_at) || 0, seed);
}

function pendingKey(record: { event_id: string; webhook_id: string }): string {
  return `${record.event_id}/${record.webhook_id}`;
}

/** Whether `hook` gets events of `type`: all of the 8 by default; an opt-in type only when named. */
function matches(hook: OutgoingWebhook, type: string): boolean {
  return hook.events === "*" ? isDefaultEventType(type) : hook.events.includes(type);
}

function attemptRecord(attempt: number, at: number, result: SendResult): AttemptRecord {
  return {
    attempt,
    at: new Date(at).toISOString(),
    ...(result.status !== undefined ? { status: result.status } : {}),
    ...(result.error !== undefined ? { error: result.error } : {}),
    duration_ms: result.duration_ms,
  };
}

/** Why an event to a disabled webhook went to the DLQ without an attempt. */
function disabledReason(webhook: OutgoingWebhook): string {
  const disabled = webhook.disabled!;
  const why = disabled.reason === "manual"
    ? "disabled by hand"
    : disabled.reason === "gone"
    ? "disabled after a 410 Gone"
    : "disabled after repeated dead letters";
  return `Not sent: the webhook was ${why} at ${disabled.at}`;
}

function describeFailure(attempt: AttemptRecord): string {
  return attempt.status !== undefined ? `HTTP ${attempt.status}` : attempt.error ?? "failed";
}

class WebhookDispatcher implements Dispatcher {
  #store: Store;
  #bus: EventBus;
  #config: DispatcherConfig;
  #fetch: FetchLike;
  #egress: EgressPolicy;
  #now: () => number;
  #random: () => number;
  #concurrency: number;
  #perWebhook: number;
  #stopTimeoutMs: number;
  #onError: (error: unknown) => void;
  #disabled: Set<string>;
  #writer: DeliveryWriter;
  /** Attempt outcomes: nobody waits on them, so they are committed in fewer, larger commits. */
  #outcomes: OutcomeBatch;
  #recordOnly: boolean;
  /** Holds the delivery lease: the one process per data directory that sends. */
  #leader = false;
  #owner = newId("dsp");
  #leaseTtlMs: number;
  #windowSize: number;
  #shared: boolean;
  /** The claim of more due deliveries in progress, if any. */
  #filling: Promise<void> | null = null;
  /** Whether another fill should follow the one in progress. */
  #fillAgain = false;
  /** When claims were last renewed (epoch ms). */
  #claimsRenewedAt = -Infinity;
  /** How far ahead deliveries are claimed and kept in memory, in ms. */
  #horizonMs: number;
  /** Deliveries given back to the store, by event id then webhook id (see #markEvicted). */
  #evicted = new Map<string, Set<string>>();
  #evictedCount = 0;
  /** Claims of evicted deliveries, given back together. */
  #releasing: { event_id: string; webhook_id: string }[] = [];

  #state: "new" | "running" | "stopping" | "stopped" = "new";
  #stopped: Promise<void> | null = null;
  #unsubscribe: (() => void) | null = null;
  #unsubscribeChanges: (() => void) | null = null;
  #pollTimer: ReturnType<typeof setTimeout> | undefined;
  #pollTask: Promise<void> | null = null;
  #abort = new AbortController();

  #hooks = new Map<string, Hook>();
  #registrationsVersion: bigint | null = null;
  #refreshing: Promise<void> | null = null;
  #refreshingSince = -Infinity;
  #refreshQueued: Promise<void> | null = null;
  /** `performance.now()` when the newest completed registrations read began. */
  #registrationsReadAt = -Infinity;
  /** How old that read may be when an attempt starts. */
  #freshMs: number;
  /** Whether the last claim found fewer due deliveries than it asked for (polls claim anyway). */
  #drained = false;

  #events = new Map<string, CachedEvent>();
  /** Ids of events whose records stage() had written, until the bus brings them. */
  #staged = new Set<string>();
  #known = new Map<string, Pending>();
  #schedule: Schedule<Pending>;
  #ready: Pending[] = [];
  #readyHead = 0;
  #inFlight = 0;
  /** Attempts in flight per webhook id. */
  #hookInFlight = new Map<string, number>();
  /** Ready deliveries waiting for a slot of their webhook. */
  #parked = new Map<string, Pending[]>();
  #attempts = new Set<Promise<void>>();
  #tasks = new Set<Promise<void>>();
  #idleWaiters: (() => void)[] = [];
  /** Per webhook: ids of its delivery log entries in KV, oldest first. */
  #logs = new Map<string, Promise<string[]>>();
  #mirrorRunning = false;
  #mirrorDirty = false;
  #onAttempt: ((attempt: AttemptObservation) => void) | undefined;
  #onDeadLetter: ((webhookId: string) => void) | undefined;
  #onUndeliverable: ((reason: UndeliverableReason, count: number) => void) | undefined;
  #problems = new Map<DeliveryProblem["code"], DeliveryProblem>();
  /** Deliveries being dead-lettered for a missing body (claims and the start-up check meet). */
  #orphaning = new Set<string>();
  #checked: Promise<OrphanReport> | null = null;

  constructor(options: DispatcherOptions) {
    const {
      store,
      bus,
      config,
      fetch = globalThis.fetch,
      now = Date.now,
      random = Math.random,
      concurrency = 64,
      perWebhookConcurrency = 16,
      stopTimeoutMs = Math.min(config.webhooks.timeout_ms, 5000),
      windowSize = 1024,
      onError = (error) => console.error("webhook dispatcher:", error),
      mode = "deliver",
    } = options;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`Invalid concurrency: ${concurrency} is not a positive integer`);
    }
    if (!Number.isInteger(perWebhookConcurrency) || perWebhookConcurrency < 1) {
      throw new RangeError(
        `Invalid perWebhookConcurrency: ${perWebhookConcurrency} is not a positive integer`,
      );
    }
    if (!Number.isInteger(windowSize) || windowSize < 1) {
      throw new RangeError(`Invalid windowSize: ${windowSize} is not a positive integer`);
    }
    this.#store = store;
    this.#bus = bus;
    this.#windowSize = windowSize;
    this.#shared = store.deliveries.sharedClaims;
    this.#config = config;
    this.#fetch = fetch;
    this.#egress = options.egress ?? new EgressPolicy();
    this.#now = now;
    this.#random = random;
    this.#concurrency = concurrency;
    this.#perWebhook = perWebhookConcurrency;
    this.#stopTimeoutMs = stopTimeoutMs;
    this.#onError = onError;
    this.#onAttempt = options.onAttempt;
    this.#onDeadLetter = options.onDeadLetter;
    this.#onUndeliverable = options.onUndeliverable;
    this.#disabled = new Set(config.events.disabled);
    this.#freshMs = Math.min(
      MAX_REGISTRATION_AGE_MS,
      config.webhooks.poll_ms,
      config.webhooks.retry_base_ms / 2,
    );
    this.#writer = store.deliveries.writer();
    this.#outcomes = new OutcomeBatch({
      writer: store.deliveries.writer(),
      running: () => this.#attempts.size,
      lingerMs: OUTCOME_LINGER_MS,
    });
    this.#recordOnly = mode === "record";
    this.#leaseTtlMs = Math.max(LEASE_MIN_TTL_MS, config.webhooks.poll_ms * 10);
    this.#horizonMs = options.claimHorizonMs ?? Math.max(config.webhooks.poll_ms * 4, 1000);
    if (!(this.#horizonMs > 0)) {
      throw new RangeError(`Invalid claimHorizonMs: ${this.#horizonMs} is not a positive number`);
    }
    this.#schedule = new Schedule((due) => this.#enqueueReady(due), now);
  }

  disabledWebhooks(): DisabledWebhook[] {
    const disabled: DisabledWebhook[] = [];
    for (const { record } of this.#hooks.values()) {
      if (record.disabled) disabled.push({ id: record.id, ...record.disabled });
    }
    return disabled;
  }

  problems(): DeliveryProblem[] {
    return [...this.#problems.values()].map((problem) => ({ ...problem }));
  }

  whenChecked(): Promise<OrphanReport> {
    return this.#checked ?? Promise.resolve({ recovered: 0, lost: 0 });
  }

  get pending(): number {
    return this.#known.size;
  }

  /**
   * Whether this process sends: deliver mode, and either a store that shares
   * work by claims or the delivery lease held.
   */
  get #sending(): boolean {
    return !this.#recordOnly && (this.#shared || this.#leader);
  }

  /** Room left in the window of deliveries held in memory. */
  get #room(): number {
    return this.#windowSize - this.#known.size;
  }

  /** The claim this process makes now, for `claimDue` and new events' fan-outs. */
  #claim(): { owner: string; until: number } {
    return { owner: this.#owner, until: this.#now() + this.#leaseTtlMs };
  }

  /** Takes or renews the delivery lease; false while another live server holds it. */
  #claimLease(): Promise<boolean> {
    return this.#store.leases.claimDelivery({ owner: this.#owner, ttlMs: this.#leaseTtlMs });
  }

  async start(): Promise<void> {
    if (this.#state !== "new") {
      throw new Error(`Cannot start the dispatcher: it is ${this.#state}`);
    }
    this.#state = "running";
    await this.#refreshRegistrations();
    this.#unsubscribe = this.#bus.subscribe((event) => this.#onEvent(event));
    if (this.#recordOnly) return;
    // Where the store pushes changes, another instance's registrations and
    // queued deliveries are picked up at once rather than at the next poll.
    this.#unsubscribeChanges = this.#store.changes.subscribe((name) => {
      if (this.#state !== "running") return;
      if (name === "registrations") {
        this.#background(this.#refreshRegistrations());
      } else if (this.#sending) {
        this.#drained = false;
        this.#background(this.#fill());
      }
    });
    if (!this.#shared) this.#leader = await this.#claimLease();
    if (this.#sending) {
      // Off the path to serving: a restart listens before its backlog is claimed,
      // after the start-up check has dead-lettered what a lost body left.
      const checked = this.#checkOrphans();
      this.#checked = checked;
      this.#background(checked.finally(() => this.#fill()));
      // A crash may have come between a DLQ change and its mirror write.
      this.#background(this.#syncMirror());
    } else {
      this.#onError(
        new GatewayError(
          "UNAVAILABLE",
          "Another toolgate server on this data directory sends the webhook deliveries: " +
            "this one records them and takes over when that one stops",
        ),
      );
    }
    this.#armPoll();
  }

  async #syncMirror(): Promise<void> {
    await cleanDlqMirrorTemps(this.#config.dataDir);
    const hasRecords = await this.#store.deliveries.countDlq() > 0;
    const hasFile = await Deno.stat(`${this.#config.dataDir}/${DLQ_FILE}`).then(
      () => true,
      (error) => {
        if (error instanceof Deno.errors.NotFound) return false;
        throw error;
      },
    );
    if (hasRecords || hasFile) this.#rewriteMirror();
  }

  stop(): Promise<void> {
    if (this.#state === "new") {
      this.#state = "stopped";
      return Promise.resolve();
    }
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  whenIdle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  async #shutdown(): Promise<void> {
    this.#state = "stopping";
    this.#unsubscribe?.();
    this.#unsubscribeChanges?.();
    clearTimeout(this.#pollTimer);
    this.#schedule.clear();
    this.#ready = [];
    this.#readyHead = 0;
    this.#parked.clear();
    await this.#pollTask;
    const inFlight = Promise.all(this.#attempts);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finished = await Promise.race([
      inFlight.then(() => true),
      new Promise<false>((resolve) =>
        timer = setTimeout(() => resolve(false), this.#stopTimeoutMs)
      ),
    ]);
    clearTimeout(timer);
    if (!finished) {
      this.#abort.abort();
      await inFlight;
    }
    while (this.#tasks.size) await Promise.all(this.#tasks);
    await this.#writer.flush();
    await this.#outcomes.flush();
    await this.#filling;
    // Another instance may take what this one held at once, instead of after the claims lapse.
    if (this.#known.size) {
      await this.#store.deliveries.releaseClaims(this.#owner).catch((error) =>
        this.#onError(error)
      );
    }
    if (this.#leader) await this.#store.leases.releaseDelivery(this.#owner);
    this.#leader = false;
    this.#state = "stopped";
    this.#known.clear();
    this.#events.clear();
    this.#checkIdle();
  }

  /** Stopped, or nothing held, running or due in the store (the last claim came back short). */
  #isIdle(): boolean {
    return this.#state === "stopped" ||
      (this.#known.size === 0 && this.#tasks.size === 0 && this.#attempts.size === 0 &&
        !this.#filling && (this.#drained || !this.#sending));
  }

  #checkIdle(): void {
    if (!this.#idleWaiters.length || !this.#isIdle()) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Runs background work, reporting its failure; `stop()` and `whenIdle()` wait for it. */
  #background(work: Promise<unknown>): void {
    const task: Promise<void> = work.then(
      () => undefined,
      (error) => this.#onError(error),
    ).finally(() => {
      this.#tasks.delete(task);
      this.#checkIdle();
    });
    this.#tasks.add(task);
  }

  // --- Registrations ------------------------------------------------------

  /**
   * Makes the registration cache no older than the freshness bound: reuses
   * the last read (or the one in flight) when it began recently enough.
   */
  #freshRegistrations(): Promise<void> {
    const limit = performance.now() - this.#freshMs;
    if (this.#registrationsReadAt >= limit) return Promise.resolve();
    if (this.#refreshing && this.#refreshingSince >= limit) return this.#refreshing;
    return this.#refreshRegistrations();
  }

  /**
   * Makes the registration cache at least as new as the store was when this
   * call began (reads are shared by callers arriving together).
   */
  #refreshRegistrations(): Promise<void> {
    if (!this.#refreshing) {
      this.#refreshingSince = performance.now();
      const run: Promise<void> = this.#loadRegistrations().finally(() => {
        if (this.#refreshing === run) this.#refreshing = null;
      });
      this.#refreshing = run;
      return run;
    }
    if (!this.#refreshQueued) {
      const next = () => {
        this.#refreshQueued = null;
        return this.#refreshRegistrations();
      };
      this.#refreshQueued = this.#refreshing.then(next, next);
    }
    return this.#refreshQueued;
  }

  async #loadRegistrations(): Promise<void> {
    const began = performance.now();
    const version = await this.#store.registrationsVersion();
    if (version === this.#registrationsVersion) {
      this.#registrationsReadAt = began;
      return;
    }
    const records = await this.#store.webhooks.listOutgoing({ unreadableSecrets: "report" });
    const hooks = new Map<string, Hook>();
    for (const record of records) {
      const old = this.#hooks.get(record.id);
      if (record.secret_error !== undefined && old?.record.secret_error === undefined) {
        this.#onError(
          new GatewayError(
            "STORE_CORRUPT",
            `Webhook ${record.id} (${record.url}) cannot be signed: ${record.secret_error}. ` +
              `Its deliveries go to the dead-letter queue until the key is right; then ` +
              `\`toolgate dlq replay --webhook ${record.id}\` sends them`,
            { details: { webhook_id: record.id } },
          ),
        );
      }
      hooks.set(
        record.id,
        old && sameSecrets(old.record, record) ? { ...old, record } : { record },
      );
    }
    if (this.#registrationsVersion !== null && this.#state === "running") {
      for (const id of this.#hooks.keys()) {
        if (!hooks.has(id)) {
          this.#logs.delete(id);
          this.#background(this.#store.deliveries.deleteLog(id));
        }
      }
    }
    this.#hooks = hooks;
    this.#registrationsVersion = version;
    this.#registrationsReadAt = began;
  }

  #armPoll(): void {
    if (this.#state !== "running") return;
    this.#pollTimer = setTimeout(() => {
      this.#pollTask = this.#poll().finally(() => {
        this.#pollTask = null;
        this.#armPoll();
      });
    }, this.#config.webhooks.poll_ms);
  }

  async #poll(): Promise<void> {
    try {
      if (!this.#shared && !this.#recordOnly) await this.#renewLease();
      await this.#refreshRegistrations();
      if (!this.#sending || this.#state !== "running") return;
      // Claims last leaseTtlMs: renewed a few times per life, not on every poll.
      const now = this.#now();
      if (this.#known.size && now - this.#claimsRenewedAt >= this.#leaseTtlMs / 4) {
        await this.#store.deliveries.renewClaims(this.#owner, now + this.#leaseTtlMs);
        this.#claimsRenewedAt = now;
      }
      await this.#fill();
    } catch (error) {
      this.#onError(error);
    }
  }

  async #renewLease(): Promise<void> {
    const leader = await this.#claimLease();
    if (leader && !this.#leader) {
      // Took over from a server that stopped: its deliveries are claimed from the store.
      this.#leader = true;
      this.#background(this.#syncMirror());
    } else if (!leader && this.#leader) {
      // Another server took the lease (this one stalled past its expiry): new
      // events are only recorded from now on; deliveries in hand finish here.
      this.#leader = false;
      this.#onError(
        new GatewayError("UNAVAILABLE", "Lost the webhook delivery lease to another server"),
      );
    }
  }

  // --- Intake ---------------------------------------------------------------

  #targets(type: string): Hook[] {
    const targets: Hook[] = [];
    if (this.#state !== "running" || this.#disabled.has(type)) return targets;
    for (const hook of this.#hooks.values()) {
      if (matches(hook.record, type)) targets.push(hook);
    }
    return targets;
  }

  #onEvent(event: EventEnvelope<EventType>): Promise<void> | undefined {
    // Already written in another commit by stage().
    if (this.#staged.delete(event.id)) return undefined;
    const targets = this.#targets(event.type);
    if (!targets.length) return undefined;
    const persisted = this.#persistEvent(event, targets);
    // The bus reports a failure of the returned promise; this copy only lets stop() wait.
    this.#background(persisted.catch(() => undefined));
    return persisted;
  }

  stage(events: readonly EventEnvelope<EventType>[]): StagedDeliveries | undefined {
    const built: BuiltEvent[] = [];
    // Claimed as written when this process sends them; else they wait in the store.
    const claim = this.#sending && this.#room > 0 ? this.#claim() : undefined;
    for (const event of events) {
      const targets = this.#targets(event.type);
      if (targets.length) built.push(this.#build(event, targets, claim));
    }
    if (!built.length) return undefined;
    return {
      ops: built.flatMap((b) => b.ops),
      bumpVersion: !this.#sending,
      committed: (versionstamp) => {
        for (const b of built) this.#staged.add(b.outbox.id);
        // Unclaimed (the window was full): claimed from the store once there is room.
        if (!claim && this.#sending) this.#drained = false;
        // Scheduled on the next turn, so the reply to the call that committed
        // them goes out before their first attempts start.
        if (!claim) return;
        this.#background(
          new Promise<void>((resolve) =>
            setTimeout(() => {
              for (const b of built) this.#adoptEvent(b, () => versionstamp);
              resolve();
            }, 0)
          ),
        );
      },
    };
  }

  /** The outbox records of one event: its body and a pending delivery per target. */
  #build(
    event: EventEnvelope<EventType>,
    targets: Hook[],
    claim?: { owner: string; until: number },
  ): BuiltEvent {
    const outbox: OutboxEvent = {
      id: event.id,
      type: event.type,
      timestamp: event.timestamp,
      body: encoder.encode(JSON.stringify(event)),
    };
    const traceparent = envelopeTraceparent(event);
    if (traceparent !== undefined) outbox.traceparent = traceparent;
    const now = this.#now();
    const fanout: FanoutRecord = {
      event_type: event.type,
      created_at: new Date(now).toISOString(),
      next_attempt_at: now,
      webhook_ids: targets.map((hook) => hook.record.id),
    };
    outbox.webhook_ids = fanout.webhook_ids;
    const ops: DeliveryOp[] = [
      { op: "put_event", event: outbox },
      { op: "put_fanout", event_id: event.id, fanout, ...(claim ? { claim } : {}) },
    ];
    return { outbox, fanout, ops };
  }

  /** Schedules the deliveries of a stored event (`versionstamp(i)`: of op `i`). */
  #adoptEvent(built: BuiltEvent, versionstamp: (op: number) => string): void {
    if (!this.#sending || this.#state !== "running") return; // Stored: the sender adopts them.
    const { webhook_ids, ...record } = built.fanout;
    const cached: CachedEvent = {
      event: built.outbox,
      versionstamp: versionstamp(0),
      refs: 0,
      fanout: { record, ids: new Set(webhook_ids) },
    };
    this.#events.set(built.outbox.id, cached);
    // Built here, off the call's path: stage() runs before the call's commit.
    for (const delivery of fanoutDeliveries(built.outbox.id, built.fanout)) {
      this.#adopt(delivery, versionstamp(1), true, cached);
    }
  }

  async #persistEvent(event: EventEnvelope<EventType>, targets: Hook[]): Promise<void> {
    const claim = this.#sending && this.#room > 0 ? this.#claim() : undefined;
    const built = this.#build(event, targets, claim);
    const result = await this.#writer.write(built.ops);
    if (!this.#sending) {
      await this.#store.deliveries.bumpVersion();
      return;
    }
    if (claim) this.#adoptEvent(built, (i) => result.versionstamps[i]);
    // Unclaimed (the window was full): claimed from the store once there is room.
    else this.#drained = false;
  }

  #adopt(record: DeliveryRecord, versionstamp: string, fanout: boolean, event: CachedEvent): void {
    const key = pendingKey(record);
    if (this.#known.has(key)) return;
    const pending: Pending = { key, record, versionstamp, fanout, event };
    event.refs++;
    this.#known.set(key, pending);
    if (record.next_attempt_at <= this.#now()) this.#enqueueReady([pending]);
    else this.#schedule.add(record.next_attempt_at, pending);
  }

  /**
   * Claims due deliveries from the store while the window has room: one page
   * per call, earliest due first (at start, on each poll, and as finished
   * deliveries make room). Calls made meanwhile share it and run once more.
   */
  #fill(): Promise<void> {
    if (this.#filling) {
      this.#fillAgain = true;
      return this.#filling;
    }
    const run: Promise<void> = this.#claimPage().finally(() => {
      this.#filling = null;
      this.#checkIdle();
      if (this.#fillAgain && this.#state === "running") {
        this.#fillAgain = false;
        this.#background(this.#fill());
      }
    });
    this.#filling = run;
    return run;
  }

  /** Webhooks with a full queue in memory: claiming more of theirs would crowd the window. */
  #saturated(): string[] {
    const out: string[] = [];
    for (const [id, parked] of this.#parked) if (parked.length >= this.#perWebhook) out.push(id);
    return out;
  }

  async #claimPage(): Promise<void> {
    if (!this.#sending || this.#state !== "running") return;
    const room = this.#room;
    if (room < Math.min(MIN_CLAIM_PAGE, this.#windowSize)) return;
    const now = this.#now();
    const claimed = await this.#store.deliveries.claimDue({
      ...this.#claim(),
      now,
      dueBefore: now + this.#horizonMs,
      limit: room,
      excludeWebhooks: this.#saturated(),
    });
    this.#drained = claimed.length < room;
    const byEvent = new Map<string, StoredDelivery[]>();
    for (const stored of claimed) {
      if (!stored.fanout) this.#unmarkEvicted(stored.record);
      if (this.#known.has(pendingKey(stored.record))) continue;
      const group = byEvent.get(stored.record.event_id);
      if (group) group.push(stored);
      else byEvent.set(stored.record.event_id, [stored]);
    }
    for (const [eventId, group] of byEvent) {
      if (this.#state !== "running") return;
      let cached = this.#events.get(eventId);
      if (!cached) {
        const loaded = await this.#store.deliveries.readEvent(eventId);
        if (!loaded) {
          await this.#deadLetterOrphans(eventId, group);
          continue;
        }
        cached = this.#events.get(eventId) ??
          { event: loaded.event, versionstamp: loaded.versionstamp, refs: 0, fanout: null };
        this.#events.set(eventId, cached);
      }
      // A fan-out record is claimed whole: these are all its entries still owed.
      for (const stored of group) {
        if (!stored.fanout) continue;
        const { record } = stored;
        cached.fanout ??= {
          record: {
            event_type: record.event_type,
            created_at: record.created_at,
            next_attempt_at: record.next_attempt_at,
          },
          ids: new Set(),
        };
        cached.fanout.ids.add(record.webhook_id);
      }
      // All deliveries of one event are adopted together, so its reference
      // count covers every one listed before any of them can finish.
      for (const stored of group) {
        if (this.#known.has(pendingKey(stored.record))) continue;
        this.#adopt(stored.record, stored.versionstamp, stored.fanout, cached);
      }
    }
  }

  /**
   * The start-up check: dead-letters every pending delivery whose event body
   * is missing (as a store defect before issue 33 left them), a page of
   * events at a time, and says what it found.
   */
  async #checkOrphans(): Promise<OrphanReport> {
    const report: OrphanReport = { recovered: 0, lost: 0 };
    for (let page = 0; page < ORPHAN_CHECK_MAX_PAGES && this.#state === "running"; page++) {
      const orphans = await this.#store.deliveries.listOrphans(ORPHAN_CHECK_PAGE);
      if (!orphans.length) break;
      const byEvent = new Map<string, StoredDelivery[]>();
      for (const stored of orphans) {
        const group = byEvent.get(stored.record.event_id);
        if (group) group.push(stored);
        else byEvent.set(stored.record.event_id, [stored]);
      }
      for (const [eventId, group] of byEvent) {
        const { recovered, count } = await this.#deadLetterOrphans(eventId, group);
        if (recovered) report.recovered += count;
        else report.lost += count;
      }
    }
    if (report.recovered || report.lost) {
      this.#onError(
        new GatewayError(
          "STORE_CORRUPT",
          `Start-up check: ${report.recovered + report.lost} pending deliveries had lost their ` +
            `event's body and were moved to the dead-letter queue: ${report.recovered} with the ` +
            `body recovered from another dead letter of the same event (\`toolgate dlq replay\` ` +
            `sends them), ${report.lost} without a body (nothing kept it; they cannot be replayed)`,
          { details: report },
        ),
      );
    }
    return report;
  }

  /**
   * Dead-letters deliveries whose event's stored body is missing, with a
   * reason, instead of sending them: the body comes from another dead letter
   * of the same event where one keeps it, else the record says it is lost.
   * Their DLQ ids derive from event and webhook, so two instances meeting
   * the same deliveries write one record each. Counted, reported by
   * `problems()` and logged at error level.
   */
  async #deadLetterOrphans(
    eventId: string,
    group: StoredDelivery[],
  ): Promise<{ recovered: boolean; count: number }> {
    const fresh = group.filter((d) => !this.#orphaning.has(pendingKey(d.record)));
    if (!fresh.length) return { recovered: false, count: 0 };
    for (const d of fresh) this.#orphaning.add(pendingKey(d.record));
    try {
      const body = await this.#store.deliveries.findDlqBody(eventId);
      const failedAt = new Date(this.#now()).toISOString();
      const reason = "Not sent: the event's stored body was deleted while this delivery was " +
        "pending (a store defect fixed in issue 33); " +
        (body
          ? "the body was recovered from another dead letter of the same event"
          : "no copy of the body was kept, so it cannot be replayed");
      const ops: DeliveryOp[] = [];
      const dead: DlqRecord[] = [];
      for (const { record } of fresh) {
        // A replay keeps the id of the record it replays (which holds the body).
        const dlqId = record.dlq_id ?? await orphanDlqId(record);
        const dlq: Omit<DlqRecord, "size" | "body"> = {
          dlq_id: dlqId,
          webhook_id: record.webhook_id,
          url: this.#hooks.get(record.webhook_id)?.record.url ?? "",
          event_id: record.event_id,
          event_type: record.event_type,
          attempts: record.attempts,
          reason,
          failed_at: failedAt,
          ...(body ? {} : { body_lost: true as const }),
        };
        ops.push({ op: "put_dlq", record: dlq, body: body ?? new Uint8Array(0) });
        dead.push({ ...dlq, size: body?.byteLength ?? 0 });
      }
      for (const { record } of fresh.filter((d) => !d.fanout)) {
        ops.push({
          op: "delete_delivery",
          event_id: record.event_id,
          webhook_id: record.webhook_id,
        });
      }
      const fanout = fresh.find((d) => d.fanout)?.record;
      if (fanout) {
        const { event_type, created_at, next_attempt_at } = fanout;
        ops.push({
          op: "put_fanout",
          event_id: eventId,
          fanout: { event_type, created_at, next_attempt_at, webhook_ids: [] },
        });
      }
      await this.#writer.write(ops);
      this.#onUndeliverable?.("body_missing", fresh.length);
      for (const d of dead) this.#onDeadLetter?.(d.webhook_id);
      this.#noteProblem(
        "DELIVERY_BODY_MISSING",
        (count) =>
          `${count} pending deliveries had lost their event's stored body and were ` +
          `moved to the dead-letter queue (\`toolgate dlq list\`)`,
        fresh.length,
      );
      this.#onError(
        new GatewayError(
          "STORE_CORRUPT",
          `Cannot deliver event ${eventId}: its stored body is missing; ${fresh.length} ` +
            `delivery record(s) moved to the dead-letter queue ` +
            (body ? "with the body of another dead letter of the event" : "without a body"),
          { details: { event_id: eventId, dlq_ids: dead.map((d) => d.dlq_id) } },
        ),
      );
      this.#rewriteMirror();
      return { recovered: body !== null, count: fresh.length };
    } finally {
      for (const d of fresh) this.#orphaning.delete(pendingKey(d.record));
    }
  }

  /**
   * The op that takes a fan-out delivery out of its event's fan-out record
   * (rewritten with the webhooks left, or deleted). Outcome commits are
   * ordered, so the last one written holds the current list.
   *
   * @returns The op and a function putting the delivery back should its commit fail.
   */
  #leaveFanout(pending: Pending): { op: DeliveryOp; undo: () => void } {
    const { event, record } = pending;
    const fanout = event.fanout;
    if (!fanout) {
      throw new GatewayError("INTERNAL", `Fan-out of event ${record.event_id} is not loaded`);
    }
    fanout.ids.delete(record.webhook_id);
    return {
      op: {
        op: "put_fanout",
        event_id: record.event_id,
        fanout: { ...fanout.record, webhook_ids: [...fanout.ids] },
      },
      undo: () => fanout.ids.add(record.webhook_id),
    };
  }

  // --- Attempts -------------------------------------------------------------

  #enqueueReady(items: Pending[]): void {
    if (this.#state !== "running") return;
    for (const item of items) this.#ready.push(item);
    this.#pump();
  }

  #pump(): void {
    while (
      this.#state === "running" && this.#inFlight < this.#concurrency &&
      this.#readyHead < this.#ready.length
    ) {
      const pending = this.#ready[this.#readyHead];
      // Let go of it: a taken entry kept in the array would live (and be
      // copied by every scavenge) until the array is compacted.
      this.#ready[this.#readyHead++] = undefined as unknown as Pending;
      if (this.#readyHead >= 1024 && this.#readyHead * 2 >= this.#ready.length) {
        this.#ready = this.#ready.slice(this.#readyHead);
        this.#readyHead = 0;
      }
      const webhookId = pending.record.webhook_id;
      const busy = this.#hookInFlight.get(webhookId) ?? 0;
      if (busy >= this.#perWebhook) {
        const parked = this.#parked.get(webhookId);
        if (parked) parked.push(pending);
        else this.#parked.set(webhookId, [pending]);
        continue;
      }
      this.#hookInFlight.set(webhookId, busy + 1);
      this.#inFlight++;
      let released = false;
      // The slot is for the HTTP request; recording the outcome happens outside it.
      const release = () => {
        if (released) return;
        released = true;
        this.#inFlight--;
        const left = this.#hookInFlight.get(webhookId)! - 1;
        if (left) this.#hookInFlight.set(webhookId, left);
        else this.#hookInFlight.delete(webhookId);
        const parked = this.#parked.get(webhookId);
        if (parked) {
          this.#ready.push(parked.shift()!);
          if (!parked.length) this.#parked.delete(webhookId);
        }
        this.#pump();
      };
      const run: Promise<void> = this.#run(pending, release).finally(() => {
        release();
        this.#attempts.delete(run);
        this.#checkIdle();
      });
      this.#attempts.add(run);
    }
  }

  async #run(pending: Pending, release: () => void): Promise<void> {
    try {
      await this.#attempt(pending, release);
    } catch (error) {
      this.#onError(error);
      // Not recorded: try again later with the same attempt number (at-least-once).
      if (this.#state === "running") {
        this.#schedule.add(this.#now() + this.#config.webhooks.retry_base_ms, pending);
      }
    }
  }

  async #attempt(pending: Pending, release: () => void): Promise<void> {
    // Re-check the registration: a webhook removed meanwhile gets no further request.
    await this.#freshRegistrations();
    if (this.#state !== "running") return;
    const { record } = pending;
    const hook = this.#hooks.get(record.webhook_id);
    if (!hook) {
      // Removed meanwhile: given up (nobody to send it to), counted.
      release();
      await this.#finish(pending, "dropped");
      this.#onUndeliverable?.("webhook_removed", 1);
      return;
    }
    if (hook.record.disabled) {
      // Kept for `dlq replay --webhook` once the endpoint is enabled again.
      release();
      await this.#finish(pending, "dead", undefined, hook, disabledReason(hook.record));
      return;
    }
    if (hook.record.secret_error !== undefined) {
      // Unsigned it would be refused, and sent with another secret it would be forged:
      // kept for `dlq replay --webhook` once this process has the right key.
      release();
      const reason =
        `Not sent: the signing secret cannot be decrypted (${hook.record.secret_error})`;
      await this.#finish(pending, "dead", undefined, hook, reason);
      this.#onUndeliverable?.("secret_unreadable", 1);
      this.#noteProblem(
        "WEBHOOK_SECRET_UNREADABLE",
        (count) =>
          `${count} deliveries were moved to the dead-letter queue: their webhook's signing ` +
          `secret cannot be decrypted with this instance's key (TOOLGATE_SECRET_KEY or ` +
          `keychain.key); \`toolgate dlq replay --webhook <id>\` sends them once it can`,
        1,
      );
      return;
    }
    const body = pending.event.event.body;
    const startedAt = this.#now();
    const timestamp = Math.floor(startedAt / 1000);
    const secret = hook.record.secret;
    if (secret !== undefined) {
      hook.signer ??= new WebhookSigner(secret, hook.record.previous_secrets);
    }
    const signed = hook.signer?.sign(record.event_id, timestamp, body, startedAt);
    // A span per attempt, a child of the call that caused the event.
    const result = await postWebhookTraced({
      fetch: this.#fetch,
      egress: this.#egress,
      url: hook.record.url,
      body,
      eventType: record.event_type,
      deliveryId: record.event_id,
      signature: signed?.signature,
      timestamp,
      standardSignature: signed?.standardSignature,
      timeoutMs: this.#config.webhooks.timeout_ms,
      signal: this.#abort.signal,
    }, {
      webhookId: record.webhook_id,
      attempt: record.attempt_count + 1,
      parent: pending.event.event.traceparent,
      root: true,
    });
    release();
    if (result.aborted) return; // Stopping: the outcome is unknown, the record stays as it was.
    this.#onAttempt?.({
      webhookId: record.webhook_id,
      ok: result.ok,
      ...(result.status !== undefined ? { status: result.status } : {}),
      durationMs: result.duration_ms,
    });
    const attempt = attemptRecord(record.attempt_count + 1, startedAt, result);
    if (result.ok) {
      await this.#finish(pending, "delivered", attempt, hook);
      if (hook.streak !== 0) this.#background(this.#recordOutcome(hook, "delivered"));
      return;
    }
    if (result.status === 410) {
      // The receiver says the endpoint is gone for good: stop sending to it now.
      const reason = "the receiver answered 410 Gone";
      await this.#finish(pending, "dead", attempt, hook, `${reason}: endpoint disabled`);
      this.#background(this.#disable(hook, "gone", reason));
      return;
    }
    const delay = nextRetryDelayMs({
      attempt: attempt.attempt,
      schedule: hook.record.retry_schedule_ms,
      baseMs: this.#config.webhooks.retry_base_ms,
      random: this.#random(),
      retryAfterMs: parseRetryAfter(result.retry_after, this.#now()),
      retryAfterMaxMs: this.#config.webhooks.retry_after_max_ms ?? DEFAULT_RETRY_AFTER_MAX_MS,
    });
    if (delay === null) {
      await this.#finish(pending, "dead", attempt, hook);
      this.#background(this.#recordOutcome(hook, "dead_lettered"));
    } else {
      const next = this.#now() + delay;
      const updated: DeliveryRecord = {
        ...record,
        attempt_count: attempt.attempt,
        next_attempt_at: next,
        attempts: [...record.attempts, attempt],
      };
      const ops: DeliveryOp[] = [
        { op: "put_delivery", delivery: updated },
        ...await this.#logOps(updated, attempt, false),
      ];
      // Queued right after its list is computed (see #finish).
      const left = pending.fanout ? this.#leaveFanout(pending) : undefined;
      if (left) ops.push(left.op);
      let written;
      try {
        written = await this.#outcomes.write(ops);
      } catch (error) {
        left?.undo();
        throw error;
      }
      pending.record = updated;
      pending.versionstamp = written.versionstamps[0];
      pending.fanout = false;
      if (this.#state !== "running") return;
      // A retry due past the claim horizon goes back to the store, so the
      // window holds what is due soon: a failing webhook cannot fill it and
      // starve the others while its retries wait.
      if (next - this.#now() > this.#horizonMs) this.#evict(pending);
      else this.#schedule.add(next, pending);
    }
  }

  /** Adds `count` deliveries to a problem `problems()` reports (and `/health` with it). */
  #noteProblem(
    code: DeliveryProblem["code"],
    message: (count: number) => string,
    count: number,
  ): void {
    const problem = this.#problems.get(code);
    const total = (problem?.count ?? 0) + count;
    this.#problems.set(code, {
      code,
      message: message(total),
      count: total,
      since: problem?.since ?? new Date(this.#now()).toISOString(),
    });
  }

  /**
   * Remembers a delivery given back to the store (while this process alone
   * sends the store's deliveries, and up to {@linkcode MAX_EVICTED_KNOWN}):
   * its event is not worth collecting before it is claimed again.
   */
  #markEvicted(record: DeliveryRecord): void {
    if (this.#store.deliveries.sharedClaims || this.#evictedCount >= MAX_EVICTED_KNOWN) return;
    let hooks = this.#evicted.get(record.event_id);
    if (!hooks) this.#evicted.set(record.event_id, hooks = new Set());
    if (hooks.has(record.webhook_id)) return;
    hooks.add(record.webhook_id);
    this.#evictedCount++;
  }

  /** A delivery claimed from the store is no longer one given back. */
  #unmarkEvicted(record: DeliveryRecord): void {
    const hooks = this.#evicted.get(record.event_id);
    if (!hooks?.delete(record.webhook_id)) return;
    this.#evictedCount--;
    if (!hooks.size) this.#evicted.delete(record.event_id);
  }

  /** Drops a delivery (stored, not due soon) from memory and gives its claim back. */
  #evict(pending: Pending): void {
    const { record, event } = pending;
    this.#known.delete(pending.key);
    this.#markEvicted(record);
    event.refs--;
    if (event.refs === 0 && this.#events.get(record.event_id) === event) {
      this.#events.delete(record.event_id);
    }
    this.#releasing.push({ event_id: record.event_id, webhook_id: record.webhook_id });
    if (this.#releasing.length === 1) {
      this.#background(
        Promise.resolve().then(() => {
          const keys = this.#releasing;
          this.#releasing = [];
          return this.#store.deliveries.releaseClaims(this.#owner, keys);
        }),
      );
    }
    if (this.#room * 2 >= this.#windowSize) this.#background(this.#fill());
    this.#checkIdle();
  }

  /**
   * Counts an event's final outcome at a webhook (a delivery resets the
   * streak of events dead-lettered in a row) and disables the webhook once
   * `webhooks.auto_disable_after` events in a row went to the DLQ.
   */
  async #recordOutcome(hook: Hook, outcome: DeliveryOutcome): Promise<void> {
    const streak = await this.#store.webhooks.recordOutcome(hook.record.id, outcome);
    hook.streak = streak;
    const limit = this.#config.webhooks.auto_disable_after ?? DEFAULT_AUTO_DISABLE_AFTER;
    if (outcome === "dead_lettered" && limit > 0 && streak >= limit) {
      await this.#disable(
        hook,
        "failing",
        `the last ${streak} events all went to the dead-letter queue`,
      );
    }
  }

  /** Disables a webhook (unless it already is) and says so in the log. */
  async #disable(hook: Hook, reason: DisabledReason, detail: string): Promise<void> {
    if (hook.record.disabled || hook.disabling) return;
    hook.disabling = true;
    try {
      const current = await this.#store.webhooks.getOutgoing(hook.record.id);
      if (!current || current.disabled) return;
      const updated = await this.#store.webhooks.updateOutgoing(hook.record.id, {
        disabled: { at: new Date(this.#now()).toISOString(), reason, detail },
      });
      if (!updated) return;
      hook.record = updated;
      this.#onError(
        new GatewayError(
          "DELIVERY_FAILED",
          `Webhook ${updated.id} (${updated.url}) disabled: ${detail}. Its events go to the ` +
            `dead-letter queue until \`toolgate webhooks enable ${updated.id}\`; then ` +
            `\`toolgate dlq replay --webhook ${updated.id}\` sends what it missed`,
          { details: { webhook_id: updated.id, reason } },
        ),
      );
    } finally {
      hook.disabling = false;
    }
  }

  /** Ops appending an attempt to the webhook's delivery log, dropping entries past 20. */
  async #logOps(
    record: DeliveryRecord,
    attempt: AttemptRecord,
    ok: boolean,
  ): Promise<DeliveryOp[]> {
    const webhookId = record.webhook_id;
    let loading = this.#logs.get(webhookId);
    if (!loading) {
      loading = this.#store.deliveries.listLogIds(webhookId);
      this.#logs.set(webhookId, loading);
      loading.catch(() => this.#logs.delete(webhookId));
    }
    const ids = await loading;
    const entry: DeliveryLogEntry = {
      at: attempt.at,
      attempt: attempt.attempt,
      ok,
      ...(attempt.status !== undefined ? { status: attempt.status } : {}),
      ...(attempt.error !== undefined ? { error: attempt.error } : {}),
      latency_ms: attempt.duration_ms,
      event_id: record.event_id,
      event_type: record.event_type,
    };
    const entry_id = newLogEntryId(Date.parse(attempt.at));
    ids.push(entry_id);
    const ops: DeliveryOp[] = [{ op: "log", webhook_id: webhookId, entry_id, entry }];
    while (ids.length > DELIVERY_LOG_SIZE) {
      ops.push({ op: "delete_log", webhook_id: webhookId, entry_id: ids.shift()! });
    }
    return ops;
  }

  async #finish(
    pending: Pending,
    outcome: "delivered" | "dead" | "dropped",
    attempt?: AttemptRecord,
    hook?: Hook,
    reason?: string,
  ): Promise<void> {
    const { record, event } = pending;
    const ops: DeliveryOp[] = [];
    if (attempt) ops.push(...await this.#logOps(record, attempt, outcome === "delivered"));
    // Nothing awaits from here to the write: the fan-out op must be queued in
    // the order its list was computed.
    const left = pending.fanout ? this.#leaveFanout(pending) : undefined;
    ops.push(
      left?.op ??
        { op: "delete_delivery", event_id: record.event_id, webhook_id: record.webhook_id },
    );
    const size = event.event.body.byteLength;
    let dlqId: string | undefined;
    let dead: Omit<DlqRecord, "size" | "body"> | undefined;
    if (outcome === "delivered" && record.dlq_id) {
      ops.push({ op: "delete_dlq", dlq_id: record.dlq_id, size });
    } else if (outcome === "dead" && hook) {
      dlqId = record.dlq_id ?? newDlqId();
      dead = {
        dlq_id: dlqId,
        webhook_id: record.webhook_id,
        url: hook.record.url,
        event_id: record.event_id,
        event_type: record.event_type,
        attempts: attempt ? [...record.attempts, attempt] : record.attempts,
        ...(reason !== undefined ? { reason } : {}),
        failed_at: new Date(this.#now()).toISOString(),
      };
      ops.push({ op: "put_dlq", record: dead, body: event.event.body });
    }
    event.refs--;
    // An entry of the fan-out record that this process did not adopt keeps
    // the event, as does a retry it gave back to the store (the store would
    // refuse the collection; asking costs the commit a round).
    const collect = event.refs === 0 && !event.fanout?.ids.size &&
      !this.#evicted.has(record.event_id);
    if (collect) {
      const webhookIds = event.event.webhook_ids;
      ops.push({
        op: "collect_event",
        event_id: record.event_id,
        versionstamp: event.versionstamp,
        size,
        ...(webhookIds ? { webhook_ids: webhookIds } : {}),
      });
    }
    if (event.refs === 0 && this.#events.get(record.event_id) === event) {
      this.#events.delete(record.event_id);
    }
    let collected: boolean;
    try {
      ({ collected } = await this.#outcomes.write(ops));
    } catch (error) {
      event.refs++;
      left?.undo();
      if (!this.#events.has(record.event_id)) this.#events.set(record.event_id, event);
      throw error;
    }
    this.#known.delete(pending.key);
    // Claim the next page once half the window is free, unless the store ran dry (the poll looks again).
    if (!this.#drained && this.#room * 2 >= this.#windowSize) this.#background(this.#fill());
    if (collect && !collected) {
      this.#background(this.#store.deliveries.collectEventIfUnreferenced(record.event_id));
    }
    if (outcome === "dead" && attempt) {
      this.#onError(
        new GatewayError(
          "DELIVERY_FAILED",
          `Delivery of ${record.event_id} to ${record.webhook_id} failed after ${attempt.attempt} attempts (last: ${
            describeFailure(attempt)
          }): moved to the dead-letter queue as ${dlqId}`,
          { details: { dlq_id: dlqId, webhook_id: record.webhook_id, event_id: record.event_id } },
        ),
      );
    }
    if (dead) {
      this.#onDeadLetter?.(record.webhook_id);
      // Appended in place: O(entry), not a rewrite of the whole file per dead letter.
      const entry = dlqEntry(dead, event.event.body);
      this.#background(appendDlqMirror(this.#store, [entry], this.#config.dataDir));
    } else if (record.dlq_id) {
      this.#rewriteMirror(); // A replayed record was delivered: it leaves the file.
    }
    this.#checkIdle();
  }

  #rewriteMirror(): void {
    if (this.#mirrorRunning) {
      this.#mirrorDirty = true;
      return;
    }
    this.#mirrorRunning = true;
    this.#background((async () => {
      try {
        do {
          this.#mirrorDirty = false;
          await writeDlqMirror(this.#store, this.#config.dataDir);
        } while (this.#mirrorDirty);
      } finally {
        this.#mirrorRunning = false;
      }
    })());
  }
}

/**
 * Creates the outgoing webhook dispatcher. Call `start()` before events are
 * emitted and `stop()` before closing the store.
 *
 * @example
 * ```ts
 * const dispatcher = createDispatcher({ store, bus, config });
 * await dispatcher.start();
 * await bus.emit("server.started", { version, tool_count: 3, plugin_count: 1, transport: "http", zero_config_plugins: 1 });
 * await dispatcher.stop();
 * ```
 */
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  return new WebhookDispatcher(options);
}
