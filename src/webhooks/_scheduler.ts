/**
 * When attempts start: held deliveries wait for their due time, then for a
 * slot within the concurrency limits (in all and per webhook). Private to
 * `src/webhooks`.
 *
 * @module
 */
import type { DispatcherConfig } from "./_dispatch_types.ts";
import type { AttemptQueue, Pending } from "./_held.ts";
import type { Lifecycle } from "./_lifecycle.ts";
import { Schedule } from "./_schedule.ts";

/** Makes the attempt of a delivery; `release` frees its slot once the request is done. */
export interface AttemptRunner {
  attempt(pending: Pending, release: () => void): Promise<void>;
}

/** Options of {@linkcode AttemptScheduler}. */
export interface AttemptSchedulerOptions {
  life: Lifecycle;
  /** Attempts in flight at once. */
  concurrency: number;
  /** Attempts in flight at once to one webhook. */
  perWebhook: number;
  /** `webhooks.retry_base_ms`: the delay of an attempt again after it failed unrecorded. */
  config: DispatcherConfig;
  /** Clock in epoch milliseconds. */
  now: () => number;
  onError: (error: unknown) => void;
}

/** The schedule of held deliveries, the ready queue and the attempts in flight. */
export class AttemptScheduler implements AttemptQueue {
  #life: Lifecycle;
  #concurrency: number;
  #perWebhook: number;
  #config: DispatcherConfig;
  #now: () => number;
  #onError: (error: unknown) => void;
  #runner: AttemptRunner | undefined;
  #schedule: Schedule<Pending>;
  #ready: Pending[] = [];
  #readyHead = 0;
  #inFlight = 0;
  /** Attempts in flight per webhook id. */
  #hookInFlight = new Map<string, number>();
  /** Ready deliveries waiting for a slot of their webhook. */
  #parked = new Map<string, Pending[]>();
  #attempts = new Set<Promise<void>>();

  constructor(options: AttemptSchedulerOptions) {
    this.#life = options.life;
    this.#concurrency = options.concurrency;
    this.#perWebhook = options.perWebhook;
    this.#config = options.config;
    this.#now = options.now;
    this.#onError = options.onError;
    this.#schedule = new Schedule((due) => this.enqueue(due), options.now);
  }

  /** Sets who makes the attempts (once, before the first delivery is adopted). */
  serve(runner: AttemptRunner): void {
    this.#runner = runner;
  }

  /** Attempts running, those waiting for their outcome's record included. */
  get running(): number {
    return this.#attempts.size;
  }

  /** Schedules the attempt of `pending` at epoch milliseconds `at`. */
  add(at: number, pending: Pending): void {
    this.#schedule.add(at, pending);
  }

  /** Webhooks with a full queue in memory: claiming more of theirs would crowd the window. */
  saturated(): string[] {
    const out: string[] = [];
    for (const [id, parked] of this.#parked) if (parked.length >= this.#perWebhook) out.push(id);
    return out;
  }

  /** Drops what waits (scheduled, ready or parked); attempts in flight go on. */
  clear(): void {
    this.#schedule.clear();
    this.#ready = [];
    this.#readyHead = 0;
    this.#parked.clear();
  }

  /** Resolves once the attempts in flight now have finished. */
  inFlight(): Promise<void[]> {
    return Promise.all(this.#attempts);
  }

  enqueue(items: Pending[]): void {
    if (!this.#life.running) return;
    for (const item of items) this.#ready.push(item);
    this.#pump();
  }

  #pump(): void {
    while (
      this.#life.running && this.#inFlight < this.#concurrency &&
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
        this.#life.checkIdle();
      });
      this.#attempts.add(run);
    }
  }

  async #run(pending: Pending, release: () => void): Promise<void> {
    try {
      await this.#runner!.attempt(pending, release);
    } catch (error) {
      this.#onError(error);
      // Not recorded: try again later with the same attempt number (at-least-once).
      if (this.#life.running) {
        this.#schedule.add(this.#now() + this.#config.webhooks.retry_base_ms, pending);
      }
    }
  }
}
