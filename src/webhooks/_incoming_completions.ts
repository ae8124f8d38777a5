/**
 * The recording of finished jobs: their completions (or failed attempts)
 * written together in shared commits, and noted in the payload log.
 * Private to `src/webhooks`.
 *
 * @module
 */
import type { IncomingFailure, IncomingJob, Store } from "../store/mod.ts";
import type { PendingJobs } from "./_pending.ts";
import type { JobClaims } from "./_incoming_claims.ts";
import type { PayloadLog } from "./_incoming_payload_log.ts";
import type { RetryDueTimes } from "./_incoming_due.ts";

/** Completions written per commit at most (the store groups them by tens). */
const COMPLETIONS_PER_FLUSH = 100;

/** The failed call: the job waits for `retry_at`, or without it becomes a failed job. */
export type JobFailure = Omit<IncomingFailure, "job"> & {
  /** Put off by the handler's rate limit: waits for `retry_at`, `attempt` is not recorded. */
  putOff?: boolean;
};

/** A finished job waiting for its completion (or its failed attempt) to be written. */
interface Completion {
  job: IncomingJob;
  /** The failed call: the job waits for `retry_at`, or without it becomes a failed job. */
  failure?: JobFailure;
  settle(): void;
}

/** What {@linkcode CompletionWriter} works with. */
export interface CompletionWriterOptions {
  store: Store;
  log: (message: string) => void;
  pendingJobs: PendingJobs;
  claims: JobClaims;
  payloadLog: PayloadLog;
  dueTimes: RetryDueTimes;
}

/** Writes the outcomes of finished jobs, those finishing together in one commit. */
export class CompletionWriter {
  #store: Store;
  #log: (message: string) => void;
  #pendingJobs: PendingJobs;
  #claims: JobClaims;
  #payloadLog: PayloadLog;
  #dueTimes: RetryDueTimes;
  #completions: Completion[] = [];
  #completing: Promise<void> | null = null;

  /** @param options Store, log and the router's parts an outcome updates. */
  constructor(options: CompletionWriterOptions) {
    this.#store = options.store;
    this.#log = options.log;
    this.#pendingJobs = options.pendingJobs;
    this.#claims = options.claims;
    this.#payloadLog = options.payloadLog;
    this.#dueTimes = options.dueTimes;
  }

  /** The writing in progress, if any (shutdown waits for it). */
  get writing(): Promise<void> | null {
    return this.#completing;
  }

  /**
   * Records a finished job: done without `failure`.
   *
   * @returns A promise settled once the outcome was written (or could not be).
   */
  record(job: IncomingJob, failure: JobFailure | undefined): Promise<void> {
    return new Promise<void>((settle) => {
      this.#completions.push({ job, failure, settle });
      this.#completing ??= this.#flushCompletions();
    });
  }

  /**
   * Writes the completions of finished jobs, those waiting together in
   * shared commits, until none is left.
   */
  async #flushCompletions(): Promise<void> {
    // Let the jobs finishing in this turn join the first commit.
    await Promise.resolve();
    try {
      while (this.#completions.length) {
        const batch = this.#completions.splice(0, COMPLETIONS_PER_FLUSH);
        try {
          const done = batch.filter(({ failure }) => !failure);
          const failed: IncomingFailure[] = batch.flatMap(({ job, failure }) =>
            !failure
              ? []
              : failure.putOff
              ? [{ job, retry_at: failure.retry_at }]
              : [{ job, attempt: failure.attempt, retry_at: failure.retry_at }]
          );
          const [removed, changed] = await Promise.all([
            done.length
              ? this.#store.incoming.complete(done.map(({ job }) => ({ job, failed: false })))
              : [],
            failed.length ? this.#store.incoming.fail(failed) : [],
          ]);
          // Done, or failed for good: no longer waiting (a retry still waits).
          removed.forEach((gone, i) => {
            if (gone) this.#pendingJobs.completed(done[i].job.endpoint_id);
          });
          changed.forEach((found, i) => {
            if (found && failed[i].retry_at === undefined) {
              this.#pendingJobs.completed(failed[i].job.endpoint_id);
            }
          });
          for (const { job, failure } of batch) this.#noteOutcome(job, failure);
        } catch (error) {
          const ids = batch.map(({ job }) => job.id);
          this.#log(
            `incoming jobs ${ids.join(", ")}: cannot mark completed: ${
              (error as Error).message
            }; they will run again`,
          );
          // Still in the store: claimable again once their claims are given back.
          for (const id of ids) this.#claims.release(id);
        }
        for (const { settle } of batch) settle();
      }
    } finally {
      this.#completing = null;
    }
  }

  /** Notes a finished call's outcome in the payload log; a retry's due time is watched. */
  #noteOutcome(job: IncomingJob, failure: JobFailure | undefined): void {
    // A call put off by the rate limit is not counted.
    const calls = (job.attempts?.length ?? 0) + (failure?.putOff ? 0 : 1);
    const base = { handler: job.handler, attempts: calls };
    if (!failure) {
      this.#payloadLog.note(job.endpoint_id, job.id, job.received_at, { status: "ok", ...base });
      return;
    }
    const { at: _at, ...error } = failure.attempt!;
    if (failure.retry_at === undefined) {
      this.#payloadLog.note(job.endpoint_id, job.id, job.received_at, {
        status: "failed",
        ...base,
        ...error,
      });
      return;
    }
    this.#dueTimes.watch(failure.retry_at);
    this.#payloadLog.note(job.endpoint_id, job.id, job.received_at, {
      status: "retrying",
      ...base,
      ...error,
      next_attempt_at: new Date(failure.retry_at).toISOString(),
    });
  }
}
