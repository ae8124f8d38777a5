/**
 * Contract: claiming incoming jobs (`claim`, `renewClaims`, `releaseClaims`,
 * and `put`/`stage` with a claim). Pending jobs are claimed oldest first; a
 * job under a live claim is nobody else's until the claim lapses, is
 * released, or the job is completed. Claims are seen across handles only
 * where the store shares them (`incoming.sharedClaims`).
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type { ClaimIncomingOptions, IncomingJob, Store } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

const encoder = new TextEncoder();

/** The fields of job `n` (ids sort like the time-ordered ids the router makes). */
function jobFields(n: number) {
  return {
    id: `inj_${String(n).padStart(6, "0")}`,
    endpoint_id: "in_claims",
    handler: "echo",
    received_at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
    // Even jobs came traced: a claim returns their span with them.
    ...(n % 2 === 0
      ? { traceparent: `00-0af7651916cd43dd8448eb211c80319c-${String(n).padStart(16, "0")}-01` }
      : {}),
  };
}

/** Puts jobs `ns` (in that order), unclaimed; returns them by `n`. */
async function putJobs(store: Store, ns: number[]): Promise<Map<number, IncomingJob>> {
  const jobs = new Map<number, IncomingJob>();
  for (const n of ns) {
    jobs.set(n, await store.incoming.put(jobFields(n), encoder.encode(`{"n":${n}}`)));
  }
  return jobs;
}

/** Claim options: owner `owner` at `now`, for 1000 ms, of up to 100 jobs. */
function claimAt(
  owner: string,
  now: number,
  more: Partial<ClaimIncomingOptions> = {},
): ClaimIncomingOptions {
  return { owner, now, until: now + 1000, limit: 100, ...more };
}

/** The `n` of each claimed job, in the order returned. */
function numbersOf(jobs: readonly IncomingJob[]): number[] {
  return jobs.map((job) => Number(job.id.slice("inj_".length)));
}

/** Cases of claiming incoming jobs. */
export const INCOMING_CLAIMS_CONTRACT: readonly ContractCase[] = [
  {
    name: "incoming claims: claim() takes the oldest jobs up to limit, as stored; the next goes on",
    async run({ store }) {
      const jobs = await putJobs(store, [3, 1, 5, 2, 4]);
      const first = await store.incoming.claim(claimAt("owner_a", 0, { limit: 2 }));
      assertEquals(first, [jobs.get(1), jobs.get(2)]);
      const second = await store.incoming.claim(claimAt("owner_a", 0, { limit: 2 }));
      assertEquals(numbersOf(second), [3, 4]);
      const rest = await store.incoming.claim(claimAt("owner_b", 0, { limit: 2 }));
      assertEquals(numbersOf(rest), [5]);
      assertEquals(await store.incoming.claim(claimAt("owner_b", 0)), []);
      // Claimed jobs are still pending: list() shows them all.
      assertEquals(numbersOf(await store.incoming.list()), [1, 2, 3, 4, 5]);
      assertEquals(await store.incoming.readBody(jobs.get(5)!), encoder.encode('{"n":5}'));
    },
  },
  {
    name: "incoming claims: a job under a live claim is not claimed until it lapses or is released",
    async run({ store }) {
      await putJobs(store, [1, 2]);
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_a", 0))), [1, 2]);
      // Claimed until 1000: not for another owner, nor again for the same one.
      assertEquals(await store.incoming.claim(claimAt("owner_b", 999)), []);
      assertEquals(await store.incoming.claim(claimAt("owner_a", 500)), []);
      // Lapsed at 1000: anyone's again.
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_b", 1000))), [1, 2]);
      assertEquals(await store.incoming.claim(claimAt("owner_a", 1500)), []);
      // owner_a's claims were taken over: it renews nothing.
      assertEquals(await store.incoming.renewClaims("owner_a", 5000), 0);
      // Released (one, then the rest): claimable at once.
      await store.incoming.releaseClaims("owner_b", [jobFields(2).id]);
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_a", 1500))), [2]);
      // Another owner's release gives back nothing of owner_a's.
      await store.incoming.releaseClaims("owner_b", [jobFields(2).id]);
      await store.incoming.releaseClaims("owner_b", []);
      await store.incoming.releaseClaims("owner_b");
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_c", 1500))), [1]);
      assertEquals(await store.incoming.claim(claimAt("owner_c", 1500)), []);
    },
  },
  {
    name: "incoming claims: renewClaims() extends one owner's claims and says how many it holds",
    async run({ store }) {
      await putJobs(store, [1, 2, 3]);
      assertEquals(await store.incoming.renewClaims("owner_a", 5000), 0);
      const claimed = await store.incoming.claim(claimAt("owner_a", 0, { until: 100 }));
      assertEquals(claimed.length, 3);
      assertEquals(await store.incoming.renewClaims("owner_b", 5000), 0);
      assertEquals(await store.incoming.renewClaims("owner_a", 5000), 3);
      // Past the first until, before the new one: still owner_a's.
      assertEquals(await store.incoming.claim(claimAt("owner_b", 4999)), []);
      await store.incoming.releaseClaims("owner_a", [jobFields(2).id]);
      assertEquals(await store.incoming.renewClaims("owner_a", 5000), 2);
      const released = await store.incoming.claim(claimAt("owner_b", 0, { until: 10_000 }));
      assertEquals(numbersOf(released), [2]);
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_c", 5000))), [1, 3]);
    },
  },
  {
    name: "incoming claims: put() and stage() with a claim write the job claimed by that owner",
    async run({ store }) {
      const claim = { owner: "owner_a", until: 1000 };
      const put = await store.incoming.put(jobFields(1), encoder.encode('{"n":1}'), claim);
      assertEquals(put.id, jobFields(1).id);
      await putJobs(store, [2]);
      const staged = store.incoming.stage(jobFields(3), encoder.encode('{"n":3}'), claim);
      assert(staged);
      const stamp = await store.audit.commit(
        { headVersionstamp: null, tailSeq: 0, tailVersionstamps: [] },
        [{ seq: 1, bytes: encoder.encode('{"seq":1}') }],
        { seq: 1, hash: `sha256:${"1".padStart(64, "0")}`, timestamp: "2026-01-01T00:00:00.000Z" },
        undefined,
        [staged.writes],
      );
      assert(stamp !== null);
      assertEquals(numbersOf(await store.incoming.list()), [1, 2, 3]);
      // Only the unclaimed job is free.
      const free = await store.incoming.claim(claimAt("owner_b", 0, { until: 10_000 }));
      assertEquals(numbersOf(free), [2]);
      assertEquals(await store.incoming.renewClaims("owner_a", 2000), 2);
      assertEquals(await store.incoming.claim(claimAt("owner_b", 1500)), []);
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_b", 2000))), [1, 3]);
      assertEquals(await store.incoming.renewClaims("owner_a", 3000), 0);
    },
  },
  {
    name:
      "incoming claims: complete() drops the claims with the jobs; a completed job is never claimed",
    async run({ store }) {
      const jobs = await putJobs(store, [1, 2, 3, 4]);
      assertEquals((await store.incoming.claim(claimAt("owner_a", 0, { limit: 3 }))).length, 3);
      const done = await store.incoming.complete([
        { job: jobs.get(1)!, failed: false },
        { job: jobs.get(3)!, failed: true },
        // Unclaimed: completed all the same.
        { job: jobs.get(4)!, failed: false },
      ]);
      assertEquals(done, [true, true, true]);
      assertEquals(await store.incoming.renewClaims("owner_a", 1000), 1);
      assertEquals(await store.incoming.claim(claimAt("owner_b", 500)), []);
      // Once the claim on job 2 lapsed, it is the only one left to take.
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_b", 1000))), [2]);
      await store.incoming.complete([{ job: jobs.get(2)!, failed: false }]);
      assertEquals(await store.incoming.renewClaims("owner_b", 5000), 0);
      assertEquals(await store.incoming.claim(claimAt("owner_c", 10_000)), []);
      assertEquals(await store.incoming.list(), []);
    },
  },
  {
    name: "incoming claims: claim() refuses a limit below 1, an empty owner and a bad time",
    async run({ store }) {
      await putJobs(store, [1]);
      const bad: Partial<ClaimIncomingOptions>[] = [
        { limit: 0 },
        { limit: 1.5 },
        { owner: "" },
        { now: Number.NaN },
        { until: Number.POSITIVE_INFINITY },
      ];
      for (const more of bad) {
        const error = await assertRejects(
          () => store.incoming.claim(claimAt("owner_a", 0, more)),
          GatewayError,
        );
        assertEquals((error as GatewayError).code, "INTERNAL", JSON.stringify(more));
      }
      const error = await assertRejects(
        () => store.incoming.put(jobFields(2), encoder.encode("{}"), { owner: "", until: 1 }),
        GatewayError,
      );
      assertEquals((error as GatewayError).code, "INTERNAL");
      // Nothing was claimed or written by the refused calls.
      assertEquals(numbersOf(await store.incoming.list()), [1]);
      assertEquals(numbersOf(await store.incoming.claim(claimAt("owner_b", 0))), [1]);
    },
  },
  {
    name: "incoming claims: claims made at once never share a job (across handles when shared)",
    async run({ store, another }) {
      const total = 60;
      await putJobs(store, Array.from({ length: total }, (_, i) => i + 1));
      // Where claims are shared, two handles (two instances) claim; else one does.
      const other = store.incoming.sharedClaims ? await another() : store;
      const handles = [store, other, store, other];
      const seen = new Map<number, string>();
      for (let round = 0; round < 10; round++) {
        const results = await Promise.all(
          handles.map((handle, i) => handle.incoming.claim(claimAt(`owner_${i}`, 0, { limit: 7 }))),
        );
        let got = 0;
        results.forEach((claimed, i) => {
          const numbers = numbersOf(claimed);
          assertEquals(numbers, [...numbers].sort((a, b) => a - b), "oldest first");
          for (const n of numbers) {
            assert(!seen.has(n), `job ${n} claimed by owner_${i} and ${seen.get(n)}`);
            seen.set(n, `owner_${i}`);
            got++;
          }
        });
        if (!got) break;
      }
      assertEquals(seen.size, total, "every job claimed once");
      if (store.incoming.sharedClaims) {
        // A claim made on one handle holds on the other.
        assertEquals(await other.incoming.claim(claimAt("owner_x", 999)), []);
        assertEquals(
          await other.incoming.renewClaims("owner_0", 2000),
          [...seen.values()].filter((owner) => owner === "owner_0").length,
        );
        // The lapsed ones (all but owner_0's) are taken on the other handle.
        const lapsed = await other.incoming.claim(claimAt("owner_y", 1000));
        assertEquals(lapsed.length, [...seen.values()].filter((o) => o !== "owner_0").length);
      }
    },
  },
];
