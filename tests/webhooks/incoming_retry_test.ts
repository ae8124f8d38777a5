/**
 * Retries and failed jobs of the incoming router, on a real KV file: a
 * handler call that fails for a reason other than its input is retried on
 * the 1, 2, 4, 8, 16 × base schedule (the waits are read from the due times
 * stored in the job, never timed), then kept as a failed job; an input error
 * is a failed job at once; a replayed job runs again once; a restart
 * honours the stored schedule. The payload log says what became of each.
 *
 * @module
 */
import { z } from "zod";
import { assert, assertEquals } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { EventBus } from "../../src/events/mod.ts";
import { Gateway, type PluginDefinition } from "../../src/gateway/mod.ts";
import type { IncomingFailure, IncomingJob } from "../../src/store/mod.ts";
import type { KvStore } from "../../src/store/kv/kv_store.ts";
import { IncomingRouter, replayFailedJobs } from "../../src/webhooks/mod.ts";
import { tempStore } from "../audit/_store.ts";
import { testConfig } from "../gateway/_fixtures.ts";

const BASE_MS = 40;

/** A plugin whose `work` tool fails while `state.failuresLeft` > 0. */
function failingPlugin(state: { failuresLeft: number; calls: number }): PluginDefinition {
  return {
    name: "work",
    version: "1.0.0",
    zeroConfig: true,
    tools: [{
      name: "work",
      description: "Fails a set number of times, then works",
      input: z.object({ n: z.number().int() }),
      execute: (args) => {
        state.calls++;
        if (state.failuresLeft > 0) {
          state.failuresLeft--;
          throw new Error("upstream said no");
        }
        return Promise.resolve({ n: args.n });
      },
    }],
  };
}

/** What each fail() call stored: the job as read back right after, per failure. */
type Stored = { failure: IncomingFailure; stored: IncomingJob | null };

async function setup(
  temp: { store: KvStore; dataDir: string },
  state: { failuresLeft: number; calls: number },
  options: { now?: () => number; rate?: { rate: string; burst: number } } = {},
) {
  const { store } = temp;
  const { rate, ...routerOptions } = options;
  const config = {
    ...await testConfig({
      webhooks: { poll_ms: 5 },
      incoming: { retry_base_ms: BASE_MS },
      // Failing calls must reach the handler, not an open circuit.
      tools: {
        circuit_threshold: 100,
        ...(rate ? { overrides: { work: { rate } } } : {}),
      },
    }),
    dataDir: temp.dataDir,
  };
  const bus = new EventBus();
  const audit = createAuditLog({ store, bus });
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: [failingPlugin(state)],
    audit,
    log: () => {},
  });
  await gateway.start();
  const stored: Stored[] = [];
  const fail = store.incoming.fail;
  store.incoming.fail = async (items) => {
    const result = await fail(items);
    for (const failure of items) {
      stored.push({ failure, stored: await store.incoming.get(failure.job.id) });
    }
    return result;
  };
  const endpoint = (await store.webhooks.listIncoming())[0] ??
    await store.webhooks.addIncoming({ name: "work", path: "/hooks/work", handler: "work" });
  const logs: string[] = [];
  const router = new IncomingRouter({
    store,
    gateway,
    audit,
    config,
    log: (m) => logs.push(m),
    random: () => 0.5,
    ...routerOptions,
  });
  await router.start();
  const post = async (body: unknown) => {
    const response = await router.handle(
      new Request("http://127.0.0.1/hooks/work", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
      endpoint,
    );
    assertEquals(response.status, 202);
    return (await response.json()).id as string;
  };
  const stop = async () => {
    store.incoming.fail = fail;
    await router.stop();
    await gateway.stop();
    await audit.close();
  };
  return { store, router, endpoint, post, stored, logs, stop };
}

/** Waits (polling the store, at most ~10 s) until `check` holds. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The wait before retry n (1-based) with random 0.5: 2^(n-1) × base × 1.05. */
function expectedWait(n: number): number {
  return Math.round(BASE_MS * 2 ** (n - 1) * 1.05);
}

Deno.test("a handler that fails 3 times is retried on the stored schedule, then runs once more and is done", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 3, calls: 0 };
  const s = await setup(temp, state);
  try {
    const id = await s.post({ n: 1 });
    await until(async () => (await s.store.incoming.get(id)) === null, "the job to finish");
    assertEquals(state.calls, 4);
    assertEquals(s.stored.length, 3);
    s.stored.forEach(({ failure, stored }, i) => {
      assertEquals(stored?.attempts?.length, i + 1);
      assertEquals(stored?.attempts?.[i].code, "TOOL_EXECUTION_FAILED");
      assertEquals(stored?.failed_at, undefined);
      // The due time in the store: the attempt's time plus the schedule's wait.
      assertEquals(stored!.next_attempt_at! - Date.parse(failure.attempt!.at), expectedWait(i + 1));
    });
    assertEquals(await s.store.incoming.listFailed(), []);
  } finally {
    await s.stop();
  }
  const [entry] = await temp.store.incoming.readPayloadLog(s.endpoint.id);
  assertEquals([entry.id, entry.status, entry.attempts], [entry.id, "ok", 4]);
  assertEquals((await temp.store.webhooks.incomingStats(s.endpoint.id)).failed, 0);
});

Deno.test("after the 5th retry fails the job is kept as a failed job; a replay runs it again once", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 1000, calls: 0 };
  const s = await setup(temp, state);
  try {
    const id = await s.post({ n: 7 });
    await until(async () => (await s.store.incoming.listFailed()).length === 1, "a failed job");
    await until(() => Promise.resolve(s.stored.length === 6), "the six failures read back");
    assertEquals(state.calls, 6);
    const [failed] = await s.store.incoming.listFailed();
    assertEquals(failed.id, id);
    assertEquals(failed.endpoint_id, s.endpoint.id);
    assertEquals(failed.handler, "work");
    assertEquals(failed.attempts?.length, 6);
    assert(failed.attempts!.every((a) => a.code === "TOOL_EXECUTION_FAILED"));
    assert(failed.attempts![5].message.includes("upstream said no"));
    assertEquals(failed.failed_at, failed.attempts![5].at);
    // The five stored waits: 1, 2, 4, 8, 16 × base (plus the chosen jitter).
    assertEquals(
      s.stored.slice(0, 5).map(({ failure, stored }) =>
        stored!.next_attempt_at! - Date.parse(failure.attempt!.at)
      ),
      [1, 2, 3, 4, 5].map(expectedWait),
    );
    assertEquals(s.stored[5].stored?.next_attempt_at, undefined);
    assertEquals((await s.store.webhooks.incomingStats(s.endpoint.id)).failed, 1);
    assert(s.logs.some((line) => line.includes(`incoming failed show ${id}`)));
    // Replayed: same id and arguments, runs once more, and is done.
    state.failuresLeft = 0;
    assertEquals(await replayFailedJobs(s.store, id), { replayed: [id] });
    await until(async () => (await s.store.incoming.get(id)) === null, "the replay to run");
    assertEquals(state.calls, 7);
    assertEquals(await s.store.incoming.listFailed(), []);
  } finally {
    await s.stop();
  }
  const [entry] = await temp.store.incoming.readPayloadLog(s.endpoint.id);
  assertEquals([entry.status, entry.attempts], ["ok", 1]);
});

Deno.test("an input error is a failed job at once, with the fields named, and never retried", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 0, calls: 0 };
  const s = await setup(temp, state);
  try {
    const id = await s.post({ n: "one" });
    await until(async () => (await s.store.incoming.listFailed()).length === 1, "a failed job");
    const [failed] = await s.store.incoming.listFailed();
    assertEquals(failed.id, id);
    assertEquals(failed.attempts?.length, 1);
    assertEquals(failed.attempts?.[0].code, "TOOL_INPUT_INVALID");
    assertEquals(failed.attempts?.[0].fields, ["n"]);
    assertEquals(state.calls, 0);
    assertEquals((await s.store.webhooks.incomingStats(s.endpoint.id)).failed, 1);
  } finally {
    await s.stop();
  }
  const [entry] = await temp.store.incoming.readPayloadLog(s.endpoint.id);
  assertEquals(entry.status, "failed");
  assertEquals(entry.code, "TOOL_INPUT_INVALID");
  assertEquals(entry.fields, ["n"]);
  assert(entry.message?.includes("n:"));
});

Deno.test("a retry scheduled before a restart waits for its stored due time, then runs", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 1, calls: 0 };
  let offset = 0;
  const first = await setup(temp, state);
  let id: string;
  try {
    id = await first.post({ n: 3 });
    await until(() => Promise.resolve(first.stored.length === 1), "the first failure");
  } finally {
    await first.stop();
  }
  const due = first.stored[0].stored!.next_attempt_at!;
  // The next process's clock stands before the due time: the job waits.
  const clock = () => due - 60_000 + offset;
  const second = await setup(temp, state, { now: clock });
  try {
    // Several polls pass (the poll is 5 ms) without a call.
    for (let i = 0; i < 10; i++) {
      await second.router.idle();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assertEquals(state.calls, 1);
    assert((await second.store.incoming.get(id)) !== null);
    offset = 60_000;
    await until(async () => (await second.store.incoming.get(id)) === null, "the retry to run");
    assertEquals(state.calls, 2);
  } finally {
    await second.stop();
  }
  const [entry] = await temp.store.incoming.readPayloadLog(second.endpoint.id);
  assertEquals([entry.id, entry.status, entry.attempts], [id, "ok", 2]);
});

Deno.test("the payload log keeps the endpoint's last 20 payloads with their outcome", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 0, calls: 0 };
  const s = await setup(temp, state);
  const ids: string[] = [];
  try {
    for (let n = 0; n < 25; n++) ids.push(await s.post({ n }));
    await s.router.idle();
  } finally {
    await s.stop();
  }
  const log = await temp.store.incoming.readPayloadLog(s.endpoint.id);
  assertEquals(log.map((e) => e.id), ids.slice(5).reverse());
  assert(log.every((e) => e.status === "ok" && e.handler === "work"));
});

Deno.test("a job waiting for a retry counts against the queue's bound; a failed job does not, a replayed one again", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 1000, calls: 0 };
  const s = await setup(temp, state);
  try {
    const id = await s.post({ n: 1 });
    await until(() => Promise.resolve(s.stored.length === 1), "the first failure");
    assertEquals(s.router.waiting(s.endpoint.id), 1);
    await until(async () => (await s.store.incoming.listFailed()).length === 1, "a failed job");
    // Counted out once the router saw its failure written (just after the store has it).
    await until(() => Promise.resolve(s.router.waiting(s.endpoint.id) === 0), "no job waiting");
    assertEquals(await replayFailedJobs(s.store, id), { replayed: [id] });
    s.router.wake();
    // Counted again (its retries take about 1.3 s), then failed again.
    await until(() => Promise.resolve(s.router.waiting(s.endpoint.id) === 1), "the recount");
    await until(
      async () => (await s.store.incoming.get(id))?.failed_at !== undefined,
      "the replay to fail again",
    );
    await until(() => Promise.resolve(s.router.waiting(s.endpoint.id) === 0), "no job waiting");
    assertEquals(state.calls, 12);
  } finally {
    await s.stop();
  }
});

Deno.test("a handler over its rate limit is not a failure: its jobs wait their turn, spaced by the limit, and all run once", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 0, calls: 0 };
  // A bucket of 5 calls refilled at 20/s: of 30 payloads at once, about 25 must wait.
  const s = await setup(temp, state, { rate: { rate: "20/s", burst: 5 } });
  const ids: string[] = [];
  try {
    for (let n = 0; n < 30; n++) ids.push(await s.post({ n }));
    await until(
      async () => (await s.store.incoming.list()).length === 0,
      "every job to run",
    );
    assertEquals(state.calls, 30, "each handler call ran once");
    // Put off, never failed: no attempt recorded, no retry used up, nothing kept as failed.
    assert(s.stored.length >= 10, `${s.stored.length} jobs put off`);
    for (const { failure, stored } of s.stored) {
      assertEquals(failure.attempt, undefined);
      assert(failure.retry_at !== undefined);
      assertEquals(stored?.attempts, undefined);
    }
    // Their turns are spaced by the limit (50 ms at 20/s), not all at once: the first ten.
    const turns = s.stored.slice(0, 10).map(({ failure }) => failure.retry_at!);
    for (let i = 1; i < turns.length; i++) assert(turns[i] - turns[i - 1] >= 40, `${turns}`);
    assertEquals(await s.store.incoming.listFailed(), []);
    assert(
      s.logs.some((line) => line.includes("handler work is over its rate limit")),
      s.logs.join("\n"),
    );
  } finally {
    await s.stop();
  }
  const log = await temp.store.incoming.readPayloadLog(s.endpoint.id);
  assertEquals(log.filter((entry) => entry.status === "ok").length, log.length);
  assertEquals((await temp.store.webhooks.incomingStats(s.endpoint.id)).failed, 0);
});

Deno.test("a job claimed again while its failed call is being written runs its retry, not after its claim lapses", async () => {
  await using temp = await tempStore();
  const state = { failuresLeft: 1, calls: 0 };
  const s = await setup(temp, state);
  const { incoming } = s.store;
  const fail = incoming.fail;
  const claim = incoming.claim;
  let raced = false;
  // The race the model test found: the router's own claim takes the job back
  // once its failed call is written (the retry fell due at once), before the
  // call is done here. The claim must not be left held with nothing to run it.
  incoming.fail = async (items) => {
    const result = await fail(items);
    if (!raced) {
      raced = true;
      // The retry falls due (1 × base plus jitter).
      await new Promise((resolve) => setTimeout(resolve, BASE_MS * 2));
      let claimed!: (ids: string[]) => void;
      const taken = new Promise<string[]>((resolve) => claimed = resolve);
      incoming.claim = async (options) => {
        const jobs = await claim(options);
        claimed(jobs.map((job) => job.id));
        return jobs;
      };
      s.router.wake();
      assertEquals(await taken, items.map(({ job }) => job.id));
      incoming.claim = claim;
    }
    return result;
  };
  try {
    const id = await s.post({ n: 1 });
    await until(() => Promise.resolve(raced), "the first call to fail");
    // Claims last 5 s: the retry runs long before one could lapse.
    const started = Date.now();
    await until(async () => (await s.store.incoming.get(id)) === null, "the retry to run");
    assert(Date.now() - started < 2000, `the retry ran after ${Date.now() - started} ms`);
    assertEquals(state.calls, 2);
    assertEquals(await s.store.incoming.listFailed(), []);
  } finally {
    incoming.fail = fail;
    incoming.claim = claim;
    await s.stop();
  }
});
