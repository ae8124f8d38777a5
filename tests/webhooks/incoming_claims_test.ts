/**
 * Incoming routers of several instances on one PostgreSQL database (a
 * throwaway cluster): each job runs on the instance that claimed it, and the
 * jobs of an instance that stopped answering are taken by another once its
 * claims lapse.
 *
 * @module
 */
import { z } from "zod";
import { assert, assertEquals } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import type { Config } from "../../src/config/mod.ts";
import { EventBus } from "../../src/events/mod.ts";
import { Gateway, type PluginDefinition } from "../../src/gateway/mod.ts";
import type { IncomingWebhook, Store } from "../../src/store/mod.ts";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";
import { IncomingRouter } from "../../src/webhooks/mod.ts";
import { startPostgres } from "../_postgres.ts";
import { testConfig } from "../gateway/_fixtures.ts";

const POLL_MS = 50;

/**
 * A plugin whose `count` tool records how often each `n` was handled, once
 * `gate` resolves (at once without one).
 */
function countingPlugin(counts: Map<number, number>, gate?: Promise<void>): PluginDefinition {
  return {
    name: "counter",
    version: "1.0.0",
    zeroConfig: true,
    tools: [{
      name: "count",
      description: "Counts calls per n",
      input: z.object({ n: z.number().int() }),
      execute: async (args) => {
        await gate;
        const n = args.n as number;
        counts.set(n, (counts.get(n) ?? 0) + 1);
        return { n };
      },
    }],
  };
}

/** One toolgate instance: its own pool on the database, gateway, audit log and router. */
interface Instance extends AsyncDisposable {
  store: Store;
  router: IncomingRouter;
  /** How often its handler ran each `n`. */
  counts: Map<number, number>;
}

async function instance(
  url: string,
  options: {
    gate?: Promise<void>;
    concurrency?: number;
    maxQueuedJobs?: number;
    now?: () => number;
  } = {},
): Promise<Instance> {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-incoming-claims-" });
  const store = await openPostgresStore({ url, dataDir, pool: { max: 4 } });
  const config: Config = {
    ...await testConfig({ webhooks: { poll_ms: POLL_MS } }),
    dataDir,
  };
  const bus = new EventBus();
  const audit = createAuditLog({ store, bus });
  const counts = new Map<number, number>();
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: [countingPlugin(counts, options.gate)],
    audit,
    log: () => {},
  });
  await gateway.start();
  const router = new IncomingRouter({
    store,
    gateway,
    audit,
    config,
    log: () => {},
    concurrency: options.concurrency ?? 2,
    maxQueuedJobs: options.maxQueuedJobs,
    now: options.now,
  });
  return {
    store,
    router,
    counts,
    [Symbol.asyncDispose]: async () => {
      await router.stop();
      await gateway.stop();
      await audit.close();
      await store.close();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
}

async function post(router: IncomingRouter, endpoint: IncomingWebhook, n: number) {
  const response = await router.handle(
    new Request(`http://127.0.0.1${endpoint.path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n }),
    }),
    endpoint,
  );
  await response.body?.cancel();
  assertEquals(response.status, 202);
}

async function until(probe: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await probe()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Every `n` counted once over the instances, none twice. */
function assertOnce(total: number, ...instances: Instance[]): void {
  const all = new Map<number, number>();
  for (const { counts } of instances) {
    for (const [n, times] of counts) all.set(n, (all.get(n) ?? 0) + times);
  }
  assertEquals(all.size, total, "every payload was handled");
  for (const [n, times] of all) assertEquals(times, 1, `payload ${n} ran ${times} times`);
}

Deno.test("incoming routers on one PostgreSQL database", async (t) => {
  await using pg = await startPostgres();

  await t.step("two routers run each job once, whichever accepted it", async () => {
    // A's queue is small: what it cannot hold waits unclaimed, and either takes it.
    await using a = await instance(pg.url, { maxQueuedJobs: 4 });
    await using b = await instance(pg.url);
    const endpoint = await a.store.webhooks.addIncoming({
      name: "shared",
      path: "/hooks/shared",
      handler: "count",
    });
    await a.router.start();
    await b.router.start();
    const total = 80;
    await Promise.all(
      Array.from({ length: total }, (_, n) => post(n % 2 ? a.router : b.router, endpoint, n)),
    );
    await until(async () => (await a.store.incoming.list()).length === 0, "an empty queue");
    // A few more polls: nothing runs twice.
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 4));
    assertOnce(total, a, b);
    assert(b.counts.size > 0 && a.counts.size > 0, "both instances ran jobs");
  });

  await t.step("a stopped router's queued jobs run on the other at once", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => open = resolve);
    await using a = await instance(pg.url, { gate, concurrency: 1 });
    await using b = await instance(pg.url);
    const endpoint = await a.store.webhooks.addIncoming({
      name: "stopped",
      path: "/hooks/stopped",
      handler: "count",
    });
    await a.router.start();
    await b.router.start();
    for (let n = 0; n < 5; n++) await post(a.router, endpoint, n);
    // A runs job 0 (held) and holds 1-4 claimed: B leaves them alone.
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 4));
    assertEquals(b.counts.size, 0);
    const stopping = a.router.stop();
    open();
    await stopping;
    assertEquals([...a.counts.keys()], [0]);
    // Given back on stop: B takes them at its next poll, long before a claim could lapse.
    const started = Date.now();
    await until(() => b.counts.size === 4, "B to run A's queued jobs");
    assert(Date.now() - started < 5000, "taken before A's claims could lapse");
    assertOnce(5, a, b);
  });

  await t.step("a router that stops answering loses its jobs once its claims lapse", async () => {
    // A's handler never finishes (until the end): as good as dead, its claims renewed.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => open = resolve);
    let skew = 0;
    await using a = await instance(pg.url, { gate, concurrency: 1 });
    await using b = await instance(pg.url, { now: () => Date.now() + skew });
    try {
      const endpoint = await a.store.webhooks.addIncoming({
        name: "dead",
        path: "/hooks/dead",
        handler: "count",
      });
      await a.router.start();
      await b.router.start();
      for (let n = 0; n < 5; n++) await post(a.router, endpoint, n);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS * 4));
      assertEquals(b.counts.size, 0, "B leaves A's live claims alone");
      // B's clock past the claims' life (A never renews them so far ahead): they lapsed.
      skew = 60_000;
      await until(() => b.counts.size === 5, "B to take A's jobs");
      await until(async () => (await b.store.incoming.list()).length === 0, "an empty queue");
      assertOnce(5, b);
    } finally {
      open();
    }
    // A finishes the call it had started; the jobs it only held are gone and never run there.
    await a.router.stop();
    assertEquals([...a.counts.keys()], [0]);
  });
});
