/**
 * Failed incoming jobs in Deno KV: looked up, listed, made pending again
 * (replay) and purged. Private to `src/store/kv`.
 *
 * @module
 */
import { incomingFailedKey, incomingFailedPrefix, incomingJobKey } from "./keys.ts";
import { type IncomingJob, IncomingJobSchema } from "../records.ts";
import type { IncomingKvHandle as KvStore } from "./_incoming_claims.ts";
import { deleteBody } from "./_incoming_bodies.ts";

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
