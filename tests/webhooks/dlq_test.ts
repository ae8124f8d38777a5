import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { listDlq, purgeDlq, replayDlq, writeDlqMirror } from "../../src/webhooks/mod.ts";
import { Receiver } from "./_receiver.ts";
import { type Env, setup, toolCalled } from "./_setup.ts";
import type { EventEnvelope } from "../../src/events/mod.ts";
import type { DlqEntry } from "../../src/webhooks/mod.ts";

/** The envelope a dead letter was sent with (none of these lost its body). */
function sent(entry: DlqEntry): EventEnvelope<"tool.called"> {
  assert(!entry.body_lost);
  return entry.event as EventEnvelope<"tool.called">;
}

/** Dead-letters `count` events to a failing receiver; returns the receiver's webhook id. */
async function deadLetter(env: Env, receiver: Receiver, count: number): Promise<string> {
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  for (let i = 0; i < count; i++) await env.bus.emit("tool.called", toolCalled(`t${i}`));
  await receiver.waitFor(6 * count);
  await dispatcher.whenIdle();
  await dispatcher.stop();
  return hook.id;
}

async function mirror(dir: string): Promise<{ dlq_id: string }[]> {
  return JSON.parse(await Deno.readTextFile(`${dir}/dlq.json`));
}

Deno.test("listDlq() lists records oldest failure first with the parsed event", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  const hookId = await deadLetter(env, receiver, 2);
  const entries = await listDlq(env.store);
  assertEquals(entries.map((e) => sent(e).data.tool_name).sort(), ["t0", "t1"]);
  assert(entries[0].failed_at <= entries[1].failed_at);
  assertEquals(entries.map((e) => e.webhook_id), [hookId, hookId]);
  assertEquals((await mirror(env.dir)).map((e) => e.dlq_id), entries.map((e) => e.dlq_id));
});

Deno.test("purgeDlq() removes records failed before a date, or all, and rewrites dlq.json", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled("older"));
  await receiver.waitFor(6);
  await dispatcher.whenIdle();
  await new Promise((resolve) => setTimeout(resolve, 5));
  await env.bus.emit("tool.called", toolCalled("newer"));
  await receiver.waitFor(12);
  await dispatcher.whenIdle();
  const [older, newer] = await listDlq(env.store);
  assertEquals([sent(older).data.tool_name, sent(newer).data.tool_name], ["older", "newer"]);
  assertEquals(await purgeDlq(env.store, { before: older.failed_at }), 0);
  assertEquals(await purgeDlq(env.store, { before: new Date(newer.failed_at) }), 1);
  assertEquals((await listDlq(env.store)).map((e) => e.dlq_id), [newer.dlq_id]);
  assertEquals((await mirror(env.dir)).map((e) => e.dlq_id), [newer.dlq_id]);
  assertEquals(await purgeDlq(env.store), 1);
  assertEquals(await listDlq(env.store), []);
  assertEquals(await mirror(env.dir), []);
  assertEquals((await Deno.stat(`${env.dir}/dlq.json`)).mode! & 0o777, 0o600);
});

Deno.test("purgeDlq() rejects a --before that is not a date", async () => {
  await using env = await setup();
  const error = await assertRejects(
    () => purgeDlq(env.store, { before: "yesterday-ish" }),
    GatewayError,
  );
  assertEquals((error as GatewayError).code, "USAGE");
});

Deno.test("replayDlq() answers NOT_FOUND for an unknown record", async () => {
  await using env = await setup();
  const error = await assertRejects(() => replayDlq(env.store, "dlq_nope"), GatewayError);
  assertEquals((error as GatewayError).code, "NOT_FOUND");
});

Deno.test("replayDlq() refuses a record whose webhook was removed, and 'all' skips it", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  const hookId = await deadLetter(env, receiver, 1);
  await env.store.webhooks.remove(hookId);
  const [entry] = await listDlq(env.store);
  const error = await assertRejects(() => replayDlq(env.store, entry.dlq_id), GatewayError);
  assertEquals((error as GatewayError).code, "NOT_FOUND");
  const result = await replayDlq(env.store, "all");
  assertEquals(result.queued, []);
  assertEquals(result.skipped.map((s) => s.dlq_id), [entry.dlq_id]);
  assertEquals(await env.store.deliveries.listPending(), []);
});

Deno.test("replayDlq() twice queues one delivery; the record stays until delivered", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  await deadLetter(env, receiver, 1);
  const [entry] = await listDlq(env.store);
  const progress: number[][] = [];
  const first = await replayDlq(env.store, "all", { onProgress: (d, t) => progress.push([d, t]) });
  assertEquals(first.queued, [entry.dlq_id]);
  assertEquals(progress, [[1, 1]]);
  const second = await replayDlq(env.store, entry.dlq_id);
  assertEquals(second.already_queued, [entry.dlq_id]);
  const pending = await env.store.deliveries.listPending();
  assertEquals(pending.length, 1);
  assertEquals(pending[0].record.attempt_count, 0);
  assertEquals(pending[0].record.dlq_id, entry.dlq_id);
  assertEquals((await listDlq(env.store)).length, 1);

  receiver.behaviour = () => 200;
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await receiver.waitFor(7);
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 7);
  assertEquals(await listDlq(env.store), []);
  assertEquals(await mirror(env.dir), []);
});

Deno.test("writeDlqMirror() writes an empty array for an empty queue", async () => {
  await using env = await setup();
  await writeDlqMirror(env.store);
  assertEquals(await mirror(env.dir), []);
});

Deno.test("replayDlq() and purgeDlq() go through a queue longer than a page, a page at a time", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  const hookId = await deadLetter(env, receiver, 3);
  const ids = (await listDlq(env.store)).map((e) => e.dlq_id);
  assertEquals(ids.length, 3);
  const reads: (number | undefined)[] = [];
  const listPage = env.store.deliveries.listDlq.bind(env.store.deliveries);
  env.store.deliveries.listDlq = (options) => {
    reads.push(options?.limit);
    return listPage(options);
  };

  const progress: number[][] = [];
  const all = await replayDlq(env.store, "all", {
    pageSize: 1,
    onProgress: (done, total) => progress.push([done, total]),
  });
  assertEquals(all.queued, ids);
  assertEquals(progress, [[1, 3], [2, 3], [3, 3]]);
  assert(reads.length > 0 && reads.every((limit) => limit === 1), `pages read: ${reads}`);

  // The records stay until delivered: a second run finds each one already queued.
  const listed = await listDlq(env.store);
  const since = listed[1].failed_at;
  const again = await replayDlq(env.store, { webhook: hookId, since }, { pageSize: 2 });
  assertEquals(
    again.already_queued,
    listed.filter((e) => e.failed_at >= since).map((e) => e.dlq_id),
  );
  assertEquals(again.queued, []);

  reads.length = 0;
  assertEquals(await purgeDlq(env.store, { pageSize: 1 }), 3);
  // Its own pages, then the rebuild of dlq.json (pages of its own size).
  const mirrorRead = reads.pop();
  assert(reads.length >= 3 && reads.every((limit) => limit === 1), `pages read: ${reads}`);
  assertEquals(mirrorRead, 256);
  assertEquals(await listDlq(env.store), []);
  assertEquals(await mirror(env.dir), []);
});
