/**
 * The delivery lifecycle on both adapters: every (event, webhook) pair ends
 * delivered or dead-lettered, and nothing is left stored after the end.
 *
 * @module
 */
import { assertEquals } from "../_asserts.ts";
import { until } from "../_helpers.ts";
import { EventBus } from "../../src/events/mod.ts";
import { createDispatcher, type DispatcherConfig } from "../../src/webhooks/mod.ts";
import { Receiver } from "./_receiver.ts";
import { LOOPBACK_EGRESS, toolCalled } from "./_setup.ts";
import { type FreshStore, kvStores, postgresStores, type StoreMaker } from "./_stores.ts";

/**
 * Issue 33: receiver A always fails, B fails twice and then answers 200. B's
 * success on its third attempt came while A's record waited in the store (a
 * retry due past the claim horizon is given back), and on Deno KV the
 * collection of the event deleted its body under A: A's last three attempts
 * and its dead letter were lost.
 */
async function successOnRetryKeepsTheOthers(fresh: StoreMaker): Promise<void> {
  await using env: FreshStore = await fresh();
  await using a = new Receiver(() => 500);
  await using b = new Receiver((_request, index) => index < 2 ? 503 : 200);
  const { store } = env;
  // A's third retry is due past the horizon (1 s at poll_ms 50): given back to the store.
  const hookA = await store.webhooks.addOutgoing({
    url: a.url,
    events: "*",
    secret: "s3cret",
    retry_schedule_ms: [10, 10, 1100, 10, 10],
  });
  const hookB = await store.webhooks.addOutgoing({
    url: b.url,
    events: "*",
    secret: "s3cret",
    retry_schedule_ms: [10, 10, 10, 10, 10],
  });
  const errors: unknown[] = [];
  const config: DispatcherConfig = {
    dataDir: env.dataDir,
    webhooks: { retry_base_ms: 250, timeout_ms: 2000, poll_ms: 50 },
    events: { disabled: [] },
  };
  const bus = new EventBus({ onListenerError: (error) => errors.push(error) });
  // B answers its third attempt a little after A's has failed and been given back.
  const slowB = async (input: string, init: RequestInit) => {
    if (input.startsWith(b.origin) && b.requests.length >= 2) {
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    return await fetch(input, init);
  };
  const dispatcher = createDispatcher({
    store,
    bus,
    config,
    fetch: slowB,
    random: () => 0,
    egress: LOOPBACK_EGRESS,
    onError: (error) => errors.push(error),
  });
  await dispatcher.start();
  try {
    const event = await bus.emit("tool.called", toolCalled("memory_set"));
    await until(
      async () => (await store.deliveries.countDlq()) > 0,
      "A's delivery in the dead-letter queue",
      15_000,
    );
    await dispatcher.whenIdle();
    assertEquals(a.requests.length, 6);
    assertEquals(b.requests.length, 3);
    const [dead, ...more] = await store.deliveries.listDlq();
    assertEquals(more, []);
    assertEquals(dead.webhook_id, hookA.id);
    assertEquals(dead.event_id, event!.id);
    assertEquals(dead.attempts.map((x) => x.status), [500, 500, 500, 500, 500, 500]);
    assertEquals(await store.deliveries.listPending(), []);
    assertEquals(await store.deliveries.readEvent(event!.id), null);
    const log = await store.deliveries.readLog(hookB.id);
    assertEquals(log.map((entry) => entry.ok), [true, false, false]);
    assertEquals(
      errors.map((error) => (error as { code?: string }).code),
      ["DELIVERY_FAILED"],
    );
  } finally {
    await dispatcher.stop();
  }
}

Deno.test("kv: one webhook delivered on a retry does not drop another's waiting delivery", async () => {
  await successOnRetryKeepsTheOthers(kvStores());
});

Deno.test("postgres: one webhook delivered on a retry does not drop another's waiting delivery", async () => {
  await using stores = await postgresStores();
  await successOnRetryKeepsTheOthers(stores.fresh);
});
