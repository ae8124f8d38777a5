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
 * This module composes the parts, one job each, along the delivery path:
 * the intake writes an event's outbox records (`_intake.ts`) against the
 * webhooks last read (`_registrations.ts`); claims bring due deliveries into
 * the window of held ones (`_claim.ts`, `_held.ts`; lost bodies are
 * dead-lettered by `_orphans.ts`); the scheduler starts attempts when due and
 * a slot is free (`_scheduler.ts`); an attempt sends one request
 * (`_attempt.ts`, over `_send.ts`); the recorder writes its final outcome
 * (`_record.ts`, with `_delivery_log_ops.ts`, `_auto_disable.ts` and
 * `_dlq_mirror_writer.ts`). What it owns itself is its start, its poll and
 * its stop.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { EventBus, EventEnvelope, EventType } from "../events/mod.ts";
import type { DeliveryWriter, Store } from "../store/mod.ts";
import { EgressPolicy } from "../egress/mod.ts";
import { Attempts } from "./_attempt.ts";
import { AutoDisable } from "./_auto_disable.ts";
import { Claims } from "./_claim.ts";
import { DeliveryLogOps } from "./_delivery_log_ops.ts";
import type {
  AttemptObservation,
  DispatcherConfig,
  UndeliverableReason,
} from "./_dispatch_types.ts";
import { DlqMirrorWriter } from "./_dlq_mirror_writer.ts";
import { HeldDeliveries } from "./_held.ts";
import { EventIntake, type StagedDeliveries } from "./_intake.ts";
import { Lifecycle } from "./_lifecycle.ts";
import { type OrphanReport, Orphans } from "./_orphans.ts";
import { OutcomeBatch } from "./_outcomes.ts";
import { type DeliveryProblem, Problems } from "./_problems.ts";
import { Recorder } from "./_record.ts";
import { type DisabledWebhook, Registrations } from "./_registrations.ts";
import { AttemptScheduler } from "./_scheduler.ts";
import type { FetchLike } from "./_send.ts";

export type {
  AttemptObservation,
  DispatcherConfig,
  UndeliverableReason,
} from "./_dispatch_types.ts";
export type { StagedDeliveries } from "./_intake.ts";
export type { OrphanReport } from "./_orphans.ts";
export type { DeliveryProblem } from "./_problems.ts";
export type { DisabledWebhook } from "./_registrations.ts";

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

/** Composes the parts of the delivery path and owns the dispatcher's start, poll and stop. */
class WebhookDispatcher implements Dispatcher {
  #store: Store;
  #bus: EventBus;
  #config: DispatcherConfig;
  #stopTimeoutMs: number;
  #onError: (error: unknown) => void;
  #recordOnly: boolean;
  #now: () => number;
  #writer: DeliveryWriter;
  /** Attempt outcomes: nobody waits on them, so they are committed in fewer, larger commits. */
  #outcomes: OutcomeBatch;

  #life: Lifecycle;
  #problems: Problems;
  #mirror: DlqMirrorWriter;
  #registrations: Registrations;
  #intake: EventIntake;
  #held: HeldDeliveries;
  #claims: Claims;
  #orphans: Orphans;
  #scheduler: AttemptScheduler;
  #attempts: Attempts;

  #stopped: Promise<void> | null = null;
  #unsubscribe: (() => void) | null = null;
  #unsubscribeChanges: (() => void) | null = null;
  #pollTimer: ReturnType<typeof setTimeout> | undefined;
  #pollTask: Promise<void> | null = null;

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
    this.#config = config;
    this.#stopTimeoutMs = stopTimeoutMs;
    this.#onError = onError;
    this.#now = now;
    const egress = options.egress ?? new EgressPolicy();
    const freshMs = Math.min(
      MAX_REGISTRATION_AGE_MS,
      config.webhooks.poll_ms,
      config.webhooks.retry_base_ms / 2,
    );
    this.#writer = store.deliveries.writer();
    this.#outcomes = new OutcomeBatch({
      writer: store.deliveries.writer(),
      running: () => this.#scheduler.running,
      lingerMs: OUTCOME_LINGER_MS,
    });
    this.#recordOnly = mode === "record";
    const horizonMs = options.claimHorizonMs ?? Math.max(config.webhooks.poll_ms * 4, 1000);
    if (!(horizonMs > 0)) {
      throw new RangeError(`Invalid claimHorizonMs: ${horizonMs} is not a positive number`);
    }

    const life = this.#life = new Lifecycle(
      onError,
      // Nothing held, running or due in the store (the last claim came back short).
      () =>
        this.#held.size === 0 && this.#scheduler.running === 0 && !this.#claims.filling &&
        (this.#claims.drained || !this.#claims.sending),
    );
    const problems = this.#problems = new Problems(now);
    const mirror = this.#mirror = new DlqMirrorWriter(store, config.dataDir, life);
    const log = new DeliveryLogOps(store, life);
    const registrations = this.#registrations = new Registrations({
      store,
      life,
      freshMs,
      onError,
      onRemoved: (webhookId) => log.forget(webhookId),
    });
    const scheduler = this.#scheduler = new AttemptScheduler({
      life,
      concurrency,
      perWebhook: perWebhookConcurrency,
      config,
      now,
      onError,
    });
    const held = this.#held = new HeldDeliveries(windowSize, scheduler, now);
    const orphans = this.#orphans = new Orphans({
      store,
      writer: this.#writer,
      registrations,
      life,
      problems,
      mirror,
      now,
      onError,
      onDeadLetter: options.onDeadLetter,
      onUndeliverable: options.onUndeliverable,
    });
    const claims = this.#claims = new Claims({
      store,
      life,
      held,
      scheduler,
      orphans,
      mirror,
      pollMs: config.webhooks.poll_ms,
      horizonMs,
      recordOnly: this.#recordOnly,
      now,
      onError,
    });
    const recorder = new Recorder({
      store,
      life,
      held,
      claims,
      outcomes: this.#outcomes,
      log,
      mirror,
      now,
      onError,
      onDeadLetter: options.onDeadLetter,
    });
    this.#attempts = new Attempts({
      config,
      life,
      registrations,
      scheduler,
      claims,
      recorder,
      autoDisable: new AutoDisable(store, config, now, onError),
      problems,
      log,
      outcomes: this.#outcomes,
      fetch,
      egress,
      now,
      random,
      onAttempt: options.onAttempt,
      onUndeliverable: options.onUndeliverable,
    });
    scheduler.serve(this.#attempts);
    this.#intake = new EventIntake({
      store,
      writer: this.#writer,
      life,
      registrations,
      claims,
      held,
      disabled: new Set(config.events.disabled),
      now,
    });
  }

  disabledWebhooks(): DisabledWebhook[] {
    return this.#registrations.disabled();
  }

  problems(): DeliveryProblem[] {
    return this.#problems.list();
  }

  whenChecked(): Promise<OrphanReport> {
    return this.#orphans.whenChecked();
  }

  get pending(): number {
    return this.#held.size;
  }

  stage(events: readonly EventEnvelope<EventType>[]): StagedDeliveries | undefined {
    return this.#intake.stage(events);
  }

  async start(): Promise<void> {
    const life = this.#life;
    if (life.state !== "new") {
      throw new Error(`Cannot start the dispatcher: it is ${life.state}`);
    }
    life.enter("running");
    await this.#registrations.refresh();
    this.#unsubscribe = this.#bus.subscribe((event) => this.#intake.onEvent(event));
    if (this.#recordOnly) return;
    const claims = this.#claims;
    // Where the store pushes changes, another instance's registrations and
    // queued deliveries are picked up at once rather than at the next poll.
    this.#unsubscribeChanges = this.#store.changes.subscribe((name) => {
      if (!life.running) return;
      if (name === "registrations") {
        life.background(this.#registrations.refresh());
      } else if (claims.sending) {
        claims.undrain();
        life.background(claims.fill());
      }
    });
    if (!claims.shared) claims.lead(await claims.claimLease());
    if (claims.sending) {
      // Off the path to serving: a restart listens before its backlog is claimed,
      // after the start-up check has dead-lettered what a lost body left.
      const checked = this.#orphans.check();
      life.background(checked.finally(() => claims.fill()));
      // A crash may have come between a DLQ change and its mirror write.
      life.background(this.#mirror.sync());
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

  stop(): Promise<void> {
    if (this.#life.state === "new") {
      this.#life.enter("stopped");
      return Promise.resolve();
    }
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  whenIdle(): Promise<void> {
    return this.#life.whenIdle();
  }

  async #shutdown(): Promise<void> {
    const life = this.#life;
    const claims = this.#claims;
    life.enter("stopping");
    this.#unsubscribe?.();
    this.#unsubscribeChanges?.();
    clearTimeout(this.#pollTimer);
    this.#scheduler.clear();
    await this.#pollTask;
    const inFlight = this.#scheduler.inFlight();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finished = await Promise.race([
      inFlight.then(() => true),
      new Promise<false>((resolve) =>
        timer = setTimeout(() => resolve(false), this.#stopTimeoutMs)
      ),
    ]);
    clearTimeout(timer);
    if (!finished) {
      this.#attempts.abort();
      await inFlight;
    }
    while (life.busy) await life.tasks();
    await this.#writer.flush();
    await this.#outcomes.flush();
    await claims.filling;
    // Another instance may take what this one held at once, instead of after the claims lapse.
    if (this.#held.size) await claims.releaseAll();
    if (claims.leader) await claims.releaseLease();
    claims.lead(false);
    life.enter("stopped");
    this.#held.clear();
    life.checkIdle();
  }

  #armPoll(): void {
    if (!this.#life.running) return;
    this.#pollTimer = setTimeout(() => {
      this.#pollTask = this.#poll().finally(() => {
        this.#pollTask = null;
        this.#armPoll();
      });
    }, this.#config.webhooks.poll_ms);
  }

  async #poll(): Promise<void> {
    const claims = this.#claims;
    try {
      if (!claims.shared && !this.#recordOnly) await claims.renewLease();
      await this.#registrations.refresh();
      if (!claims.sending || !this.#life.running) return;
      // Claims last leaseTtlMs: renewed a few times per life, not on every poll.
      const now = this.#now();
      if (this.#held.size && claims.claimsStale(now)) {
        await claims.renewClaims(now);
        claims.renewed(now);
      }
      await claims.fill();
    } catch (error) {
      this.#onError(error);
    }
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
