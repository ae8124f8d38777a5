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

/**
 * The wait the dispatcher chose after each webhook's first failed attempt:
 * the stored next attempt time minus that attempt's start, read from the
 * store, so no wall-clock gap is timed.
 */
async function firstWaits(env: Env, ids: string[]): Promise<number[]> {
  let pending: Awaited<ReturnType<typeof env.store.deliveries.listPending>> = [];
  await until(async () => {
    pending = (await env.store.deliveries.listPending()).filter((p) =>
      p.record.attempt_count === 1
    );
    return pending.length === ids.length;
  }, "each first attempt to be recorded");
  return ids.map((id) => {
    const { record } = pending.find((p) => p.record.webhook_id === id)!;
    return record.next_attempt_at - Date.parse(record.attempts[0].at);
  });
}

/** Asserts `ms` is `expected` plus at most 10 % jitter and `slack` ms of the dispatcher's own work. */
function assertWait(ms: number, expected: number, what: string, slack = 2000): void {
  assert(
    ms >= expected && ms <= expected * 1.1 + slack,
    `${what}: waits ${ms} ms, not ${expected}`,
  );
}

Deno.test("a webhook's own retry schedule sets the number of attempts", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  const hook = await env.store.webhooks.addOutgoing({
    url: receiver.url,
    events: "*",
    retry_schedule_ms: [1, 1],
  });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(3);
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 3, "two retries, then the DLQ");
  const [dead] = await listDlq(env.store);
  assertEquals(dead.webhook_id, hook.id);
  assertEquals(dead.attempts.map((a) => a.attempt), [1, 2, 3]);
});

Deno.test("a webhook's own schedule, Retry-After on 429/503 (capped) and the default set the next wait", async () => {
  await using env = await setup({ retryBaseMs: 1000 });
  const answer = (status: number, retryAfter: string) => () => ({
    status,
    headers: { "Retry-After": retryAfter },
  });
  await using slow = new Receiver(() => 500);
  await using tooMany = new Receiver(answer(429, "120"));
  await using unavailable = new Receiver(answer(503, "7200"));
  await using serverError = new Receiver(answer(500, "120"));
  await using shortAfter = new Receiver(answer(429, "0"));
  const ids: string[] = [];
  for (
    const [receiver, schedule] of [
      [slow, [60_000, 1000]],
      [tooMany, undefined],
      [unavailable, undefined],
      [serverError, undefined],
      [shortAfter, [30_000]],
    ] as const
  ) {
    const hook = await env.store.webhooks.addOutgoing({
      url: receiver.url,
      events: "*",
      ...(schedule ? { retry_schedule_ms: [...schedule] } : {}),
    });
    ids.push(hook.id);
  }
  const dispatcher = dispatcherWith(env, { retry_after_max_ms: 600_000 });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  const [own, after429, after503, after500, shortened] = await firstWaits(env, ids);
  assertWait(own, 60_000, "its own first delay");
  assertWait(after429, 120_000, "Retry-After: 120 on a 429", 1000);
  assertWait(after503, 600_000, "Retry-After: 7200 on a 503, capped at 10 min", 1000);
  assertWait(after500, 1000, "a 500's Retry-After is ignored: the default 1 s");
  assertWait(shortened, 30_000, "Retry-After: 0 never shortens the schedule");
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
  const earlyFailed = (await listDlq(env.store)).map((e) => Date.parse(e.failed_at));
  assertEquals(earlyFailed.length, 2);
  const since = new Date(Math.max(...earlyFailed) + 1).toISOString();
  await until(() => Date.now() > Date.parse(since), "the clock to pass since");
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
