/**
 * The delivery lifecycle on both adapters: every (event, webhook) pair ends
 * delivered or dead-lettered, and nothing is left stored after the end.
 *
 * @module
 */
import { assert, assertEquals, assertMatch, assertRejects } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";
import type { Store } from "../../src/store/mod.ts";
import { until } from "../_helpers.ts";
import { EventBus } from "../../src/events/mod.ts";
import {
  createDispatcher,
  type DispatcherConfig,
  listDlq,
  replayDlq,
} from "../../src/webhooks/mod.ts";
import { Receiver } from "./_receiver.ts";
import { LOOPBACK_EGRESS, toolCalled } from "./_setup.ts";
import { type FreshStore, kvStores, postgresStores, type StoreMaker } from "../store/_stores.ts";

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

const LOST = {
  recoverable: "evt_01m8tk6f1rc6kz5hmhzesv76z8",
  lost: "evt_01m8tk6f21f4532xhp7sp4vxbh",
  a: "wh_01m8tk6f15d58rjnca77bfdq5d",
  c: "wh_01m8tk6f1enm0ddwvphfk9cgps",
};

Deno.test("kv: the start-up check dead-letters what 0.1.0 left without a body, recovering bodies from other dead letters", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-lost-" });
  try {
    const fixture = new URL("./fixtures/lost_bodies_0.1.0/", import.meta.url);
    for (const name of ["toolgate.kv", "keychain.key", "dlq.json"]) {
      await Deno.copyFile(new URL(name, fixture), `${dataDir}/${name}`);
      await Deno.chmod(`${dataDir}/${name}`, 0o600);
    }
    await Deno.chmod(dataDir, 0o700);
    const store = await openKvStore({ dataDir });
    try {
      const before = await store.deliveries.listPending();
      assertEquals(before.map((d) => [d.record.event_id, d.record.webhook_id]), [
        [LOST.recoverable, LOST.a],
        [LOST.lost, LOST.a],
      ]);
      const config: DispatcherConfig = {
        dataDir,
        webhooks: { retry_base_ms: 20, timeout_ms: 1000, poll_ms: 50 },
        events: { disabled: [] },
      };
      const errors: unknown[] = [];
      const undeliverable: [string, number][] = [];
      const sent: string[] = [];
      const dispatcher = createDispatcher({
        store,
        bus: new EventBus({}),
        config,
        fetch: (input) => {
          sent.push(input);
          return Promise.resolve(new Response(null, { status: 200 }));
        },
        onError: (error) => errors.push(error),
        onUndeliverable: (reason, count) => undeliverable.push([reason, count]),
      });
      await dispatcher.start();
      try {
        assertEquals(await dispatcher.whenChecked(), { recovered: 1, lost: 1 });
        await dispatcher.whenIdle();
        assertEquals(sent, []);
        assertEquals(await store.deliveries.listPending(), []);
        assertEquals(undeliverable, [["body_missing", 1], ["body_missing", 1]]);
        const dlq = await store.deliveries.listDlq();
        const of = (eventId: string, webhookId: string) =>
          dlq.find((r) => r.event_id === eventId && r.webhook_id === webhookId);
        const sibling = of(LOST.recoverable, LOST.c);
        const recovered = of(LOST.recoverable, LOST.a);
        const lost = of(LOST.lost, LOST.a);
        assert(sibling && recovered && lost, JSON.stringify(dlq));
        assertEquals(dlq.length, 3);
        // The recovered record holds the very bytes the sibling was sent; it replays.
        assertEquals(
          await store.deliveries.readDlqBody(recovered),
          await store.deliveries.readDlqBody(sibling),
        );
        assertEquals(recovered.attempts.map((x) => x.status), [500, 500, 500]);
        assertMatch(recovered.reason ?? "", /recovered from another dead letter/);
        assertEquals(recovered.body_lost, undefined);
        assertEquals(lost.body_lost, true);
        assertEquals(lost.size, 0);
        assertMatch(lost.reason ?? "", /cannot be replayed/);
        const [problem] = dispatcher.problems();
        assertEquals([problem.code, problem.count], ["DELIVERY_BODY_MISSING", 2]);
        const codes = errors.map((error) => (error as { code?: string }).code);
        assertEquals(codes, ["STORE_CORRUPT", "STORE_CORRUPT", "STORE_CORRUPT"]);
        assertMatch(String(errors.at(-1)), /Start-up check: 2 pending deliveries/);
        // The mirror lists all three; the lost one says what is known of its event.
        await until(async () => {
          const mirror = JSON.parse(await Deno.readTextFile(`${dataDir}/dlq.json`));
          return mirror.length === 3;
        }, "dlq.json with three records");
        const lostEntry = (await listDlq(store)).find((e) => e.dlq_id === lost.dlq_id);
        assertEquals(lostEntry?.event, { id: LOST.lost, type: "tool.called" });
        assertEquals(lostEntry?.body_lost, true);
        await assertRejects(
          () => replayDlq(store, lost.dlq_id),
          GatewayError,
          "body was lost",
        );
        assertEquals((await replayDlq(store, recovered.dlq_id)).queued, [recovered.dlq_id]);
      } finally {
        await dispatcher.stop();
      }
      // A second start finds nothing more.
      const again = createDispatcher({
        store,
        bus: new EventBus({}),
        config,
        fetch: () => Promise.resolve(new Response(null, { status: 200 })),
        onError: () => {},
      });
      await again.start();
      assertEquals(await again.whenChecked(), { recovered: 0, lost: 0 });
      await again.stop();
    } finally {
      await store.close();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

/**
 * Issue 33 item 2: a process whose key cannot decrypt a webhook's signing
 * secret (another instance's key) dead-letters that webhook's deliveries
 * with a reason, counts them and reports the problem; the other webhooks
 * are delivered as usual, and a process with the right key replays them.
 */
async function unreadableSecretDeadLetters(
  fresh: StoreMaker,
  otherKey: (env: FreshStore, key: Uint8Array) => Promise<Store>,
): Promise<void> {
  await using env: FreshStore = await fresh();
  await using receiver = new Receiver(() => 200);
  const sealedHere = await env.store.webhooks.addOutgoing({
    url: `${receiver.url}/sealed`,
    events: "*",
    secret: "s3cret",
  });
  const plain = await env.store.webhooks.addOutgoing({ url: `${receiver.url}/plain`, events: "*" });
  const wrong = await otherKey(env, crypto.getRandomValues(new Uint8Array(32)));
  const errors: unknown[] = [];
  const undeliverable: string[] = [];
  const config: DispatcherConfig = {
    dataDir: env.dataDir,
    webhooks: { retry_base_ms: 20, timeout_ms: 2000, poll_ms: 50 },
    events: { disabled: [] },
  };
  const bus = new EventBus({ onListenerError: (error) => errors.push(error) });
  const dispatcher = createDispatcher({
    store: wrong,
    bus,
    config,
    egress: LOOPBACK_EGRESS,
    onError: (error) => errors.push(error),
    onUndeliverable: (reason, count) => undeliverable.push(`${reason}:${count}`),
  });
  await dispatcher.start();
  let event;
  try {
    event = await bus.emit("tool.called", toolCalled("memory_set"));
    await until(
      async () => (await wrong.deliveries.countDlq()) > 0 && receiver.requests.length > 0,
      "one delivery dead-lettered and the other sent",
      10_000,
    );
    await dispatcher.whenIdle();
  } finally {
    await dispatcher.stop();
  }
  assertEquals(receiver.requests.map((r) => r.path), [new URL(`${receiver.url}/plain`).pathname]);
  const [dead, ...more] = await wrong.deliveries.listDlq();
  assertEquals(more, []);
  assertEquals(dead.webhook_id, sealedHere.id);
  assertEquals(dead.attempts, []);
  assertMatch(dead.reason ?? "", /^Not sent: the signing secret cannot be decrypted \(/);
  assertEquals(undeliverable, ["secret_unreadable:1"]);
  assertEquals(dispatcher.problems().map((p) => [p.code, p.count]), [
    ["WEBHOOK_SECRET_UNREADABLE", 1],
  ]);
  const logged = errors.map((error) => String((error as Error).message));
  assert(logged.some((m) => m.startsWith(`Webhook ${sealedHere.id} (`)), logged.join("\n"));
  assertEquals(await wrong.deliveries.listPending(), []);
  // The right key: the replay is signed and delivered.
  const replayed = await replayDlq(env.store, { webhook: sealedHere.id });
  assertEquals(replayed.queued.length, 1);
  const right = createDispatcher({
    store: env.store,
    bus: new EventBus(),
    config,
    egress: LOOPBACK_EGRESS,
  });
  await right.start();
  try {
    await until(() => receiver.requests.length === 2, "the replayed delivery", 10_000);
    await right.whenIdle();
  } finally {
    await right.stop();
  }
  const sent = receiver.requests[1];
  assertEquals(sent.path, new URL(`${receiver.url}/sealed`).pathname);
  assertEquals(sent.headers.get("x-service-delivery"), event!.id);
  assert(sent.headers.get("x-service-signature")?.startsWith("sha256="));
  assertEquals(await env.store.deliveries.countDlq(), 0);
  assertEquals(plain.secret, undefined);
}

Deno.test("kv: a webhook whose secret this process cannot decrypt has its deliveries dead-lettered, the others delivered", async () => {
  await unreadableSecretDeadLetters(
    kvStores(),
    (env, secretKey) => openKvStore({ dataDir: env.dataDir, secretKey }),
  );
});

Deno.test("postgres: a webhook whose secret this process cannot decrypt has its deliveries dead-lettered, the others delivered", async () => {
  await using stores = await postgresStores();
  await unreadableSecretDeadLetters(stores.fresh, async (env, secretKey) => {
    const dataDir = await Deno.makeTempDir({ prefix: "toolgate-other-key-" });
    const store = await openPostgresStore({ url: env.url!, dataDir, secretKey });
    const close = store.close.bind(store);
    store.close = async () => {
      await close();
      await Deno.remove(dataDir, { recursive: true });
    };
    return store;
  });
});
