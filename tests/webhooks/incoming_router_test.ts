/**
 * The incoming router's job queue on a real KV file: jobs beyond the
 * in-memory queue wait in the store and still run exactly once each; jobs
 * are claimed by the router that runs them, and given back on stop.
 *
 * @module
 */
import { z } from "zod";
import { assertEquals } from "../_asserts.ts";
import type { PluginDefinition } from "../../src/gateway/mod.ts";
import type { IncomingAuditLog, IncomingRouter } from "../../src/webhooks/mod.ts";
import type { KvStore } from "../../src/store/kv/kv_store.ts";
import { tempStore } from "../audit/_store.ts";
import { gatedTool, incomingEnv } from "./_incoming_env.ts";

/** A plugin whose `count` tool records how often each `n` was handled. */
function countingPlugin(counts: Map<number, number>): PluginDefinition {
  return {
    name: "counter",
    version: "1.0.0",
    zeroConfig: true,
    tools: [{
      name: "count",
      description: "Counts calls per n",
      input: z.object({ n: z.number().int() }),
      execute: async (args) => {
        const n = args.n as number;
        await new Promise((resolve) => setTimeout(resolve, 1));
        counts.set(n, (counts.get(n) ?? 0) + 1);
        return { n };
      },
    }],
  };
}

Deno.test("jobs past the in-memory queue wait in the store and each runs exactly once", async () => {
  const counts = new Map<number, number>();
  await using env = await incomingEnv({ plugins: [countingPlugin(counts)] });
  const { store } = env;
  const endpoint = await store.webhooks.addIncoming({
    name: "count",
    path: "/hooks/count",
    handler: "count",
  });
  const router = env.router({ concurrency: 2, maxQueuedJobs: 5 });
  await router.start();
  try {
    const total = 60;
    const statuses = await Promise.all(Array.from({ length: total }, async (_, n) => {
      const response = await env.post(router, endpoint, { n });
      await response.body?.cancel();
      return response.status;
    }));
    assertEquals(statuses, Array(total).fill(202));
    // Not router.idle(), which loads waiting jobs itself: the router must on its own.
    for (let i = 0; i < 500 && (await store.incoming.list()).length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assertEquals(counts.size, total, "every payload was handled");
    for (const [n, times] of counts) assertEquals(times, 1, `payload ${n} ran ${times} times`);
    assertEquals(await store.incoming.list(), []);
  } finally {
    await router.stop();
  }
});

Deno.test("a job completed while it was listed reads as gone, not as a broken body", async () => {
  await using temp = await tempStore();
  const { store } = temp;
  const job = await store.incoming.put({
    id: "inj_done",
    endpoint_id: "in_1",
    handler: "count",
    received_at: new Date().toISOString(),
  }, new TextEncoder().encode('{"n":1}'));
  assertEquals(await store.incoming.complete([{ job, failed: false }]), [true]);
  assertEquals(await store.incoming.readBody(job), null);
});

/** A router setup whose `count` tool is held at a gate; `open()` lets its calls finish. */
async function gatedSetup() {
  const gated = gatedTool("count");
  const env = await incomingEnv({ plugins: [gated.plugin] });
  const endpoint = await env.store.webhooks.addIncoming({
    name: "gated",
    path: "/hooks/gated",
    handler: "count",
  });
  const post = async (router: IncomingRouter, n: number) => {
    const response = await env.post(router, endpoint, { n });
    await response.body?.cancel();
    assertEquals(response.status, 202);
  };
  return {
    store: env.store,
    audit: env.audit,
    calls: gated.handled,
    open: gated.open,
    router: (options: { maxQueuedJobs?: number; audit?: IncomingAuditLog } = {}) =>
      env.router(options),
    post,
    async [Symbol.asyncDispose]() {
      gated.open();
      await env[Symbol.asyncDispose]();
    },
  };
}

/** Claims whatever another owner could take now, and gives it back; returns the job ids. */
async function claimable(store: KvStore): Promise<string[]> {
  const now = Date.now();
  const jobs = await store.incoming.claim({ owner: "probe", now, until: now + 60_000, limit: 100 });
  await store.incoming.releaseClaims("probe");
  return jobs.map((job) => job.id);
}

Deno.test("accepted jobs are claimed by their router as written; past its queue they wait unclaimed", async () => {
  await using env = await gatedSetup();
  const { store } = env;
  const router = env.router({ maxQueuedJobs: 3 });
  await router.start();
  try {
    // Job 0 runs (held at the gate), 1-3 fill the queue, 4-5 are past it.
    for (let n = 0; n < 6; n++) await env.post(router, n);
    const jobs = await store.incoming.list();
    assertEquals(jobs.length, 6);
    assertEquals(await claimable(store), jobs.slice(4).map((job) => job.id));
    env.open();
    await router.idle();
    assertEquals(env.calls.toSorted(), [0, 1, 2, 3, 4, 5]);
    assertEquals(await store.incoming.list(), []);
  } finally {
    await router.stop();
  }
});

Deno.test("stop() gives back the claims of queued jobs, which the next router runs once", async () => {
  await using env = await gatedSetup();
  const { store } = env;
  const first = env.router();
  await first.start();
  for (let n = 0; n < 4; n++) await env.post(first, n);
  const jobs = await store.incoming.list();
  assertEquals(await claimable(store), [], "all four are claimed");
  const stopping = first.stop();
  env.open();
  await stopping;
  assertEquals(env.calls, [0], "the running call finished; the queued jobs did not start");
  assertEquals(await claimable(store), jobs.slice(1).map((job) => job.id));
  const second = env.router();
  await second.start();
  try {
    await second.idle();
    assertEquals(env.calls.toSorted(), [0, 1, 2, 3]);
    assertEquals(await store.incoming.list(), []);
  } finally {
    await second.stop();
  }
});

Deno.test("?wait=true runs the handler in the request and leaves no job to run elsewhere", async () => {
  await using env = await gatedSetup();
  const { store } = env;
  env.open();
  const router = env.router();
  await router.start();
  try {
    const endpoint = router.match("/hooks/gated")!;
    const response = await router.handle(
      new Request("http://127.0.0.1/hooks/gated?wait=true", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ n: 7 }),
      }),
      endpoint,
    );
    assertEquals((await response.json()).status, "completed");
    assertEquals(env.calls, [7]);
    assertEquals(await store.incoming.list(), []);
  } finally {
    await router.stop();
  }
});

Deno.test("a job left to the store while another is being accepted into the last place waits, then runs once", async () => {
  await using env = await gatedSetup();
  const { store } = env;
  // The audit append of payload 1 is held: its queue place stays promised meanwhile.
  let releaseAppend!: () => void;
  const appendHeld = new Promise<void>((resolve) => releaseAppend = resolve);
  const audit: IncomingAuditLog = {
    append: async (input, options) => {
      if ((input.input as { n?: number }).n === 1) await appendHeld;
      return await env.audit.append(input, options);
    },
  };
  const router = env.router({ maxQueuedJobs: 1, audit });
  await router.start();
  try {
    await env.post(router, 0); // runs, held at the gate
    const accepting = env.post(router, 1); // the last queue place, promised
    await env.post(router, 2); // no place: left to the store
    // Payload 1's job is not written yet (it rides in the held commit).
    const stored = await store.incoming.list();
    assertEquals(stored.length, 2);
    assertEquals(await claimable(store), [stored[1].id], "payload 2 waits unclaimed");
    releaseAppend();
    await accepting;
    env.open();
    await router.idle();
    assertEquals(env.calls, [0, 1, 2]);
    assertEquals(await store.incoming.list(), []);
  } finally {
    releaseAppend();
    env.open();
    await router.stop();
  }
});
