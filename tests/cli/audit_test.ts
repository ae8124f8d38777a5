import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";

async function seed(home: string, count: number): Promise<void> {
  for (let i = 1; i <= count; i++) {
    const run = await runCli(
      ["tools", "call", "memory_set", "--args", JSON.stringify({ key: `k${i}`, value: i })],
      { home },
    );
    assertEquals(run.code, 0, run.stderr);
  }
}

async function editKv(home: string, edit: (kv: Deno.Kv) => Promise<void>): Promise<void> {
  const kv = await Deno.openKv(`${home}/toolgate.kv`);
  try {
    await edit(kv);
  } finally {
    kv.close();
  }
}

Deno.test("audit list and export show every tool call; verify passes with the count", async () => {
  await using tmp = await tempHome();
  await seed(tmp.home, 3);
  const list = await runCli(["audit", "list", "--json"], { home: tmp.home });
  assertEquals(list.code, 0, list.stderr);
  const page = JSON.parse(list.stdout);
  assertEquals(page.entries.map((e: { seq: number }) => e.seq), [1, 2, 3]);
  assertEquals(page.entries[0].tool, "memory_set");
  assertEquals(page.entries[0].kind, "tool.call");
  const filtered = JSON.parse(
    (await runCli(["audit", "list", "--json", "--after", "1", "--limit", "1"], { home: tmp.home }))
      .stdout,
  );
  assertEquals(filtered.entries.map((e: { seq: number }) => e.seq), [2]);
  const exported = await runCli(["audit", "export", "--format", "jsonl"], { home: tmp.home });
  const lines = exported.stdout.trim().split("\n").map((line) => JSON.parse(line));
  assertEquals(lines.map((e) => e.seq), [1, 2, 3]);
  assertEquals(lines[1].previous_hash, lines[0].entry_hash);
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 0, verify.stderr);
  assertMatch(verify.stdout, /intact: 3 entries/);
});

Deno.test("audit verify exits 1 naming the seq whose content was changed in KV", async () => {
  await using tmp = await tempHome();
  await seed(tmp.home, 3);
  await editKv(tmp.home, async (kv) => {
    const key = ["audit", "entry", 2, 0];
    const entry = await kv.get<Uint8Array>(key);
    const text = new TextDecoder().decode(entry.value!).replace('"k2"', '"kX"');
    await kv.set(key, new TextEncoder().encode(text));
  });
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 1);
  assertMatch(verify.stderr, /seq 2 \(content_changed\)/);
});

Deno.test("audit verify exits 1 naming the seq of a deleted entry", async () => {
  await using tmp = await tempHome();
  await seed(tmp.home, 3);
  await editKv(tmp.home, async (kv) => {
    for await (const entry of kv.list({ prefix: ["audit", "entry", 2] })) {
      await kv.delete(entry.key);
    }
  });
  const verify = await runCli(["audit", "verify", "--json"], { home: tmp.home });
  assertEquals(verify.code, 1);
  assertEquals(JSON.parse(verify.stdout).seq, 2);
  assertMatch(verify.stderr, /seq 2 \(seq_gap\)/);
});

Deno.test("audit verify exits 1 naming the first seq of two reordered entries", async () => {
  await using tmp = await tempHome();
  await seed(tmp.home, 3);
  await editKv(tmp.home, async (kv) => {
    const a = await kv.get<Uint8Array>(["audit", "entry", 1, 0]);
    const b = await kv.get<Uint8Array>(["audit", "entry", 2, 0]);
    await kv.atomic().set(a.key, b.value!).set(b.key, a.value!).commit();
  });
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 1);
  assertMatch(verify.stderr, /seq 1 \(/);
});

Deno.test("audit list rejects a bad --limit and --since with exit 2", async () => {
  await using tmp = await tempHome();
  const limit = await runCli(["audit", "list", "--limit", "0"], { home: tmp.home });
  assertEquals(limit.code, 2);
  assertMatch(limit.stderr, /--limit "0"/);
  const since = await runCli(["audit", "list", "--since", "yesterday"], { home: tmp.home });
  assertEquals(since.code, 2);
  assertMatch(since.stderr, /--since "yesterday"/);
});

Deno.test("a token given to a tool never appears in the audit log", async () => {
  await using tmp = await tempHome();
  const run = await runCli(
    [
      "tools",
      "call",
      "memory_set",
      "--args",
      JSON.stringify({ key: "k", value: { token: "s3cret" } }),
    ],
    { home: tmp.home },
  );
  assertEquals(run.code, 0, run.stderr);
  const exported = await runCli(["audit", "export"], { home: tmp.home });
  assert(!exported.stdout.includes("s3cret"), exported.stdout);
  assertMatch(exported.stdout, /\[REDACTED\]/);
});

Deno.test("audit list's next-page hint keeps the filters; an unknown --kind is refused with the known kinds", async () => {
  await using tmp = await tempHome();
  await seed(tmp.home, 3);
  const since = "2020-01-02T03:04:05.000Z";
  const first = await runCli(
    [
      "audit",
      "list",
      "--tool",
      "memory_set",
      "--kind",
      "tool.call",
      "--since",
      since,
      "--limit",
      "2",
    ],
    { home: tmp.home },
  );
  assertEquals(first.code, 0, first.stderr);
  const hint = first.stdout.trim().split("\n").at(-1)!;
  assertEquals(
    hint,
    `More entries: toolgate audit list --tool memory_set --kind tool.call --since ${since} --limit 2 --after 2`,
  );
  // The hint, run as printed, gives the next page.
  const next = await runCli([...hint.split(" ").slice(3), "--json"], { home: tmp.home });
  assertEquals(JSON.parse(next.stdout).entries.map((e: { seq: number }) => e.seq), [3]);

  for (const command of ["list", "export"]) {
    const bad = await runCli(["audit", command, "--kind", "tool.calls"], { home: tmp.home });
    assertEquals(bad.code, 2);
    assertEquals(
      bad.stderr,
      'toolgate: USAGE: Invalid --kind "tool.calls": expected one of tool.call, webhook.incoming, prompt.get, resource.read, audit.pruned, pin.created, pin.changed, pin.approved, pin.rejected, approval.requested, approval.decided, approval.expired\n',
    );
  }
});
