import { Webhook } from "standardwebhooks";
import { assert, assertEquals, assertMatch, assertRejects } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { VERSION } from "../../src/version.ts";
import { recentAttempts, testWebhook, verifySignature } from "../../src/webhooks/mod.ts";
import { Receiver } from "./_receiver.ts";
import { LOOPBACK_EGRESS, setup } from "./_setup.ts";

Deno.test("testWebhook() sends one signed webhook.test envelope and reports status and latency", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  const hook = await env.store.webhooks.addOutgoing({
    url: receiver.url,
    events: "*",
    secret: "t",
  });
  const result = await testWebhook(env.store, hook.id, { egress: LOOPBACK_EGRESS });
  assertEquals(result.ok, true);
  assertEquals(result.status, 200);
  assertEquals(result.signed, true);
  assert(result.latency_ms >= 0);
  assertEquals(receiver.requests.length, 1);
  const [request] = receiver.requests;
  assertEquals(request.headers.get("x-service-event"), "webhook.test");
  assertEquals(request.headers.get("x-service-delivery"), result.event_id);
  assertEquals(request.headers.get("user-agent"), `Service-Webhooks/${VERSION}`);
  assert(verifySignature("t", request.body, request.headers.get("x-service-signature")));
  assertEquals(request.headers.get("webhook-id"), result.event_id);
  const standard = new Webhook(new TextEncoder().encode("t"), { format: "raw" });
  standard.verify(new TextDecoder().decode(request.body), {
    "webhook-id": request.headers.get("webhook-id")!,
    "webhook-timestamp": request.headers.get("webhook-timestamp")!,
    "webhook-signature": request.headers.get("webhook-signature")!,
  });
  const envelope = JSON.parse(new TextDecoder().decode(request.body));
  assertEquals(envelope.type, "webhook.test");
  assertEquals(envelope.data.webhook_id, hook.id);
  assertMatch(envelope.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  const [logged] = await recentAttempts(env.store, hook.id);
  assertEquals([logged.event_type, logged.ok, logged.status], ["webhook.test", true, 200]);
});

Deno.test("testWebhook() sends no signature without secret and never retries a failure", async () => {
  await using env = await setup();
  await using receiver = new Receiver(() => 500);
  const hook = await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const result = await testWebhook(env.store, hook.id, { egress: LOOPBACK_EGRESS });
  assertEquals([result.ok, result.status, result.signed], [false, 500, false]);
  assertEquals(receiver.requests[0].headers.has("x-service-signature"), false);
  assertEquals(receiver.requests[0].headers.has("webhook-signature"), false);
  assertEquals(receiver.requests[0].headers.get("webhook-id"), result.event_id);
  assertEquals(receiver.requests.length, 1);
});

Deno.test("testWebhook() reports a connection error and a timeout", async () => {
  await using env = await setup();
  const closed = new Receiver();
  const url = closed.url;
  await closed[Symbol.asyncDispose]();
  const refused = await env.store.webhooks.addOutgoing({ url, events: "*" });
  const down = await testWebhook(env.store, refused.id, { egress: LOOPBACK_EGRESS });
  assertEquals(down.ok, false);
  assertEquals(down.status, undefined);
  assert(down.error && down.error.length > 0);

  await using slow = new Receiver(() => "hang");
  const hook = await env.store.webhooks.addOutgoing({ url: slow.url, events: "*" });
  const late = await testWebhook(env.store, hook.id, { timeoutMs: 30, egress: LOOPBACK_EGRESS });
  assertEquals([late.ok, late.error], [false, "Timed out after 30 ms"]);
});

Deno.test("testWebhook() answers NOT_FOUND for an unknown id", async () => {
  await using env = await setup();
  const error = await assertRejects(() => testWebhook(env.store, "wh_missing"), GatewayError);
  assertEquals((error as GatewayError).code, "NOT_FOUND");
});
