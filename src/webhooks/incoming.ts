/**
 * Incoming webhooks: named endpoints on the HTTP transport that validate a
 * payload, record it in the audit log, and route it to a handler tool from a
 * durable queue.
 *
 * Works on web-standard `Request`/`Response`, so the HTTP layer only mounts it.
 *
 * Several instances may share one store (PostgreSQL): each runs the jobs it
 * claimed in the store. A job accepted here is written claimed by this
 * router and runs here; jobs left in the store (a full queue, an instance
 * that stopped or died: its claims lapse) are claimed oldest first by
 * whichever instance has room. Claims are renewed while the jobs wait or
 * run, and given back on stop.
 *
 * The router composes the parts, each in its own module: the endpoints by
 * path (`_incoming_endpoints.ts`), the answer to a request
 * (`_incoming_intake.ts`, `?wait=true` in `_incoming_wait.ts`), the queue of
 * claimed jobs (`_incoming_queue.ts`, `_incoming_claims.ts`), the run of a
 * job (`_incoming_run.ts`) and the recording of its outcome
 * (`_incoming_completions.ts`, `_incoming_payload_log.ts`,
 * `_incoming_stats.ts`).
 *
 * @module
 */
import { getLog, lineSink } from "../log/mod.ts";
import type { Config } from "../config/mod.ts";
import type { Caller, Gateway } from "../gateway/mod.ts";
import type { IncomingWebhook, Store } from "../store/mod.ts";
import { PendingJobs } from "./_pending.ts";
import { traced } from "../tracing/mod.ts";
import { JobClaims } from "./_incoming_claims.ts";
import { CompletionWriter } from "./_incoming_completions.ts";
import { RetryDueTimes } from "./_incoming_due.ts";
import { IncomingEndpoints } from "./_incoming_endpoints.ts";
import {
  type IncomingAuditLog,
  IncomingIntake,
  type IncomingPayloadObservation,
} from "./_incoming_intake.ts";
import { HandlerPacing } from "./_incoming_pacing.ts";
import { PayloadLog } from "./_incoming_payload_log.ts";
import { JobQueue } from "./_incoming_queue.ts";
import { EndpointRateLimit } from "./_incoming_rate_limit.ts";
import { JobRunner } from "./_incoming_run.ts";
import { IncomingStats } from "./_incoming_stats.ts";
import { WaitingCalls } from "./_incoming_wait.ts";

export { DEDUPE_TTL_MS } from "./_incoming_dedupe.ts";
export type { IncomingAuditLog, IncomingPayloadObservation } from "./_incoming_intake.ts";

/** Options of {@linkcode IncomingRouter}. */
export interface IncomingRouterOptions {
  store: Store;
  gateway: Gateway;
  audit: IncomingAuditLog;
  config: Config;
  /** Log sink (stderr). @default the `incoming` logger */
  log?: (message: string) => void;
  /** Handler calls running at once. @default 16 */
  concurrency?: number;
  /**
   * Most jobs queued in memory (each claimed); past it, accepted jobs wait
   * in the store unclaimed, and are claimed oldest first once the queue has
   * drained (here or by another instance sharing the store).
   * @default 10000
   */
  maxQueuedJobs?: number;
  /** Clock in ms. @default Date.now */
  now?: () => number;
  /**
   * Who sent a `?wait=true` request to an endpoint without a secret, from
   * its `Authorization` header: the HTTP transport's own authentication
   * (administrator token, API keys, OAuth), throwing `UNAUTHORIZED` when it
   * does not authenticate. The handler then runs as that caller. Without
   * it, only `TOOLGATE_API_TOKEN` is accepted.
   */
  resolveCaller?: (authorization: string | undefined) => Promise<Caller>;
  /** Random numbers in [0, 1) choosing the jitter of retry delays. @default Math.random */
  random?: () => number;
  /**
   * This deployment's loop marker (the store's deployment id): a request
   * carrying it in `X-Toolgate-Loop` came from this deployment itself (a
   * webhook delivery or an `http_request`) and is refused with
   * `508 LOOP_DETECTED` before anything else is checked, recorded or run.
   * @default none
   */
  loopMarker?: string;
  /** Told how each payload was answered (metrics). @default none */
  onPayload?: (payload: IncomingPayloadObservation) => void;
}

/**
 * Shortest life of a claim on a job without renewal (as the dispatcher's:
 * ten polls, at least this); claims are renewed every quarter of it.
 */
const CLAIM_MIN_TTL_MS = 5000;

/** How often a router sharing its store with other instances counts the waiting jobs (ms). */
const COUNT_EVERY_MS = 1000;

/** Serves every registered incoming endpoint. */
export class IncomingRouter {
  #store: Store;
  #config: Config;
  #log: (message: string) => void;
  #now: () => number;
  /** Whether other instances run jobs of the same store (they leave jobs to claim). */
  #shared: boolean;
  #ticking: Promise<void> | null = null;
  /** Jobs waiting for their handler, per endpoint: the queue's bounds. */
  #pendingJobs: PendingJobs;
  /** When the waiting jobs were last counted in the store (epoch ms). */
  #countedAt = -Infinity;
  #timer: ReturnType<typeof setInterval> | undefined;
  #endpoints: IncomingEndpoints;
  #stats: IncomingStats;
  #payloadLog: PayloadLog;
  #dueTimes = new RetryDueTimes();
  #claims: JobClaims;
  #completions: CompletionWriter;
  #jobs: JobQueue;
  #intake: IncomingIntake;

  /** @param options Store, gateway, audit log and configuration. */
  constructor(options: IncomingRouterOptions) {
    const {
      log = lineSink(getLog("incoming")),
      concurrency = 16,
      maxQueuedJobs = 10_000,
      now = Date.now,
      random = Math.random,
    } = options;
    const { store, gateway, config } = options;
    this.#store = store;
    this.#config = config;
    this.#log = log;
    this.#now = now;
    this.#shared = store.incoming.sharedClaims;
    this.#pendingJobs = new PendingJobs(
      config.incoming.max_pending_per_endpoint,
      config.incoming.max_pending,
      now,
    );
    const endpoints = this.#endpoints = new IncomingEndpoints(store, log);
    const stats = this.#stats = new IncomingStats(store, log);
    const payloadLog = this.#payloadLog = new PayloadLog(store, log, now);
    const claims = this.#claims = new JobClaims(
      store,
      now,
      Math.max(CLAIM_MIN_TTL_MS, config.webhooks.poll_ms * 10),
    );
    const completions = this.#completions = new CompletionWriter({
      store,
      log,
      pendingJobs: this.#pendingJobs,
      claims,
      payloadLog,
      dueTimes: this.#dueTimes,
    });
    const runner = new JobRunner({
      store,
      gateway,
      config,
      log,
      now,
      random,
      claims,
      pacing: new HandlerPacing(log, now),
      completions,
      endpoints,
    });
    const jobs = this.#jobs = new JobQueue({
      store,
      log,
      now,
      concurrency,
      maxQueued: maxQueuedJobs,
      claims,
      runner,
    });
    this.#intake = new IncomingIntake({
      store,
      audit: options.audit,
      config,
      log,
      now,
      loopMarker: options.loopMarker,
      onPayload: options.onPayload,
      pendingJobs: this.#pendingJobs,
      endpoints,
      rateLimit: new EndpointRateLimit(now),
      stats,
      payloadLog,
      claims,
      jobs,
      waiting: new WaitingCalls({
        gateway,
        config,
        now,
        resolveCaller: options.resolveCaller,
        endpoints,
        stats,
        payloadLog,
      }),
    });
  }

  /**
   * Loads the endpoints, claims jobs left by an earlier process, and starts
   * polling (every `poll_ms`) for registration changes (CLI edits), for
   * renewing its claims and, on a shared store, for jobs to claim.
   */
  async start(): Promise<void> {
    await this.refresh();
    await this.#store.incoming.sweepOrphanBodies();
    await this.#countPending();
    this.#jobs.markOverflow();
    await this.#jobs.reload();
    this.#timer = setInterval(() => {
      this.#ticking ??= this.#tick().finally(() => this.#ticking = null);
    }, this.#config.webhooks.poll_ms);
  }

  /** One poll: registrations, counters, claims. */
  async #tick(): Promise<void> {
    await Promise.all([
      this.refresh().catch((e) => this.#log(`incoming: refresh failed: ${(e as Error).message}`)),
      this.#stats.flush().catch((e) =>
        this.#log(`incoming: stats flush failed: ${(e as Error).message}`)
      ),
      this.#payloadLog.flush(),
    ]);
    const jobs = this.#jobs;
    if (jobs.stopped) return;
    try {
      // Those released and not completed wait in the store again.
      if (await this.#claims.maintain(jobs.holding(), jobs.queuedIds)) jobs.markOverflow();
    } catch (error) {
      this.#log(`incoming: cannot renew claims: ${(error as Error).message}`);
    }
    jobs.retryReloads();
    // Other instances accept and finish jobs too: count what waits now and then.
    if (this.#shared && this.#now() - this.#countedAt >= COUNT_EVERY_MS) {
      await this.#countPending().catch((e) =>
        this.#log(`incoming: cannot count waiting jobs: ${(e as Error).message}`)
      );
    }
    // Other instances leave jobs to claim: released, lapsed, or past their queue.
    if (this.#shared) jobs.markOverflow();
    // Retries fall due; while idle, look for any due job (replayed failed
    // jobs, retries scheduled by an earlier process).
    if (this.#dueTimes.due(this.#now()) || jobs.idleNow()) jobs.markOverflow();
    jobs.pump();
  }

  /** Counts the jobs waiting in the store, for the queue's bounds. */
  async #countPending(): Promise<void> {
    this.#countedAt = this.#now();
    this.#pendingJobs.replace(await this.#store.incoming.pendingCounts());
  }

  /** Accepted payloads waiting for their handler: one endpoint's, or all. */
  waiting(endpointId?: string): number {
    return this.#pendingJobs.waiting(endpointId);
  }

  /** Reloads the endpoints when the registrations changed. */
  refresh(): Promise<void> {
    return this.#endpoints.refresh();
  }

  /** The endpoint registered at `path`, if any. */
  match(path: string): IncomingWebhook | undefined {
    return this.#endpoints.match(path);
  }

  /** The registered endpoints. */
  endpoints(): IncomingWebhook[] {
    return this.#endpoints.list();
  }

  /**
   * Handles a request to an endpoint: its own loop marker 508, method 405,
   * `?wait=true` without the API token on an endpoint without a secret 401,
   * size 413, content type 415 (JSON or form-encoded), signature 401 (the
   * endpoint's scheme, see `incoming_verify.ts`), JSON 400, rate limit 429;
   * then records and accepts (202), or with `?wait=true` runs the handler and
   * answers its result.
   */
  handle(request: Request, endpoint: IncomingWebhook): Promise<Response> {
    // A span per payload; its handler call (now or from the queue) is its child.
    return traced(`incoming_webhook ${endpoint.name}`, {
      attributes: {
        "toolgate.incoming.endpoint": endpoint.name,
        "toolgate.incoming.endpoint_id": endpoint.id,
      },
    }, async (span) => {
      const response = await this.#intake.answer(request, endpoint);
      span.set({ "http.response.status_code": response.status });
      if (response.status >= 400) span.fail(String(response.status));
      return response;
    });
  }

  /**
   * Looks for due jobs in the store now (a replay queued some), not on the
   * next poll, and counts the waiting jobs again (replayed jobs wait too).
   */
  wake(): void {
    this.#jobs.markOverflow();
    this.#jobs.pump();
    this.#countPending().catch((e) =>
      this.#log(`incoming: cannot count waiting jobs: ${(e as Error).message}`)
    );
  }

  /** Resolves when no job is queued or running (tests, shutdown). */
  idle(): Promise<void> {
    return this.#jobs.idle();
  }

  /**
   * Stops polling and new jobs, waits for running handler calls, flushes
   * counters, and gives back the claims on jobs still queued (another
   * instance takes them at once, this one on its next start).
   */
  async stop(): Promise<void> {
    this.#jobs.stop();
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#ticking;
    await this.#jobs.reloading;
    await Promise.all(this.#jobs.runs());
    await this.#completions.writing;
    await this.#stats.flush();
    await this.#payloadLog.flush();
    await this.#store.incoming.releaseClaims(this.#claims.owner).catch((e) =>
      this.#log(`incoming: cannot release claims: ${(e as Error).message}`)
    );
  }
}
