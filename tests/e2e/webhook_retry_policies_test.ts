/**
 * Retry policies end to end (issue 20 item 5): the real server process, the
 * real CLI and a real receiver on 127.0.0.1.
 */
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";

function receiver(status: () => number) {
  const requests: { id: string | null }[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      await request.body?.cancel();
      requests.push({ id: request.headers.get("x-service-delivery") });
      return new Response(null, { status: status() });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    requests,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

async function call(url: string, key: string): Promise<void> {
  const response = await fetch(`${url}/tools/memory_set`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key, value: 1 }),
  });
  await response.body?.cancel();
  assertEquals(response.status, 200);
}

interface DlqListed {
  dlq_id: string;
  event: { id: string };
  webhook_id: string;
  reason?: string;
  attempts: { status?: number }[];
}

Deno.test("a 410 disables the webhook: /health and the log say so, its events wait in the DLQ; enable and replay --webhook catch up", async () => {
  await using tmp = await tempHome();
  let status = 410;
  await using hook = receiver(() => status);
  const added = await runCli(
    ["webhooks", "add", "--url", hook.url, "--events", "tool.called", "--json"],
    { home: tmp.home },
  );
  assertEquals(added.code, 0, added.stderr);
  const id = JSON.parse(added.stdout).id as string;
  await using server = await startHttpServer({ home: tmp.home });
  await call(server.url, "first");
  let health: { disabled_webhooks: { id: string; reason: string; at: string }[] } = {
    disabled_webhooks: [],
  };
  await until(async () => {
    health = await (await fetch(`${server.url}/health`)).json();
    return health.disabled_webhooks.length === 1;
  }, "/health to list the disabled webhook");
  assertEquals(health.disabled_webhooks[0].id, id);
  assertEquals(health.disabled_webhooks[0].reason, "gone");
  assert(!JSON.stringify(health).includes(hook.url), "/health needs no token: no URL in it");

  await call(server.url, "second");
  let records: DlqListed[] = [];
  await until(async () => {
    records = JSON.parse((await runCli(["dlq", "list", "--json"], { home: tmp.home })).stdout);
    return records.length === 2;
  }, "both events in the DLQ");
  assertEquals(hook.requests.length, 1, "nothing is sent after the 410");
  assertEquals(records[0].attempts.map((a) => a.status), [410]);
  assertEquals(records[1].attempts, []);
  assertStringIncludes(records[1].reason ?? "", "disabled after a 410 Gone");
  const table = await runCli(["dlq", "list"], { home: tmp.home });
  assertStringIncludes(table.stdout, "Not sent: the webhook was disabled");

  const refused = await runCli(["dlq", "replay", "--webhook", id], { home: tmp.home });
  assertEquals(refused.code, 1);
  assertStringIncludes(refused.stderr, `enable it first with \`toolgate webhooks enable ${id}\``);
  const badSince = await runCli(["dlq", "replay", "--webhook", id, "--since", "last week"], {
    home: tmp.home,
  });
  assertEquals(badSince.code, 2);
  assertStringIncludes(badSince.stderr, 'Invalid --since "last week": expected an ISO time');
  const both = await runCli(["dlq", "replay", "--all", "--webhook", id], { home: tmp.home });
  assertEquals(both.code, 2);
  assertStringIncludes(both.stderr, "give only one of <dlq_id>, --webhook <id> or --all");

  status = 200; // the receiver is back
  const enabled = await runCli(["webhooks", "enable", id], { home: tmp.home });
  assertEquals(enabled.code, 0, enabled.stderr);
  const replay = await runCli(["dlq", "replay", "--webhook", id, "--json"], { home: tmp.home });
  assertEquals(replay.code, 0, replay.stderr);
  assertEquals(JSON.parse(replay.stdout).queued.length, 2);
  await until(() => hook.requests.length === 3, "the two missed events");
  assertEquals(
    hook.requests.slice(1).map((r) => r.id),
    records.map((r) => r.event.id),
    "sent again, oldest first, with their event ids",
  );
  await until(async () => {
    const left = JSON.parse((await runCli(["dlq", "list", "--json"], { home: tmp.home })).stdout);
    return left.length === 0;
  }, "the DLQ to empty");
  health = await (await fetch(`${server.url}/health`)).json();
  assertEquals(health.disabled_webhooks, []);

  const { stderr } = await server.stop();
  assertStringIncludes(
    stderr,
    `Webhook ${id} (${hook.url}) disabled: the receiver answered 410 Gone`,
  );
});

Deno.test("webhooks add --retry-schedule stores the schedule; a bad one exits 2 naming the entry", async () => {
  await using tmp = await tempHome();
  const added = await runCli(
    ["webhooks", "add", "--url", "https://example.com/h", "--retry-schedule", "5s,5m,2h", "--json"],
    { home: tmp.home },
  );
  assertEquals(added.code, 0, added.stderr);
  assertEquals(JSON.parse(added.stdout).retry_schedule_ms, [5000, 300_000, 7_200_000]);
  const bad = await runCli(
    ["webhooks", "add", "--url", "https://example.com/h", "--retry-schedule", "5s,8d"],
    { home: tmp.home },
  );
  assertEquals(bad.code, 2);
  assertStringIncludes(bad.stderr, 'Invalid --retry-schedule delay "8d"');
  const listed = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(listed.outgoing.length, 1, "nothing stored for the bad one");
});
