/**
 * Webhook deliveries and the egress policy: refused receivers are failed
 * attempts naming the fix, allowed ones get the loop marker, and the
 * connection goes to the address that was checked.
 *
 * @module
 */
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { EgressPolicy } from "../../src/egress/mod.ts";
import { listDlq } from "../../src/webhooks/mod.ts";
import { Receiver } from "./_receiver.ts";
import { setup, toolCalled } from "./_setup.ts";

Deno.test("by default a delivery to 127.0.0.1 is refused: failed attempts naming egress.allow, then the DLQ", async () => {
  await using env = await setup({ retryBaseMs: 2 });
  await using receiver = new Receiver();
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher({ egress: new EgressPolicy() });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 0, "nothing was sent");
  const [dead] = await listDlq(env.store);
  assertEquals(dead.attempts.length, 6);
  for (const attempt of dead.attempts) {
    assertEquals(attempt.status, undefined);
    assertMatch(attempt.error ?? "", /^EGRESS_DENIED: Refused to connect to 127\.0\.0\.1: /);
    assertMatch(attempt.error ?? "", /add "127\.0\.0\.1\/32" to egress\.allow/);
  }
});

Deno.test("an injected fetch is never called for a refused receiver", async () => {
  await using env = await setup({ retryBaseMs: 2 });
  let calls = 0;
  await env.store.webhooks.addOutgoing({ url: "http://169.254.169.254/hook", events: "*" });
  const dispatcher = env.dispatcher({
    egress: new EgressPolicy(),
    fetch: () => {
      calls++;
      return Promise.resolve(new Response(null, { status: 204 }));
    },
  });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await dispatcher.whenIdle();
  assertEquals(calls, 0);
  const [dead] = await listDlq(env.store);
  assertMatch(dead.attempts[0].error ?? "", /a cloud metadata address/);
});

Deno.test("deliveries go to the address the policy checked, and carry the loop marker", async () => {
  await using env = await setup();
  await using receiver = new Receiver();
  const port = new URL(receiver.url).port;
  // hook.invalid resolves only through the policy's lookup.
  const egress = new EgressPolicy({
    allow: ["hook.invalid"],
    marker: "dep_test",
    lookup: () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]),
  });
  await env.store.webhooks.addOutgoing({ url: `http://hook.invalid:${port}/hook`, events: "*" });
  const dispatcher = env.dispatcher({ egress });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await receiver.waitFor(1);
  await dispatcher.whenIdle();
  const [request] = receiver.requests;
  assertEquals(request.headers.get("host"), `hook.invalid:${port}`);
  assertEquals(request.headers.get("x-toolgate-loop"), "dep_test");
  assertEquals(await listDlq(env.store), []);
});

Deno.test("a delivery to toolgate's own listening address is refused even with loopback allowed", async () => {
  await using env = await setup({ retryBaseMs: 2 });
  await using receiver = new Receiver();
  const egress = new EgressPolicy({ allow: ["127.0.0.1/32"] });
  // As if toolgate listened where the receiver does.
  egress.listen({ hostname: "0.0.0.0", port: Number(new URL(receiver.url).port) });
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const dispatcher = env.dispatcher({ egress });
  await dispatcher.start();
  await env.bus.emit("tool.called", toolCalled());
  await dispatcher.whenIdle();
  assertEquals(receiver.requests.length, 0);
  const [dead] = await listDlq(env.store);
  assert(dead, "dead-lettered");
  assertMatch(dead.attempts[0].error ?? "", /toolgate's own listening address/);
});
