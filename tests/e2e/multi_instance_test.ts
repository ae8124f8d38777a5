/**
 * Several toolgate instances on one PostgreSQL database: real server
 * processes, a real receiver, a real throwaway PostgreSQL cluster.
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { initializeRequest, runCli, tempHome, until } from "../_helpers.ts";
import { startPostgres } from "../_postgres.ts";
import { startHttpServer } from "./_http_server.ts";

interface Delivery {
  id: string;
  type: string;
}

/** A webhook receiver on 127.0.0.1 that answers 200, or holds requests while `hold` is set. */
function receiver() {
  const deliveries: Delivery[] = [];
  let release: (() => void) | undefined;
  let held: Promise<void> | undefined;
  let arrivals = 0;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      arrivals++;
      const body = await request.json();
      if (held) {
        await held;
        return new Response(null, { status: 503 });
      }
      deliveries.push({ id: body.id, type: body.type });
      return new Response(null, { status: 204 });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    deliveries,
    get arrivals() {
      return arrivals;
    },
    /** Holds every request until `open()`, then fails those held (the sender retries). */
    hold() {
      held = new Promise((resolve) => release = resolve);
    },
    open() {
      held = undefined;
      release?.();
    },
    [Symbol.asyncDispose]: async () => {
      release?.();
      await server.shutdown();
    },
  };
}

async function call(url: string, tool: string, args: unknown): Promise<number> {
  const response = await fetch(`${url}/tools/${tool}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(args),
  });
  await response.body?.cancel();
  return response.status;
}

/** Instances on one database share the key sealing webhook secrets (docs/storage.md). */
const SECRET_KEY = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
const FAST = {
  TOOLGATE_RETRY_BASE_MS: "100",
  TOOLGATE_POLL_MS: "100",
  TOOLGATE_SECRET_KEY: SECRET_KEY,
};

Deno.test("two instances on one database serve REST and MCP, share registrations, and each event arrives once", async () => {
  await using pg = await startPostgres();
  await using homeA = await tempHome();
  await using homeB = await tempHome();
  const env = { TOOLGATE_DATABASE_URL: pg.url, ...FAST };
  await using hooks = receiver();
  const added = await runCli(
    ["webhooks", "add", "--url", hooks.url, "--events", "tool.called"],
    { home: homeA.home, env },
  );
  assertEquals(added.code, 0, added.stderr);
  await using a = await startHttpServer({ home: homeA.home, env });
  await using b = await startHttpServer({ home: homeB.home, env });

  // MCP on both.
  for (const server of [a, b]) {
    const response = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify(initializeRequest()),
    });
    assertEquals(response.status, 200);
    assertStringIncludes(await response.text(), '"serverInfo"');
  }

  // /events on A streams B's events too.
  const stream = await fetch(`${a.url}/events?types=tool.called`);
  const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
  let streamed = "";
  const reading = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      streamed += value;
    }
  })();

  const calls = 20;
  for (let i = 0; i < calls; i++) {
    assertEquals(await call(i % 2 ? a.url : b.url, "memory_set", { key: `k${i}`, value: i }), 200);
  }
  await until(() => hooks.deliveries.length >= calls, `${calls} deliveries`, 20_000);
  const ids = hooks.deliveries.map((d) => d.id);
  assertEquals(new Set(ids).size, ids.length, "an event was delivered twice");
  await until(
    () => (streamed.match(/event: tool\.called/g) ?? []).length >= calls,
    "/events on A",
    10_000,
  );

  // A webhook added through the CLI against the database reaches both instances.
  await using later = receiver();
  const second = await runCli(
    ["webhooks", "add", "--url", later.url, "--events", "tool.called"],
    { home: homeB.home, env },
  );
  assertEquals(second.code, 0, second.stderr);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assertEquals(await call(a.url, "memory_get", { key: "k1" }), 200);
  assertEquals(await call(b.url, "memory_get", { key: "k2" }), 200);
  await until(() => later.deliveries.length >= 2, "the later webhook used by both", 10_000);

  await reader.cancel();
  await reading.catch(() => {});
  await a.stop();
  await b.stop();
});

Deno.test("kill -9 of the instance holding claims mid-delivery: every event still arrives", async () => {
  await using pg = await startPostgres();
  await using homeA = await tempHome();
  await using homeB = await tempHome();
  const env = { TOOLGATE_DATABASE_URL: pg.url, ...FAST };
  await using hooks = receiver();
  const added = await runCli(
    ["webhooks", "add", "--url", hooks.url, "--events", "tool.called"],
    { home: homeA.home, env },
  );
  assertEquals(added.code, 0, added.stderr);
  hooks.hold();
  const a = await startHttpServer({ home: homeA.home, env });
  const calls = 10;
  for (let i = 0; i < calls; i++) {
    assertEquals(await call(a.url, "memory_set", { key: `k${i}`, value: i }), 200);
  }
  // A claimed them and is mid-delivery (its requests are held).
  await until(() => hooks.arrivals >= calls, "A's first attempts", 10_000);
  await a.stop("SIGKILL");
  hooks.open();
  await using b = await startHttpServer({ home: homeB.home, env });
  // B takes A's deliveries once A's claims lapse.
  await until(
    () => new Set(hooks.deliveries.map((d) => d.id)).size >= calls,
    "every event",
    30_000,
  );
  await b.stop();
});

Deno.test("500 concurrent audited calls over two instances leave one contiguous, intact chain", async () => {
  await using pg = await startPostgres();
  await using homeA = await tempHome();
  await using homeB = await tempHome();
  const env = { TOOLGATE_DATABASE_URL: pg.url, ...FAST };
  await using a = await startHttpServer({ home: homeA.home, env });
  await using b = await startHttpServer({ home: homeB.home, env });
  const total = 500;
  const statuses = await Promise.all(
    Array.from(
      { length: total },
      (_, i) => call(i % 2 ? a.url : b.url, "memory_set", { key: `c${i}`, value: i }),
    ),
  );
  assert(statuses.every((status) => status === 200), `statuses: ${[...new Set(statuses)]}`);
  await a.stop();
  await b.stop();
  const verify = await runCli(["audit", "verify", "--json"], { home: homeA.home, env });
  assertEquals(verify.code, 0, verify.stderr + verify.stdout);
  const result = JSON.parse(verify.stdout);
  assertEquals(result.ok ?? result.intact, true, verify.stdout);
  const list = await runCli(["audit", "list", "--json", "--limit", "1000"], {
    home: homeB.home,
    env,
  });
  assertEquals(list.code, 0, list.stderr);
  const entries: { seq: number; tool: string }[] = JSON.parse(list.stdout).entries ??
    JSON.parse(list.stdout);
  const seqs = entries.map((e) => e.seq);
  assertEquals(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1));
  assert(entries.filter((e) => e.tool === "memory_set").length >= total);
});
