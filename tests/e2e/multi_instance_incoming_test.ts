/**
 * Incoming webhooks on several toolgate instances sharing one PostgreSQL
 * database: real server processes, a real throwaway PostgreSQL cluster, and
 * a handler (`http_request`) that calls a receiver counting each payload.
 */
import postgres from "postgres";
import { assertEquals } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { startPostgres } from "../_postgres.ts";
import { startHttpServer } from "./_http_server.ts";

/**
 * What the handler calls: counts the requests answered per path, or holds
 * them while `hold` is set (a handler call that does not finish).
 */
function receiver() {
  const answered = new Map<string, number>();
  const arrived: string[] = [];
  let release: (() => void) | undefined;
  let held: Promise<void> | undefined;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const path = new URL(request.url).pathname;
      arrived.push(path);
      if (held) {
        await held;
        return new Response(null, { status: 503 });
      }
      answered.set(path, (answered.get(path) ?? 0) + 1);
      return new Response(null, { status: 204 });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    answered,
    arrived,
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

/** Posts a payload for the `http_request` handler: a GET of `url`. */
async function post(server: string, url: string): Promise<number> {
  const response = await fetch(`${server}/hooks/jobs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ url }),
  });
  await response.body?.cancel();
  return response.status;
}

/**
 * Claims last max(5000, 10 × poll) ms: 5 s here. Instances on one database
 * share one secret key (the store refuses another).
 */
const ENV = {
  TOOLGATE_POLL_MS: "100",
  TOOLGATE_RETRY_BASE_MS: "100",
  TOOLGATE_SECRET_KEY: btoa(String.fromCharCode(...new Uint8Array(32).fill(3))),
};
const CONFIG = { incoming: { concurrency: 2 } };

Deno.test("two instances on one database run each incoming payload once; a killed instance's claimed jobs run on the other", async () => {
  await using pg = await startPostgres();
  await using homeA = await tempHome();
  await using homeB = await tempHome();
  await using hooks = receiver();
  const env = { TOOLGATE_DATABASE_URL: pg.url, ...ENV };
  const created = await runCli(
    ["webhooks", "create", "--name", "jobs", "--url", "/hooks/jobs", "--handler", "http_request"],
    { home: homeA.home, env },
  );
  assertEquals(created.code, 0, created.stderr);
  const a = await startHttpServer({ home: homeA.home, env, config: CONFIG });
  await using b = await startHttpServer({ home: homeB.home, env, config: CONFIG });
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const pending = async () =>
      Number((await sql`select count(*)::int as n from toolgate_incoming_jobs`)[0].n);

    // Payloads posted to both at once, alternately: each handler call runs once.
    const total = 40;
    const statuses = await Promise.all(
      Array.from(
        { length: total },
        (_, i) => post(i % 2 ? a.url : b.url, `${hooks.url}/shared/${i}`),
      ),
    );
    assertEquals(statuses, Array(total).fill(202));
    await until(() => hooks.answered.size >= total, `${total} handler calls`, 10_000);
    await until(async () => await pending() === 0, "an empty queue", 5_000);
    // Several polls later, still nothing ran twice.
    await new Promise((resolve) => setTimeout(resolve, 500));
    assertEquals(hooks.arrived.length, total, "a payload's handler ran twice");

    // A takes six jobs: two run (held at the receiver), four wait claimed in its queue.
    hooks.hold();
    for (let i = 0; i < 6; i++) assertEquals(await post(a.url, `${hooks.url}/killed/${i}`), 202);
    const killed = () => hooks.arrived.filter((path) => path.startsWith("/killed/"));
    await until(() => killed().length >= 2, "A's first two handler calls", 5_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assertEquals(killed().length, 2, "B left A's claimed jobs alone");
    assertEquals(await pending(), 6);
    await a.stop("SIGKILL");
    hooks.open();
    // B takes all six once A's claims lapse: each runs there once.
    await until(
      () => [...hooks.answered.keys()].filter((path) => path.startsWith("/killed/")).length >= 6,
      "B to run the killed instance's jobs",
      12_000,
    );
    await until(async () => await pending() === 0, "an empty queue", 5_000);
    for (let i = 0; i < 6; i++) {
      assertEquals(hooks.answered.get(`/killed/${i}`), 1, `job ${i} after the kill`);
    }
  } finally {
    await sql.end();
    await a.stop("SIGKILL");
  }
  const stopped = await b.stop();
  assertEquals(stopped.code, 0, stopped.stderr);
});
