import { createHmac, timingSafeEqual } from "node:crypto";
import { Buffer } from "node:buffer";
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { LOOPBACK_ALLOW, ROOT, runCli, tempHome, until } from "../_helpers.ts";
import {
  ALL_EVENT_DATA_SCHEMAS,
  EVENT_TYPES,
  EventEnvelopeSchema,
  type EventType,
} from "../../src/events/mod.ts";
import { VERSION } from "../../src/version.ts";
import { startHttpServer } from "./_http_server.ts";

interface Received {
  headers: Headers;
  raw: Uint8Array;
  body: { id: string; type: string; data: Record<string, unknown> };
}

function receiver(status: () => number | Promise<number> = () => 200) {
  const requests: Received[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const raw = new Uint8Array(await request.arrayBuffer());
      requests.push({
        headers: request.headers,
        raw,
        body: JSON.parse(new TextDecoder().decode(raw)),
      });
      return new Response(null, { status: await status() });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    requests,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

function post(url: string, tool: string, args: unknown) {
  return fetch(`${url}/tools/${tool}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(args),
  }).then((r) => r.body?.cancel());
}

Deno.test("all 8 event types reach a real receiver with the spec's headers, fields and signature", async () => {
  await using tmp = await tempHome();
  await using all = receiver();
  await using filtered = receiver();
  const addAll = await runCli(["webhooks", "add", "--url", all.url, "--secret", "whsec"], {
    home: tmp.home,
  });
  assertEquals(addAll.code, 0, addAll.stderr);
  const addFiltered = await runCli(
    ["webhooks", "add", "--url", filtered.url, "--events", "tool.called", "--no-secret"],
    { home: tmp.home },
  );
  assertEquals(addFiltered.code, 0, addFiltered.stderr);
  await using server = await startHttpServer({
    home: tmp.home,
    config: { tools: { circuit_threshold: 1, circuit_reset_ms: 300 } },
    env: { TOOLGATE_RETRY_BASE_MS: "50" },
  });
  await post(server.url, "memory_set", { key: "k", value: 1 });
  await post(server.url, "http_request", { url: "http://127.0.0.1:9/unreachable" });
  await until(() => new Set(all.requests.map((r) => r.body.type)).size === 8, "all 8 event types");

  for (const { headers, raw, body } of all.requests) {
    const envelope = EventEnvelopeSchema.strict().parse(body);
    ALL_EVENT_DATA_SCHEMAS[envelope.type as EventType].strict().parse(envelope.data);
    assertEquals(headers.get("content-type"), "application/json");
    assertEquals(headers.get("x-service-event"), envelope.type);
    assertEquals(headers.get("x-service-delivery"), envelope.id);
    assertMatch(envelope.id, /^evt_/);
    assertEquals(headers.get("x-service-version"), VERSION);
    assertEquals(headers.get("user-agent"), `Service-Webhooks/${VERSION}`);
    const expected = Buffer.from(
      "sha256=" + createHmac("sha256", "whsec").update(raw).digest("hex"),
    );
    const signature = Buffer.from(headers.get("x-service-signature") ?? "");
    assert(signature.length === expected.length && timingSafeEqual(signature, expected));
  }
  const byType = (type: string) =>
    all.requests.filter((r) => r.body.type === type).map((r) => r.body.data);
  assertEquals(byType("server.started")[0].transport, "http");
  assertEquals(byType("plugin.error")[0], {
    plugin_name: "slack",
    error:
      "Plugin slack is not configured: slack.bot_token is not set; store it with toolgate keychain set slack.bot_token",
    error_code: "PLUGIN_NOT_CONFIGURED",
    state: "not_configured",
  });
  assertEquals(byType("tool.failed")[0].error_code, "PLUGIN_REQUEST_FAILED");
  assertEquals(byType("circuit.opened")[0].threshold, 1);
  assertEquals(byType("circuit.closed")[0].tool_name, "http_request");
  assertEquals(new Set(EVENT_TYPES), new Set(all.requests.map((r) => r.body.type)));

  await until(() => filtered.requests.length >= 1, "the filtered delivery");
  await new Promise((r) => setTimeout(r, 200));
  assertEquals(filtered.requests.map((r) => r.body.type), ["tool.called"]);
  assertEquals(filtered.requests[0].headers.get("x-service-signature"), null);
});

Deno.test("kill -9 while a delivery waits for a retry: after restart it continues and is delivered", async () => {
  await using tmp = await tempHome();
  let failing = true;
  await using hook = receiver(() => failing ? 500 : 200);
  const add = await runCli(
    ["webhooks", "add", "--url", hook.url, "--events", "tool.called"],
    { home: tmp.home },
  );
  const id = add.stdout.trim();
  const env = { TOOLGATE_RETRY_BASE_MS: "400" };
  const first = await startHttpServer({ home: tmp.home, env });
  await post(first.url, "memory_set", { key: "k", value: 1 });
  // Two attempts recorded (the first try and retry 1), retry 2 is scheduled.
  await until(async () => {
    const show = await runCli(["webhooks", "show", id, "--json"], { home: tmp.home });
    return JSON.parse(show.stdout).recent_attempts.length >= 2;
  }, "two recorded attempts");
  await first.stop("SIGKILL");
  assertEquals(hook.requests.length, 2);
  failing = false;

  await using second = await startHttpServer({ home: tmp.home, env });
  await until(() => hook.requests.length >= 3, "the delivery after restart");
  await new Promise((r) => setTimeout(r, 400));
  assertEquals(hook.requests.length, 3, "exactly one more attempt after the restart");
  assertEquals(new Set(hook.requests.map((r) => r.headers.get("x-service-delivery"))).size, 1);
  const bodies = hook.requests.map((r) => new TextDecoder().decode(r.raw));
  assertEquals(new Set(bodies).size, 1, "the same bytes on every attempt");
  const show = JSON.parse(
    (await runCli(["webhooks", "show", id, "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(
    show.recent_attempts.map((a: { attempt: number; ok: boolean }) => [a.attempt, a.ok]).reverse(),
    [[1, false], [2, false], [3, true]],
  );
  const dlq = JSON.parse((await runCli(["dlq", "list", "--json"], { home: tmp.home })).stdout);
  assertEquals(dlq, []);
  await second.stop();
});

Deno.test("kill -9 during first attempts: after restart only the webhooks not yet served get the event", async () => {
  await using tmp = await tempHome();
  await using fast = receiver();
  let release = () => {};
  const released = new Promise<void>((resolve) => release = resolve);
  // The first request hangs until the server is gone; later ones get 200.
  await using stuck = receiver(() => stuck.requests.length === 1 ? released.then(() => 200) : 200);
  const add = (url: string) =>
    runCli(["webhooks", "add", "--url", url, "--events", "tool.called"], { home: tmp.home })
      .then((run) => run.stdout.trim());
  const fastId = await add(fast.url);
  await add(stuck.url);
  const env = { TOOLGATE_WEBHOOK_TIMEOUT_MS: "30000" };
  const first = await startHttpServer({ home: tmp.home, env });
  await post(first.url, "memory_set", { key: "k", value: 1 });
  // The fast webhook's outcome (its log entry and the event's fan-out list
  // without it) is committed while the other's first attempt hangs.
  await until(async () => {
    const show = await runCli(["webhooks", "show", fastId, "--json"], { home: tmp.home });
    return JSON.parse(show.stdout).recent_attempts.length === 1 && stuck.requests.length === 1;
  }, "the fast delivery recorded and the other in flight");
  await first.stop("SIGKILL");
  release();

  await using second = await startHttpServer({ home: tmp.home, env });
  await until(() => stuck.requests.length >= 2, "the pending delivery after restart");
  await new Promise((r) => setTimeout(r, 400));
  assertEquals([fast.requests.length, stuck.requests.length], [1, 2]);
  assertEquals(stuck.requests[1].body.id, stuck.requests[0].body.id);
  assertEquals(stuck.requests[1].body.id, fast.requests[0].body.id);
  await second.stop();
});

Deno.test("a receiver that always fails lands in the DLQ; dlq replay delivers it once fixed", async () => {
  await using tmp = await tempHome();
  let failing = true;
  await using hook = receiver(() => failing ? 503 : 200);
  await runCli(["webhooks", "add", "--url", hook.url, "--events", "tool.called"], {
    home: tmp.home,
  });
  await using server = await startHttpServer({
    home: tmp.home,
    env: { TOOLGATE_RETRY_BASE_MS: "10" },
  });
  await post(server.url, "memory_set", { key: "k", value: 1 });
  let records: { dlq_id: string; attempts: unknown[]; event: { id: string } }[] = [];
  await until(async () => {
    records = JSON.parse((await runCli(["dlq", "list", "--json"], { home: tmp.home })).stdout);
    return records.length === 1;
  }, "the DLQ record");
  assertEquals(records[0].attempts.length, 6);
  assertEquals(hook.requests.length, 6);
  const mirror = JSON.parse(await Deno.readTextFile(`${tmp.home}/dlq.json`));
  assertEquals(mirror.map((r: { dlq_id: string }) => r.dlq_id), [records[0].dlq_id]);
  failing = false;
  const replay = await runCli(["dlq", "replay", records[0].dlq_id], { home: tmp.home });
  assertEquals(replay.code, 0, replay.stderr);
  await until(() => hook.requests.length === 7, "the replayed delivery");
  assertEquals(hook.requests[6].body.id, records[0].event.id);
  await until(async () => {
    const left = JSON.parse((await runCli(["dlq", "list", "--json"], { home: tmp.home })).stdout);
    return left.length === 0;
  }, "the DLQ to empty");
});

Deno.test("webhooks added and removed by the CLI while the server runs take effect within a second", async () => {
  await using tmp = await tempHome();
  await using hook = receiver();
  await using server = await startHttpServer({ home: tmp.home });
  const add = await runCli(["webhooks", "add", "--url", hook.url, "--events", "tool.called"], {
    home: tmp.home,
  });
  const id = add.stdout.trim();
  const added = Date.now();
  await until(async () => {
    await post(server.url, "memory_set", { key: "k", value: 1 });
    return hook.requests.length > 0;
  }, "the first delivery");
  assert(Date.now() - added < 1500, `took ${Date.now() - added} ms`);
  assertEquals((await runCli(["webhooks", "remove", id], { home: tmp.home })).code, 0);
  await new Promise((r) => setTimeout(r, 1000));
  const before = hook.requests.length;
  await post(server.url, "memory_set", { key: "k", value: 2 });
  await new Promise((r) => setTimeout(r, 300));
  assertEquals(hook.requests.length, before, "no delivery after removal");
});

Deno.test("two servers on one data dir deliver each event once; after kill -9 the other takes over", async () => {
  await using tmp = await tempHome();
  await using hook = receiver();
  await runCli(["webhooks", "add", "--url", hook.url, "--events", "tool.called"], {
    home: tmp.home,
  });
  const first = await startHttpServer({ home: tmp.home });
  await using second = await startHttpServer({ home: tmp.home });
  await post(first.url, "memory_set", { key: "a", value: 1 });
  await post(second.url, "memory_set", { key: "b", value: 2 });
  await until(() => hook.requests.length >= 2, "both deliveries");
  await new Promise((r) => setTimeout(r, 500));
  assertEquals(hook.requests.length, 2, "each event exactly once");
  assertEquals(new Set(hook.requests.map((r) => r.body.id)).size, 2);
  await first.stop("SIGKILL");
  await post(second.url, "memory_set", { key: "c", value: 3 });
  await until(() => hook.requests.length >= 3, "the delivery after the takeover", 5000);
  assertEquals(
    (hook.requests[2].body.data as { input: { key: string } }).input.key,
    "c",
  );
});

Deno.test("a stdio server delivers server.started with transport stdio and its plugin events", async () => {
  await using tmp = await tempHome();
  await using hook = receiver();
  await runCli(
    ["webhooks", "add", "--url", hook.url, "--events", "server.started,plugin.ready"],
    { home: tmp.home },
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--cached-only", `${ROOT}main.ts`, "mcp", "start"],
    env: { TOOLGATE_HOME: tmp.home, NO_COLOR: "1", TOOLGATE_EGRESS_ALLOW: LOOPBACK_ALLOW },
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    await until(
      () => hook.requests.some((r) => r.body.type === "server.started"),
      "server.started",
    );
    const started = hook.requests.find((r) => r.body.type === "server.started")!.body.data;
    assertEquals(started.transport, "stdio");
    assertEquals(started.plugin_count, 2);
    assertEquals(started.zero_config_plugins, 2);
    await until(
      () => hook.requests.filter((r) => r.body.type === "plugin.ready").length === 2,
      "plugin.ready of http and memory",
    );
  } finally {
    await child.stdin.close();
    await child.stdout.cancel();
    await child.status;
  }
});
