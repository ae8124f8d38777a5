/**
 * The durable queue of accepted incoming webhook payloads waiting for their
 * handler tool. Bodies up to several MiB are split into chunks below Deno
 * KV's 64 KiB value limit; the job record is written last, so a job exists
 * only once its whole body does.
 *
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../errors/mod.ts";
import {
  incomingBodiesPrefix,
  incomingJobBodyKey,
  incomingJobBodyPrefix,
  incomingJobKey,
  incomingJobsPrefix,
  incomingStatsKey,
} from "./keys.ts";
import type { Store } from "./store.ts";

const CHUNK_BYTES = 60 * 1024;
const CHUNKS_PER_COMMIT = 10;

/** A pending incoming job. */
export const IncomingJobSchema = z.strictObject({
  id: z.string(),
  endpoint_id: z.string(),
  handler: z.string(),
  received_at: z.string(),
  body_bytes: z.number().int().min(0),
  chunks: z.number().int().min(0),
  audit_seq: z.number().int().optional(),
});

/** A pending incoming job (its body is stored separately). */
export type IncomingJob = z.infer<typeof IncomingJobSchema>;

/**
 * Stores a job and its raw body durably.
 *
 * @returns The stored job record.
 */
export async function putIncomingJob(
  store: Store,
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

/** Reads a job's raw body. */
export async function readIncomingJobBody(store: Store, job: IncomingJob): Promise<Uint8Array> {
  const body = new Uint8Array(job.body_bytes);
  let offset = 0;
  let count = 0;
  await store.retry(async () => {
    offset = 0;
    count = 0;
    for await (
      const entry of store.kv.list<Uint8Array>({ prefix: incomingJobBodyPrefix(job.id) })
    ) {
      body.set(entry.value, offset);
      offset += entry.value.byteLength;
      count++;
    }
  });
  if (count !== job.chunks || offset !== job.body_bytes) {
    throw new GatewayError("STORE_CORRUPT", `Stored body of incoming job ${job.id} is incomplete`);
  }
  return body;
}

/** All pending jobs, oldest first. */
export async function listIncomingJobs(store: Store): Promise<IncomingJob[]> {
  return await store.retry(async () => {
    const jobs: IncomingJob[] = [];
    for await (const entry of store.kv.list({ prefix: incomingJobsPrefix() })) {
      const parsed = IncomingJobSchema.safeParse(entry.value);
      if (parsed.success) jobs.push(parsed.data);
    }
    return jobs;
  });
}

/**
 * Removes a finished job and counts a failure when it failed. Deleting is
 * checked against the stored record, so only one process completes a job.
 *
 * @returns Whether this call completed the job (false: already completed).
 */
export async function completeIncomingJob(
  store: Store,
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

async function deleteBody(store: Store, jobId: string): Promise<void> {
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
export async function sweepOrphanIncomingBodies(store: Store): Promise<number> {
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
  store: Store,
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
