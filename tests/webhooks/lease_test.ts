import { assertEquals } from "../_asserts.ts";
import { EventBus } from "../../src/events/mod.ts";
import { createDispatcher } from "../../src/webhooks/mod.ts";
import { Receiver } from "./_receiver.ts";
import { LOOPBACK_EGRESS, setup, toolCalled } from "./_setup.ts";

Deno.test("two delivering dispatchers on one data dir: one sends, the other records; each event arrives once", async () => {
  await using env = await setup({ pollMs: 30 });
  await using receiver = new Receiver();
  await env.store.webhooks.addOutgoing({ url: receiver.url, events: "*" });
  const leader = env.dispatcher();
  await leader.start();
  // A second server process: its own KV handle and its own bus.
  const otherStore = await env.reopen();
  const otherBus = new EventBus();
  const errors: unknown[] = [];
  const follower = createDispatcher({
    store: otherStore,
    bus: otherBus,
    config: env.config,
    egress: LOOPBACK_EGRESS,
    onError: (error) => errors.push(error),
  });
  await follower.start();
  try {
    assertEquals(errors.length, 1, "the follower says another server sends");
    await env.bus.emit("tool.called", toolCalled("from_leader"));
    await otherBus.emit("tool.called", toolCalled("from_follower"));
    await receiver.waitFor(2);
    await new Promise((r) => setTimeout(r, 200));
    const tools = receiver.requests.map((r) =>
      JSON.parse(new TextDecoder().decode(r.body)).data.tool_name
    );
    assertEquals(tools.sort(), ["from_follower", "from_leader"]);
    assertEquals(follower.pending, 0, "the follower schedules nothing");

    // The sender stops: the other server takes over and delivers what comes next.
    await leader.stop();
    await new Promise((r) => setTimeout(r, 100));
    await otherBus.emit("tool.called", toolCalled("after_takeover"));
    await receiver.waitFor(3);
    assertEquals(
      JSON.parse(new TextDecoder().decode(receiver.requests[2].body)).data.tool_name,
      "after_takeover",
    );
  } finally {
    await follower.stop();
  }
});
