/**
 * Retries and failed jobs of incoming webhooks with the real server: a
 * handler that is not there yet is retried on the schedule, then kept as a
 * failed job that `webhooks show`, `incoming failed list|show` and the
 * management API show; once the handler exists, a replay over HTTP runs it
 * through the normal pipeline. A bad replay target exits 2 naming the flag.
 *
 * @module
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";

async function until<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

Deno.test("a payload whose handler is missing is retried, kept as a failed job, listed, shown and replayed", async () => {
  await using tmp = await tempHome();
  const created = await runCli([
    "webhooks",
    "create",
    "--name",
    "later",
    "--path",
    "/hooks/later",
    "--handler",
    "memory_set",
  ], { home: tmp.home });
  assertEquals(created.code, 0, created.stderr);
  const endpointId = created.stdout.split("\n")[0].trim();
  const token = "e2e-token";
  const env = { TOOLGATE_INCOMING_RETRY_BASE_MS: "10", TOOLGATE_API_TOKEN: token };
  const auth = { authorization: `Bearer ${token}` };
  let id: string;
  {
    // The memory plugin is off: memory_set is not there (TOOL_NOT_FOUND, retried).
    await using server = await startHttpServer({
      home: tmp.home,
      env,
      config: { plugins: { disabled: ["memory"] } },
    });
    const response = await fetch(`${server.url}/hooks/later`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: "k", value: 1 }),
    });
    assertEquals(response.status, 202);
    id = (await response.json()).id;
    // Six calls (the first and 5 retries), then a failed job.
    const failed = await until(async () => {
      const list = await (await fetch(`${server.url}/incoming/failed`, { headers: auth })).json();
      return list.jobs?.length ? list.jobs : undefined;
    }, "a failed job");
    assertEquals(failed.length, 1);
    assertEquals(failed[0].id, id);
    assertEquals(failed[0].endpoint_id, endpointId);
    assertEquals(failed[0].attempts.length, 6);
    assert(failed[0].attempts.every((a: { code: string }) => a.code === "TOOL_NOT_FOUND"));
    // The CLI sees it too, with its arguments.
    const listed = await runCli(["incoming", "failed", "list"], { home: tmp.home });
    assertStringIncludes(listed.stdout, id);
    assertStringIncludes(listed.stdout, "TOOL_NOT_FOUND");
    const shown = await runCli(["incoming", "failed", "show", id, "--json"], { home: tmp.home });
    assertEquals(JSON.parse(shown.stdout).arguments, { key: "k", value: 1 });
    // webhooks show lists the payload with its outcome (the log is written on the next poll).
    const show = await until(async () => {
      const run = await runCli(["webhooks", "show", endpointId], { home: tmp.home });
      return run.stdout.includes("failed (6 call(s)): TOOL_NOT_FOUND") ? run.stdout : undefined;
    }, "the payload log");
    assertStringIncludes(show, `toolgate incoming failed show ${id}`);
    // No replay target, or two: exit 2 naming what to give.
    const none = await runCli(["incoming", "failed", "replay"], { home: tmp.home });
    assertEquals(none.code, 2);
    assertStringIncludes(none.stderr, "--endpoint <in_id> or --all");
    const two = await runCli(["incoming", "failed", "replay", id, "--all"], { home: tmp.home });
    assertEquals(two.code, 2);
  }
  // Restarted with the plugin on: a replay over HTTP runs the same job through the pipeline.
  await using server = await startHttpServer({ home: tmp.home, env, config: {} });
  const replayed = await fetch(`${server.url}/incoming/failed/${id}/replay`, {
    method: "POST",
    headers: auth,
  });
  assertEquals(await replayed.json(), { replayed: [id] });
  await until(async () => {
    const run = await runCli(["webhooks", "show", endpointId, "--json"], { home: tmp.home });
    const [entry] = JSON.parse(run.stdout).recent_payloads;
    return entry?.status === "ok" ? entry : undefined;
  }, "the replay to run");
  const got = await fetch(`${server.url}/tools/memory_get`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ key: "k" }),
  });
  assertStringIncludes(await got.text(), '"value":1');
  const list = await (await fetch(`${server.url}/incoming/failed`, { headers: auth })).json();
  assertEquals(list.jobs, []);
});
