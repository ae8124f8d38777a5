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
  incomingJobBodyKey,
  incomingJobBodyPrefix,
  incomingJobKey,
  incomingJobsPrefix,
  incomingStatsKey,
} from "./keys.ts";
import type { KvStagedWrites } from "./_staged.ts";
import type { KvStore } from "./kv_store.ts";
import {
  type ClaimIncomingOptions,
  type DedupeReservation,
  type IncomingClaim,
  type IncomingJob,
  IncomingJobSchema,
  type ReserveDedupeOptions,
} from "../records.ts";

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
    return (await store.kv.get(incomingJobKey(job.id))).versionstamp !== null;
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
      const job = await store.kv.get(incomingJobKey(jobId));
      if (job.value === null) orphans.add(jobId);
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

/** Marks the reservation `jobId` holds as accepted. */
export async function confirmIncomingDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
): Promise<void> {
  const key = incomingDedupeKey(endpointId, deliveryId);
  await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get<DedupeRecord>(key);
      if (!entry.value || entry.value.job_id !== jobId || entry.value.confirmed) return;
      const left = Math.max(1, entry.value.expires_at - Date.now());
      const result = await store.kv.atomic().check(entry)
        .set(key, { ...entry.value, confirmed: true }, { expireIn: left }).commit();
      if (result.ok) return;
    }
  });
}

/** Drops the reservation `jobId` holds. */
export async function releaseIncomingDedupeKey(
  store: KvStore,
  endpointId: string,
  deliveryId: string,
  jobId: string,
): Promise<void> {
  const key = incomingDedupeKey(endpointId, deliveryId);
  await store.retry(async () => {
    for (;;) {
      const entry = await store.kv.get<DedupeRecord>(key);
      if (!entry.value || entry.value.job_id !== jobId) return;
      const result = await store.kv.atomic().check(entry).delete(key).commit();
      if (result.ok) return;
    }
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
