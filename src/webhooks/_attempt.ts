/**
 * One attempt of a due delivery: its webhook checked again, the request
 * signed and sent, and what came of it handed on: a final outcome to the
 * recorder, a retry rescheduled. Private to `src/webhooks`.
 *
 * @module
 */
import { DEFAULT_RETRY_AFTER_MAX_MS } from "../config/mod.ts";
import type { EgressPolicy } from "../egress/mod.ts";
import type { AttemptRecord, DeliveryOp, DeliveryRecord, OutgoingWebhook } from "../store/mod.ts";
import type { AutoDisable } from "./_auto_disable.ts";
import type { Claims } from "./_claim.ts";
import type { DeliveryLogOps } from "./_delivery_log_ops.ts";
import type {
  AttemptObservation,
  DispatcherConfig,
  UndeliverableReason,
} from "./_dispatch_types.ts";
import type { Pending } from "./_held.ts";
import type { Lifecycle } from "./_lifecycle.ts";
import type { OutcomeBatch } from "./_outcomes.ts";
import type { Problems } from "./_problems.ts";
import { leaveFanout, type Recorder } from "./_record.ts";
import type { Registrations } from "./_registrations.ts";
import type { AttemptRunner, AttemptScheduler } from "./_scheduler.ts";
import { type FetchLike, postWebhookTraced, type SendResult } from "./_send.ts";
import { nextRetryDelayMs, parseRetryAfter } from "./retry_policy.ts";
import { WebhookSigner } from "./signer.ts";

/** Options of {@linkcode Attempts}. */
export interface AttemptsOptions {
  config: DispatcherConfig;
  life: Lifecycle;
  registrations: Registrations;
  scheduler: AttemptScheduler;
  claims: Claims;
  recorder: Recorder;
  autoDisable: AutoDisable;
  problems: Problems;
  log: DeliveryLogOps;
  /** Where a retry's record is written (merged into few commits). */
  outcomes: OutcomeBatch;
  fetch: FetchLike;
  egress: EgressPolicy;
  now: () => number;
  random: () => number;
  onAttempt: ((attempt: AttemptObservation) => void) | undefined;
  onUndeliverable: ((reason: UndeliverableReason, count: number) => void) | undefined;
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

/** Makes the attempts the scheduler starts; `abort()` cuts those in flight short. */
export class Attempts implements AttemptRunner {
  #config: DispatcherConfig;
  #life: Lifecycle;
  #registrations: Registrations;
  #scheduler: AttemptScheduler;
  #claims: Claims;
  #recorder: Recorder;
  #autoDisable: AutoDisable;
  #problems: Problems;
  #log: DeliveryLogOps;
  #outcomes: OutcomeBatch;
  #fetch: FetchLike;
  #egress: EgressPolicy;
  #now: () => number;
  #random: () => number;
  #onAttempt: ((attempt: AttemptObservation) => void) | undefined;
  #onUndeliverable: ((reason: UndeliverableReason, count: number) => void) | undefined;
  #abort = new AbortController();

  constructor(options: AttemptsOptions) {
    this.#config = options.config;
    this.#life = options.life;
    this.#registrations = options.registrations;
    this.#scheduler = options.scheduler;
    this.#claims = options.claims;
    this.#recorder = options.recorder;
    this.#autoDisable = options.autoDisable;
    this.#problems = options.problems;
    this.#log = options.log;
    this.#outcomes = options.outcomes;
    this.#fetch = options.fetch;
    this.#egress = options.egress;
    this.#now = options.now;
    this.#random = options.random;
    this.#onAttempt = options.onAttempt;
    this.#onUndeliverable = options.onUndeliverable;
  }

  /** Aborts the requests in flight (stopping): their outcomes stay unknown, their records as they were. */
  abort(): void {
    this.#abort.abort();
  }

  async attempt(pending: Pending, release: () => void): Promise<void> {
    // Re-check the registration: a webhook removed meanwhile gets no further request.
    await this.#registrations.fresh();
    if (!this.#life.running) return;
    const { record } = pending;
    const hook = this.#registrations.get(record.webhook_id);
    if (!hook) {
      // Removed meanwhile: given up (nobody to send it to), counted.
      release();
      await this.#recorder.finish(pending, "dropped");
      this.#onUndeliverable?.("webhook_removed", 1);
      return;
    }
    if (hook.record.disabled) {
      // Kept for `dlq replay --webhook` once the endpoint is enabled again.
      release();
      await this.#recorder.finish(pending, "dead", undefined, hook, disabledReason(hook.record));
      return;
    }
    if (hook.record.secret_error !== undefined) {
      // Unsigned it would be refused, and sent with another secret it would be forged:
      // kept for `dlq replay --webhook` once this process has the right key.
      release();
      const reason =
        `Not sent: the signing secret cannot be decrypted (${hook.record.secret_error})`;
      await this.#recorder.finish(pending, "dead", undefined, hook, reason);
      this.#onUndeliverable?.("secret_unreadable", 1);
      this.#problems.note(
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
      await this.#recorder.finish(pending, "delivered", attempt, hook);
      if (hook.streak !== 0) {
        this.#life.background(this.#autoDisable.recordOutcome(hook, "delivered"));
      }
      return;
    }
    if (result.status === 410) {
      // The receiver says the endpoint is gone for good: stop sending to it now.
      const reason = "the receiver answered 410 Gone";
      await this.#recorder.finish(pending, "dead", attempt, hook, `${reason}: endpoint disabled`);
      this.#life.background(this.#autoDisable.disable(hook, "gone", reason));
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
      await this.#recorder.finish(pending, "dead", attempt, hook);
      this.#life.background(this.#autoDisable.recordOutcome(hook, "dead_lettered"));
      return;
    }
    // A retry: its record is written here, in this attempt's own await chain
    // (a call to write it elsewhere would add a turn before the attempt ends).
    const next = this.#now() + delay;
    const updated: DeliveryRecord = {
      ...record,
      attempt_count: attempt.attempt,
      next_attempt_at: next,
      attempts: [...record.attempts, attempt],
    };
    const ops: DeliveryOp[] = [
      { op: "put_delivery", delivery: updated },
      ...await this.#log.ops(updated, attempt, false),
    ];
    // Queued right after its list is computed (see Recorder.finish).
    const left = pending.fanout ? leaveFanout(pending) : undefined;
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
    if (!this.#life.running) return;
    // A retry due past the claim horizon goes back to the store, so the
    // window holds what is due soon: a failing webhook cannot fill it and
    // starve the others while its retries wait.
    if (next - this.#now() > this.#claims.horizonMs) this.#claims.evict(pending);
    else this.#scheduler.add(next, pending);
  }
}
