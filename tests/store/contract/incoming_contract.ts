/**
 * Contract: the durable queue of incoming jobs. Jobs list oldest first,
 * bodies come back byte for byte, and each job is completed once, whatever
 * the number of handles completing it.
 *
 * @module
 */
import { assert, assertEquals } from "../../_asserts.ts";
import type { IncomingJob } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

const encoder = new TextEncoder();

/** `length` random bytes (getRandomValues fills 64 KiB at a time). */
function randomBytes(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let offset = 0; offset < length; offset += 65_536) {
    crypto.getRandomValues(bytes.subarray(offset, offset + 65_536));
  }
  return bytes;
}

/** The fields of job `n` (ids sort like the time-ordered ids the router makes). */
function jobFields(n: number, endpointId = "in_contract") {
  return {
    id: `inj_${String(n).padStart(6, "0")}`,
    endpoint_id: endpointId,
    handler: "echo",
    received_at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
  };
}

/** A W3C traceparent, as a traced payload's job keeps it. */
const TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/** Cases of the incoming job queue. */
export const INCOMING_CONTRACT: readonly ContractCase[] = [
  {
    name: "incoming: put() stores jobs that list oldest first and read back byte for byte",
    async run({ store, another }) {
      assertEquals(await store.incoming.list(), []);
      const bodies = [
        encoder.encode('{"a":1}'),
        randomBytes(3 * 1024 * 1024 + 17),
        new Uint8Array(0),
        randomBytes(200_000),
      ];
      const jobs: IncomingJob[] = [];
      // Put out of order: the list is by age, not by arrival.
      for (const n of [2, 1, 4, 3]) {
        // audit_seq is no longer written, but a job that has it keeps it; a traced payload's
        // job keeps its span for the handler call.
        const fields = n === 3
          ? { ...jobFields(n), audit_seq: 41 }
          : n === 4
          ? { ...jobFields(n), traceparent: TRACEPARENT }
          : jobFields(n);
        const job = await store.incoming.put(fields, bodies[n - 1]);
        assertEquals(job.id, jobFields(n).id);
        assertEquals(job.endpoint_id, "in_contract");
        assertEquals(job.handler, "echo");
        assertEquals(job.received_at, jobFields(n).received_at);
        assertEquals(job.body_bytes, bodies[n - 1].byteLength);
        assertEquals(job.audit_seq, n === 3 ? 41 : undefined);
        assertEquals(job.traceparent, n === 4 ? TRACEPARENT : undefined);
        jobs[n - 1] = job;
      }
      const other = await another();
      assertEquals(await other.incoming.list(), jobs);
      assertEquals(await other.incoming.list({ limit: 2 }), jobs.slice(0, 2));
      for (const [index, job] of jobs.entries()) {
        const body = await other.incoming.readBody(job);
        assert(body instanceof Uint8Array, "a body is a Uint8Array");
        assertEquals(body, bodies[index], `body of ${job.id}`);
      }
      assertEquals(await other.incoming.sweepOrphanBodies(), 0, "no body is orphaned");
      assertEquals(await store.incoming.list(), jobs);
    },
  },
  {
    name: "incoming: stage() takes bodies up to stagedBodyMaxBytes and writes nothing itself",
    async run({ store }) {
      const max = store.incoming.stagedBodyMaxBytes;
      assertEquals(max, 128 * 1024, "both adapters stage the same jobs");
      assertEquals(store.incoming.stage(jobFields(1), new Uint8Array(max + 1)), undefined);
      const staged = store.incoming.stage(jobFields(2), new Uint8Array(max));
      assert(staged);
      assertEquals(staged.job.id, jobFields(2).id);
      assertEquals(staged.job.body_bytes, max);
      assert(staged.writes.cost.mutations >= 1);
      assert(staged.writes.cost.bytes >= max);
      assertEquals(await store.incoming.list(), []);
      assertEquals(await store.incoming.readBody(staged.job), null);
    },
  },
  {
    name: "incoming: complete() removes jobs and bodies and says which were still there",
    async run({ store }) {
      const jobs: IncomingJob[] = [];
      for (let n = 1; n <= 14; n++) {
        jobs.push(await store.incoming.put(jobFields(n), encoder.encode(`{"n":${n}}`)));
      }
      assertEquals(await store.incoming.complete([]), []);
      const first = await store.incoming.complete([
        { job: jobs[0], failed: false },
        { job: jobs[1], failed: true },
      ]);
      assertEquals(first, [true, true]);
      assertEquals(await store.incoming.readBody(jobs[0]), null);
      assertEquals(await store.incoming.readBody(jobs[1]), null);
      // Already completed ones say false; the rest (over one commit's worth) go.
      const rest = await store.incoming.complete(
        jobs.map((job, index) => ({ job, failed: index % 3 === 0 })),
      );
      assertEquals(rest, jobs.map((_, index) => index >= 2));
      assertEquals(await store.incoming.list(), []);
      assertEquals(await store.incoming.complete([{ job: jobs[5], failed: false }]), [false]);
    },
  },
  {
    name: "incoming: complete() counts failed jobs in their endpoint's stats, once",
    async run({ store, another }) {
      const other = await another();
      const endpoint = await store.webhooks.addIncoming({
        name: "contract",
        path: "/hooks/contract",
        handler: "echo",
      });
      const jobs: IncomingJob[] = [];
      for (let n = 1; n <= 5; n++) {
        jobs.push(await store.incoming.put(jobFields(n, endpoint.id), encoder.encode("{}")));
      }
      const items = jobs.map((job, index) => ({ job, failed: index < 3 }));
      await Promise.all([store.incoming.complete(items), other.incoming.complete(items)]);
      await store.incoming.complete(items);
      const stats = await other.webhooks.incomingStats(endpoint.id);
      assertEquals(stats.failed, 3, "each failed job is counted once");
      assertEquals(stats.received, 0);
    },
  },
  {
    name: "incoming: two handles completing the same jobs complete each exactly once",
    async run({ store, another }) {
      const other = await another();
      const jobs: IncomingJob[] = [];
      for (let n = 1; n <= 30; n++) {
        jobs.push(await store.incoming.put(jobFields(n), encoder.encode(`{"n":${n}}`)));
      }
      const items = jobs.map((job) => ({ job, failed: false }));
      const reversed = [...items].reverse();
      const results = await Promise.all([
        store.incoming.complete(items.slice(0, 20)),
        other.incoming.complete(reversed.slice(0, 20)),
        store.incoming.complete(items.slice(10)),
        other.incoming.complete(reversed),
      ]);
      const completedBy = new Map<string, number>();
      const calls = [items.slice(0, 20), reversed.slice(0, 20), items.slice(10), reversed];
      for (const [call, result] of results.entries()) {
        assertEquals(result.length, calls[call].length);
        for (const [index, done] of result.entries()) {
          const id = calls[call][index].job.id;
          if (done) completedBy.set(id, (completedBy.get(id) ?? 0) + 1);
        }
      }
      for (const job of jobs) {
        assertEquals(completedBy.get(job.id), 1, `${job.id} is completed exactly once`);
      }
      assertEquals(await other.incoming.list(), []);
    },
  },
];
