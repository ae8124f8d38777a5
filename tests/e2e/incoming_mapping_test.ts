/**
 * Incoming payloads mapped to arguments, filtered, routed and de-duplicated
 * (issue 21 items 2 and 3), with the real server process and CLI: a real
 * GitHub `issues` payload stored with `memory_set`.
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { Webhook } from "standardwebhooks";
import { startHttpServer } from "./_http_server.ts";

/** The parts of a GitHub `issues` event that matter here (the real one has 200 more fields). */
function issuesEvent(action: string, number: number) {
  return {
    action,
    issue: {
      number,
      html_url: `https://github.com/octo/app/issues/${number}`,
      title: `Crash on start #${number}`,
      user: { login: "mona" },
      labels: [{ name: "bug" }],
    },
    repository: { full_name: "octo/app" },
    sender: { login: "mona" },
  };
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

async function memoryGet(url: string, key: string): Promise<unknown> {
  const response = await fetch(`${url}/tools/memory_get`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key }),
  });
  const result = await response.json();
  return result.structuredContent ?? result;
}

Deno.test("a GitHub issues payload is mapped into memory_set's arguments, filtered on its action, de-duplicated on its delivery id", async () => {
  await using tmp = await tempHome();
  const created = await runCli([
    "webhooks",
    "create",
    "--name",
    "github-issues",
    "--url",
    "/hooks/github",
    "--handler",
    "memory_set",
    "--map",
    "key=/issue/html_url",
    "--map",
    "value=/issue/title",
    "--when",
    "/action=opened",
    "--when",
    "header:X-GitHub-Event=issues",
    "--dedupe-header",
    "X-GitHub-Delivery",
    "--json",
  ], { home: tmp.home });
  assertEquals(created.code, 0, created.stderr);
  const endpoint = JSON.parse(created.stdout);
  assertEquals(endpoint.map, { key: "/issue/html_url", value: "/issue/title" });
  const shown = await runCli(["webhooks", "show", endpoint.id], { home: tmp.home });
  assertStringIncludes(shown.stdout, "arguments: key=/issue/html_url, value=/issue/title");
  assertStringIncludes(shown.stdout, "runs when: /action=opened and header:X-GitHub-Event=issues");
  assertStringIncludes(shown.stdout, "de-duplicated on X-GitHub-Delivery (24 h)");

  await using server = await startHttpServer({ home: tmp.home });
  const hook = `${server.url}/hooks/github`;
  const github = (delivery: string) => ({
    "X-GitHub-Event": "issues",
    "X-GitHub-Delivery": delivery,
  });
  const first = await post(hook, issuesEvent("opened", 7), github("d-7"));
  assertEquals(first.status, 202);
  assertEquals(first.body.status, "accepted");
  await until(
    async () =>
      JSON.stringify(await memoryGet(server.url, issuesEvent("opened", 7).issue.html_url))
        .includes("Crash on start #7"),
    "the mapped memory_set call",
  );

  const again = await post(hook, issuesEvent("opened", 7), github("d-7"));
  assertEquals(again, { status: 200, body: { id: first.body.id, status: "duplicate" } });

  const closed = await post(hook, issuesEvent("closed", 8), github("d-8"));
  assertEquals(closed.status, 202);
  assertEquals(closed.body.status, "skipped");
  assertEquals(closed.body.reason, "--when /action=opened does not hold");
  const ping = await post(hook, { zen: "Keep it simple" }, {
    "X-GitHub-Event": "ping",
    "X-GitHub-Delivery": "d-ping",
  });
  assertEquals(ping.body.status, "skipped");

  const audit = await (await fetch(`${server.url}/audit?kind=webhook.incoming&limit=100`)).json();
  const outcomes = audit.entries.map((e: { outcome: Record<string, unknown> }) => e.outcome);
  assertEquals(outcomes.length, 3, "the duplicate is not recorded again");
  assertEquals(outcomes.filter((o: { skipped?: string }) => o.skipped).length, 2);
  const notStored = await memoryGet(server.url, issuesEvent("closed", 8).issue.html_url);
  assert(!JSON.stringify(notStored).includes("#8"), "a skipped payload runs nothing");
  await server.stop();
});

Deno.test("routes pick the handler by header; a mapping the handler refuses is named at create and at the first payload", async () => {
  await using tmp = await tempHome();
  const created = await runCli([
    "webhooks",
    "create",
    "--name",
    "routed",
    "--url",
    "/hooks/routed",
    "--handler",
    "memory_set",
    "--route-by",
    "header:X-Kind",
    "--route",
    "lookup=memory_get",
    "--map",
    "key=/name",
    "--map",
    "content=/text",
  ], { home: tmp.home });
  assertEquals(created.code, 0, created.stderr);
  assertStringIncludes(created.stderr, "memory_set takes key, value");
  assertStringIncludes(created.stderr, "--map gives it content, which it refuses");

  await using server = await startHttpServer({ home: tmp.home });
  const hook = `${server.url}/hooks/routed`;
  const routed = await fetch(`${hook}?wait=true`, {
    method: "POST",
    headers: { "content-type": "application/json", "X-Kind": "lookup" },
    body: JSON.stringify({ name: "nothing-here" }),
  });
  const body = await routed.json();
  assertEquals(routed.status, 200, JSON.stringify(body));
  assertEquals(body.status, "completed", "memory_get ran: content is left out, key mapped");

  const refused = await fetch(hook, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "a", text: "b" }),
  });
  assertEquals(refused.status, 202);
  await refused.body?.cancel();
  const second = await fetch(hook, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "c", text: "d" }),
  });
  await second.body?.cancel();
  let stderr = "";
  await until(async () => {
    const shown = await runCli([
      "webhooks",
      "show",
      "--json",
      JSON.parse(
        (await runCli(["webhooks", "list", "--json", "--incoming"], { home: tmp.home })).stdout,
      ).incoming[0].id,
    ], { home: tmp.home });
    return JSON.parse(shown.stdout).stats.failed === 2;
  }, "both payloads to fail");
  ({ stderr } = await server.stop());
  const reports = stderr.split("\n").filter((line) => line.includes("its --map gives memory_set"));
  assertEquals(reports.length, 1, `reported once:\n${stderr}`);
  assertStringIncludes(reports[0], "incoming /hooks/routed");
});

Deno.test("bad --map, --when and --route values exit 2 naming the flag, and nothing is stored", async () => {
  await using tmp = await tempHome();
  const base = [
    "webhooks",
    "create",
    "--name",
    "x",
    "--url",
    "/hooks/x",
    "--handler",
    "memory_set",
  ];
  const cases: [string[], string][] = [
    [["--map", "key=issue/title"], 'Invalid --map "issue/title": expected a JSON Pointer'],
    [["--map", "/issue/title"], 'Invalid --map "/issue/title": expected <argument>=<source>'],
    [["--map", "key=/a", "--map", "key=/b"], 'argument "key" is mapped twice'],
    [["--when", "action=opened"], 'Invalid --when "action": expected a JSON Pointer'],
    [["--route", "push=deploy"], "give --route-by <source>"],
    [["--dedupe-header", "X Delivery"], 'Invalid --dedupe-header "X Delivery"'],
  ];
  for (const [flags, message] of cases) {
    const run = await runCli([...base, ...flags], { home: tmp.home });
    assertEquals(run.code, 2, `${flags.join(" ")}: ${run.stderr}`);
    assertStringIncludes(run.stderr, message);
  }
  const listed = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(listed.incoming, []);
});

Deno.test("a Standard Webhooks endpoint de-duplicates on the signed webhook-id without --dedupe-header", async () => {
  await using tmp = await tempHome();
  const secret = "whsec_" + btoa("a-32-byte-secret-for-the-test!!!");
  const created = await runCli([
    "webhooks",
    "create",
    "--name",
    "svix",
    "--path",
    "/hooks/svix",
    "--handler",
    "memory_set",
    "--secret",
    secret,
    "--verify",
    "standard-webhooks",
  ], { home: tmp.home });
  assertEquals(created.code, 0, created.stderr);
  await using server = await startHttpServer({ home: tmp.home });
  const webhook = new Webhook(secret);
  const send = async (id: string, key: string) => {
    const body = JSON.stringify({ key, value: 1 });
    const now = new Date();
    const response = await fetch(`${server.url}/hooks/svix`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
        "webhook-signature": webhook.sign(id, now, body),
      },
      body,
    });
    return { status: response.status, body: await response.json() };
  };
  const first = await send("msg_1", "a");
  assertEquals(first.status, 202);
  const again = await send("msg_1", "b");
  assertEquals(again, { status: 200, body: { id: first.body.id, status: "duplicate" } });
  assertEquals((await send("msg_2", "c")).status, 202);
  await server.stop();
});
