import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { tempHome } from "../_helpers.ts";
import { startPostgres } from "../_postgres.ts";
import { createAuditLog, verifyAuditChain } from "../../src/audit/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { type CopyKind, copyStore, openStore, type Store } from "../../src/store/mod.ts";
import { printed, toolgate } from "./_cli.ts";

function bytes(length: number, seed: number): Uint8Array<ArrayBuffer> {
  // Every byte value, in an order that differs per seed.
  return Uint8Array.from({ length }, (_, i) => (i * 31 + seed * 7 + (i >> 8)) & 0xff);
}

/** Everything a store holds, read through the interface (version stamps left out). */
async function snapshot(store: Store) {
  const outgoing = await store.webhooks.listOutgoing();
  const incoming = await store.webhooks.listIncoming();
  const pending = await store.deliveries.listPending();
  const eventIds = [...new Set(pending.map(({ record }) => record.event_id))];
  const dlq = await store.deliveries.listDlq();
  const audit: { seq: number; bytes: Uint8Array | null }[] = [];
  for await (const page of store.audit.pages({ pageSize: 16 })) {
    audit.push(...page.map(({ seq, bytes }) => ({ seq, bytes })));
  }
  const jobs = await store.incoming.list();
  const failed = await store.incoming.listFailed();
  return {
    outgoing,
    incoming,
    stats: await Promise.all(incoming.map(({ id }) => store.webhooks.incomingStats(id))),
    upstreams: await store.upstreams.list(),
    keychain: await store.keychain.list(),
    apiKeys: await store.apiKeys.list(),
    servers: await store.servers.list(),
    pins: await store.pins.list(),
    policies: await store.policies.list(),
    approvals: await store.approvals.list({ limit: 1000 }),
    memory: await store.memory.list({ limit: 1000 }),
    pending: pending.map(({ record, fanout }) => ({ record, fanout })),
    events: await Promise.all(
      eventIds.map(async (id) => (await store.deliveries.readEvent(id))?.event),
    ),
    dlq: dlq.map(({ body: _inline, ...record }) => record),
    dlqBodies: await Promise.all(dlq.map((record) => store.deliveries.readDlqBody(record))),
    logs: await Promise.all(outgoing.map(async ({ id }) => ({
      ids: await store.deliveries.listLogIds(id),
      entries: await store.deliveries.readLog(id),
    }))),
    audit,
    head: (await store.audit.readHead()).head,
    // How many chunks a body is stored in is the adapter's own affair.
    jobs: jobs.map(({ chunks: _chunks, ...job }) => job),
    jobBodies: await Promise.all(jobs.map((job) => store.incoming.readBody(job))),
    failed: failed.map(({ chunks: _chunks, ...job }) => job),
    failedBodies: await Promise.all(failed.map((job) => store.incoming.readBody(job))),
  };
}

/** Writes one record of every kind into the data dir's KV store, through the interface. */
async function populate(store: Store): Promise<void> {
  const now = Date.now();
  const hook = await store.webhooks.addOutgoing({
    url: "https://hooks.example.com/a",
    events: ["tool.called", "tool.failed"],
    secret: "whsec_c2VjcmV0LXNpZ25pbmcta2V5",
  });
  const other = await store.webhooks.addOutgoing({ url: "http://127.0.0.1:9/b", events: "*" });
  const endpoint = await store.webhooks.addIncoming({
    name: "github",
    path: "/hooks/github",
    handler: "memory_set",
    secret: "incoming-secret",
    signature_header: "X-Hub-Signature-256",
    rate_limit_per_s: 5,
  });
  await store.webhooks.addIncoming({ name: "quiet", path: "/hooks/quiet", handler: "echo" });
  await store.webhooks.addIncomingStats(endpoint.id, { received: 7, rejected: 2, failed: 1 });
  await store.webhooks.addIncomingStats(endpoint.id, { received: 1 }, "2026-03-01T10:00:00.000Z");
  await store.upstreams.add({
    name: "files",
    command: "npx",
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
    env: { TOKEN: "keychain:files.token" },
    headers: {},
    include: ["read_*"],
    exclude: [],
    rename: { read_file: "cat" },
    prefix: false,
    enabled: false,
  });
  await store.keychain.put("slack.bot_token", {
    backend: "file",
    iv: bytes(12, 1),
    data: bytes(48, 2),
    updated_at: "2026-02-01T00:00:00.000Z",
  });
  await store.keychain.put("github.token", {
    backend: "secret-tool",
    updated_at: "2026-02-02T00:00:00.000Z",
  });
  await store.apiKeys.add({
    id: "key_01KB0000000000000000000000",
    name: "ci",
    prefix: "tg_abcdef",
    hash: "ab".repeat(32),
    tools: ["memory_*"],
    server: null,
    rate: "10/s",
    expires_at: "2030-01-01T00:00:00.000Z",
    created_at: "2026-02-03T00:00:00.000Z",
    last_used_at: null,
  });
  await store.servers.add({
    name: "team-a",
    tools: ["memory_*", "github__*"],
    description: "agents",
    created_at: "2026-02-03T00:00:00.000Z",
    updated_at: "2026-02-04T00:00:00.000Z",
  });
  await store.pins.put({
    plugin: "files",
    kind: "tool",
    name: "read_file",
    status: "changed",
    pinned: {
      hash: "cd".repeat(32),
      definition: { name: "read_file", inputSchema: { type: "object" } },
      seen_at: "2026-02-05T00:00:00.000Z",
    },
    pending: {
      hash: "ef".repeat(32),
      definition: { name: "read_file", description: "Reads any file", inputSchema: {} },
      seen_at: "2026-02-06T00:00:00.000Z",
    },
    decided_by: null,
    updated_at: "2026-02-06T00:00:00.000Z",
  }, null);
  await store.policies.add({
    name: "no-etc",
    rule: {
      name: "no-etc",
      tools: ["files__*"],
      when: 'args.path.startsWith("/etc/")',
      effect: "deny",
    },
    position: 10,
    created_at: "2026-02-07T00:00:00.000Z",
    updated_at: "2026-02-08T00:00:00.000Z",
  });
  await store.approvals.create({
    id: "apr_01KB0000000000000000000000",
    status: "approved",
    tool: "memory_set",
    plugin: "memory",
    caller: { kind: "key", id: "key_01KB0000000000000000000000", name: "ci" },
    caller_ref: "key:key_01KB0000000000000000000000",
    args: { key: "k", value: { b: 1, a: [1, 2.5] } },
    args_sha256: "12".repeat(32),
    policy: "ask",
    policy_sha256: "34".repeat(32),
    approvers: ["admin", "key:key_02"],
    reason: "writes the notebook",
    transport: "rest",
    server: "team-a",
    created_at: "2026-02-09T00:00:00.000Z",
    expires_at: "2026-02-09T00:30:00.000Z",
    decided_by: "admin",
    decided_at: "2026-02-09T00:05:00.000Z",
    decision_reason: null,
    running: null,
    ran: { at: "2026-02-09T00:05:01.000Z", ok: true, output: { stored: true } },
  });
  await store.memory.set("a\u0000b", { b: 1, a: [1, 2.5, { z: null }], "10": "x" });
  await store.memory.set("émoji 🎉", "ünïcode \u2028");
  await store.memory.set("\ufeffbom", 1e21);

  const writer = store.deliveries.writer();
  const event = (id: string, seed: number) => ({
    id,
    type: "tool.called",
    timestamp: "2026-03-01T10:00:00.000Z",
    body: bytes(3000 + seed, seed),
  });
  await writer.write([
    { op: "put_event", event: event("evt_0001", 1) },
    {
      op: "put_fanout",
      event_id: "evt_0001",
      fanout: {
        event_type: "tool.called",
        created_at: "2026-03-01T10:00:00.000Z",
        next_attempt_at: now,
        webhook_ids: [other.id, hook.id],
      },
    },
    // A retry of the same event to one webhook: its own record wins over the fan-out entry.
    {
      op: "put_delivery",
      delivery: {
        event_id: "evt_0001",
        event_type: "tool.called",
        webhook_id: other.id,
        attempt_count: 2,
        next_attempt_at: now + 4000,
        created_at: "2026-03-01T10:00:00.000Z",
        attempts: [
          { attempt: 1, at: "2026-03-01T10:00:00.000Z", status: 500, duration_ms: 12 },
          { attempt: 2, at: "2026-03-01T10:00:01.000Z", error: "timeout", duration_ms: 10000 },
        ],
      },
    },
    { op: "put_event", event: event("evt_0002", 2) },
    {
      op: "put_delivery",
      delivery: {
        event_id: "evt_0002",
        event_type: "tool.called",
        webhook_id: hook.id,
        attempt_count: 0,
        next_attempt_at: now + 1000,
        created_at: "2026-03-01T10:00:02.000Z",
        attempts: [],
        dlq_id: "dlq_replayed",
      },
    },
    {
      op: "put_dlq",
      record: {
        dlq_id: "dlq_01",
        webhook_id: hook.id,
        url: hook.url,
        event_id: "evt_dead",
        event_type: "tool.failed",
        attempts: [{ attempt: 6, at: "2026-03-01T09:00:00.000Z", status: 503, duration_ms: 3 }],
        failed_at: "2026-03-01T09:00:00.000Z",
      },
      // Larger than one KV value: stored in chunks there.
      body: bytes(200_000, 3),
    },
  ]);
  for (const [i, ok] of [true, false, true].entries()) {
    await store.deliveries.appendLog(hook.id, {
      at: new Date(now - 3000 + i * 1000).toISOString(),
      attempt: i + 1,
      ok,
      ...(ok ? { status: 200 } : { error: "connection refused" }),
      latency_ms: 5 + i,
      event_id: `evt_log_${i}`,
      event_type: "tool.called",
    });
  }
  await store.incoming.put({
    id: "job_01",
    endpoint_id: endpoint.id,
    handler: "memory_set",
    received_at: "2026-03-01T10:00:03.000Z",
  }, bytes(70_000, 4));
  await store.incoming.put({
    id: "job_02",
    endpoint_id: endpoint.id,
    handler: "memory_set",
    received_at: "2026-03-01T10:00:04.000Z",
    audit_seq: 3,
  }, new Uint8Array());
  // A job waiting for its retry and a failed job keep their attempts and schedule.
  for (const n of [3, 4]) {
    await store.incoming.put({
      id: `job_0${n}`,
      endpoint_id: endpoint.id,
      handler: "memory_set",
      received_at: `2026-03-01T10:00:0${n + 2}.000Z`,
    }, bytes(1000, n));
  }
  const claimed = await store.incoming.claim({ owner: "copy", until: now + 60_000, now, limit: 4 });
  const attempt = (code: string) => ({ at: "2026-03-01T10:01:00.000Z", code, message: code });
  await store.incoming.fail([
    { job: claimed[2], attempt: attempt("TOOL_TIMEOUT"), retry_at: now + 3_600_000 },
    { job: claimed[3], attempt: { ...attempt("TOOL_INPUT_INVALID"), fields: ["value"] } },
  ]);
  await store.incoming.releaseClaims("copy");

  const log = createAuditLog({ store });
  try {
    for (let i = 0; i < 40; i++) {
      await log.append({
        kind: "tool.call",
        tool: "echo",
        input: { text: `call ${i}`, api_key: "k-1" },
        outcome: i % 7 === 3
          ? { ok: false, error_code: "TOOL_TIMEOUT", error: "Timed out" }
          : { ok: true, latency_ms: i },
      });
    }
  } finally {
    await log.close();
  }
}

Deno.test("db copy moves every record of the KV store into an empty PostgreSQL database, exactly", async () => {
  await using tmp = await tempHome();
  await using pg = await startPostgres();
  const env = { TOOLGATE_DATABASE_URL: pg.url };

  // A real tool call (an audit entry and a memory note), then every other kind.
  const call = await toolgate(
    ["tools", "call", "memory_set", "--args", '{"key": "greeting", "value": "hello"}'],
    tmp.home,
  );
  assertEquals(call.code, 0, printed(call));
  const source = await openStore({ dataDir: tmp.home });
  let before: Awaited<ReturnType<typeof snapshot>>;
  try {
    await populate(source);
    before = await snapshot(source);
  } finally {
    await source.close();
  }
  assertEquals(before.audit.length, 41);
  assertEquals(before.pending.length, 3);
  assertEquals(before.jobs.map((job) => job.next_attempt_at !== undefined), [false, false, true]);
  assertEquals(before.failed.map((job) => [job.id, job.attempts?.[0].fields]), [
    ["job_04", ["value"]],
  ]);

  // From a PostgreSQL store: refused, the source is the embedded one.
  const fromPg = await toolgate(["db", "copy", "--to", pg.url], tmp.home, { env });
  assertEquals(fromPg.code, 2, printed(fromPg));
  assertStringIncludes(fromPg.stderr, "the configured store is already PostgreSQL");

  const copy = await toolgate(["db", "copy", "--to", pg.url], tmp.home);
  assertEquals(copy.code, 0, printed(copy));
  assertEquals(copy.stderr, "");
  assertStringIncludes(copy.stdout, `Copied ${tmp.home}/toolgate.kv into ${pg.url}:`);
  assertStringIncludes(copy.stdout, "audit entries");
  assertStringIncludes(copy.stdout, "Audit chain intact (41 entries).");

  const reopened = await openStore({ dataDir: tmp.home });
  let target: Store | undefined;
  try {
    // Nothing in the source changed.
    assertEquals(await snapshot(reopened), before);
    target = await openStore({ dataDir: tmp.home, url: pg.url });
    const after = await snapshot(target);
    assertEquals(after, before);
    assert(after.events.every((event) => event !== undefined));
    assertEquals(after.keychain[1].record, {
      backend: "file",
      iv: bytes(12, 1),
      data: bytes(48, 2),
      updated_at: "2026-02-01T00:00:00.000Z",
    });
    assertEquals(after.outgoing[0].secret, "whsec_c2VjcmV0LXNpZ25pbmcta2V5");
    assertEquals(after.dlqBodies[0], bytes(200_000, 3));
  } finally {
    await reopened.close();
    await target?.close();
  }

  const verify = await toolgate(["audit", "verify"], tmp.home, { env });
  assertEquals(verify.code, 0, printed(verify));
  assertStringIncludes(verify.stdout, "Audit chain intact: 41 entries");

  // Copying again: refused, the database holds data; nothing changed.
  const again = await toolgate(["db", "copy", "--to", pg.url, "--json"], tmp.home);
  assertEquals(again.code, 1, printed(again));
  assertEquals(again.stdout, "");
  assertStringIncludes(again.stderr, "it is not empty");
  assertStringIncludes(again.stderr, "copy into an empty database");
  const still = await openStore({ dataDir: tmp.home, url: pg.url });
  try {
    assertEquals(await snapshot(still), before);
  } finally {
    await still.close();
  }
});

Deno.test("db copy --json reports the counts and the verification; a bad --to or a missing store fails", async () => {
  await using tmp = await tempHome();
  const missing = await toolgate(["db", "copy", "--to", "postgres://u@127.0.0.1:1/x"], tmp.home);
  assertEquals(missing.code, 1, printed(missing));
  assertStringIncludes(missing.stderr, `Nothing to copy: ${tmp.home}/toolgate.kv does not exist`);
  const none = await toolgate(["db", "copy"], tmp.home);
  assertEquals(none.code, 2, printed(none));
  assertStringIncludes(none.stderr, "Missing --to");
  const bad = await toolgate(["db", "copy", "--to", "mysql://u@h/d"], tmp.home);
  assertEquals(bad.code, 2, printed(bad));
  assertStringIncludes(bad.stderr, "Invalid --to");

  await using pg = await startPostgres();
  const call = await toolgate(["tools", "call", "memory_get", "--args", '{"key": "k"}'], tmp.home);
  assertEquals(call.code, 0, printed(call));
  const copy = await toolgate(["db", "copy", "--to", pg.url, "--json"], tmp.home);
  assertEquals(copy.code, 0, printed(copy));
  const result = JSON.parse(copy.stdout);
  assertEquals(result.to, pg.url);
  assertEquals(result.counts.audit_entries, 1);
  assertEquals(result.counts.outgoing_webhooks, 0);
  assertEquals(result.verified.ok, true);
  assertEquals(result.verified.count, 1);
});

Deno.test("copyStore() writes in batches, all or nothing, and of two copies at once one wins", async () => {
  await using tmp = await tempHome();
  await using pg = await startPostgres();
  const source = await openStore({ dataDir: tmp.home });
  let before: Awaited<ReturnType<typeof snapshot>>;
  try {
    await populate(source);
    before = await snapshot(source);
  } finally {
    await source.close();
  }
  const options = {
    from: { dataDir: tmp.home },
    to: pg.url,
    batchRows: 4,
    verify: (target: Store) => verifyAuditChain(target),
  };

  // A server running on the data dir (its state published): refused before anything is written.
  const running = await openStore({ dataDir: tmp.home });
  try {
    await running.upstreams.putServerStatus({
      server_id: "srv_running",
      pid: 4242,
      transport: "http",
      started_at: new Date().toISOString(),
      updated_at: new Date().toISOString(),
      plugins: [],
    }, 60_000);
    await assertRejects(
      () => copyStore(options),
      GatewayError,
      "a toolgate server is running on it (pid 4242); stop it first",
    );
    await running.upstreams.deleteServerStatus("srv_running");
  } finally {
    await running.close();
  }

  // A copy that fails midway leaves nothing behind.
  const progress: [CopyKind, number][] = [];
  await assertRejects(
    () =>
      copyStore({
        ...options,
        onProgress: (kind, copied) => {
          progress.push([kind, copied]);
          if (kind === "audit_entries" && copied === 20) throw new Error("interrupted");
        },
      }),
    Error,
    "interrupted",
  );
  assertEquals(
    progress.filter(([kind]) => kind === "audit_entries").map(([, copied]) => copied),
    [4, 8, 12, 16, 20],
  );

  const results = await Promise.allSettled([copyStore(options), copyStore(options)]);
  const won = results.filter((result) => result.status === "fulfilled");
  const lost = results.filter((result) => result.status === "rejected");
  assertEquals([won.length, lost.length], [1, 1]);
  const { counts, verified } = won[0].value;
  assertEquals(verified, {
    ok: true,
    count: 40,
    head_seq: 40,
    head_hash: before.head!.hash,
  });
  assertEquals(counts, {
    outgoing_webhooks: 2,
    incoming_webhooks: 2,
    incoming_stats: 1,
    upstreams: 1,
    keychain: 2,
    api_keys: 1,
    virtual_servers: 1,
    tool_pins: 1,
    policies: 1,
    approvals: 1,
    memory: 3,
    events: 2,
    deliveries: 3,
    dlq: 1,
    delivery_log: 3,
    audit_entries: 40,
    audit_tiles: 1, // 1/0: level 0 is the entries'
    incoming_jobs: 4,
  });
  const error = lost[0].reason;
  assert(error instanceof GatewayError);
  assertEquals(error.code, "CONFLICT");
  assertStringIncludes(error.message, "it is not empty");

  const target = await openStore({ dataDir: tmp.home, url: pg.url });
  try {
    assertEquals(await snapshot(target), before);
  } finally {
    await target.close();
  }
});
