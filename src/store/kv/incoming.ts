/**
 * The durable queue of accepted incoming webhook payloads waiting for their
 * handler tool. Bodies up to several MiB are split into chunks below Deno
 * KV's 64 KiB value limit; the job record is written last, so a job exists
 * only once its whole body does.
 *
 * Claims on jobs live in the {@linkcode KvStore} handle's memory
 * ({@linkcode IncomingClaims}): one server per KV file runs the jobs.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import {
  incomingBodiesPrefix,
  incomingDedupeKey,
  incomingFailedKey,
  incomingFailedPrefix,
  incomingJobBodyKey,
  incomingJobBodyPrefix,
  incomingJobKey,
  incomingJobsPrefix,
  incomingLogKey,
  incomingLogPrefix,
  incomingStatsKey,
} from "./keys.ts";
import type { KvStagedWrites } from "./_staged.ts";
import type { KvHandle } from "./_handle.ts";
import {
  checkIncomingFailure,
  type ClaimIncomingOptions,
  type DedupeReservation,
  INCOMING_LOG_SIZE,
  type IncomingClaim,
  type IncomingFailure,
  type IncomingJob,
  IncomingJobSchema,
  type IncomingLogEntry,
  IncomingLogEntrySchema,
  type ReserveDedupeOptions,
} from "../records.ts";

/** The handle, with the claims on incoming jobs it keeps in memory. */
type KvStore = KvHandle & { readonly incomingClaims: IncomingClaims };

const CHUNK_BYTES = 60 * 1024;
const CHUNKS_PER_COMMIT = 10;

/**
 * Largest body written in another commit with {@linkcode stageIncomingJob}
 * (the audit entry's); larger bodies go through {@linkcode putIncomingJob}.
 */
export const STAGED_BODY_MAX_BYTES = 128 * 1024;

/** Jobs completed per commit by {@linkcode completeIncomingJobs} (a `getMany` reads 10 keys). */
const COMPLETIONS_PER_COMMIT = 10;

/** Bytes counted per mutation for its key. */
const KEY_BYTES = 60;

/**
 * Claims on incoming jobs, in one {@linkcode KvStore} handle's memory (the
 * modules of `src/store` only). A claim may be set before its job is
 * written (a job accepted by the claimer), and goes when the job is
 * completed, when released, or when another owner claims the job after it
 * lapsed.
 */
export class IncomingClaims {
  /** Claims by job id, live or lapsed. */
  #held = new Map<string, IncomingClaim>();
  /** Claim scans in flight. */
  #scans = 0;
  /** Jobs completed while a scan was in flight: it may have listed them. */
  #gone = new Set<string>();

  /** Claims held, live or lapsed. */
  get size(): number {
    return this.#held.size;
  }

  /** Whether job `id` may be claimed at `now`: no live claim, not completed during a scan. */
  free(id: string, now: number): boolean {
    const held = this.#held.get(id);
    return (held === undefined || held.until <= now) && !this.#gone.has(id);
  }

  /** Claims job `id` (replacing any claim on it). */
  set(id: string, claim: IncomingClaim): void {
    this.#held.set(id, { owner: claim.owner, until: claim.until });
  }

  /** Drops claims that lapsed at `now` (their jobs are anyone's). */
  prune(now: number): void {
    for (const [id, held] of this.#held) if (held.until <= now) this.#held.delete(id);
  }

  /** Extends `owner`'s claims to `until`; returns how many it holds. */
  renew(owner: string, until: number): number {
    let count = 0;
    for (const held of this.#held.values()) {
      if (held.owner !== owner) continue;
      held.until = until;
      count++;
    }
    return count;
  }

  /** Gives back `owner`'s claims: all, or those of the jobs `ids`. */
  release(owner: string, ids?: readonly string[]): void {
    for (const id of ids ?? [...this.#held.keys()]) {
      if (this.#held.get(id)?.owner === owner) this.#held.delete(id);
    }
  }

  /** Drops the claims of completed jobs. */
  completed(ids: readonly string[]): void {
    for (const id of ids) {
      this.#held.delete(id);
      // A scan in flight may have listed the job before it went.
      if (this.#scans) this.#gone.add(id);
    }
  }

  /** Runs a claim scan: jobs completed while it runs are never claimed by it. */
  async scan<T>(run: () => Promise<T>): Promise<T> {
    this.#scans++;
    try {
      return await run();
    } finally {
      if (--this.#scans === 0) this.#gone.clear();
    }
  }
}

/** Refuses a claim that cannot be held. */
function checkClaim(claim: IncomingClaim | undefined): void {
  if (claim === undefined) return;
  if (typeof claim.owner !== "string" || claim.owner === "") {
    throw new GatewayError("INTERNAL", "Cannot claim incoming jobs: the owner is empty");
  }
  if (typeof claim.until !== "number" || !Number.isFinite(claim.until)) {
    throw new GatewayError("INTERNAL", `Invalid until ${claim.until}: use epoch milliseconds`);
  }
}

/** Refuses claim options that cannot claim anything. */
function checkClaimOptions(options: ClaimIncomingOptions): void {
  const { now, limit } = options;
  checkClaim(options);
  if (!Number.isInteger(limit) || limit < 1) {
    throw new GatewayError("INTERNAL", `Invalid limit ${limit}: use an integer of 1 or more`);
  }
  if (typeof now !== "number" || !Number.isFinite(now)) {
    throw new GatewayError("INTERNAL", `Invalid now ${now}: use epoch milliseconds`);
  }
}

/**
 * Stores a job and its raw body durably, claimed by `claim` when given (the
 * claim is held from before the job is written).
 *
 * @returns The stored job record.
 */
export async function putIncomingJob(
  store: KvStore,
  job: Omit<IncomingJob, "body_bytes" | "chunks">,
  body: Uint8Array,
  claim?: IncomingClaim,
): Promise<IncomingJob> {
  checkClaim(claim);
  if (!claim) return await writeIncomingJob(store, job, body);
  store.incomingClaims.set(job.id, claim);
  try {
    return await writeIncomingJob(store, job, body);
  } catch (error) {
    store.incomingClaims.release(claim.owner, [job.id]);
    throw error;
  }
}

async function writeIncomingJob(
  store: KvStore,
  job: Omit<IncomingJob, "body_bytes" | "chunks">,
  body: Uint8Array,
): Promise<IncomingJob> {
  const chunks = Math.ceil(body.byteLength / CHUNK_BYTES);
  for (let first = 0; first < chunks; first += CHUNKS_PER_COMMIT) {
    await store.retry(async () => {
      let atomic = store.kv.atomic();
      for (let i = first; i < Math.min(chunks, first + CHUNKS_PER_COMMIT); i++) {
        atomic = atomic.set(
          incomingJobBodyKey(job.id, i),
          body.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
        );
      }
      await atomic.commit();
    });
  }
  const record = IncomingJobSchema.parse({ ...job, body_bytes: body.byteLength, chunks });
  await store.retry(() => store.kv.set(incomingJobKey(job.id), record));
  return record;
}

/**
 * Reads a job's raw body.
 *
 * @returns The body, or `null` when the job was completed meanwhile.
 * @throws {GatewayError} `STORE_CORRUPT` when the body of a pending job is incomplete.
 */
export async function readIncomingJobBody(
  store: KvStore,
  job: IncomingJob,
): Promise<Uint8Array | null> {
  const body = new Uint8Array(job.body_bytes);
  let offset = 0;
  let count = 0;
  const pending = await store.retry(async () => {
    offset = 0;
    count = 0;
    for await (
      const entry of store.kv.list<Uint8Array>({ prefix: incomingJobBodyPrefix(job.id) })
    ) {
      if (offset + entry.value.byteLength > body.byteLength) break;
      body.set(entry.value, offset);
      offset += entry.value.byteLength;
      count++;
    }
    // Read after the body: a job record is deleted before (or with) its body,
    // so a record still there means the body read above was whole.
    const key = job.failed_at === undefined ? incomingJobKey(job.id) : incomingFailedKey(job.id);
    return (await store.kv.get(key)).versionstamp !== null;
  });
  if (!pending) return null;
  if (count !== job.chunks || offset !== job.body_bytes) {
    throw new GatewayError("STORE_CORRUPT", `Stored body of incoming job ${job.id} is incomplete`);
  }
  return body;
}

/** Pending jobs, oldest first: all of them, or the first `limit`. */
export async function listIncomingJobs(
  store: KvStore,
  options: { limit?: number } = {},
): Promise<IncomingJob[]> {
  return await store.retry(async () => {
    const jobs: IncomingJob[] = [];
    const { limit } = options;
    for await (const entry of store.kv.list({ prefix: incomingJobsPrefix() }, { limit })) {
      const parsed = IncomingJobSchema.safeParse(entry.value);
      if (parsed.success) jobs.push(parsed.data);
    }
    return jobs;
  });
}

/**
 * Claims pending jobs for `options.owner`, oldest first: those with no live
 * claim in this handle's memory.
 *
 * @returns The claimed jobs, oldest first.
 * @throws {GatewayError} `INTERNAL` on bad options (empty owner, limit below 1, times not finite).
 */
export async function claimIncomingJobs(
  store: KvStore,
  options: ClaimIncomingOptions,
): Promise<IncomingJob[]> {
  checkClaimOptions(options);
  const { owner, until, now, limit } = options;
  const claims = store.incomingClaims;
  claims.prune(now);
  return await claims.scan(async () => {
    const found = await store.retry(async () => {
      const jobs: IncomingJob[] = [];
      for await (const entry of store.kv.list({ prefix: incomingJobsPrefix() })) {
        const parsed = IncomingJobSchema.safeParse(entry.value);
        if (!parsed.success || !claims.free(parsed.data.id, now)) continue;
        // Waiting for its retry.
        if ((parsed.data.next_attempt_at ?? -Infinity) > now) continue;
        jobs.push(parsed.data);
        if (jobs.length >= limit) break;
      }
      return jobs;
    });
    // Claimed at once, after the listing: what another claim took meanwhile is left alone.
    const claimed = found.filter((job) => claims.free(job.id, now));
    for (const job of claimed) claims.set(job.id, { owner, until });
    return claimed;
  });
}

/**
 * A job and its whole body as writes for another commit (the audit entry
 * of the payload), so that the entry and the queued job are durable
 * together, in one commit. With `claim`, the job is claimed from now on (a
 * commit that never lands leaves a claim on no job, until released).
 *
 * @returns The job record and its writes, or `undefined` when the body is
 * over {@linkcode STAGED_BODY_MAX_BYTES} (store it with
 * {@linkcode putIncomingJob}).
 */
export function stageIncomingJob(
  store: KvStore,
  job: Omit<IncomingJob, "body_bytes" | "chunks">,
  body: Uint8Array,
  claim?: IncomingClaim,
): { job: IncomingJob; writes: KvStagedWrites } | undefined {
  checkClaim(claim);
  if (body.byteLength > STAGED_BODY_MAX_BYTES) return undefined;
  const chunks = Math.ceil(body.byteLength / CHUNK_BYTES);
  const record = IncomingJobSchema.parse({ ...job, body_bytes: body.byteLength, chunks });
  const sets: { key: Deno.KvKey; value: unknown }[] = [];
  for (let i = 0; i < chunks; i++) {
    sets.push({
      key: incomingJobBodyKey(job.id, i),
      value: body.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
    });
  }
  sets.push({ key: incomingJobKey(job.id), value: record });
  if (claim) store.incomingClaims.set(job.id, claim);
  const recordBytes = 200 + job.id.length + job.endpoint_id.length + job.handler.length;
  return {
    job: record,
    writes: {
      cost: {
        mutations: sets.length,
        bytes: body.byteLength + recordBytes + sets.length * KEY_BYTES,
        keyBytes: sets.length * KEY_BYTES,
      },
      sets,
    },
  };
}

/**
 * Removes finished jobs, several per commit, counting failures: what
 * {@linkcode completeIncomingJob} does for each, in fewer commits. Each
 * delete is checked against the record read, so only one process completes
 * a job; when a check fails, the jobs of that commit are completed one by
 * one. The claims of the jobs go with them.
 *
 * @returns Per job, whether this call completed it.
 */
export async function completeIncomingJobs(
  store: KvStore,
  items: readonly { job: IncomingJob; failed: boolean }[],
): Promise<boolean[]> {
  const done = await completeEach(store, items);
  // Gone (completed here or before): nobody runs them again.
  store.incomingClaims.completed(items.map(({ job }) => job.id));
  return done;
}

async function completeEach(
  store: KvStore,
  items: readonly { job: IncomingJob; failed: boolean }[],
): Promise<boolean[]> {
  const done: boolean[] = [];
  for (let first = 0; first < items.length; first += COMPLETIONS_PER_COMMIT) {
    const group = items.slice(first, first + COMPLETIONS_PER_COMMIT);
    // Bodies with many chunks are deleted by listing them, one job at a time.
    if (group.some(({ job }) => job.chunks > CHUNKS_PER_COMMIT)) {
      for (const { job, failed } of group) done.push(await completeIncomingJob(store, job, failed));
      continue;
    }
    const outcome = await store.retry(async () => {
      const entries = await store.kv.getMany(group.map(({ job }) => incomingJobKey(job.id)));
      const atomic = store.kv.atomic();
      const completes = entries.map((entry, index) => {
        if (entry.value === null) return false;
        const { job, failed } = group[index];
        atomic.check(entry).delete(entry.key);
        for (let i = 0; i < job.chunks; i++) atomic.delete(incomingJobBodyKey(job.id, i));
        if (failed) atomic.sum(incomingStatsKey(job.endpoint_id, "failed"), 1n);
        return true;
      });
      if (!completes.includes(true)) return completes;
      return (await atomic.commit()).ok ? completes : undefined;
    });
    if (outcome) {
      done.push(...outcome);
    } else {
      // Another process completed one of them meanwhile: settle each on its own.
      for (const { job, failed } of group) done.push(await completeIncomingJob(store, job, failed));
    }
  }
  return done;
}

/**
 * Removes a finished job and counts a failure when it failed. Deleting is
 * checked against the stored record, so only one process completes a job.
 *
 * @returns Whether this call completed the job (false: already completed).
 */
export async function completeIncomingJob(
  store: KvStore,
  job: IncomingJob,
  failed: boolean,
): Promise<boolean> {
  const done = await store.retry(async () => {
    const entry = await store.kv.get(incomingJobKey(job.id));
    if (entry.value === null) return false;
    let atomic = store.kv.atomic().check(entry).delete(entry.key);
    if (failed) atomic = atomic.sum(incomingStatsKey(job.endpoint_id, "failed"), 1n);
    return (await atomic.commit()).ok;
  });
  if (done) await deleteBody(store, job.id);
  return done;
}

async function deleteBody(store: KvStore, jobId: string): Promise<void> {
  await store.retry(async () => {
    const keys: Deno.KvKey[] = [];
    for await (const entry of store.kv.list({ prefix: incomingJobBodyPrefix(jobId) })) {
      keys.push(entry.key);
    }
    for (let i = 0; i < keys.length; i += 100) {
      let atomic = store.kv.atomic();
      for (const key of keys.slice(i, i + 100)) atomic = atomic.delete(key);
      await atomic.commit();
    }
  });
}

/** Deletes body chunks whose job record was never written (crash mid-write). */
export async function sweepOrphanIncomingBodies(store: KvStore): Promise<number> {
  const orphans = new Set<string>();
  await store.retry(async () => {
    for await (const entry of store.kv.list({ prefix: incomingBodiesPrefix() })) {
      const jobId = String(entry.key[2]);
      if (orphans.has(jobId)) continue;
      const [job, failed] = await store.kv.getMany([
        incomingJobKey(jobId),
        incomingFailedKey(jobId),
      ]);
      if (job.value === null && failed.value === null) orphans.add(jobId);
    }
  });
  for (const jobId of orphans) await deleteBody(store, jobId);
  return orphans.size;
}

/** Adds counter deltas of an incoming endpoint in one commit. */
export async function addIncomingStats(
  store: KvStore,
  id: string,
  deltas: { received?: number; rejected?: number; failed?: number },
  lastReceivedAt?: string,
): Promise<void> {
  await store.retry(async () => {
    let atomic = store.kv.atomic();
    for (const counter of ["received", "rejected", "failed"] as const) {
      const delta = deltas[counter] ?? 0;
      if (delta > 0) atomic = atomic.sum(incomingStatsKey(id, counter), BigInt(delta));
    }
    if (lastReceivedAt) atomic = atomic.set(incomingStatsKey(id, "last"), lastReceivedAt);
    await atomic.commit();
  });
}

/** A remembered delivery id, as stored. */
interface DedupeRecord {
  job_id: string;
  reserved_at: number;
  expires_at: number;
  confirmed: boolean;
}

/** Reserves a sender's delivery id at an endpoint (see `IncomingStore.reserveDedupeKey`). */
export async function reserveIncomingDedupeKey(
  store: KvStore,
  options: ReserveDedupeOptions,
): Promise<DedupeReservation> {
  const { endpoint_id, delivery_id, job_id, now, ttl_ms, stale_ms } = options;
  const key = incomingDedupeKey(endpoint_id, delivery_id);
  return await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get<DedupeRecord>(key);
      const held = entry.value;
      // Deno KV expires keys lazily: the record's own expiry decides.
      if (
        held && held.expires_at > now &&
        (held.confirmed || held.reserved_at + stale_ms > now)
      ) {
        return { status: "duplicate", job_id: held.job_id, confirmed: held.confirmed };
      }
      const record: DedupeRecord = {
        job_id,
        reserved_at: now,
        expires_at: now + ttl_ms,
        confirmed: false,
      };
      const result = await store.kv.atomic().check(entry).set(key, record, { expireIn: ttl_ms })
        .commit();
      if (result.ok) return { status: "reserved" };
    }
  });
}

/**
 * Changes the reservation of a delivery id while `jobId` holds it (nothing
 * when another job holds it, or none does), with a checked commit retried
 * until it lands.
 *
 * @param change The commit's write for the held record, or `undefined` for none.
 */
async function changeHeldDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
  change: (atomic: Deno.AtomicOperation, key: Deno.KvKey, held: DedupeRecord) => boolean,
): Promise<void> {
  const key = incomingDedupeKey(endpointId, deliveryId);
  await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get<DedupeRecord>(key);
      if (!entry.value || entry.value.job_id !== jobId) return;
      const atomic = store.kv.atomic().check(entry);
      if (!change(atomic, key, entry.value)) return;
      if ((await atomic.commit()).ok) return;
    }
  });
}

/** Marks the reservation `jobId` holds as accepted. */
export async function confirmIncomingDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
): Promise<void> {
  await changeHeldDedupeKey(store, endpointId, deliveryId, jobId, (atomic, key, held) => {
    if (held.confirmed) return false;
    const left = Math.max(1, held.expires_at - Date.now());
    atomic.set(key, { ...held, confirmed: true }, { expireIn: left });
    return true;
  });
}

/** Drops the reservation `jobId` holds. */
export async function releaseIncomingDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
): Promise<void> {
  await changeHeldDedupeKey(store, endpointId, deliveryId, jobId, (atomic, key) => {
    atomic.delete(key);
    return true;
  });
}

/** How many jobs wait, by endpoint (a scan of the job records: used at start and for display). */
export async function countPendingIncomingJobs(store: KvStore): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  await store.retry(async () => {
    for (const key of Object.keys(counts)) delete counts[key];
    for await (
      const entry of store.kv.list<{ endpoint_id?: string }>({ prefix: incomingJobsPrefix() })
    ) {
      const id = entry.value?.endpoint_id;
      if (typeof id === "string") counts[id] = (counts[id] ?? 0) + 1;
    }
  });
  return counts;
}

/** Failed handler calls recorded per commit by {@linkcode failIncomingJobs}. */
const FAILURES_PER_COMMIT = 10;

/** A job after a failed attempt: waiting for `retry_at`, or failed. */
function afterFailure(stored: IncomingJob, failure: IncomingFailure): IncomingJob {
  const { next_attempt_at: _due, failed_at: _failed, attempts, ...rest } = stored;
  const { attempt } = failure;
  const all = attempt ? [...(attempts ?? []), attempt] : attempts;
  return IncomingJobSchema.parse({
    ...rest,
    ...(all ? { attempts: all } : {}),
    ...(failure.retry_at === undefined
      ? { failed_at: attempt!.at }
      : { next_attempt_at: Math.ceil(failure.retry_at) }),
  });
}

/**
 * Records failed handler calls (see `IncomingStore.fail`), several per
 * commit; each write is checked against the record read, so a job completed
 * or failed meanwhile by another claimer is left alone.
 *
 * @returns Per item, whether the job was still pending.
 */
export async function failIncomingJobs(
  store: KvStore,
  items: readonly IncomingFailure[],
): Promise<boolean[]> {
  items.forEach(checkIncomingFailure);
  const done: boolean[] = [];
  for (let first = 0; first < items.length; first += FAILURES_PER_COMMIT) {
    const group = items.slice(first, first + FAILURES_PER_COMMIT);
    const outcome = await store.retry(async () => {
      const entries = await store.kv.getMany<IncomingJob[]>(
        group.map(({ job }) => incomingJobKey(job.id)),
      );
      const atomic = store.kv.atomic();
      const found = entries.map((entry, index) => {
        const parsed = IncomingJobSchema.safeParse(entry.value);
        if (!parsed.success) return false;
        const failure = group[index];
        const next = afterFailure(parsed.data, failure);
        atomic.check(entry);
        if (failure.retry_at === undefined) {
          atomic.delete(entry.key).set(incomingFailedKey(next.id), next)
            .sum(incomingStatsKey(next.endpoint_id, "failed"), 1n);
        } else {
          atomic.set(entry.key, next);
        }
        return true;
      });
      if (!found.includes(true)) return found;
      return (await atomic.commit()).ok ? found : undefined;
    });
    // Changed meanwhile (completed by an earlier claimer): try again, one by one.
    if (outcome) done.push(...outcome);
    else for (const item of group) done.push(...await failIncomingJobs(store, [item]));
  }
  // Unclaimed: due again at retry_at, for whoever claims it then.
  store.incomingClaims.completed(items.map(({ job }) => job.id));
  return done;
}

/** One job, pending or failed, or `null`. */
export async function getIncomingJob(store: KvStore, id: string): Promise<IncomingJob | null> {
  const [pending, failed] = await store.retry(() =>
    store.kv.getMany([incomingJobKey(id), incomingFailedKey(id)])
  );
  const parsed = IncomingJobSchema.safeParse(pending.value ?? failed.value);
  return parsed.success ? parsed.data : null;
}

/** Failed jobs, oldest first (see `IncomingStore.listFailed`). */
export async function listFailedIncomingJobs(
  store: KvStore,
  options: { endpoint_id?: string; limit?: number } = {},
): Promise<IncomingJob[]> {
  const { endpoint_id, limit } = options;
  return await store.retry(async () => {
    const jobs: IncomingJob[] = [];
    for await (const entry of store.kv.list({ prefix: incomingFailedPrefix() })) {
      const parsed = IncomingJobSchema.safeParse(entry.value);
      if (!parsed.success) continue;
      if (endpoint_id !== undefined && parsed.data.endpoint_id !== endpoint_id) continue;
      jobs.push(parsed.data);
      if (limit !== undefined && jobs.length >= limit) break;
    }
    return jobs;
  });
}

/** Makes failed jobs pending again (see `IncomingStore.replayFailed`). */
export async function replayFailedIncomingJobs(
  store: KvStore,
  ids: readonly string[],
): Promise<string[]> {
  const replayed: string[] = [];
  for (const id of ids) {
    const done = await store.retry(async () => {
      for (;;) {
        const entry = await store.kv.get<IncomingJob>(incomingFailedKey(id));
        const parsed = IncomingJobSchema.safeParse(entry.value);
        if (!parsed.success) return false;
        const { attempts: _a, next_attempt_at: _n, failed_at: _f, ...fresh } = parsed.data;
        const result = await store.kv.atomic().check(entry).delete(entry.key)
          .set(incomingJobKey(id), IncomingJobSchema.parse(fresh)).commit();
        if (result.ok) return true;
      }
    });
    if (done) replayed.push(id);
  }
  return replayed;
}

/** Deletes failed jobs with their bodies (see `IncomingStore.purgeFailed`). */
export async function purgeFailedIncomingJobs(
  store: KvStore,
  options: { ids?: readonly string[]; before?: string } = {},
): Promise<number> {
  const { ids, before } = options;
  const targets = ids
    ? (await Promise.all(ids.map((id) => getIncomingJob(store, id))))
      .filter((job): job is IncomingJob => job?.failed_at !== undefined)
    : (await listFailedIncomingJobs(store)).filter((job) =>
      before === undefined || Date.parse(job.failed_at!) < Date.parse(before)
    );
  let count = 0;
  for (const job of targets) {
    const gone = await store.retry(async () => {
      const entry = await store.kv.get(incomingFailedKey(job.id));
      if (entry.value === null) return false;
      return (await store.kv.atomic().check(entry).delete(entry.key).commit()).ok;
    });
    if (!gone) continue;
    await deleteBody(store, job.id);
    count++;
  }
  return count;
}

/** Writes payload log entries and trims each endpoint's log to its newest entries. */
export async function logIncomingPayloads(
  store: KvStore,
  entries: readonly IncomingLogEntry[],
): Promise<void> {
  if (!entries.length) return;
  const records = entries.map((entry) => IncomingLogEntrySchema.parse(entry));
  for (let i = 0; i < records.length; i += 10) {
    await store.retry(async () => {
      const atomic = store.kv.atomic();
      for (const entry of records.slice(i, i + 10)) {
        atomic.set(incomingLogKey(entry.endpoint_id, entry.id), entry);
      }
      await atomic.commit();
    });
  }
  for (const endpointId of new Set(records.map((entry) => entry.endpoint_id))) {
    await store.retry(async () => {
      const old: Deno.KvKey[] = [];
      let seen = 0;
      for await (
        const entry of store.kv.list({ prefix: incomingLogPrefix(endpointId) }, { reverse: true })
      ) {
        if (++seen > INCOMING_LOG_SIZE) old.push(entry.key);
      }
      for (let i = 0; i < old.length; i += 100) {
        const atomic = store.kv.atomic();
        for (const key of old.slice(i, i + 100)) atomic.delete(key);
        await atomic.commit();
      }
    });
  }
}

/** An endpoint's payload log, newest first. */
export async function readIncomingPayloadLog(
  store: KvStore,
  endpointId: string,
  limit: number = INCOMING_LOG_SIZE,
): Promise<IncomingLogEntry[]> {
  const most = Math.max(0, Math.min(limit, INCOMING_LOG_SIZE));
  if (!most) return [];
  return await store.retry(async () => {
    const entries: IncomingLogEntry[] = [];
    for await (
      const entry of store.kv.list({ prefix: incomingLogPrefix(endpointId) }, {
        reverse: true,
        limit: most,
      })
    ) {
      const parsed = IncomingLogEntrySchema.safeParse(entry.value);
      if (parsed.success) entries.push(parsed.data);
    }
    return entries;
  });
}
