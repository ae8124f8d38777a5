/**
 * Running one queued job: its handler call through the gateway, and what a
 * failed call becomes (a retry on the schedule, a slot after the handler's
 * rate limit, or a failed job). Private to `src/webhooks`.
 *
 * @module
 */
import type { Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Gateway } from "../gateway/mod.ts";
import type { IncomingAttempt, IncomingJob, Store } from "../store/mod.ts";
import { MAX_RETRIES, retryDelayMs } from "./retry_policy.ts";
import { attemptOf, INPUT_ERROR_CODES } from "./_incoming_attempts.ts";
import { parseObject } from "./_incoming_body.ts";
import type { JobClaims } from "./_incoming_claims.ts";
import type { CompletionWriter, JobFailure } from "./_incoming_completions.ts";
import type { IncomingEndpoints } from "./_incoming_endpoints.ts";
import { type HandlerPacing, rateLimited, rateLimitWait } from "./_incoming_pacing.ts";

/** A queued job, with its payload when this process accepted it. */
export interface QueuedJob {
  job: IncomingJob;
  payload?: Record<string, unknown>;
}

/** What {@linkcode JobRunner} works with. */
export interface JobRunnerOptions {
  store: Store;
  gateway: Gateway;
  config: Config;
  log: (message: string) => void;
  now: () => number;
  random: () => number;
  claims: JobClaims;
  pacing: HandlerPacing;
  completions: CompletionWriter;
  endpoints: IncomingEndpoints;
}

/** Runs queued jobs' handler calls and hands their outcomes to the completion writer. */
export class JobRunner {
  #store: Store;
  #gateway: Gateway;
  #config: Config;
  #log: (message: string) => void;
  #now: () => number;
  #random: () => number;
  #claims: JobClaims;
  #pacing: HandlerPacing;
  #completions: CompletionWriter;
  #endpoints: IncomingEndpoints;

  /** @param options Store, gateway, configuration and the router's parts a run uses. */
  constructor(options: JobRunnerOptions) {
    this.#store = options.store;
    this.#gateway = options.gateway;
    this.#config = options.config;
    this.#log = options.log;
    this.#now = options.now;
    this.#random = options.random;
    this.#claims = options.claims;
    this.#pacing = options.pacing;
    this.#completions = options.completions;
    this.#endpoints = options.endpoints;
  }

  /** Runs a job's handler call; resolves once its outcome was written. */
  async run({ job, payload }: QueuedJob): Promise<void> {
    let failure: JobFailure | undefined;
    try {
      let args = payload;
      if (!args) {
        const body = await this.#store.incoming.readBody(job);
        // Completed meanwhile (by an earlier claimer): nothing left to do.
        if (body === null) {
          this.#claims.release(job.id);
          return;
        }
        args = parseObject(body);
      }
      // The handler's rate limit is known to refuse it now: wait for a slot, no call made.
      // A job that waited for its time (its slot, or a retry) calls.
      const slot = job.next_attempt_at === undefined
        ? this.#pacing.slotFor(job.handler)
        : undefined;
      if (slot !== undefined) {
        failure = {
          attempt: rateLimited(job.handler, slot, this.#now()),
          retry_at: slot,
          putOff: true,
        };
      } else {
        await this.#gateway.call(job.handler, args, {
          sessionId: job.id,
          source: "webhook",
          ...(job.traceparent !== undefined ? { trace: job.traceparent } : {}),
        });
      }
    } catch (error) {
      const now = this.#now();
      const attempt = attemptOf(error, now);
      const limited = rateLimitWait(error);
      if (limited !== undefined) {
        // Refused by the tool's rate limit: not a failure. The job waits for its own slot,
        // spaced by the limit, without using up a retry.
        failure = { attempt, retry_at: this.#pacing.pace(job.handler, now, limited), putOff: true };
      } else {
        failure = this.#failed(job, error, attempt, now);
      }
    }
    await this.#completions.record(job, failure);
  }

  /** The failure of a handler call: a retry on the schedule, or a failed job. */
  #failed(
    job: IncomingJob,
    error: unknown,
    attempt: IncomingAttempt,
    now: number,
  ): JobFailure {
    // Calls made so far, this one included; retry n waits 2^(n-1) × the base.
    const calls = (job.attempts?.length ?? 0) + 1;
    const last = INPUT_ERROR_CODES.has(attempt.code) || calls > MAX_RETRIES;
    const failure = last ? { attempt } : {
      attempt,
      retry_at: now + retryDelayMs(calls, this.#config.incoming.retry_base_ms, this.#random()),
    };
    this.#log(
      `incoming job ${job.id}: handler ${job.handler} failed: ${attempt.code}` +
        (failure.retry_at === undefined
          ? ` (attempt ${calls}); kept as a failed job: toolgate incoming failed show ${job.id}`
          : ` (attempt ${calls}); retry at ${new Date(failure.retry_at).toISOString()}`),
    );
    if (error instanceof GatewayError && attempt.code === "TOOL_INPUT_INVALID") {
      this.#endpoints.reportBadMapping(job.endpoint_id, job.handler, error);
    }
    return failure;
  }
}
