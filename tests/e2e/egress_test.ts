/**
 * No loops, end to end: a webhook aimed at the server's own incoming
 * endpoint is refused (own listening address) and never reaches the
 * handler, and a request carrying the deployment's loop marker is refused
 * by the incoming endpoint with 508.
 *
 * @module
 */
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";

async function until<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

Deno.test("a webhook at the server's own incoming endpoint is refused, and the loop marker gets 508", async () => {
  await using tmp = await tempHome();
  const created = await runCli(
    ["webhooks", "create", "--name", "loop", "--url", "/hooks/loop", "--handler", "memory_set"],
    { home: tmp.home },
  );
  assertEquals(created.code, 0, created.stderr);
  const seen: Headers[] = [];
  await using receiver = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen.push(req.headers);
    return new Response(null, { status: 204 });
  });
  // Loopback is allowed (the test helpers' TOOLGATE_EGRESS_ALLOW): only the own address stops it.
  await using server = await startHttpServer({ home: tmp.home });
  const add = async (url: string) => {
    const run = await runCli(["webhooks", "add", "--url", url, "--events", "tool.called"], {
      home: tmp.home,
    });
    assertEquals(run.code, 0, run.stderr);
    return run.stdout.trim();
  };
  await add(`http://127.0.0.1:${receiver.addr.port}/hook`);
  const loopId = await add(`${server.url}/hooks/loop`);
  // Give the running server a moment to see both registrations, then cause one event.
  await until(async () => {
    const response = await fetch(`${server.url}/tools/memory_set`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: "k", value: 1 }),
    });
    assertEquals(response.status, 200, await response.text());
    return seen.length > 0 ? true : undefined;
  }, "a delivery to the receiver");
  const marker = seen[0].get("x-toolgate-loop");
  assert(marker !== null && /^dep_[0-9a-z]+$/.test(marker), `marker ${marker}`);

  const store = await openKvStore({ dataDir: tmp.home });
  try {
    const attempts = await until(async () => {
      const log = await store.deliveries.readLog(loopId);
      return log.length ? log : undefined;
    }, "an attempt at the own endpoint");
    assertEquals(attempts[0].ok, false);
    assertMatch(attempts[0].error ?? "", /^EGRESS_DENIED: .*toolgate's own listening address/);
  } finally {
    store.close();
  }

  const looped = await fetch(`${server.url}/hooks/loop`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-toolgate-loop": marker },
    body: JSON.stringify({ key: "loop", value: 2 }),
  });
  assertEquals(looped.status, 508);
  const body = await looped.json();
  assertEquals(body.error.code, "LOOP_DETECTED");
  assertMatch(body.error.message, /came from this toolgate deployment itself/);
  // Nothing of it was recorded: no incoming entry in the audit log.
  const audit = await (await fetch(`${server.url}/audit?limit=1000`)).json();
  assertEquals(
    audit.entries.filter((e: { kind: string }) => e.kind !== "tool.call").map((
      e: { kind: string },
    ) => e.kind),
    [],
  );
  // Another deployment's marker (or none) is an ordinary request.
  const other = await fetch(`${server.url}/hooks/loop`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-toolgate-loop": "dep_other" },
    body: JSON.stringify({ key: "other", value: 3 }),
  });
  assertEquals(other.status, 202, await other.text());
  const stopped = await server.stop();
  assertEquals(stopped.code, 0, stopped.stderr);
});
