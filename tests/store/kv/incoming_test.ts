/**
 * The incoming job queue in the store: a small job written in its audit
 * entry's commit, large bodies in their own commits, completions grouped
 * several per commit, and claims kept in the handle's memory.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { createAuditLog } from "../../../src/audit/mod.ts";
import type { IncomingJob } from "../../../src/store/mod.ts";
import {
  auditEntryPartKey,
  incomingJobBodyPrefix,
  incomingJobKey,
  incomingStatsKey,
} from "../../../src/store/kv/keys.ts";
import { IncomingClaims } from "../../../src/store/kv/incoming.ts";
import { type KvStore as Store, openKvStore } from "../../../src/store/kv/kv_store.ts";
import { tempStore } from "../../audit/_store.ts";

function jobFields(id: string) {
  return { id, endpoint_id: "inc_1", handler: "echo", received_at: new Date().toISOString() };
}

function accepted(jobId: string) {
  return { accepted: true, endpoint_id: "inc_1", endpoint: "hook", job_id: jobId };
}

function bodyOf(bytes: number): Uint8Array {
  const text = JSON.stringify({ pad: "x".repeat(Math.max(0, bytes - 10)) });
  return new TextEncoder().encode(text);
}

async function storedChunks(store: Store, id: string): Promise<number> {
  let count = 0;
  for await (const _ of store.kv.list({ prefix: incomingJobBodyPrefix(id) })) count++;
  return count;
}

Deno.test("a staged job is written in its audit entry's commit, body whole", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const log = createAuditLog({ store });
  const body = bodyOf(70 * 1024); // two chunks
  const staged = store.incoming.stage(jobFields("inj_a"), body);
  assert(staged, "a 70 KiB body is staged");
  assertEquals(staged.job.chunks, 2);
  const entry = await log.append({
    kind: "webhook.incoming",
    tool: "echo",
    session_id: "inj_a",
    input: {},
    outcome: accepted("inj_a"),
  }, { writes: staged.writes });
  const [record, part] = await store.kv.getMany([
    incomingJobKey("inj_a"),
    auditEntryPartKey(entry.seq, 0),
  ]);
  assert(record.versionstamp !== null, "the job record is stored");
  assertEquals(record.versionstamp, part.versionstamp, "job and entry share one commit");
  assertEquals(await store.incoming.readBody(staged.job), body);
  assertEquals((await store.incoming.list()).map((job) => job.id), ["inj_a"]);
  await log.close();
});

Deno.test("concurrent staged jobs share commits and each lands with its own entry", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const log = createAuditLog({ store });
  const staged = Array.from({ length: 40 }, (_, i) => {
    const job = store.incoming.stage(jobFields(`inj_${i}`), bodyOf(100 + i));
    assert(job);
    return job;
  });
  await Promise.all(staged.map(({ job, writes }) =>
    log.append({
      kind: "webhook.incoming",
      tool: "echo",
      session_id: job.id,
      input: {},
      outcome: accepted(job.id),
    }, { writes })
  ));
  const jobs = await store.incoming.list();
  assertEquals(jobs.length, 40);
  const commits = new Set<string>();
  for (const entry of (await log.list()).entries) {
    const [record, part] = await store.kv.getMany([
      incomingJobKey(entry.session_id!),
      auditEntryPartKey(entry.seq, 0),
    ]);
    assertEquals(record.versionstamp, part.versionstamp, `job ${entry.session_id}`);
    commits.add(part.versionstamp!);
  }
  assert(commits.size < 40, `40 appends at once took ${commits.size} commits`);
  for (const { job } of staged) {
    assertEquals((await store.incoming.readBody(job))?.byteLength, job.body_bytes);
  }
  assertEquals((await log.verify()).ok, true);
  await log.close();
});

Deno.test("a body over the staging limit is not staged; putIncomingJob stores it", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const body = bodyOf(store.incoming.stagedBodyMaxBytes + 1);
  assertEquals(store.incoming.stage(jobFields("inj_big"), body), undefined);
  const job = await store.incoming.put(jobFields("inj_big"), body);
  assertEquals(job.chunks, 3);
  assertEquals(await store.incoming.readBody(job), body);
});

Deno.test("completeIncomingJobs removes jobs and bodies, counts failures, skips completed ones", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const jobs: IncomingJob[] = [];
  for (let i = 0; i < 13; i++) {
    jobs.push(await store.incoming.put(jobFields(`inj_${i}`), bodyOf(i === 0 ? 700_000 : 50)));
  }
  assertEquals(jobs[0].chunks, 12, "a body with more chunks than one commit deletes");
  const first = await store.incoming.complete(
    jobs.slice(0, 3).map((job, i) => ({ job, failed: i === 1 })),
  );
  assertEquals(first, [true, true, true]);
  const again = await store.incoming.complete(
    jobs.map((job, i) => ({ job, failed: i === 2 || i === 5 })),
  );
  assertEquals(again, jobs.map((_, i) => i >= 3), "completed jobs are not completed twice");
  assertEquals(await store.incoming.list(), []);
  for (const job of jobs) assertEquals(await storedChunks(store, job.id), 0, job.id);
  const failed = await store.kv.get<Deno.KvU64>(incomingStatsKey("inc_1", "failed"));
  // inj_1 in the first call, inj_5 in the second (inj_2 was already completed).
  assertEquals(failed.value?.value, 2n);
});

Deno.test("claims live in the handle's memory: another handle on the file does not see them", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const other = await openKvStore({ dataDir: temp.dataDir });
  try {
    assertEquals(store.incoming.sharedClaims, false);
    await store.incoming.put(jobFields("inj_a"), bodyOf(20), { owner: "here", until: 1000 });
    const options = { owner: "there", now: 0, until: 1000, limit: 10 };
    assertEquals(await store.incoming.claim(options), []);
    assertEquals((await other.incoming.claim(options)).map((job) => job.id), ["inj_a"]);
  } finally {
    other.close();
  }
});

Deno.test("a claim scan never claims a job completed while it ran", async () => {
  const claims = new IncomingClaims();
  claims.set("inj_a", { owner: "a", until: 1000 });
  await claims.scan(() => {
    // Listed before it went, then completed: not free for this scan.
    claims.completed(["inj_a"]);
    assertEquals(claims.free("inj_a", 0), false);
    return Promise.resolve();
  });
  // Scans after the completion do not list it; nothing is kept for it.
  assertEquals(claims.free("inj_a", 0), true);
  assertEquals(claims.size, 0);
});

Deno.test("a job whose write fails keeps no claim", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const claim = { owner: "here", until: 1000 };
  // A staged job is claimed from staging on; put() claims only what it writes.
  assert(store.incoming.stage(jobFields("inj_staged"), bodyOf(20), claim));
  assertEquals(await store.incoming.renewClaims("here", 2000), 1);
  await store.incoming.releaseClaims("here", ["inj_staged"]);
  store.closeSync();
  await assertRejects(() => store.incoming.put(jobFields("inj_b"), bodyOf(20), claim));
  assertEquals(store.incomingClaims.size, 0);
});
