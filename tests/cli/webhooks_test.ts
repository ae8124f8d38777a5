import { Webhook } from "standardwebhooks";
import {
  assert,
  assertEquals,
  assertMatch,
  assertNotEquals,
  assertStringIncludes,
  assertThrows,
} from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";

Deno.test("webhooks add prints a wh_ id and list shows it without the secret", async () => {
  await using tmp = await tempHome();
  const add = await runCli(
    [
      "webhooks",
      "add",
      "--url",
      "https://example.com/hook",
      "--events",
      "tool.called,tool.failed",
      "--secret",
      "s3cret",
    ],
    { home: tmp.home },
  );
  assertEquals(add.code, 0, add.stderr);
  const id = add.stdout.trim();
  assertMatch(id, /^wh_[0-9a-z]{26}$/);
  const list = await runCli(["webhooks", "list", "--json"], { home: tmp.home });
  assertEquals(list.code, 0, list.stderr);
  assert(!list.stdout.includes("s3cret"), "secret leaked into list output");
  const parsed = JSON.parse(list.stdout);
  assertEquals(parsed.outgoing.length, 1);
  assertEquals(parsed.outgoing[0].id, id);
  assertEquals(parsed.outgoing[0].events, ["tool.called", "tool.failed"]);
  assertEquals(parsed.outgoing[0].has_secret, true);
  const human = await runCli(["webhooks", "list"], { home: tmp.home });
  assertStringIncludes(human.stdout, id);
  assert(!human.stdout.includes("s3cret"));
});

Deno.test("webhooks add without --events stores all types as '*'", async () => {
  await using tmp = await tempHome();
  const add = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/x"], {
    home: tmp.home,
  });
  assertEquals(add.code, 0, add.stderr);
  const list = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(list.outgoing[0].events, "*");
});

Deno.test("webhooks add without --secret generates a whsec_ secret and prints it once", async () => {
  await using tmp = await tempHome();
  const add = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/x"], {
    home: tmp.home,
  });
  assertEquals(add.code, 0, add.stderr);
  const id = add.stdout.trim(); // stdout stays the id alone: ID=$(toolgate webhooks add …)
  assertMatch(id, /^wh_[0-9a-z]{26}$/);
  const secret = /Signing secret \(shown only now; give it to the receiver\): (whsec_\S+)/
    .exec(add.stderr)?.[1];
  assert(secret, add.stderr);
  assertEquals(atob(secret.slice("whsec_".length)).length, 32);
  const json = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/y", "--json"], {
    home: tmp.home,
  });
  const added = JSON.parse(json.stdout);
  assertMatch(added.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assertEquals(added.has_secret, true);
  assertEquals(json.stderr, "");
  assertNotEquals(added.secret, secret);
  for (const args of [["list"], ["list", "--json"], ["show", id], ["show", id, "--json"]]) {
    const run = await runCli(["webhooks", ...args], { home: tmp.home });
    assertEquals(run.code, 0, run.stderr);
    assert(!run.stdout.includes(secret.slice(6)) && !run.stdout.includes(added.secret.slice(6)));
  }
  const list = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(list.outgoing.map((w: { has_secret: boolean }) => w.has_secret), [true, true]);
});

Deno.test("webhooks add --no-secret registers an unsigned webhook with a warning", async () => {
  await using tmp = await tempHome();
  const add = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/x", "--no-secret"], {
    home: tmp.home,
  });
  assertEquals(add.code, 0, add.stderr);
  const id = add.stdout.trim();
  assertMatch(add.stderr, /warning: webhook wh_\w+ is unsigned \(--no-secret\)/);
  assert(!add.stderr.includes("whsec_"));
  const shown = JSON.parse(
    (await runCli(["webhooks", "show", id, "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(shown.has_secret, false);
});

Deno.test("webhooks update changes url, events and description; nothing to change or an unknown id fails", async () => {
  await using tmp = await tempHome();
  const id = (await runCli(
    ["webhooks", "add", "--url", "http://127.0.0.1:9/x", "--description", "old note"],
    { home: tmp.home },
  )).stdout.trim();
  const show = async () =>
    JSON.parse((await runCli(["webhooks", "show", id, "--json"], { home: tmp.home })).stdout);
  assertEquals((await show()).description, "old note");
  const update = await runCli([
    "webhooks",
    "update",
    id,
    "--url",
    "https://example.com/new",
    "--events",
    "tool.failed,circuit.opened",
    "--description",
    "new note",
  ], { home: tmp.home });
  assertEquals(update.code, 0, update.stderr);
  assertStringIncludes(update.stdout, `Updated ${id}: https://example.com/new`);
  const after = await show();
  assertEquals(
    [after.url, after.events, after.description, after.has_secret],
    ["https://example.com/new", ["tool.failed", "circuit.opened"], "new note", true],
  );
  assert(after.updated_at >= after.created_at);
  const cleared = await runCli(
    ["webhooks", "update", id, "--events", "*", "--description", "", "--json"],
    { home: tmp.home },
  );
  assertEquals(cleared.code, 0, cleared.stderr);
  const view = JSON.parse(cleared.stdout);
  assertEquals([view.events, view.description], ["*", undefined]);
  const scheduled = await runCli(
    ["webhooks", "update", id, "--retry-schedule", "5s,5m", "--json"],
    { home: tmp.home },
  );
  assertEquals(JSON.parse(scheduled.stdout).retry_schedule_ms, [5000, 300_000]);
  const unscheduled = await runCli(
    ["webhooks", "update", id, "--retry-schedule", "default", "--json"],
    { home: tmp.home },
  );
  assertEquals(JSON.parse(unscheduled.stdout).retry_schedule_ms, undefined);

  const nothing = await runCli(["webhooks", "update", id], { home: tmp.home });
  assertEquals(nothing.code, 2);
  assertMatch(
    nothing.stderr,
    /Nothing to update on wh_\w+: give --url, --events, --description or --retry-schedule/,
  );
  const badUrl = await runCli(["webhooks", "update", id, "--url", "ftp://x/"], { home: tmp.home });
  assertEquals(badUrl.code, 2);
  assertMatch(badUrl.stderr, /Invalid --url "ftp:\/\/x\/": scheme ftp/);
  const missing = await runCli(["webhooks", "update", "wh_nope", "--url", "https://x.test/"], {
    home: tmp.home,
  });
  assertEquals(missing.code, 1);
  assertMatch(missing.stderr, /No outgoing webhook with id wh_nope/);
  assertEquals((await show()).url, "https://example.com/new");
});

Deno.test("webhooks disable and enable: list and show say so, with the reason", async () => {
  await using tmp = await tempHome();
  const id = (await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/x"], {
    home: tmp.home,
  })).stdout.trim();
  const disable = await runCli(["webhooks", "disable", id, "--reason", "receiver migrating"], {
    home: tmp.home,
  });
  assertEquals(disable.code, 0, disable.stderr);
  const list = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(list.outgoing[0].disabled.reason, "manual");
  assertEquals(list.outgoing[0].disabled.detail, "receiver migrating");
  assertMatch(list.outgoing[0].disabled.at, /^\d{4}-\d{2}-\d{2}T/);
  const human = await runCli(["webhooks", "list"], { home: tmp.home });
  assertStringIncludes(human.stdout, "disabled (manual: receiver migrating)");
  const show = await runCli(["webhooks", "show", id], { home: tmp.home });
  assertMatch(show.stdout, /state: disabled since \S+ \(manual: receiver migrating\)/);

  const enable = await runCli(["webhooks", "enable", id], { home: tmp.home });
  assertEquals([enable.code, enable.stdout.trim()], [0, `Enabled ${id}`]);
  const again = await runCli(["webhooks", "enable", id], { home: tmp.home });
  assertEquals([again.code, again.stdout.trim()], [0, `${id} was already enabled`]);
  const shown = JSON.parse(
    (await runCli(["webhooks", "show", id, "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(shown.disabled, undefined);
  assertStringIncludes((await runCli(["webhooks", "list"], { home: tmp.home })).stdout, "enabled");
  const missing = await runCli(["webhooks", "disable", "wh_nope"], { home: tmp.home });
  assertEquals(missing.code, 1);
});

Deno.test("webhooks rotate-secret prints the new secret once; during the overlap test deliveries verify with both", async () => {
  await using tmp = await tempHome();
  const received: Headers[] = [];
  const bodies: string[] = [];
  await using receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      received.push(request.headers);
      bodies.push(await request.text());
      return new Response(null, { status: 204 });
    },
  );
  const added = JSON.parse(
    (await runCli(
      ["webhooks", "add", "--url", `http://127.0.0.1:${receiver.addr.port}/`, "--json"],
      { home: tmp.home },
    )).stdout,
  );
  const rotate = await runCli(["webhooks", "rotate-secret", added.id, "--overlap", "1h"], {
    home: tmp.home,
  });
  assertEquals(rotate.code, 0, rotate.stderr);
  const secret = rotate.stdout.trim();
  assertMatch(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assertNotEquals(secret, added.secret);
  assertMatch(rotate.stderr, /the old one also signs webhook-signature until \d{4}-/);
  const shown = JSON.parse(
    (await runCli(["webhooks", "show", added.id, "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(shown.previous_secrets.length, 1);
  const expires = Date.parse(shown.previous_secrets[0].expires_at) - Date.now();
  assert(expires > 50 * 60_000 && expires <= 60 * 60_000, `expires in ${expires} ms`);
  assert(!JSON.stringify(shown).includes(secret.slice(6)));
  assert(!JSON.stringify(shown).includes(added.secret.slice(6)));

  const test = await runCli(["webhooks", "test", added.id], { home: tmp.home });
  assertEquals(test.code, 0, test.stderr);
  const headers = Object.fromEntries(
    ["webhook-id", "webhook-timestamp", "webhook-signature"].map((h) => [h, received[0].get(h)!]),
  );
  assertEquals(headers["webhook-signature"].split(" ").length, 2);
  for (const key of [secret, added.secret]) new Webhook(key).verify(bodies[0], headers);

  const json = await runCli(["webhooks", "rotate-secret", added.id, "--overlap", "0", "--json"], {
    home: tmp.home,
  });
  assertEquals(json.code, 0, json.stderr);
  const rotated = JSON.parse(json.stdout);
  assertMatch(rotated.secret, /^whsec_/);
  // No overlap for the secret just replaced; the one before keeps its hour.
  assertEquals(rotated.webhook.previous_secrets.length, 1);
  await runCli(["webhooks", "test", added.id], { home: tmp.home });
  const last = Object.fromEntries(
    ["webhook-id", "webhook-timestamp", "webhook-signature"].map((h) => [h, received[1].get(h)!]),
  );
  new Webhook(rotated.secret).verify(bodies[1], last);
  new Webhook(added.secret).verify(bodies[1], last);
  assertThrows(() => new Webhook(secret).verify(bodies[1], last), "No matching signature");

  const bad = await runCli(["webhooks", "rotate-secret", added.id, "--overlap", "soon"], {
    home: tmp.home,
  });
  assertEquals(bad.code, 2);
  assertMatch(bad.stderr, /Invalid --overlap "soon"/);
  const tooLong = await runCli(["webhooks", "rotate-secret", added.id, "--overlap", "31d"], {
    home: tmp.home,
  });
  assertEquals(tooLong.code, 2);
  assertMatch(tooLong.stderr, /Invalid overlap: \d+ ms; expected 0 to/);
});

Deno.test("webhooks add --secret - reads the secret from stdin", async () => {
  await using tmp = await tempHome();
  const add = await runCli([
    "webhooks",
    "add",
    "--url",
    "http://127.0.0.1:9/x",
    "--secret",
    "-",
    "--json",
  ], {
    home: tmp.home,
    stdin: "from-stdin\n",
  });
  assertEquals(add.code, 0, add.stderr);
  assertEquals(JSON.parse(add.stdout).has_secret, true);
  assert(!add.stdout.includes("from-stdin"));
});

Deno.test("webhooks remove deletes outgoing and incoming ids; unknown id exits 1", async () => {
  await using tmp = await tempHome();
  const out =
    (await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/x"], { home: tmp.home }))
      .stdout.trim();
  const created = await runCli(
    ["webhooks", "create", "--name", "gh", "--url", "/hooks/gh", "--handler", "memory_set"],
    { home: tmp.home },
  );
  assertEquals(created.code, 0, created.stderr);
  const inId = created.stdout.split("\n")[0].trim();
  assertMatch(inId, /^in_[0-9a-z]{26}$/);
  assertStringIncludes(created.stdout, "http://127.0.0.1:7821/hooks/gh");
  assertEquals((await runCli(["webhooks", "remove", out], { home: tmp.home })).code, 0);
  assertEquals((await runCli(["webhooks", "remove", inId], { home: tmp.home })).code, 0);
  const list = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(list, { outgoing: [], incoming: [] });
  const again = await runCli(["webhooks", "remove", out], { home: tmp.home });
  assertEquals(again.code, 1);
  assertStringIncludes(again.stderr, out);
  // The path and name are free again once the endpoint is removed.
  const recreated = await runCli(
    ["webhooks", "create", "--name", "gh", "--url", "/hooks/gh", "--handler", "memory_set"],
    { home: tmp.home },
  );
  assertEquals(recreated.code, 0, recreated.stderr);
});

Deno.test("webhooks create warns when no plugin offers the handler, and registers it anyway", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(
    `${tmp.home}/config.json`,
    JSON.stringify({
      plugins: {
        disabled: ["http"],
        upstreams: { cfg: { kind: "mcp", command: "/nonexistent/x" } },
      },
    }),
  );
  const stored = await runCli(["plugins", "add", "kept", "--command", "/nonexistent/y"], {
    home: tmp.home,
  });
  assertEquals(stored.code, 0, stored.stderr);
  const create = (name: string, handler: string) =>
    runCli(
      [
        "webhooks",
        "create",
        "--name",
        name,
        "--url",
        `/hooks/${name}`,
        "--handler",
        handler,
        "--secret",
        "s",
      ],
      { home: tmp.home },
    );
  // Offered: a built-in tool, or <plugin>__<tool> of an upstream in config.json or the store.
  for (const [name, handler] of [["a", "memory_set"], ["b", "cfg__echo"], ["c", "kept__echo"]]) {
    const run = await create(name, handler);
    assertEquals(run.code, 0, run.stderr);
    assertEquals(run.stderr, "", `unexpected warning for ${handler}`);
  }
  const typo = await create("d", "memory_sett");
  assertEquals(typo.code, 0, typo.stderr);
  assertStringIncludes(typo.stderr, "warning: no plugin offers a tool named memory_sett");
  assertStringIncludes(typo.stderr, "memory_set, memory_get");
  assertStringIncludes(typo.stderr, "TOOL_NOT_FOUND");
  const unknownUpstream = await create("e", "other__echo");
  assertStringIncludes(unknownUpstream.stderr, "no plugin offers a tool named other__echo");
  const disabled = await create("f", "http_request");
  assertStringIncludes(disabled.stderr, "plugin http, which is disabled in config");
  const list = JSON.parse(
    (await runCli(["webhooks", "list", "--json", "--incoming"], { home: tmp.home })).stdout,
  );
  assertEquals(list.incoming.length, 6, "every endpoint is registered, warned or not");
});

const BAD_INPUT: { name: string; args: string[]; code: number; message: RegExp }[] = [
  {
    name: "malformed URL",
    args: ["webhooks", "add", "--url", "not a url"],
    code: 2,
    message: /--url.*not a URL/,
  },
  {
    name: "ftp URL",
    args: ["webhooks", "add", "--url", "ftp://example.com/x"],
    code: 2,
    message: /scheme ftp/,
  },
  {
    name: "unknown event type",
    args: ["webhooks", "add", "--url", "http://x.test/", "--events", "tool.called,tool.exploded"],
    code: 2,
    message:
      /tool\.exploded.*valid: tool\.called, tool\.failed, plugin\.ready, plugin\.error, circuit\.opened, circuit\.closed, audit\.written, server\.started/,
  },
  {
    name: "empty --events",
    args: ["webhooks", "add", "--url", "http://x.test/", "--events", ""],
    code: 2,
    message: /--events.*empty/,
  },
  { name: "missing --url", args: ["webhooks", "add"], code: 2, message: /--url/ },
  {
    name: "whsec_ secret that is not base64",
    args: ["webhooks", "add", "--url", "http://x.test/", "--secret", "whsec_not-base64!"],
    code: 2,
    message: /Invalid --secret: a whsec_ secret must be base64 after the prefix/,
  },
  {
    name: "missing --handler",
    args: ["webhooks", "create", "--name", "a", "--url", "/hooks/a"],
    code: 2,
    message: /--handler/,
  },
  {
    name: "path without slash",
    args: ["webhooks", "create", "--name", "a", "--url", "hooks/a", "--handler", "t"],
    code: 2,
    message: /must start with "\/"/,
  },
  {
    name: "path shadowing /tools",
    args: ["webhooks", "create", "--name", "a", "--url", "/tools/x", "--handler", "t"],
    code: 2,
    message: /shadows the built-in route \/tools/,
  },
  {
    name: "path shadowing /health",
    args: ["webhooks", "create", "--name", "a", "--url", "/health", "--handler", "t"],
    code: 2,
    message: /shadows the built-in route \/health/,
  },
  ...["/ui/x", "/metrics", "/.well-known/oauth-protected-resource", "/incoming/failed"].map((
    path,
  ) => ({
    name: `path shadowing ${path}`,
    args: ["webhooks", "create", "--name", "a", "--url", path, "--handler", "t"],
    code: 2,
    message: new RegExp(`shadows the built-in route ${path.split("/").slice(0, 2).join("/")}`),
  })),
  { name: "unknown command", args: ["webhooks", "explode"], code: 2, message: /unknown command/ },
  {
    name: "unknown flag",
    args: ["webhooks", "list", "--bogus"],
    code: 2,
    message: /unknown option '--bogus'/,
  },
];

for (const bad of BAD_INPUT) {
  Deno.test(`bad input is rejected and stores nothing: ${bad.name}`, async () => {
    await using tmp = await tempHome();
    const run = await runCli(bad.args, { home: tmp.home });
    assertEquals(run.code, bad.code, run.stderr);
    assertMatch(run.stderr, bad.message);
    assertEquals(run.stderr.trim().split("\n").length, 1, `not one line: ${run.stderr}`);
    assertEquals(run.stdout, "");
    const list = await runCli(["webhooks", "list", "--json"], { home: tmp.home });
    assertEquals(JSON.parse(list.stdout), { outgoing: [], incoming: [] });
  });
}

Deno.test("duplicate incoming path or name exits 1 and keeps the first registration", async () => {
  await using tmp = await tempHome();
  const first = await runCli(
    ["webhooks", "create", "--name", "ci", "--url", "/hooks/ci", "--handler", "memory_set"],
    { home: tmp.home },
  );
  assertEquals(first.code, 0, first.stderr);
  const samePath = await runCli(
    ["webhooks", "create", "--name", "other", "--url", "/hooks/ci", "--handler", "memory_set"],
    { home: tmp.home },
  );
  assertEquals(samePath.code, 1);
  assertMatch(samePath.stderr, /--url: path \/hooks\/ci is already used/);
  const sameName = await runCli(
    ["webhooks", "create", "--name", "ci", "--url", "/hooks/other", "--handler", "memory_set"],
    { home: tmp.home },
  );
  assertEquals(sameName.code, 1);
  assertMatch(sameName.stderr, /--name: "ci" is already used/);
  const list = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(list.incoming.length, 1);
  assertEquals(list.incoming[0].path, "/hooks/ci");
});

Deno.test("two CLI processes adding 50 webhooks each at once: all 100 listed, ids unique", async () => {
  await using tmp = await tempHome();
  const worker = async (n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < 50; i++) {
      const run = await runCli(
        ["webhooks", "add", "--url", `http://127.0.0.1:9/w${n}/${i}`],
        { home: tmp.home },
      );
      assertEquals(run.code, 0, run.stderr);
      ids.push(run.stdout.trim());
    }
    return ids;
  };
  const [a, b] = await Promise.all([worker(1), worker(2)]);
  const list = JSON.parse(
    (await runCli(["webhooks", "list", "--json"], { home: tmp.home })).stdout,
  );
  assertEquals(list.outgoing.length, 100);
  const listed = new Set(list.outgoing.map((w: { id: string }) => w.id));
  assertEquals(listed.size, 100);
  for (const id of [...a, ...b]) assert(listed.has(id), `missing ${id}`);
});

Deno.test("mcp start on stdio warns that registered incoming endpoints need --transport http", async () => {
  await using tmp = await tempHome();
  await runCli([
    "webhooks",
    "create",
    "--name",
    "a",
    "--url",
    "/hooks/a",
    "--handler",
    "memory_set",
  ], {
    home: tmp.home,
  });
  const run = await runCli(["mcp", "start"], { home: tmp.home, stdin: "" });
  assertEquals(run.code, 0, run.stderr);
  assertEquals(run.stdout, "");
  assertMatch(
    run.stderr,
    /1 incoming webhook endpoint\(s\) are registered; they are served only with --transport http/,
  );
});

Deno.test("webhooks list sums up each outgoing webhook's latest delivery attempts", async () => {
  await using tmp = await tempHome();
  await using receiver = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response(null, { status: 204 }),
  );
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const closedPort = (closed.addr as Deno.NetAddr).port;
  closed.close();
  const add = async (url: string) =>
    (await runCli(["webhooks", "add", "--url", url], { home: tmp.home })).stdout.trim();
  const good = await add(`http://127.0.0.1:${receiver.addr.port}/hook`);
  const bad = await add(`http://127.0.0.1:${closedPort}/hook`);
  const idle = await add("http://127.0.0.1:9/never");
  for (const id of [good, good, bad]) {
    await runCli(["webhooks", "test", id, "--timeout", "2000"], { home: tmp.home });
  }
  const json = await runCli(["webhooks", "list", "--json"], { home: tmp.home });
  assertEquals(json.code, 0, json.stderr);
  const recent = Object.fromEntries(
    JSON.parse(json.stdout).outgoing.map((w: { id: string; recent: unknown }) => [w.id, w.recent]),
  );
  assertEquals(recent[good].attempts, 2);
  assertEquals(recent[good].ok, 2);
  assertEquals(recent[good].last.status, 204);
  assertEquals(recent[bad].attempts, 1);
  assertEquals(recent[bad].ok, 0);
  assertEquals(recent[bad].last.ok, false);
  assert(recent[bad].last.error, "a refused connection is reported as an error");
  assertEquals(recent[idle], { attempts: 0, ok: 0 });
  const human = await runCli(["webhooks", "list"], { home: tmp.home });
  const row = (id: string) => human.stdout.split("\n").find((line) => line.startsWith(id)) ?? "";
  assertMatch(row(good), /2 of last 2 ok; last HTTP 204 at \d{4}-/);
  assertMatch(row(bad), /0 of last 1 ok; last error: .+ at \d{4}-/);
  assertStringIncludes(row(idle), "no deliveries yet");
});

Deno.test("webhooks test waits webhooks.timeout_ms unless --timeout says otherwise", async () => {
  await using tmp = await tempHome();
  // A receiver that accepts connections and never answers.
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of silent) held.push(conn);
  })();
  try {
    const id = (await runCli(
      ["webhooks", "add", "--url", `http://127.0.0.1:${(silent.addr as Deno.NetAddr).port}/`],
      { home: tmp.home },
    )).stdout.trim();
    const configured = await runCli(["webhooks", "test", id], {
      home: tmp.home,
      env: { TOOLGATE_WEBHOOK_TIMEOUT_MS: "300" },
    });
    assertEquals(configured.code, 1);
    assertStringIncludes(configured.stdout + configured.stderr, "Timed out after 300 ms");
    const flag = await runCli(["webhooks", "test", id, "--timeout", "200"], {
      home: tmp.home,
      env: { TOOLGATE_WEBHOOK_TIMEOUT_MS: "300" },
    });
    assertStringIncludes(flag.stdout + flag.stderr, "Timed out after 200 ms");
  } finally {
    silent.close();
    for (const conn of held) conn.close();
    await accepting.catch(() => {});
  }
});

Deno.test("TOOLGATE_SECRET_KEY seals webhook secrets instead of keychain.key; a bad or other key is a clear error", async () => {
  await using tmp = await tempHome();
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
  const env = { TOOLGATE_SECRET_KEY: key };
  const add = await runCli(["webhooks", "add", "--url", "http://127.0.0.1:9/x", "--json"], {
    home: tmp.home,
    env,
  });
  assertEquals(add.code, 0, add.stderr);
  const { id, secret } = JSON.parse(add.stdout);
  assertEquals(await Deno.stat(`${tmp.home}/keychain.key`).then(() => true, () => false), false);
  const rotated = await runCli(["webhooks", "rotate-secret", id], { home: tmp.home, env });
  assertEquals(rotated.code, 0, rotated.stderr);
  const show = await runCli(["webhooks", "show", id, "--json"], { home: tmp.home, env });
  assertEquals(JSON.parse(show.stdout).previous_secrets.length, 1);

  const other = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
  const wrong = await runCli(["webhooks", "test", id], {
    home: tmp.home,
    env: { TOOLGATE_SECRET_KEY: other },
  });
  assertEquals(wrong.code, 1);
  assertMatch(
    wrong.stderr,
    /Cannot decrypt the signing secret of wh_\w+: TOOLGATE_SECRET_KEY is not the key it was sealed with/,
  );
  assert(!wrong.stderr.includes(secret.slice(6)));
  const bad = await runCli(["webhooks", "list"], {
    home: tmp.home,
    env: { TOOLGATE_SECRET_KEY: "c2hvcnQ=" },
  });
  assertEquals(bad.code, 1);
  assertMatch(bad.stderr, /Invalid TOOLGATE_SECRET_KEY: expected the base64 of 32 bytes/);
});
