import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome, until } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";

interface Entry {
  seq: number;
  previous_hash: string;
  entry_hash: string;
  kind: string;
  outcome: Record<string, unknown>;
}

async function allEntries(url: string): Promise<Entry[]> {
  const entries: Entry[] = [];
  let after = 0;
  for (;;) {
    const page = await (await fetch(`${url}/audit?after=${after}&limit=1000`)).json();
    assertEquals(page.chain.intact, true);
    entries.push(...page.entries);
    if (page.next === null) return entries;
    after = page.next;
  }
}

Deno.test("500 concurrent REST calls and a second process: contiguous seqs, valid links, verify passes", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home });
  const rest = Array.from({ length: 500 }, async (_, i) => {
    const response = await fetch(`${server.url}/tools/memory_set`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: `rest-${i}`, value: i }),
    });
    assertEquals(response.status, 200);
    await response.body?.cancel();
  });
  const other = (async () => {
    for (let i = 0; i < 10; i++) {
      const run = await runCli(
        ["tools", "call", "memory_set", "--args", JSON.stringify({ key: `cli-${i}`, value: i })],
        { home: tmp.home },
      );
      assertEquals(run.code, 0, run.stderr);
    }
  })();
  await Promise.all([...rest, other]);
  const entries = await allEntries(server.url);
  assertEquals(entries.length, 510);
  assertEquals(entries.map((e) => e.seq), Array.from({ length: 510 }, (_, i) => i + 1));
  for (let i = 1; i < entries.length; i++) {
    assertEquals(entries[i].previous_hash, entries[i - 1].entry_hash, `link at seq ${i + 1}`);
  }
  const head = (await (await fetch(`${server.url}/audit?limit=1`)).json()).chain;
  assertEquals(head.head_seq, 510);
  assertEquals(head.head_hash, entries.at(-1)!.entry_hash);
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 0, verify.stderr);
  assertMatch(verify.stdout, /intact: 510 entries/);
});

Deno.test("a token never shows in the audit log, in /audit or in any delivered event", async () => {
  await using tmp = await tempHome();
  const bodies: string[] = [];
  const hook = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
    bodies.push(await r.text());
    return new Response(null, { status: 204 });
  });
  try {
    await runCli(["webhooks", "add", "--url", `http://127.0.0.1:${hook.addr.port}/`], {
      home: tmp.home,
    });
    await using server = await startHttpServer({ home: tmp.home });
    for (const args of [{ key: "k", value: { token: "s3cret" } }, { key: "k", token: "s3cret" }]) {
      const response = await fetch(`${server.url}/tools/memory_set`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(args),
      });
      await response.body?.cancel();
    }
    const audit = await (await fetch(`${server.url}/audit`)).text();
    assert(!audit.includes("s3cret"), audit);
    assertMatch(audit, /\[REDACTED\]/);
    const deadline = Date.now() + 5000;
    while (
      !bodies.some((b) => b.includes('"audit.written"')) ||
      bodies.filter((b) => b.includes('"tool.')).length < 2
    ) {
      if (Date.now() > deadline) throw new Error("events did not arrive");
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const body of bodies) assert(!body.includes("s3cret"), body);
    await server.stop();
    const exported = await runCli(["audit", "export"], { home: tmp.home });
    assert(!exported.stdout.includes("s3cret"));
  } finally {
    await hook.shutdown();
  }
});

Deno.test("secrets inside argument values are redacted in /audit, the CLI, /events and webhooks, not for the tool", async () => {
  await using tmp = await tempHome();
  const url = "https://ci:pa55word@build.example.com/hook?access_token=tok-abc123&page=2";
  const note = "sent with Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl";
  const employee = "emp-123456";
  const secrets = ["pa55word", "tok-abc123", "eyJhbGciOiJIUzI1NiJ9", employee];
  const bodies: string[] = [];
  const hook = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
    bodies.push(await r.text());
    return new Response(null, { status: 204 });
  });
  try {
    const added = await runCli(
      [
        "webhooks",
        "add",
        "--url",
        `http://127.0.0.1:${hook.addr.port}/`,
        "--events",
        "tool.called",
      ],
      { home: tmp.home },
    );
    assertEquals(added.code, 0, added.stderr);
    await using server = await startHttpServer({
      home: tmp.home,
      config: { redact: { patterns: ["emp-\\d{6}"] }, egress: { allow: ["127.0.0.1/32"] } },
    });
    const stream = await fetch(`${server.url}/events?types=tool.called`);
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let streamed = "";
    // Ends when the reader is cancelled, or with an error when the server stops first.
    const reading = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        streamed += value;
      }
    })().catch(() => {});
    const call = async (tool: string, args: unknown) => {
      const response = await fetch(`${server.url}/tools/${tool}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(args),
      });
      assertEquals(response.status, 200);
      return await response.json();
    };
    await call("memory_set", { key: "build", value: { url, note, owner: employee } });
    // The tool stored the real values: reading them back returns them unredacted.
    const read = await call("memory_get", { key: "build" });
    assertEquals(read.structuredContent.value, { url, note, owner: employee });

    const audit = await (await fetch(`${server.url}/audit`)).json();
    const input = audit.entries.find((e: { tool: string }) => e.tool === "memory_set").input;
    assertEquals(input.value, {
      url: "https://ci:[REDACTED]@build.example.com/hook?access_token=[REDACTED]&page=2",
      note: "sent with Authorization: Bearer [REDACTED]",
      owner: "[REDACTED]",
    });
    await until(() => bodies.length >= 2, "two tool.called deliveries");
    await until(
      () => (streamed.match(/event: tool\.called/g) ?? []).length >= 2,
      "two tool.called on /events",
    );
    await reader.cancel();
    await reading;
    const exported = await runCli(["audit", "export"], { home: tmp.home });
    assertEquals(exported.code, 0, exported.stderr);
    for (
      const [where, text] of [
        ["/audit", JSON.stringify(audit)],
        ["webhook deliveries", bodies.join("\n")],
        ["/events", streamed],
        ["audit export", exported.stdout],
      ]
    ) {
      for (const secret of secrets) assert(!text.includes(secret), `${secret} in ${where}`);
      assertStringIncludes(text, "https://ci:[REDACTED]@build.example.com", where);
    }
  } finally {
    await hook.shutdown();
  }
});
