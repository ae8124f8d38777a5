/**
 * `toolgate incoming failed list|show|replay|purge` as real processes on a
 * data dir holding failed jobs written by the store's own operations.
 *
 * @module
 */
import { assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";

const AT = Date.UTC(2026, 10, 1);

/** An endpoint with two failed jobs (the second failed a minute later). */
async function seed(home: string): Promise<{ endpoint: string; ids: string[] }> {
  const store = await openKvStore({ dataDir: home });
  try {
    const endpoint = await store.webhooks.addIncoming({
      name: "gh",
      path: "/hooks/gh",
      handler: "memory_set",
    });
    const ids = ["inj_01", "inj_02"];
    for (const [i, id] of ids.entries()) {
      await store.incoming.put({
        id,
        endpoint_id: endpoint.id,
        handler: "memory_set",
        received_at: new Date(AT).toISOString(),
      }, new TextEncoder().encode(JSON.stringify({ key: `k${i}` })));
    }
    const jobs = await store.incoming.claim({ owner: "t", until: AT + 1e6, now: AT, limit: 2 });
    await store.incoming.fail(jobs.map((job, i) => ({
      job,
      attempt: {
        at: new Date(AT + i * 60_000).toISOString(),
        code: "TOOL_INPUT_INVALID",
        message: "Invalid arguments for memory_set: value: Required",
        fields: ["value"],
      },
    })));
    return { endpoint: endpoint.id, ids };
  } finally {
    store.close();
  }
}

Deno.test("incoming failed list, show, replay and purge work on the data dir", async () => {
  await using tmp = await tempHome();
  const { endpoint, ids } = await seed(tmp.home);
  const list = await runCli(["incoming", "failed", "list"], { home: tmp.home });
  assertEquals(list.code, 0, list.stderr);
  assertStringIncludes(list.stdout, "JOB ID");
  assertStringIncludes(list.stdout, `${endpoint} /hooks/gh`);
  assertStringIncludes(list.stdout, "TOOL_INPUT_INVALID: Invalid arguments");
  const json = await runCli(["incoming", "failed", "list", "--json", "--endpoint", endpoint], {
    home: tmp.home,
  });
  assertEquals(JSON.parse(json.stdout).map((j: { id: string }) => j.id), ids);
  const show = await runCli(["incoming", "failed", "show", ids[0]], { home: tmp.home });
  assertEquals(show.code, 0, show.stderr);
  assertStringIncludes(show.stdout, 'arguments: {"key":"k0"}');
  assertStringIncludes(show.stdout, "(fields: value)");
  const missing = await runCli(["incoming", "failed", "show", "inj_nope"], { home: tmp.home });
  assertEquals(missing.code, 1);
  assertStringIncludes(missing.stderr, "No failed incoming job inj_nope");
  const badBefore = await runCli(["incoming", "failed", "purge", "--before", "yesterday"], {
    home: tmp.home,
  });
  assertEquals(badBefore.code, 2);
  assertStringIncludes(badBefore.stderr, "--before");
  const replay = await runCli(["incoming", "failed", "replay", ids[0], "--json"], {
    home: tmp.home,
  });
  assertEquals(JSON.parse(replay.stdout), { replayed: [ids[0]] });
  const purge = await runCli([
    "incoming",
    "failed",
    "purge",
    "--before",
    new Date(AT + 120_000).toISOString(),
  ], { home: tmp.home });
  assertEquals(purge.stdout.trim(), "Purged 1 failed job(s)");
  const empty = await runCli(["incoming", "failed", "list"], { home: tmp.home });
  assertEquals(empty.stdout.trim(), "No failed incoming jobs.");
  // The replayed job waits in the queue for a server, same id.
  const store = await openKvStore({ dataDir: tmp.home });
  try {
    assertEquals((await store.incoming.list()).map((j) => j.id), [ids[0]]);
  } finally {
    store.close();
  }
});

Deno.test("webhooks create refuses a path under /incoming", async () => {
  await using tmp = await tempHome();
  const run = await runCli([
    "webhooks",
    "create",
    "--name",
    "x",
    "--path",
    "/incoming/failed",
    "--handler",
    "memory_set",
  ], { home: tmp.home });
  assertEquals(run.code, 2, run.stderr);
  assertStringIncludes(run.stderr, "/incoming");
});
