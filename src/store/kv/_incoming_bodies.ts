/**
 * The bodies of incoming jobs in Deno KV: split into chunks below the 64 KiB
 * value limit, read back whole, and deleted (also those a crash left without
 * their job). Private to `src/store/kv`.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import {
  incomingBodiesPrefix,
  incomingFailedKey,
  incomingJobBodyPrefix,
  incomingJobKey,
} from "./keys.ts";
import type { IncomingJob } from "../records.ts";
import type { IncomingKvHandle as KvStore } from "./_incoming_claims.ts";

/** Bytes per body chunk. */
export const CHUNK_BYTES = 60 * 1024;

/** Body chunks written per commit. */
export const CHUNKS_PER_COMMIT = 10;

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

/** Deletes a job's body chunks. */
export async function deleteBody(store: KvStore, jobId: string): Promise<void> {
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
