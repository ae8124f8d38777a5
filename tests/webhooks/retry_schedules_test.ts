/**
 * Retry policies of outgoing webhooks (issue 20 item 5) with a real
 * dispatcher, a real KV file and a real receiver: a webhook's own schedule,
 * `Retry-After`, `410 Gone`, auto-disable after dead letters in a row, a
 * disabled endpoint's events kept in the DLQ, and catching up with
 * `replayDlq({ webhook, since })`.
 */
import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { listDlq, recentAttempts, replayDlq } from "../../src/webhooks/mod.ts";
import { until } from "../_helpers.ts";
import { Receiver } from "./_receiver.ts";
import { type Env, setup, toolCalled } from "./_setup.ts";

/** A dispatcher with some `webhooks.*` settings changed. */
function dispatcherWith(
  env: Env,
  webhooks: { auto_disable_after?: number; retry_after_max_ms?: number },
) {
  return env.dispatcher({
    config: { ...env.config, webhooks: { ...env.config.webhooks, ...webhooks } },
  });
}

function gaps(receiver: Receiver): number[] {
  return receiver.requests.slice(1).map((r, i) => Math.round(r.at - receiver.requests[i].at));
}

Deno.test("a webhook's own retry schedule sets the waits and the number of attempts", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  const hook = await env.store.webhooks.addOutgoing({
    url: receiver.url,
    events: "*",
    retry_schedule_ms: [60, 120],
  });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(3);
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 3, "two retries, then the DLQ");
  const [first, second] = gaps(receiver);
  assert(first >= 59 && first <= 60 * 1.1 + 60, `first wait ${first} ms, expected 60-126`);
  assert(second >= 119 && second <= 120 * 1.1 + 60, `second wait ${second} ms, expected 120-192`);
  const [dead] = await listDlq(env.store);
  assertEquals(dead.webhook_id, hook.id);
  assertEquals(dead.attempts.map((a) => a.attempt), [1, 2, 3]);
});

Deno.test("Retry-After on 429 and 503 delays the retry, capped by retry_after_max_ms", async () => {
  await using env = await setup({ retryBaseMs: 2 });
  await using receiver = new Receiver((_, i) =>
    i === 0
      ? { status: 429, headers: { "Retry-After": "3600" } }
      : i === 1
      ? { status: 503, headers: { "Retry-After": "3600" } }
      : i === 2
      ? { status: 500, headers: { "Retry-After": "3600" } } // only 429 and 503 count
      : 200
  );
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = dispatcherWith(env, { retry_after_max_ms: 150 });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(4);
  await dispatcher.whenIdle();
  const [afterTooMany, afterUnavailable, afterServerError] = gaps(receiver);
  assert(afterTooMany >= 149, `after 429 waited ${afterTooMany} ms, not the capped 150`);
  assert(afterTooMany < 3000, `after 429 waited ${afterTooMany} ms: the cap was ignored`);
  assert(afterUnavailable >= 149, `after 503 waited ${afterUnavailable} ms, not 150`);
  assert(afterServerError < 140, `after 500 waited ${afterServerError} ms: Retry-After honoured`);
  assertEquals(await listDlq(env.store), []);
});

Deno.test("410 Gone disables the webhook at once; its later events go to the DLQ unsent", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 410);
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  await dispatcher.whenIdle();
  const stored = await env.store.webhooks.getOutgoing(hook.id);
  assertEquals(stored?.disabled?.reason, "gone");
  await until(() => dispatcher.disabledWebhooks().length === 1, "the dispatcher to see it");
  assertEquals(dispatcher.disabledWebhooks()[0].id, hook.id);
  await env.bus.emit("tool.called", toolCalled("second"));
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 1, "no request after the 410");
  const dlq = await listDlq(env.store);
  assertEquals(dlq.length, 2);
  assertEquals(dlq[0].attempts.map((a) => a.status), [410]);
  assertEquals(dlq[0].reason, "the receiver answered 410 Gone: endpoint disabled");
  assertEquals(dlq[1].attempts, []);
  assert(dlq[1].reason?.startsWith("Not sent: the webhook was disabled after a 410 Gone"));
  const messages = env.errors.map((e) => (e as Error).message);
  assert(
    messages.some((m) => m.includes(`Webhook ${hook.id} (${receiver.url}) disabled`)),
    `the log says it was disabled: ${messages.join(" | ")}`,
  );
});

Deno.test("a webhook whose last N events all went to the DLQ is disabled; a delivery resets the count", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  let failing = true;
  await using receiver = new Receiver(() => failing ? 500 : 200);
  const hook = await env.store.webhooks.addOutgoing({
    url: receiver.url,
    events: "*",
    retry_schedule_ms: [1],
  });
  const dispatcher = dispatcherWith(env, { auto_disable_after: 3 });
  await dispatcher.start();
  const emitAndSettle = async (tool: string) => {
    await env.bus.emit("tool.called", toolCalled(tool));
    await dispatcher.whenIdle();
  };
  await emitAndSettle("a");
  await emitAndSettle("b");
  failing = false;
  await emitAndSettle("c"); // delivered: the streak starts over
  failing = true;
  await emitAndSettle("d");
  await emitAndSettle("e");
  assertEquals(
    (await env.store.webhooks.getOutgoing(hook.id))?.disabled,
    undefined,
    "two dead letters since the delivery: still enabled",
  );
  await emitAndSettle("f");
  const disabled = (await env.store.webhooks.getOutgoing(hook.id))!.disabled!;
  assertEquals(disabled.reason, "failing");
  assert(disabled.detail?.includes("went to the dead-letter queue"), disabled.detail);
});

Deno.test("enable + replayDlq({webhook, since}) sends what a disabled webhook missed, oldest first", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 200);
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const other = await env.store.webhooks.addOutgoing({
    url: `${receiver.origin}/other`,
    events: "*",
  });
  await env.store.webhooks.updateOutgoing(hook.id, {
    disabled: { at: new Date().toISOString(), reason: "manual" },
  });
  await env.store.webhooks.updateOutgoing(other.id, {
    disabled: { at: new Date().toISOString(), reason: "manual" },
  });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const early = await env.bus.emit("tool.called", toolCalled("early"));
  await dispatcher.whenIdle();
  const since = new Date(Date.now() + 1).toISOString();
  await new Promise((resolve) => setTimeout(resolve, 5));
  const missed = [
    await env.bus.emit("tool.called", toolCalled("one")),
    await env.bus.emit("tool.called", toolCalled("two")),
  ];
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 0, "a disabled webhook gets nothing");
  assertEquals((await listDlq(env.store)).length, 6);

  const refused = await assertRejects(
    () => replayDlq(env.store, { webhook: hook.id }),
    GatewayError,
    "enable it first",
  );
  assertEquals(refused.code, "CONFLICT");
  await env.store.webhooks.updateOutgoing(hook.id, { disabled: null });
  const result = await replayDlq(env.store, { webhook: hook.id, since });
  assertEquals(result.queued.length, 2);
  await receiver.waitFor(2);
  await dispatcher.whenIdle();
  const delivered = receiver.requests.map((r) => r.headers.get("x-service-delivery"));
  assertEquals(delivered, missed.map((e) => e!.id));
  assert(receiver.requests.every((r) => r.path === "/hook"));
  const left = await listDlq(env.store);
  assertEquals(
    left.map((e) => e.event.id).sort(),
    [early!.id, early!.id, missed[0]!.id, missed[1]!.id].sort(),
  );
  const all = await replayDlq(env.store, "all");
  assertEquals(all.skipped.length, 3, "the other webhook is still disabled");
  assertEquals(all.queued.length, 1);
  const log = await recentAttempts(env.store, hook.id);
  assert(log.every((entry) => entry.ok));
  await assertRejects(
    () => replayDlq(env.store, { webhook: hook.id, since: "yesterday" }),
    GatewayError,
    'Invalid --since "yesterday"',
  );
  await assertRejects(
    () => replayDlq(env.store, { webhook: "wh_nope" }),
    GatewayError,
    "no webhook",
  );
});
