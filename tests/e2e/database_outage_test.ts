/**
 * A server on PostgreSQL whose database goes away: calls fail with a clear
 * 503 `STORE_UNAVAILABLE`, and the server recovers by itself once the
 * database is back, with nothing half-written.
 */
import { assertEquals } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { startPostgres } from "../_postgres.ts";
import { startHttpServer } from "./_http_server.ts";

interface Reply {
  status: number;
  retryAfter: string | null;
  body: { structuredContent?: Record<string, unknown>; error?: { code: string } };
}

/** `/health/ready` and `/health`: statuses and the codes of their reasons. */
async function health(url: string) {
  const ready = await fetch(`${url}/health/ready`);
  const readyBody = await ready.json();
  const full = await fetch(`${url}/health`);
  const fullBody = await full.json();
  const codes = (body: { reasons?: { code: string }[] }) => (body.reasons ?? []).map((r) => r.code);
  return {
    ready: ready.status,
    readyCodes: codes(readyBody),
    health: full.status,
    status: fullBody.status as string,
    codes: codes(fullBody),
  };
}

async function call(url: string, tool: string, args: unknown): Promise<Reply> {
  const response = await fetch(`${url}/tools/${tool}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(args),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    body: await response.json(),
  };
}

Deno.test("calls fail with 503 STORE_UNAVAILABLE while the database is down, and work again after; /health/ready says 503 meanwhile", async () => {
  await using pg = await startPostgres();
  await using tmp = await tempHome();
  const env = {
    TOOLGATE_DATABASE_URL: pg.url,
    TOOLGATE_POLL_MS: "100",
  };
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({ store: { connect_timeout_ms: 1000 } }),
  );
  await using server = await startHttpServer({ home: tmp.home, env });
  assertEquals((await call(server.url, "memory_set", { key: "before", value: 1 })).status, 200);
  assertEquals(await health(server.url), {
    ready: 200,
    readyCodes: [],
    health: 200,
    status: "ok",
    codes: [],
  });
  const live = await fetch(`${server.url}/health/live`);
  assertEquals([live.status, (await live.json()).status], [200, "live"]);

  const during: Reply[] = [];
  let down: Awaited<ReturnType<typeof health>> | undefined;
  await pg.restart(async () => {
    // The probe's answer is reused for a second: wait for one made while it is down.
    await until(async () => (await health(server.url)).ready === 503, "not ready", 10_000);
    down = await health(server.url);
    during.push(await call(server.url, "memory_set", { key: "during", value: 2 }));
    during.push(await call(server.url, "memory_get", { key: "before" }));
    // What needs no database still answers.
    const tools = await fetch(`${server.url}/tools`);
    await tools.body?.cancel();
    assertEquals(tools.status, 200);
  });
  for (const reply of during) {
    assertEquals(reply.status, 503, JSON.stringify(reply.body));
    assertEquals(reply.body.error?.code, "STORE_UNAVAILABLE");
    assertEquals(reply.retryAfter, "1");
  }

  // A load balancer takes it out: 503 with the reason; /health still serves (degraded).
  assertEquals(down, {
    ready: 503,
    readyCodes: ["STORE_UNAVAILABLE"],
    health: 200,
    status: "degraded",
    codes: ["STORE_UNAVAILABLE"],
  });
  // Back by itself: no restart of toolgate.
  await until(async () => (await health(server.url)).ready === 200, "ready again", 15_000);
  await until(
    async () => (await call(server.url, "memory_set", { key: "after", value: 3 })).status === 200,
    "recovery",
    15_000,
  );
  // The refused write left nothing behind.
  const got = await call(server.url, "memory_get", { key: "during" });
  assertEquals(got.status, 200);
  assertEquals(got.body.structuredContent, { key: "during", found: false });
  assertEquals(
    (await call(server.url, "memory_get", { key: "after" })).body.structuredContent?.value,
    3,
  );
  await server.stop();
  const verify = await runCli(["audit", "verify", "--json"], { home: tmp.home, env });
  assertEquals(verify.code, 0, verify.stderr + verify.stdout);
  assertEquals(JSON.parse(verify.stdout).ok, true);
});
