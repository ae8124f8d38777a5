/**
 * The in-memory queue of the jobs a router holds claims on: topped up from
 * the store oldest first, drained by at most `concurrency` handler calls at
 * once. Private to `src/webhooks`.
 *
 * @module
 */
import type { Store } from "../store/mod.ts";
import type { JobClaims } from "./_incoming_claims.ts";
import type { JobRunner, QueuedJob } from "./_incoming_run.ts";

/**
 * Most payload bytes the queue keeps in memory for jobs accepted by this
 * process (handlers then skip reading them back); past it, jobs read their
 * payload from the store when they run.
 */
const HELD_PAYLOAD_MAX_BYTES = 16 * 1024 * 1024;

/** What {@linkcode JobQueue} works with. */
export interface JobQueueOptions {
  store: Store;
  log: (message: string) => void;
  now: () => number;
  /** Handler calls running at once. */
  concurrency: number;
  /** Most jobs queued in memory (each claimed). */
  maxQueued: number;
  claims: JobClaims;
  runner: JobRunner;
}

/** The jobs claimed by one router, queued and running. */
export class JobQueue {
  #store: Store;
  #log: (message: string) => void;
  #now: () => number;
  #concurrency: number;
  #maxQueued: number;
  #claims: JobClaims;
  #runner: JobRunner;
  /** Queue places promised to claims in flight: jobs being accepted, a reload's page. */
  #reserved = 0;
  /** Jobs whose handler call (and the writing of its outcome) runs here now. */
  #started = new Set<string>();
  /** Started jobs claimed again meanwhile: their claims go back once the call is done. */
  #reclaimed = new Set<string>();
  /** The last reload failed: the next waits for the poll. */
  #reloadFailed = false;
  #queue: QueuedJob[] = [];
  #queued = new Set<string>();
  /** Payload bytes held by queued jobs. */
  #heldBytes = 0;
  /** Jobs may be waiting in the store only (the queue was full). */
  #overflow = false;
  #reloading: Promise<void> | null = null;
  #running = new Set<Promise<void>>();
  #stopped = false;

  /** @param options Store, limits, the router's claims and the runner of jobs. */
  constructor(options: JobQueueOptions) {
    this.#store = options.store;
    this.#log = options.log;
    this.#now = options.now;
    this.#concurrency = options.concurrency;
    this.#maxQueued = options.maxQueued;
    this.#claims = options.claims;
    this.#runner = options.runner;
  }

  /** Whether the queue stopped taking and running jobs. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** The claim in flight, if any (shutdown waits for it). */
  get reloading(): Promise<void> | null {
    return this.#reloading;
  }

  /** Jobs queued or running here (their claims are not given back). */
  get queuedIds(): ReadonlySet<string> {
    return this.#queued;
  }

  /** Whether claims are held: jobs queued here, or places promised to claims in flight. */
  holding(): boolean {
    return this.#queued.size > 0 || this.#reserved > 0;
  }

  /** The handler calls running now. */
  runs(): Promise<void>[] {
    return [...this.#running];
  }

  /**
   * A claim for a job being accepted, with its place in the queue, when
   * there is room; else none (the job is written unclaimed).
   */
  reserve(): { owner: string; until: number } | undefined {
    if (this.#queue.length + this.#reserved >= this.#maxQueued) return undefined;
    const claim = this.#claims.claim();
    this.#reserved++;
    return claim;
  }

  /** Frees the place a {@linkcode reserve} promised. */
  unreserve(): void {
    this.#reserved--;
  }

  /** Jobs may wait in the store: the next drain (or poll) claims them. */
  markOverflow(): void {
    this.#overflow = true;
  }

  /** A failed reload may be tried again (once per poll). */
  retryReloads(): void {
    this.#reloadFailed = false;
  }

  /** Stops taking and running jobs. */
  stop(): void {
    this.#stopped = true;
  }

  /** Queues a job claimed by this router (room was reserved for it). */
  enqueue(queued: QueuedJob): void {
    const { job } = queued;
    if (this.#queued.has(job.id)) {
      // Claimed again while its last call's outcome was being written (a
      // retry due at once): nothing here runs it again, so its claim goes
      // back once that call is done, and it is claimed afresh when due.
      // Otherwise its claim lapsed while it waited here: the queued copy runs.
      if (this.#started.has(job.id)) this.#reclaimed.add(job.id);
      return;
    }
    this.#queued.add(job.id);
    if (queued.payload) {
      if (this.#heldBytes + job.body_bytes > HELD_PAYLOAD_MAX_BYTES) {
        queued = { job };
      } else {
        this.#heldBytes += job.body_bytes;
      }
    }
    this.#queue.push(queued);
    this.pump();
  }

  /**
   * Claims jobs that wait in the store, oldest first, as many as the queue
   * has room for; when the page was full, more may wait, and the next
   * reload (once the queue is half drained) takes them.
   */
  reload(): Promise<void> {
    if (this.#reloading) return this.#reloading;
    const room = this.#maxQueued - this.#queue.length - this.#reserved;
    if (room <= 0) {
      // Full, counting the jobs being accepted: the next drain tries again.
      this.#overflow = true;
      return Promise.resolve();
    }
    this.#overflow = false;
    this.#reserved += room;
    this.#reloading = (async () => {
      try {
        const jobs = await this.#store.incoming.claim({
          ...this.#claims.claim(),
          now: this.#now(),
          limit: room,
        });
        for (const job of jobs) this.enqueue({ job });
        if (jobs.length === room) this.#overflow = true;
      } catch (error) {
        this.#overflow = true;
        // Not again at once: the next poll tries.
        this.#reloadFailed = true;
        this.#log(`incoming: cannot claim queued jobs: ${(error as Error).message}`);
      } finally {
        this.#reserved -= room;
        this.#reloading = null;
        this.pump();
      }
    })();
    return this.#reloading;
  }

  /** Tops the queue up when it is half drained, and starts calls while there is room. */
  pump(): void {
    // Top the queue up from the store once it is half drained.
    if (
      this.#overflow && this.#queue.length <= this.#maxQueued / 2 && !this.#reloading &&
      !this.#reloadFailed && !this.#stopped
    ) {
      void this.reload();
    }
    while (!this.#stopped && this.#running.size < this.#concurrency && this.#queue.length) {
      const queued = this.#queue.shift()!;
      if (queued.payload) this.#heldBytes -= queued.job.body_bytes;
      const id = queued.job.id;
      this.#started.add(id);
      const run = this.#runner.run(queued).finally(() => {
        this.#running.delete(run);
        this.#queued.delete(id);
        this.#started.delete(id);
        if (this.#reclaimed.delete(id)) this.#claims.release(id);
        this.pump();
      });
      this.#running.add(run);
    }
  }

  /** Nothing queued, running, being accepted or claimed. */
  idleNow(): boolean {
    return !this.#queue.length && !this.#running.size && !this.#reserved && !this.#reloading;
  }

  /** Resolves when no job is queued or running (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#running.size || this.#queue.length || this.#overflow || this.#reloading) {
      if (this.#overflow && !this.#running.size && !this.#queue.length) await this.reload();
      const pending = [...this.#running, this.#reloading].filter((p) => p !== null);
      // Nothing to wait for yet (jobs being accepted fill the queue): look again shortly.
      if (pending.length) await Promise.all(pending);
      else await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
}
