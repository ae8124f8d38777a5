import { Webhook } from "standardwebhooks";
import { assert, assertEquals, assertMatch, assertThrows } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { VERSION } from "../../src/version.ts";
import {
  listDlq,
  MAX_RETRIES,
  recentAttempts,
  replayDlq,
  retryDelayMs,
  verifySignature,
} from "../../src/webhooks/mod.ts";
import { until } from "../_helpers.ts";
import { Receiver } from "./_receiver.ts";
import { circuitOpened, setup, toolCalled } from "./_setup.ts";

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function headerNames(headers: Headers): string[] {
  return [...headers.keys()].filter((name) =>
    name.startsWith("x-") || name.startsWith("webhook-") || name === "user-agent" ||
    name === "content-type"
  ).sort();
}

/** The Standard Webhooks headers of a request, as the npm verifier takes them. */
function standardHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const value = headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

async function readMirror(dir: string): Promise<unknown[]> {
  return JSON.parse(await Deno.readTextFile(`${dir}/dlq.json`));
}

Deno.test("retryDelayMs() doubles from the base and adds at most 10 % jitter", () => {
  assertEquals([1, 2, 3, 4, 5].map((r) => retryDelayMs(r, 1000, 0)), [
    1000,
    2000,
    4000,
    8000,
    16000,
  ]);
  assertEquals(retryDelayMs(5, 1000, 0.999999), 17600);
  assertEquals(MAX_RETRIES, 5);
});

Deno.test("a delivery carries exactly the spec headers, the Standard Webhooks ones, and signatures over the raw bytes", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  const hook = await env.store.webhooks.addOutgoing({
    url: receiver.url,
    events: "*",
    secret: "s3cret",
  });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  assert(envelope);
  await receiver.waitFor(1);
  const [request] = receiver.requests;
  assertEquals(headerNames(request.headers), [
    "content-type",
    "user-agent",
    "webhook-id",
    "webhook-signature",
    "webhook-timestamp",
    "x-service-delivery",
    "x-service-event",
    "x-service-signature",
    "x-service-version",
  ]);
  assertEquals(request.headers.get("content-type"), "application/json");
  assertEquals(request.headers.get("x-service-event"), "tool.called");
  assertEquals(request.headers.get("x-service-delivery"), envelope.id);
  assertMatch(envelope.id, /^evt_[0-9a-z]{26}$/);
  assertEquals(request.headers.get("x-service-version"), VERSION);
  assertEquals(request.headers.get("user-agent"), `Service-Webhooks/${VERSION}`);
  assertMatch(request.headers.get("x-service-signature")!, /^sha256=[0-9a-f]{64}$/);
  assert(verifySignature("s3cret", request.body, request.headers.get("x-service-signature")));
  assertEquals(JSON.parse(decoder.decode(request.body)), envelope);
  assertEquals(request.headers.get("webhook-id"), envelope.id);
  assertMatch(request.headers.get("webhook-timestamp")!, /^\d{10}$/);
  assertMatch(request.headers.get("webhook-signature")!, /^v1,[A-Za-z0-9+/]{43}=$/);
  // A secret without whsec_ is keyed with its UTF-8 bytes (format "raw" in the npm library).
  const verified = new Webhook(encoder.encode("s3cret"), { format: "raw" })
    .verify(decoder.decode(request.body), standardHeaders(request.headers));
  assertEquals(verified, envelope);
  await dispatcher.whenIdle();
  assertEquals(env.errors, []);
  const log = await recentAttempts(env.store, hook.id);
  assertEquals(log.length, 1);
  assertEquals(log[0].ok, true);
  assertEquals(log[0].status, 200);
  assertEquals(log[0].event_id, envelope.id);
});

Deno.test("no signature header is sent for a webhook without secret; webhook-id and -timestamp are", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const now = () => Date.parse("2026-03-04T05:06:07.890Z");
  await env.dispatcher({ now }).start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  const { headers } = receiver.requests[0];
  assertEquals(headers.has("x-service-signature"), false);
  assertEquals(headers.has("webhook-signature"), false);
  assertEquals(headers.get("x-service-event"), "tool.called");
  assertEquals(headers.get("webhook-id"), envelope!.id);
  assertEquals(headers.get("webhook-timestamp"), String(Math.floor(now() / 1000)));
});

Deno.test("a whsec_ secret's deliveries verify with the npm standardwebhooks Webhook class", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  const secret = "whsec_" +
    btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*", secret });
  await env.dispatcher().start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  const [request] = receiver.requests;
  const text = decoder.decode(request.body);
  assertEquals(new Webhook(secret).verify(text, standardHeaders(request.headers)), envelope);
  assert(verifySignature(secret, request.body, request.headers.get("x-service-signature")));
  const tampered = { ...standardHeaders(request.headers), "webhook-id": "evt_other" };
  assertThrows(() => new Webhook(secret).verify(text, tampered), "No matching signature");
});

Deno.test("during a rotation overlap both secrets verify webhook-signature and the old one X-Service-Signature; after expiry only the new one signs", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  const key = () =>
    "whsec_" + btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(24))));
  const [oldSecret, newSecret] = [key(), key()];
  const hook = await env.store.webhooks.addOutgoing({
    url: receiver.url,
    events: "*",
    secret: oldSecret,
  });
  // The verifier checks webhook-timestamp against its own clock (5 minutes either way),
  // so the injected clock starts at the real time and moves by less than that.
  const start = Date.now();
  let offset = 0;
  const now = () => start + offset;
  await env.store.webhooks.updateOutgoing(hook.id, {
    secret: newSecret,
    previous_secrets: [{ secret: oldSecret, expires_at: new Date(start + 60_000).toISOString() }],
  });
  const dispatcher = env.dispatcher({ now });
  await dispatcher.start();
  const first = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  const during = receiver.requests[0];
  const text = decoder.decode(during.body);
  assertEquals(during.headers.get("webhook-signature")!.split(" ").length, 2);
  for (const secret of [newSecret, oldSecret]) {
    assertEquals(new Webhook(secret).verify(text, standardHeaders(during.headers)), first);
  }
  // The spec header has room for one: the old secret's until the overlap ends.
  assert(verifySignature(oldSecret, during.body, during.headers.get("x-service-signature")));
  assertEquals(
    verifySignature(newSecret, during.body, during.headers.get("x-service-signature")),
    false,
  );

  offset = 120_000; // past expires_at
  const second = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(2);
  const after = receiver.requests[1];
  const afterText = decoder.decode(after.body);
  assertEquals(after.headers.get("webhook-signature")!.split(" ").length, 1);
  assertEquals(new Webhook(newSecret).verify(afterText, standardHeaders(after.headers)), second);
  assert(verifySignature(newSecret, after.body, after.headers.get("x-service-signature")));
  assertThrows(
    () => new Webhook(oldSecret).verify(afterText, standardHeaders(after.headers)),
    "No matching signature",
  );
  assertEquals(
    after.headers.get("webhook-timestamp"),
    String(Math.floor((start + 120_000) / 1000)),
  );
  await dispatcher.whenIdle();
  assertEquals(env.errors, []);
});

Deno.test("the event and its delivery are in KV when emit() resolves, and a slow receiver never delays it", async () => {
  await using env = await setup({ timeoutMs: 5000 });
  await using receiver = new Receiver(() => "hang");
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const started = performance.now();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  assert(envelope);
  assert(performance.now() - started < 1000, "emit() waited for the receiver");
  const pending = await env.store.deliveries.listPending();
  assertEquals(pending.map((d) => [d.record.event_id, d.record.webhook_id]), [[
    envelope.id,
    hook.id,
  ]]);
  const stored = await env.store.deliveries.readEvent(envelope.id);
  assertEquals(JSON.parse(decoder.decode(stored!.event.body)), envelope);
  await receiver.waitFor(1);
  receiver.behaviour = () => 200;
});

Deno.test("each webhook gets only the event types it subscribed to, '*' every enabled type", async () => {
  await using env = await setup({ disabled: ["audit.written"] });
  await using calls = new Receiver();
  await using circuits = new Receiver();
  await using all = new Receiver();
  await env.store.webhooks.addOutgoing({
    url: calls.url,
    events: ["tool.called", "audit.written"],
  });
  await env.store.webhooks.addOutgoing({ url: circuits.url, events: ["circuit.opened"] });
  await env.store.webhooks.addOutgoing({ url: all.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await env.bus.emit("circuit.opened", circuitOpened());
  await env.bus.emit("audit.written", {
    seq: 1,
    entry_hash: `sha256:${"1".repeat(64)}`,
    previous_hash: `sha256:${"0".repeat(64)}`,
    tool: "echo",
    chain_intact: true,
  });
  await env.bus.emit("plugin.ready", {
    plugin_name: "core",
    tool_count: 1,
    zero_config: true,
    version: "1.0.0",
  });
  await dispatcher.whenIdle();
  const types = (r: Receiver) => r.requests.map((q) => q.headers.get("x-service-event")).sort();
  assertEquals(types(calls), ["tool.called"]);
  assertEquals(types(circuits), ["circuit.opened"]);
  assertEquals(types(all), ["circuit.opened", "plugin.ready", "tool.called"]);
});

Deno.test("a receiver failing 3 times then answering 200 gets it on attempt 4, gaps 1:2:4 × base", async () => {
  const base = 40;
  await using env = await setup({ retryBaseMs: base });
  await using receiver = new Receiver((_, i) => (i < 3 ? 500 : 200));
  const hook = await env.store.webhooks.addOutgoing({
    url: receiver.url,
    events: "*",
    secret: "k",
  });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(4);
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 4);
  const ids = new Set(receiver.requests.map((r) => r.headers.get("x-service-delivery")));
  assertEquals([...ids], [envelope!.id]);
  const bodies = new Set(receiver.requests.map((r) => decoder.decode(r.body)));
  assertEquals(bodies.size, 1, "the same bytes are sent on every attempt");
  const gaps = receiver.requests.slice(1).map((r, i) => r.at - receiver.requests[i].at);
  [1, 2, 4].forEach((factor, i) => {
    const delay = base * factor;
    assert(gaps[i] >= delay - 1, `gap ${i + 1} is ${gaps[i]} ms, under ${delay}`);
    assert(gaps[i] <= delay * 1.1 + 60, `gap ${i + 1} is ${gaps[i]} ms, over ${delay * 1.1 + 60}`);
  });
  const log = await recentAttempts(env.store, hook.id);
  assertEquals(log.map((e) => [e.attempt, e.ok, e.status]), [
    [4, true, 200],
    [3, false, 500],
    [2, false, 500],
    [1, false, 500],
  ]);
  assertEquals(await env.store.deliveries.listPending(), []);
  assertEquals(
    await env.store.deliveries.readEvent(envelope!.id),
    null,
    "the delivered event is collected",
  );
  assertEquals(await listDlq(env.store), []);
});

Deno.test("an always-failing receiver gets 6 attempts, then the DLQ and dlq.json hold the event", async () => {
  await using env = await setup({ retryBaseMs: 5 });
  await using receiver = new Receiver(() => 503);
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(6);
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 6);
  const dlq = await listDlq(env.store);
  assertEquals(dlq.length, 1);
  assertMatch(dlq[0].dlq_id, /^dlq_[0-9a-z]+$/);
  assertEquals(dlq[0].webhook_id, hook.id);
  assertEquals(dlq[0].url, receiver.url);
  assertEquals(dlq[0].event, envelope);
  assertEquals(dlq[0].attempts.map((a) => [a.attempt, a.status]), [
    [1, 503],
    [2, 503],
    [3, 503],
    [4, 503],
    [5, 503],
    [6, 503],
  ]);
  assert(dlq[0].attempts.every((a) => a.duration_ms >= 0 && !Number.isNaN(Date.parse(a.at))));
  assert(!Number.isNaN(Date.parse(dlq[0].failed_at)));
  assertEquals(await readMirror(env.dir), JSON.parse(JSON.stringify(dlq)));
  assertEquals((await Deno.stat(`${env.dir}/dlq.json`)).mode! & 0o777, 0o600);
  assertEquals(await env.store.deliveries.listPending(), []);
  const reported = env.errors.filter((e) => e instanceof GatewayError);
  assertEquals(reported.map((e) => (e as GatewayError).code), ["DELIVERY_FAILED"]);
});

Deno.test("a never-answering receiver times out 6 times and lands in the DLQ", async () => {
  await using env = await setup({ retryBaseMs: 5, timeoutMs: 40 });
  await using receiver = new Receiver(() => "hang");
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(6);
  await dispatcher.whenIdle();
  const [entry] = await listDlq(env.store);
  assertEquals(entry.attempts.length, 6);
  for (const attempt of entry.attempts) {
    assertEquals(attempt.status, undefined);
    assertEquals(attempt.error, "Timed out after 40 ms");
    assert(attempt.duration_ms >= 35, `attempt took ${attempt.duration_ms} ms`);
  }
  assertEquals((await readMirror(env.dir)).length, 1);
});

Deno.test("redirects are not followed and count as failures", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 302);
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(6);
  await dispatcher.whenIdle();
  assert(receiver.requests.every((r) => r.path === "/hook"), "a redirect was followed");
  const log = await recentAttempts(env.store, hook.id);
  assertEquals(log.map((e) => [e.ok, e.status]), new Array(6).fill([false, 302]));
});

Deno.test("replayDlq() re-delivers the same event and body once the receiver is fixed, then drops the record", async () => {
  await using env = await setup({ retryBaseMs: 2 });
  await using receiver = new Receiver(() => 500);
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*", secret: "k" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(6);
  await dispatcher.whenIdle();
  const [entry] = await listDlq(env.store);
  const failedBody = receiver.requests[5].body;
  receiver.behaviour = () => 200;
  const cli = await env.reopen(); // as the CLI process would
  const result = await replayDlq(cli, entry.dlq_id);
  assertEquals(result, { queued: [entry.dlq_id], already_queued: [], skipped: [] });
  await receiver.waitFor(7);
  const replayed = receiver.requests[6];
  assertEquals(replayed.headers.get("x-service-delivery"), envelope!.id);
  assertEquals(replayed.body, failedBody);
  assert(verifySignature("k", replayed.body, replayed.headers.get("x-service-signature")));
  await dispatcher.whenIdle();
  assertEquals(await listDlq(env.store), []);
  assertEquals(await readMirror(env.dir), []);
  assertEquals(await env.store.deliveries.listPending(), []);
  assertEquals(await env.store.deliveries.readEvent(envelope!.id), null);
  assertEquals(receiver.requests.length, 7);
});

Deno.test("a replayed delivery that fails again updates its DLQ record with the new attempts", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(6);
  await dispatcher.whenIdle();
  const [before] = await listDlq(env.store);
  receiver.behaviour = () => 404;
  await replayDlq(env.store, "all");
  await receiver.waitFor(12);
  await dispatcher.whenIdle();
  const after = await listDlq(env.store);
  assertEquals(after.length, 1);
  assertEquals(after[0].dlq_id, before.dlq_id);
  assertEquals(after[0].attempts.map((a) => a.status), new Array(6).fill(404));
});

Deno.test("a restarted dispatcher resumes pending deliveries with their attempt count", async () => {
  const base = 20;
  await using env = await setup({ retryBaseMs: base });
  let stopping: Promise<void> = Promise.resolve();
  await using receiver = new Receiver((_, i) => {
    if (i === 1) stopping = first.stop(); // stop while the second attempt is in flight
    return 500;
  });
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const first = env.dispatcher();
  await first.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(2);
  await stopping;
  const [stored] = await env.store.deliveries.listPending();
  assertEquals(stored.record.attempt_count, 2);
  assertEquals(stored.record.attempts.map((a) => a.status), [500, 500]);
  assert(stored.record.next_attempt_at > Date.now() - 50);

  const again = await env.reopen();
  const second = env.dispatcher({ store: again });
  await second.start();
  await receiver.waitFor(6);
  await second.whenIdle();
  assertEquals(receiver.requests.length, 6);
  const [entry] = await listDlq(again);
  assertEquals(entry.event.id, envelope!.id);
  assertEquals(entry.attempts.map((a) => a.attempt), [1, 2, 3, 4, 5, 6]);
  // The third attempt waited for its stored time (2 × base after the second).
  const gap = receiver.requests[2].at - receiver.requests[1].at;
  assert(gap >= 2 * base - 1, `resumed attempt came after ${gap} ms`);
});

/** The outbox keys in KV (the delivery logs aside), as `kind/event/webhook` strings. */
async function outboxKeys(env: { store: { kv: Deno.Kv } }): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of env.store.kv.list({ prefix: ["outbox"] })) {
    if (entry.key[1] !== "log" && entry.key[1] !== "due") keys.push(entry.key.slice(1).join("/"));
  }
  return keys;
}

Deno.test("an event for several webhooks is queued as two records; a delivery gets its own only to retry", async () => {
  await using env = await setup({ retryBaseMs: 200 });
  await using ok = new Receiver();
  await using flaky = new Receiver((_, i) => i === 0 ? 500 : 200);
  const hooks = [
    await env.store.webhooks.addOutgoing({ url: ok.url, events: "*" }),
    await env.store.webhooks.addOutgoing({ url: ok.url, events: "*" }),
    await env.store.webhooks.addOutgoing({ url: flaky.url, events: "*" }),
  ];
  // Recorded by a one-shot process: one event record and one fan-out record.
  const recorder = env.dispatcher({ mode: "record" });
  await recorder.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  assert(envelope);
  await recorder.stop();
  assertEquals(await outboxKeys(env), [`event/${envelope.id}`, `fanout/${envelope.id}`]);
  const listed = await env.store.deliveries.listPending();
  assertEquals(listed.map((d) => d.record.webhook_id).sort(), hooks.map((h) => h.id).sort());

  // The sender adopts them from the fan-out record; the failed one moves to a record of its own.
  const sender = env.dispatcher();
  await sender.start();
  await until(
    async () =>
      (await outboxKeys(env)).join() ===
        `delivery/${envelope.id}/${hooks[2].id},event/${envelope.id}`,
    "the fan-out record to give way to one delivery record",
  );
  const [retrying] = await env.store.deliveries.listPending();
  assertEquals([retrying.fanout, retrying.record.attempt_count], [false, 1]);
  assertEquals(retrying.record.attempts.map((a) => a.status), [500]);
  await flaky.waitFor(2);
  await sender.whenIdle();
  assertEquals([ok.requests.length, flaky.requests.length], [2, 2]);
  assertEquals(await outboxKeys(env), []);
  assertEquals(env.errors, []);
});

Deno.test("a restarted dispatcher sends only the fan-out entries not yet delivered", async () => {
  await using env = await setup({ timeoutMs: 5000 });
  await using fast = new Receiver();
  await using slow = new Receiver((_, i) => i === 0 ? "hang" : 200);
  const fastHook = await env.store.webhooks.addOutgoing({ url: fast.url, events: "*" });
  const slowHook = await env.store.webhooks.addOutgoing({ url: slow.url, events: "*" });
  const first = env.dispatcher({ stopTimeoutMs: 50 });
  await first.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  assert(envelope);
  await fast.waitFor(1);
  await slow.waitFor(1);
  const fanoutLists = async () => {
    const entry = await env.store.kv.get<{ webhook_ids: string[] }>([
      "outbox",
      "fanout",
      envelope.id,
    ]);
    return entry.value?.webhook_ids.join() ?? "";
  };
  await until(
    async () => await fanoutLists() === slowHook.id,
    "the fan-out record to drop the delivered webhook",
  );
  await first.stop(); // aborts the hanging attempt: its entry stays as it was
  assertEquals(await fanoutLists(), slowHook.id);

  const again = await env.reopen();
  const second = env.dispatcher({ store: again });
  await second.start();
  await slow.waitFor(2);
  await second.whenIdle();
  assertEquals([fast.requests.length, slow.requests.length], [1, 2]);
  assertEquals(slow.requests[1].headers.get("x-service-delivery"), envelope.id);
  assertEquals(await outboxKeys(env), []);
  assertEquals((await recentAttempts(env.store, fastHook.id)).length, 1);
});

Deno.test("a webhook removed between attempts gets no further request", async () => {
  await using env = await setup({ retryBaseMs: 30 });
  const cli = await env.reopen();
  let hookId = "";
  let removal: Promise<unknown> = Promise.resolve();
  await using receiver = new Receiver(() => {
    removal = cli.webhooks.remove(hookId);
    return 500;
  });
  hookId = (await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" })).id;
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  await removal;
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 1);
  assertEquals(await env.store.deliveries.listPending(), []);
  assertEquals(await listDlq(env.store), []);
  assertEquals(await env.store.deliveries.readEvent(envelope!.id), null);
});

Deno.test("pending deliveries of a webhook removed while stopped are dropped on start, never sent", async () => {
  await using env = await setup({ retryBaseMs: 80 });
  await using receiver = new Receiver(() => 500);
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const first = env.dispatcher();
  await first.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  await first.stop();
  assertEquals((await env.store.deliveries.listPending()).length, 1);
  await env.store.webhooks.remove(hook.id);
  const second = env.dispatcher();
  await second.start();
  await second.whenIdle();
  assertEquals(receiver.requests.length, 1);
  assertEquals(await env.store.deliveries.listPending(), []);
});

Deno.test("a webhook added by another process is used within the poll interval", async () => {
  const pollMs = 50;
  await using env = await setup({ pollMs });
  await using receiver = new Receiver();
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled("before"));
  const cli = await env.reopen();
  await cli.webhooks.addOutgoing({ url: receiver.url, events: ["tool.called"] });
  await new Promise((resolve) => setTimeout(resolve, pollMs * 3));
  await env.bus.emit("tool.called", toolCalled("after"));
  await receiver.waitFor(1);
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 1);
  const event = JSON.parse(decoder.decode(receiver.requests[0].body));
  assertEquals(event.data.tool_name, "after");
});

Deno.test("a body over one KV value (chunked) is sent byte for byte, also after DLQ replay", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*", secret: "big" });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const output = { text: "x".repeat(150_000), emoji: "✓".repeat(20_000) };
  const envelope = await env.bus.emit("tool.called", toolCalled("big", output));
  await receiver.waitFor(6);
  await dispatcher.whenIdle();
  const first = receiver.requests[0].body;
  assert(first.byteLength > 200_000);
  assertEquals(JSON.parse(decoder.decode(first)), envelope);
  const [entry] = await listDlq(env.store);
  assertEquals(entry.event, envelope);
  receiver.behaviour = () => 200;
  await replayDlq(env.store, entry.dlq_id);
  await receiver.waitFor(7);
  await dispatcher.whenIdle();
  assertEquals(receiver.requests[6].body, first);
  assert(
    verifySignature("big", first, receiver.requests[6].headers.get("x-service-signature")),
  );
  assertEquals(await listDlq(env.store), []);
  assertEquals(await env.store.deliveries.readEvent(envelope!.id), null);
});

Deno.test("many concurrent events to several webhooks are each delivered exactly once", async () => {
  await using env = await setup();
  const receivers = [new Receiver(), new Receiver(), new Receiver()];
  try {
    for (const r of receivers) {
      await env.store.webhooks.addOutgoing({ url: r.url, events: "*", secret: "s" });
    }
    const dispatcher = env.dispatcher();
    await dispatcher.start();
    const envelopes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => env.bus.emit("tool.called", toolCalled(`t${i}`))),
    );
    await dispatcher.whenIdle();
    for (const r of receivers) {
      const ids = r.requests.map((q) => q.headers.get("x-service-delivery"));
      assertEquals(ids.length, 300);
      assertEquals(new Set(ids).size, 300);
      assertEquals(new Set(envelopes.map((e) => e!.id)), new Set(ids));
    }
    assertEquals(await env.store.deliveries.listPending(), []);
    assertEquals(env.errors, []);
  } finally {
    for (const r of receivers) await r[Symbol.asyncDispose]();
  }
});

Deno.test("stop() aborts a hanging attempt after stopTimeoutMs and leaves the delivery as it was", async () => {
  await using env = await setup({ timeoutMs: 5000 });
  await using receiver = new Receiver(() => "hang");
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher({ stopTimeoutMs: 50 });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  const started = performance.now();
  await dispatcher.stop();
  assert(performance.now() - started < 1000, "stop() waited for the receiver");
  const [stored] = await env.store.deliveries.listPending();
  assertEquals(stored.record.attempt_count, 0);
  assertEquals(dispatcher.pending, 0);
});

Deno.test("events emitted while no webhook matches are not stored", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: ["circuit.closed"] });
  const dispatcher = env.dispatcher();
  await dispatcher.start();
  const envelope = await env.bus.emit("tool.called", toolCalled());
  assertEquals(await env.store.deliveries.readEvent(envelope!.id), null);
  assertEquals(await env.store.deliveries.listPending(), []);
});

Deno.test("start() rewrites a stale dlq.json from the store (a crash between the two)", async () => {
  await using env = await setup({ retryBaseMs: 1 });
  await using receiver = new Receiver(() => 500);
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const first = env.dispatcher();
  await first.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(6);
  await first.whenIdle();
  await first.stop();
  await Deno.writeTextFile(`${env.dir}/dlq.json`, "[]");
  const second = env.dispatcher();
  await second.start();
  await second.whenIdle();
  assertEquals((await readMirror(env.dir)).length, 1);
});

Deno.test("a hanging receiver holds at most its per-webhook slots; other webhooks keep flowing", async () => {
  await using env = await setup({ timeoutMs: 400 });
  await using slow = new Receiver(() => "hang");
  await using fast = new Receiver();
  await env.store.webhooks.addOutgoing({ url: slow.url, events: "*" });
  await env.store.webhooks.addOutgoing({ url: fast.url, events: "*" });
  const dispatcher = env.dispatcher({
    concurrency: 4,
    perWebhookConcurrency: 2,
    stopTimeoutMs: 10,
  });
  await dispatcher.start();
  for (let i = 0; i < 10; i++) await env.bus.emit("tool.called", toolCalled(`t${i}`));
  await fast.waitFor(10, 350);
  assertEquals(slow.requests.length, 2);
});

Deno.test("a backlog larger than the window is claimed in due-time pages, never all held in memory", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  // Recorded while no process sends: the backlog waits in the store.
  const recorder = env.dispatcher({ mode: "record" });
  await recorder.start();
  const total = 120;
  const envelopes = [];
  for (let i = 0; i < total; i++) envelopes.push(await env.bus.emit("tool.called", toolCalled()));
  await recorder.stop();
  assertEquals((await env.store.deliveries.listPending()).length, total);

  const windowSize = 16;
  const sender = env.dispatcher({ windowSize });
  let most = 0;
  const sampler = setInterval(() => most = Math.max(most, sender.pending), 1);
  try {
    await sender.start();
    await until(() => receiver.requests.length >= total, `${total} deliveries`, 10_000);
    await sender.whenIdle();
  } finally {
    clearInterval(sampler);
  }
  assert(most > 0 && most <= windowSize, `held ${most} deliveries at once`);
  const ids = receiver.requests.map((r) => r.headers.get("x-service-delivery"));
  assertEquals(new Set(ids).size, total);
  assertEquals(new Set(ids), new Set(envelopes.map((e) => e!.id)));
  // Earliest due first: the first page holds the first events recorded.
  const early = new Set(envelopes.slice(0, windowSize).map((e) => e!.id));
  assert(ids.slice(0, windowSize).every((id) => early.has(id!)), "a later event went first");
  assertEquals(await env.store.deliveries.listPending(), []);
});

Deno.test("a failing webhook's retries leave the window: another webhook's deliveries still flow", async () => {
  // Retries wait 2 s and more: past the claim horizon (1 s), so they go back to the store.
  await using env = await setup({ retryBaseMs: 2000, pollMs: 50 });
  await using failing = new Receiver(() => 500);
  await using healthy = new Receiver();
  await env.store.webhooks.addOutgoing({ url: failing.url, events: ["tool.called"] });
  await env.store.webhooks.addOutgoing({ url: healthy.url, events: ["circuit.opened"] });
  const windowSize = 8;
  const dispatcher = env.dispatcher({ windowSize });
  await dispatcher.start();
  for (let i = 0; i < 3 * windowSize; i++) await env.bus.emit("tool.called", toolCalled());
  await failing.waitFor(3 * windowSize);
  for (let i = 0; i < 5; i++) await env.bus.emit("circuit.opened", circuitOpened());
  // Without eviction the window would hold 8 failing deliveries for a minute.
  await healthy.waitFor(5);
  assert(dispatcher.pending <= windowSize);
  // Idle: nothing held or due now; the failing deliveries wait in the store for their retry.
  await dispatcher.whenIdle();
  assertEquals(dispatcher.pending, 0);
  const stored = await env.store.deliveries.listPending();
  assertEquals(stored.length, 3 * windowSize);
  assert(stored.every((d) => d.record.attempt_count === 1));
});

Deno.test("events stored while the window is full are claimed as room frees, not at the next poll; whenIdle() waits for them", async () => {
  // A poll an hour away: only claiming as deliveries finish can pick the later events up.
  await using env = await setup({ pollMs: 3_600_000 });
  let open = () => {};
  const gate = new Promise<void>((resolve) => open = resolve);
  let received = 0;
  await using receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      await request.arrayBuffer();
      received++;
      await gate;
      return new Response(null, { status: 204 });
    },
  );
  await env.store.webhooks.addOutgoing({
    url: `http://127.0.0.1:${receiver.addr.port}/hook`,
    events: "*",
  });
  const dispatcher = env.dispatcher({ windowSize: 2 });
  await dispatcher.start();
  const total = 12;
  // The first two fill the window (their attempts wait at the gate); the rest are stored unclaimed.
  for (let i = 0; i < total; i++) await env.bus.emit("tool.called", toolCalled());
  open();
  await dispatcher.whenIdle();
  assertEquals(received, total);
  assertEquals(await env.store.deliveries.listPending(), []);
});
