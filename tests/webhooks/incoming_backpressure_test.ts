/**
 * Backpressure on incoming endpoints (issue 21 item 7): the queue of
 * accepted payloads is bounded per endpoint and in total; past the bound a
 * payload is answered 503 QUEUE_FULL with Retry-After and nothing is
 * recorded. A real KV store, gateway and audit log; a handler held at a gate.
 *
 * @module
 */
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { PendingJobs } from "../../src/webhooks/_pending.ts";
import { gatedTool, incomingEnv } from "./_incoming_env.ts";

Deno.test("PendingJobs holds places for accepts in flight and frees them on completion", () => {
  let now = 0;
  const jobs = new PendingJobs(2, 3, () => now);
  const a = jobs.admit("in_a", "/a");
  const b = jobs.admit("in_a", "/a");
  let refused = "";
  try {
    jobs.admit("in_a", "/a");
  } catch (error) {
    refused = (error as Error).message;
  }
  assertMatch(
    refused,
    /^Queue full: 2 payloads of \/a wait .*limit 2, incoming.max_pending_per_endpoint/,
  );
  a.accepted();
  b.abandoned();
  assertEquals([jobs.waiting("in_a"), jobs.waiting()], [1, 1]);
  jobs.admit("in_b", "/b").accepted();
  jobs.admit("in_c", "/c").accepted();
  assertEquals(jobs.waiting(), 3);
  let total = "";
  try {
    jobs.admit("in_d", "/d");
  } catch (error) {
    total = (error as Error).message;
  }
  assertMatch(total, /limit 3, incoming.max_pending\)/);
  // No completions yet: the longest wait is suggested.
  assertEquals(jobs.retryAfterS(2), 60);
  for (let i = 0; i < 10; i++) jobs.completed("in_b");
  now = 500;
  assertEquals(jobs.waiting("in_b"), 0, "never below zero");
  assertEquals(jobs.retryAfterS(100), 10, "10 of 100 at 1 per second");
  now = 20_000;
  assertEquals(jobs.retryAfterS(100), 60, "completions older than 10 s no longer count");
  jobs.replace({ in_a: 5 });
  assertEquals([jobs.waiting("in_a"), jobs.waiting()], [5, 5]);
});

Deno.test("past max_pending_per_endpoint a payload gets 503 QUEUE_FULL with Retry-After, and is not recorded", async () => {
  const gated = gatedTool("count");
  await using env = await incomingEnv({
    plugins: [gated.plugin],
    incoming: { max_pending_per_endpoint: 3 },
  });
  const endpoint = await env.store.webhooks.addIncoming({
    name: "gated",
    path: "/hooks/gated",
    handler: "count",
  });
  const router = env.router();
  await router.start();
  try {
    const statuses: number[] = [];
    for (let n = 0; n < 3; n++) {
      const response = await env.post(router, endpoint, { n });
      await response.body?.cancel();
      statuses.push(response.status);
    }
    assertEquals(statuses, [202, 202, 202]);
    assertEquals(router.waiting(endpoint.id), 3);
    const full = await env.post(router, endpoint, { n: 3 });
    assertEquals(full.status, 503);
    const retryAfter = Number(full.headers.get("retry-after"));
    assert(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    const body = await full.json();
    assertEquals(body.error.code, "QUEUE_FULL");
    assertMatch(body.error.message, /3 payloads of \/hooks\/gated wait for their handler/);
    const accepted = (await env.audit.list({ kind: "webhook.incoming" })).entries.length;
    assertEquals(accepted, 3, "the refused payload was not recorded");
    // ?wait=true leaves no job: it is not refused (its handler waits at the gate too).
    const waiting = env.post(router, endpoint, { n: 9 }, "?wait=true");
    gated.open();
    const waited = await waiting;
    assertEquals(waited.status, 200);
    await waited.body?.cancel();
    await router.idle();
    assertEquals(gated.handled.toSorted(), [0, 1, 2, 9]);
    assertEquals(router.waiting(endpoint.id), 0);
    const after = await env.post(router, endpoint, { n: 4 });
    await after.body?.cancel();
    assertEquals(after.status, 202, "room again once the handlers drained the queue");
    await router.idle();
    assertEquals(gated.handled.toSorted(), [0, 1, 2, 4, 9]);
  } finally {
    gated.open();
  }
});

Deno.test("a router starting on a full store counts what waits and refuses at once", async () => {
  const gated = gatedTool("hold");
  await using env = await incomingEnv({
    plugins: [gated.plugin],
    incoming: { max_pending_per_endpoint: 2 },
  });
  const endpoint = await env.store.webhooks.addIncoming({
    name: "x",
    path: "/hooks/x",
    handler: "hold",
  });
  for (let i = 0; i < 2; i++) {
    await env.store.incoming.put({
      id: `inj_${i}`,
      endpoint_id: endpoint.id,
      handler: "hold",
      received_at: new Date().toISOString(),
    }, new TextEncoder().encode("{}"));
  }
  const router = env.router();
  try {
    await router.start();
    assertEquals(router.waiting(endpoint.id), 2, "the jobs an earlier process accepted count");
    const response = await env.post(router, endpoint, {});
    assertEquals(response.status, 503);
    assertEquals((await response.json()).error.code, "QUEUE_FULL");
    gated.open();
    await router.idle();
    assertEquals(router.waiting(endpoint.id), 0);
  } finally {
    gated.open();
  }
});
