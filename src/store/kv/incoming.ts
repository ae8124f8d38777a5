/**
 * The durable queue of accepted incoming webhook payloads waiting for their
 * handler tool. Bodies up to several MiB are split into chunks below Deno
 * KV's 64 KiB value limit; the job record is written last, so a job exists
 * only once its whole body does.
 *
 * Claims on jobs live in the handle's memory
 * ({@linkcode IncomingClaims}): one server per KV file runs the jobs.
 *
 * This module holds the jobs' lifecycle (write, claim, complete, fail); the
 * claims, bodies, delivery-id reservations, failed jobs, payload log and
 * counters are in the `_incoming_*.ts` modules beside it, re-exported here.
 *
 * @module
 */
import {
  incomingFailedKey,
  incomingJobBodyKey,
  incomingJobKey,
  incomingJobsPrefix,
  incomingStatsKey,
} from "./keys.ts";
import type { KvStagedWrites } from "./_staged.ts";
import {
  checkIncomingFailure,
  type ClaimIncomingOptions,
  type IncomingClaim,
  type IncomingFailure,
  type IncomingJob,
  IncomingJobSchema,
} from "../records.ts";
import { checkClaim, checkClaimOptions } from "../_incoming_contract.ts";
import type { IncomingKvHandle as KvStore } from "./_incoming_claims.ts";
import { CHUNK_BYTES, CHUNKS_PER_COMMIT, deleteBody } from "./_incoming_bodies.ts";

export { IncomingClaims } from "./_incoming_claims.ts";
export { readIncomingJobBody, sweepOrphanIncomingBodies } from "./_incoming_bodies.ts";
export { addIncomingStats } from "./_incoming_stats.ts";
export {
  confirmIncomingDedupeKey,
  releaseIncomingDedupeKey,
  reserveIncomingDedupeKey,
} from "./_incoming_dedupe.ts";
export {
  getIncomingJob,
  listFailedIncomingJobs,
  purgeFailedIncomingJobs,
  replayFailedIncomingJobs,
} from "./_incoming_failed.ts";
export { logIncomingPayloads, readIncomingPayloadLog } from "./_incoming_log.ts";

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
