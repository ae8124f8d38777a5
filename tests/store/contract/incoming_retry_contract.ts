/**
 * Contract: retries, failed jobs and the payload log of incoming endpoints.
 * A failed handler call is recorded on the job; a job waiting for its retry
 * is claimed only once due; a failed job is kept with its body, never
 * claimed, until replayed (pending again, fresh) or purged; the payload log
 * keeps each endpoint's newest 20 entries.
 *
 * @module
 */
import { assert, assertEquals } from "../../_asserts.ts";
import type { IncomingLogEntry } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

const encoder = new TextEncoder();

function jobFields(n: number, endpointId = "in_retry") {
  return {
    id: `inj_${String(n).padStart(6, "0")}`,
    endpoint_id: endpointId,
    handler: "echo",
    received_at: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
  };
}

const T0 = Date.UTC(2026, 0, 1, 1);

function attempt(code: string, at = T0) {
  return { at: new Date(at).toISOString(), code, message: `${code} happened` };
}

/** Cases of incoming retries, failed jobs and the payload log. */
export const INCOMING_RETRY_CONTRACT: readonly ContractCase[] = [
  {
    name: "incoming: a put-off call (no attempt) waits for its time, its attempts as they were",
    async run({ store, another }) {
      await store.incoming.put(jobFields(7), encoder.encode('{"n":7}'));
      const claim = { owner: "a", until: T0 + 60_000, limit: 5 };
      const [claimed] = await store.incoming.claim({ ...claim, now: T0 });
      await store.incoming.fail([{
        job: claimed,
        attempt: attempt("UPSTREAM_ERROR"),
        retry_at: T0,
      }]);
      const [again] = await store.incoming.claim({ ...claim, now: T0 });
      // Its handler's rate limit put the call off: no attempt appended, due at retry_at.
      assertEquals(await store.incoming.fail([{ job: again, retry_at: T0 + 500 }]), [true]);
      const stored = await (await another()).incoming.get(again.id);
      assertEquals(stored?.attempts, [attempt("UPSTREAM_ERROR")]);
      assertEquals(stored?.next_attempt_at, T0 + 500);
      assertEquals(stored?.failed_at, undefined);
      assertEquals(await store.incoming.claim({ ...claim, owner: "b", now: T0 + 499 }), []);
      // A job never failed stays without attempts.
      const fresh = await store.incoming.put(jobFields(8), encoder.encode('{"n":8}'));
      const [eight] = (await store.incoming.claim({ ...claim, now: T0 + 499 }))
        .filter((job) => job.id === fresh.id);
      await store.incoming.fail([{ job: eight, retry_at: T0 + 600 }]);
      assertEquals((await store.incoming.get(fresh.id))?.attempts, undefined);
      // Neither an attempt nor a time: refused, nothing changed.
      let refused: unknown;
      try {
        await store.incoming.fail([{ job: eight }]);
      } catch (error) {
        refused = error;
      }
      assertEquals((refused as { code?: string })?.code, "INTERNAL");
      assertEquals((await store.incoming.get(fresh.id))?.next_attempt_at, T0 + 600);
    },
  },
  {
    name: "incoming: a failed call waits for its retry, unclaimable until due, on every handle",
    async run({ store, another }) {
      const job = await store.incoming.put(jobFields(1), encoder.encode('{"n":1}'));
      const [claimed] = await store.incoming.claim({
        owner: "a",
        until: T0 + 60_000,
        now: T0,
        limit: 5,
      });
      assertEquals(claimed.id, job.id);
      assertEquals(
        await store.incoming.fail([{
          job: claimed,
          attempt: attempt("UPSTREAM_ERROR"),
          retry_at: T0 + 1000,
        }]),
        [true],
      );
      const stored = await store.incoming.get(job.id);
      assertEquals(stored?.attempts, [attempt("UPSTREAM_ERROR")]);
      assertEquals(stored?.next_attempt_at, T0 + 1000);
      assertEquals(stored?.failed_at, undefined);
      // Still pending (listed), but not due: nobody claims it, not even its old owner.
      assertEquals((await store.incoming.list()).map((j) => j.id), [job.id]);
      const other = await another();
      assertEquals(
        await other.incoming.claim({ owner: "b", until: T0 + 60_000, now: T0 + 999, limit: 5 }),
        [],
      );
      assertEquals(
        await store.incoming.claim({ owner: "a", until: T0 + 60_000, now: T0 + 999, limit: 5 }),
        [],
      );
      // Due: claimed with its attempts, and a second failure appends.
      const handle = store.incoming.sharedClaims ? other : store;
      const [due] = await handle.incoming.claim({
        owner: "b",
        until: T0 + 60_000,
        now: T0 + 1000,
        limit: 5,
      });
      assertEquals(due.attempts?.length, 1);
      assertEquals(due.next_attempt_at, T0 + 1000);
      await handle.incoming.fail([{
        job: due,
        attempt: attempt("TOOL_TIMEOUT", T0 + 1001),
        retry_at: T0 + 3000,
      }]);
      const twice = await store.incoming.get(job.id);
      assertEquals(twice?.attempts?.map((a) => a.code), ["UPSTREAM_ERROR", "TOOL_TIMEOUT"]);
      assertEquals(twice?.next_attempt_at, T0 + 3000);
      // The body is still there, byte for byte.
      assertEquals(new TextDecoder().decode((await store.incoming.readBody(twice!))!), '{"n":1}');
      // Completing after the retry removes it, as any job.
      const [again] = await handle.incoming.claim({
        owner: "b",
        until: T0 + 60_000,
        now: T0 + 3000,
        limit: 5,
      });
      assertEquals(await handle.incoming.complete([{ job: again, failed: false }]), [true]);
      assertEquals(await store.incoming.get(job.id), null);
      assertEquals((await store.webhooks.incomingStats("in_retry")).failed, 0);
    },
  },
  {
    name:
      "incoming: a failed job is kept with its body and attempts, counted, never claimed, replayed fresh",
    async run({ store, another }) {
      const job = await store.incoming.put(jobFields(1), encoder.encode('{"n":1}'));
      await store.incoming.put(jobFields(2, "in_other"), encoder.encode('{"n":2}'));
      await store.incoming.put(jobFields(3), encoder.encode('{"n":3}'));
      const claimed = await store.incoming.claim({
        owner: "a",
        until: T0 + 60_000,
        now: T0,
        limit: 5,
      });
      assertEquals(claimed.length, 3);
      const failed = {
        ...attempt("TOOL_INPUT_INVALID"),
        fields: ["key"],
      };
      assertEquals(
        await store.incoming.fail([
          { job: claimed[0], attempt: failed },
          { job: claimed[1], attempt: attempt("TOOL_NOT_FOUND") },
        ]),
        [true, true],
      );
      // Failing a job that is gone (failed already) changes nothing.
      assertEquals(await store.incoming.fail([{ job: claimed[0], attempt: failed }]), [false]);
      assertEquals(await store.incoming.complete([{ job: claimed[0], failed: false }]), [false]);
      const other = await another();
      assertEquals((await other.incoming.list()).map((j) => j.id), [claimed[2].id]);
      const all = await other.incoming.listFailed();
      assertEquals(all.map((j) => j.id), [claimed[0].id, claimed[1].id]);
      assertEquals(all[0].failed_at, failed.at);
      assertEquals(all[0].attempts, [failed]);
      assertEquals(all[0].next_attempt_at, undefined);
      assertEquals(
        (await other.incoming.listFailed({ endpoint_id: "in_other" })).map((j) => j.id),
        [
          claimed[1].id,
        ],
      );
      assertEquals((await other.incoming.listFailed({ limit: 1 })).length, 1);
      assertEquals((await other.webhooks.incomingStats("in_retry")).failed, 1);
      assertEquals((await other.webhooks.incomingStats("in_other")).failed, 1);
      // Never claimed, even long after.
      await store.incoming.releaseClaims("a");
      const later = await other.incoming.claim({
        owner: "b",
        until: T0 + 1e9,
        now: T0 + 1e8,
        limit: 5,
      });
      assertEquals(later.map((j) => j.id), [claimed[2].id]);
      // Its body is kept (an orphan sweep leaves it).
      await store.incoming.sweepOrphanBodies();
      assertEquals(new TextDecoder().decode((await other.incoming.readBody(all[0]))!), '{"n":1}');
      // Replay: pending again, same id and body, no attempts, due at once.
      assertEquals(await other.incoming.replayFailed([job.id, "inj_missing", claimed[2].id]), [
        job.id,
      ]);
      assertEquals(await other.incoming.replayFailed([job.id]), []);
      const fresh = await store.incoming.get(job.id);
      assertEquals(fresh, { ...jobFields(1), body_bytes: 7, chunks: 1 });
      const [replayed] = await store.incoming.claim({
        owner: "c",
        until: T0 + 1e9,
        now: T0,
        limit: 5,
      });
      assertEquals(replayed.id, job.id);
      assertEquals(new TextDecoder().decode((await store.incoming.readBody(replayed))!), '{"n":1}');
      assertEquals((await store.incoming.listFailed()).map((j) => j.id), [claimed[1].id]);
    },
  },
  {
    name:
      "incoming: purgeFailed deletes failed jobs by id, before a time, or all; pending ones stay",
    async run({ store, another }) {
      for (let n = 1; n <= 4; n++) {
        await store.incoming.put(jobFields(n), encoder.encode(`{"n":${n}}`));
      }
      const jobs = await store.incoming.claim({
        owner: "a",
        until: T0 + 60_000,
        now: T0,
        limit: 3,
      });
      await store.incoming.fail(
        jobs.map((job, i) => ({ job, attempt: attempt("INTERNAL", T0 + i * 60_000) })),
      );
      const other = await another();
      assertEquals(await other.incoming.purgeFailed({ ids: [jobs[1].id, "inj_4"] }), 1);
      assertEquals((await other.incoming.listFailed()).map((j) => j.id), [jobs[0].id, jobs[2].id]);
      // Before the third's failure (an ISO time with an offset compares as an instant).
      const before = new Date(T0 + 120_000).toISOString().replace("Z", "+00:00");
      assertEquals(await other.incoming.purgeFailed({ before }), 1);
      assertEquals((await other.incoming.listFailed()).map((j) => j.id), [jobs[2].id]);
      assertEquals(await store.incoming.purgeFailed(), 1);
      assertEquals(await store.incoming.listFailed(), []);
      assertEquals(await store.incoming.get(jobs[2].id), null);
      assertEquals((await store.incoming.list()).map((j) => j.id), ["inj_000004"]);
    },
  },
  {
    name: "incoming: the payload log keeps each endpoint's newest 20 entries, replaced by id",
    async run({ store, another }) {
      const entry = (n: number, endpoint = "in_log"): IncomingLogEntry => ({
        id: `inj_${String(n).padStart(6, "0")}`,
        endpoint_id: endpoint,
        received_at: new Date(T0 + n).toISOString(),
        updated_at: new Date(T0 + n).toISOString(),
        status: "accepted",
        handler: "echo",
      });
      assertEquals(await store.incoming.readPayloadLog("in_log"), []);
      await store.incoming.logPayloads([entry(1), entry(2), entry(1, "in_else")]);
      await store.incoming.logPayloads([{
        ...entry(1),
        status: "failed",
        attempts: 1,
        code: "TOOL_INPUT_INVALID",
        message: "Invalid arguments for echo: key: Required",
        fields: ["key"],
      }]);
      const other = await another();
      const log = await other.incoming.readPayloadLog("in_log");
      assertEquals(log.map((e) => [e.id, e.status]), [["inj_000002", "accepted"], [
        "inj_000001",
        "failed",
      ]]);
      assertEquals(log[1].fields, ["key"]);
      const many = Array.from({ length: 30 }, (_, i) => entry(i + 3));
      await other.incoming.logPayloads(many.slice(0, 12));
      await store.incoming.logPayloads(many.slice(12));
      const kept = await store.incoming.readPayloadLog("in_log");
      assertEquals(kept.length, 20);
      assertEquals(kept[0].id, "inj_000032");
      assertEquals(kept[19].id, "inj_000013");
      assertEquals((await store.incoming.readPayloadLog("in_log", 3)).map((e) => e.id), [
        "inj_000032",
        "inj_000031",
        "inj_000030",
      ]);
      // Another endpoint's log is its own.
      assertEquals((await other.incoming.readPayloadLog("in_else")).map((e) => e.id), [
        "inj_000001",
      ]);
      assert((await store.incoming.readPayloadLog("in_log", 100)).length === 20);
    },
  },
  {
    name: "incoming: removing an endpoint removes its payload log; its failed jobs stay",
    async run({ store, another }) {
      const endpoint = await store.webhooks.addIncoming({
        name: "gone",
        path: "/hooks/gone",
        handler: "echo",
      });
      const at = new Date(T0).toISOString();
      await store.incoming.logPayloads([
        {
          id: "inj_000001",
          endpoint_id: endpoint.id,
          received_at: at,
          updated_at: at,
          status: "ok",
        },
      ]);
      await store.incoming.put(jobFields(1, endpoint.id), encoder.encode("{}"));
      const [job] = await store.incoming.claim({ owner: "a", until: T0 + 1000, now: T0, limit: 1 });
      await store.incoming.fail([{ job, attempt: attempt("TOOL_NOT_FOUND") }]);
      const other = await another();
      assertEquals(await other.webhooks.remove(endpoint.id), "incoming");
      assertEquals(await store.incoming.readPayloadLog(endpoint.id), []);
      assertEquals((await other.incoming.listFailed()).map((j) => j.id), [job.id]);
    },
  },
];
