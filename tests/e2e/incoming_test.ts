import { createHmac } from "node:crypto";
import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import { incomingBodiesPrefix } from "../../src/store/kv/keys.ts";

function sign(secret: string, body: string): string {
  return "sha256=" + createHmac("sha256", secret).update(body).digest("hex");
}

async function create(home: string, args: string[]): Promise<string> {
  const run = await runCli(["webhooks", "create", ...args], { home });
  assertEquals(run.code, 0, run.stderr);
  return run.stdout.split("\n")[0].trim();
}

interface AuditEntryLite {
  seq: number;
  kind: string;
  tool: string;
  input: Record<string, unknown>;
  outcome: Record<string, unknown>;
}

async function auditEntries(url: string, query = ""): Promise<AuditEntryLite[]> {
  const entries: AuditEntryLite[] = [];
  let after = 0;
  for (;;) {
    const response = await fetch(`${url}/audit?limit=1000&after=${after}${query}`);
    const page = await response.json();
    entries.push(...page.entries);
    if (page.next === null) return entries;
    after = page.next;
  }
}

/** Jobs and body chunks left in the data dir (the server must be stopped). */
async function leftovers(home: string): Promise<{ jobs: number; chunks: number }> {
  const store = await openKvStore({ dataDir: home });
  try {
    let chunks = 0;
    for await (const _ of store.kv.list({ prefix: incomingBodiesPrefix() })) chunks++;
    return { jobs: (await store.incoming.list()).length, chunks };
  } finally {
    store.close();
  }
}

async function until<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

Deno.test("a GitHub-style signed POST reaches its handler; one changed byte is 401 and never does", async () => {
  await using tmp = await tempHome();
  await create(tmp.home, [
    "--name",
    "github",
    "--url",
    "/hooks/github",
    "--handler",
    "memory_set",
    "--secret",
    "gh-secret",
    "--signature-header",
    "X-Hub-Signature-256",
  ]);
  await using server = await startHttpServer({ home: tmp.home });
  const body = JSON.stringify({ key: "push", value: { ref: "refs/heads/main", commits: 3 } });
  const accepted = await fetch(`${server.url}/hooks/github`, {
    method: "POST",
    headers: { "content-type": "application/json", "X-Hub-Signature-256": sign("gh-secret", body) },
    body,
  });
  assertEquals(accepted.status, 202);
  const reply = await accepted.json();
  assertEquals(reply.status, "accepted");
  assertMatch(reply.id, /^inj_/);

  const tampered = body.replace("main", "mainX");
  const rejected = await fetch(`${server.url}/hooks/github`, {
    method: "POST",
    headers: { "content-type": "application/json", "X-Hub-Signature-256": sign("gh-secret", body) },
    body: tampered,
  });
  assertEquals(rejected.status, 401);
  assertEquals((await rejected.json()).error.code, "SIGNATURE_INVALID");

  const calls = await until(async () => {
    const entries = await auditEntries(server.url, "&tool=memory_set");
    const toolCalls = entries.filter((e) => e.kind === "tool.call");
    return toolCalls.length ? entries : undefined;
  }, "the handler call");
  const handled = calls.filter((e) => e.kind === "tool.call");
  assertEquals(handled.length, 1);
  assertEquals(handled[0].outcome.ok, true);
  const received = calls.filter((e) => e.kind === "webhook.incoming");
  assertEquals(received.length, 1, "the rejected payload is not recorded as received");
  const value = await fetch(`${server.url}/tools/memory_get`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key: "push" }),
  });
  assertEquals((await value.json()).structuredContent.value, {
    ref: "refs/heads/main",
    commits: 3,
  });
});

Deno.test("incoming requests get 404, 405, 413, 415, 400, 401, 429 with documented error bodies", async () => {
  await using tmp = await tempHome();
  await create(tmp.home, [
    "--name",
    "signed",
    "--url",
    "/hooks/signed",
    "--handler",
    "memory_set",
    "--secret",
    "s",
  ]);
  await create(tmp.home, [
    "--name",
    "limited",
    "--url",
    "/hooks/limited",
    "--handler",
    "memory_set",
    "--rate-limit",
    "1/s",
  ]);
  await using server = await startHttpServer({
    home: tmp.home,
    config: { incoming: { body_limit_bytes: 2048 } },
  });
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });
  const expect = async (response: Response, status: number, code: string) => {
    assertEquals(response.status, status, `${code}: ${await response.clone().text()}`);
    const body = await response.json();
    assertEquals(body.error.code, code);
    assert(typeof body.error.message === "string" && body.error.message.length > 0);
    return response;
  };
  const ok = JSON.stringify({ key: "a", value: 1 });
  await expect(await post("/hooks/nope", ok), 404, "NOT_FOUND");
  const get = await expect(await fetch(`${server.url}/hooks/limited`), 405, "METHOD_NOT_ALLOWED");
  assertEquals(get.headers.get("allow"), "POST");
  await expect(
    await post("/hooks/limited", JSON.stringify({ key: "x".repeat(5000) })),
    413,
    "PAYLOAD_TOO_LARGE",
  );
  await expect(
    await post("/hooks/limited", ok, { "content-type": "text/plain" }),
    415,
    "UNSUPPORTED_MEDIA_TYPE",
  );
  await expect(await post("/hooks/limited", "{not json"), 400, "INVALID_JSON");
  await expect(await post("/hooks/limited", "[1,2]"), 400, "INVALID_JSON");
  await expect(await post("/hooks/signed", ok), 401, "SIGNATURE_INVALID");
  await expect(
    await post("/hooks/signed", ok, { "X-Service-Signature": sign("wrong", ok) }),
    401,
    "SIGNATURE_INVALID",
  );
  assertEquals(
    (await post("/hooks/signed", ok, { "X-Service-Signature": sign("s", ok) })).status,
    202,
  );
  assertEquals((await post("/hooks/limited", ok)).status, 202);
  const limited = await expect(await post("/hooks/limited", ok), 429, "RATE_LIMITED");
  assert(Number(limited.headers.get("retry-after")) >= 1);

  const stats = await until(async () => {
    const list = JSON.parse(
      (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
    );
    // The counters are written after the replies: wait for every one this test checks.
    const stats = (name: string) =>
      list.incoming.find((w: { name: string }) => w.name === name).stats;
    const [limited, signed] = [stats("limited"), stats("signed")];
    const settled = limited.rejected >= 6 && limited.received >= 1 && signed.received >= 1 &&
      signed.rejected >= 2;
    return settled ? list : undefined;
  }, "the counters");
  const byName = Object.fromEntries(
    stats.incoming.map((w: { name: string; stats: unknown }) => [w.name, w.stats]),
  );
  assertEquals(byName.limited.received, 1);
  assertEquals(byName.limited.rejected, 6);
  assertEquals(byName.signed.received, 1);
  assertEquals(byName.signed.rejected, 2);
  assert(byName.limited.last_received_at);
});

Deno.test("?wait=true answers the tool result, or 422 naming the fields the handler rejected", async () => {
  await using tmp = await tempHome();
  await create(tmp.home, ["--name", "w", "--url", "/hooks/w", "--handler", "memory_set"]);
  await using server = await startHttpServer({ home: tmp.home });
  const post = (body: unknown) =>
    fetch(`${server.url}/hooks/w?wait=true`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const done = await post({ key: "k", value: 42 });
  assertEquals(done.status, 200);
  const result = await done.json();
  assertEquals(result.status, "completed");
  assertEquals(result.result.structuredContent.key, "k");
  const invalid = await post({ value: 42 });
  assertEquals(invalid.status, 422);
  const failure = await invalid.json();
  assertEquals(failure.error.code, "TOOL_INPUT_INVALID");
  assertMatch(failure.error.message, /key/);
  const entries = await auditEntries(server.url);
  const failed = entries.filter((e) => e.kind === "tool.call" && e.outcome.ok === false);
  assertEquals(failed.length, 1);
  assertEquals(failed[0].outcome.error_code, "TOOL_INPUT_INVALID");
});

Deno.test("kill -9 right after a 202: the handler runs after restart, recorded completed once", async () => {
  await using tmp = await tempHome();
  // The first server's handler call (if it starts before the kill) hangs
  // until the test ends; calls after the restart are answered and counted.
  let hang = true;
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  let handled = 0;
  const upstream = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async () => {
    if (hang) {
      await released;
      return new Response("too late", { status: 500 });
    }
    handled++;
    return Response.json({ ok: true });
  });
  try {
    await create(tmp.home, ["--name", "slow", "--url", "/hooks/slow", "--handler", "http_request"]);
    const first = await startHttpServer({ home: tmp.home });
    const url = `http://127.0.0.1:${upstream.addr.port}/work`;
    const response = await fetch(`${first.url}/hooks/slow`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ url }),
    });
    assertEquals(response.status, 202);
    await response.body?.cancel();
    await first.stop("SIGKILL");
    assertEquals(handled, 0);
    hang = false;

    await using second = await startHttpServer({ home: tmp.home });
    await until(
      () => Promise.resolve(handled === 1 ? true : undefined),
      "the resumed handler call",
    );
    const calls = await until(async () => {
      const entries = (await auditEntries(second.url, "&tool=http_request"))
        .filter((e) => e.kind === "tool.call");
      return entries.length ? entries : undefined;
    }, "the audit entry");
    await new Promise((r) => setTimeout(r, 300));
    const again = (await auditEntries(second.url, "&tool=http_request"))
      .filter((e) => e.kind === "tool.call");
    assertEquals(again.length, 1, JSON.stringify(calls));
    assertEquals(again[0].outcome.ok, true);
    assertEquals(handled, 1);
  } finally {
    release();
    await upstream.shutdown();
  }
});

Deno.test("1,000 concurrent POSTs: every accepted one is audited and handled, chain intact", async () => {
  await using tmp = await tempHome();
  await create(tmp.home, ["--name", "bulk", "--url", "/hooks/bulk", "--handler", "memory_set"]);
  await using server = await startHttpServer({ home: tmp.home });
  const total = 1000;
  let next = 0;
  const statuses: number[] = [];
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const response = await fetch(`${server.url}/hooks/bulk`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ key: `k${i}`, value: i }),
      });
      await response.body?.cancel();
      statuses.push(response.status);
    }
  };
  await Promise.all(Array.from({ length: 100 }, worker));
  assertEquals(statuses.length, total);
  assert(statuses.every((s) => s === 202), `non-202: ${statuses.filter((s) => s !== 202)}`);
  const entries = await until(async () => {
    const all = await auditEntries(server.url);
    const handled = all.filter((e) => e.kind === "tool.call" && e.outcome.ok === true);
    return handled.length >= total ? all : undefined;
  }, "all handler calls");
  const received = entries.filter((e) => e.kind === "webhook.incoming");
  assertEquals(received.length, total);
  assertEquals(new Set(received.map((e) => e.input.key)).size, total);
  const handledKeys = new Set(
    entries.filter((e) => e.kind === "tool.call").map((e) => e.input.key as string),
  );
  assertEquals(handledKeys.size, total);
  assertEquals(entries.map((e) => e.seq), Array.from({ length: entries.length }, (_, i) => i + 1));
  await server.stop();
  assertEquals(await leftovers(tmp.home), { jobs: 0, chunks: 0 }, "every job was completed");
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 0, verify.stderr);
  assertMatch(verify.stdout, new RegExp(`intact: ${entries.length} entries`));
});

Deno.test("a 300 KiB payload is queued in its own commits and reaches its handler whole", async () => {
  await using tmp = await tempHome();
  await create(tmp.home, ["--name", "big", "--url", "/hooks/big", "--handler", "memory_set"]);
  await using server = await startHttpServer({ home: tmp.home });
  const value = "v".repeat(300 * 1024);
  const response = await fetch(`${server.url}/hooks/big`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key: "big", value }),
  });
  assertEquals(response.status, 202, await response.text());
  // memory_set refuses values over 60 KiB: the handler's audited call shows
  // what it was given (the audit log keeps inputs up to 448 KiB whole).
  const call = await until(async () => {
    const entries = await auditEntries(server.url, "&tool=memory_set&kind=tool.call");
    return entries[0];
  }, "the handler call");
  assertEquals(call.input, { key: "big", value });
  assertEquals(call.outcome.error_code, "TOOL_INPUT_INVALID");
  await server.stop();
  // An input error: kept as a failed job with its whole body, until purged.
  const failed = await runCli(["incoming", "failed", "list", "--json"], { home: tmp.home });
  assertEquals(JSON.parse(failed.stdout).length, 1, failed.stderr);
  assertEquals(await leftovers(tmp.home), { jobs: 0, chunks: 6 });
  const purged = await runCli(["incoming", "failed", "purge"], { home: tmp.home });
  assertEquals(purged.stdout.trim(), "Purged 1 failed job(s)");
  assertEquals(await leftovers(tmp.home), { jobs: 0, chunks: 0 });
});

Deno.test("endpoints created and removed by the CLI while the server runs are served within a second", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home });
  const post = () =>
    fetch(`${server.url}/hooks/live`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: "live", value: 1 }),
    });
  const before = await post();
  assertEquals(before.status, 404);
  await before.body?.cancel();
  const id = await create(tmp.home, [
    "--name",
    "live",
    "--url",
    "/hooks/live",
    "--handler",
    "memory_set",
  ]);
  const created = Date.now();
  await until(async () => {
    const response = await post();
    await response.body?.cancel();
    return response.status === 202 ? true : undefined;
  }, "the new endpoint");
  assert(Date.now() - created < 1500, `took ${Date.now() - created} ms`);
  assertEquals((await runCli(["webhooks", "remove", id], { home: tmp.home })).code, 0);
  await until(async () => {
    const response = await post();
    await response.body?.cancel();
    return response.status === 404 ? true : undefined;
  }, "the endpoint to go");
});
