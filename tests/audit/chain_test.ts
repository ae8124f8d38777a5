import { assert, assertEquals, assertMatch, assertRejects } from "../_asserts.ts";
import {
  type AuditEntry,
  canonicalJson,
  computeEntryHash,
  createAuditLog,
  GENESIS_HASH,
  MAX_INPUT_BYTES,
  TRUNCATED,
} from "../../src/audit/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { EventBus, type EventEnvelope, type EventType } from "../../src/events/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { readRaw, tempStore, toolCall, writeRaw } from "./_store.ts";

const T0 = Date.UTC(2025, 0, 2, 3, 4, 5, 678);

async function subtleSha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("entry_hash is sha256: + hex SHA-256 of the hand-written canonical JSON (known answer)", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store, now: () => T0 });
  const entry = await log.append({
    kind: "tool.call",
    tool: "echo",
    session_id: "s1",
    input: { text: "hi", nested: { b: 1, a: [true, null] } },
    outcome: { ok: true, latency_ms: 7 },
  });
  await log.close();
  const canonical = '{"input":{"nested":{"a":[true,null],"b":1},"text":"hi"},"kind":"tool.call",' +
    '"outcome":{"latency_ms":7,"ok":true},"previous_hash":"sha256:' + "0".repeat(64) + '",' +
    '"seq":1,"session_id":"s1","timestamp":"2025-01-02T03:04:05.678Z","tool":"echo"}';
  const independent = `sha256:${await subtleSha256Hex(canonical)}`;
  assertEquals(
    independent,
    "sha256:3cfa55154a58221d7ba9e52c1d495c48393193485caff10cfa558266de93c425",
  );
  assertEquals(entry.entry_hash, independent);
  assertEquals(computeEntryHash(entry), independent);
  const { entry_hash: _hash, ...body } = entry;
  assertEquals(canonicalJson(body), canonical);
  assertEquals(await readRaw(tmp.store, 1), { ...body, entry_hash: independent });
});

Deno.test("the first entry links to the genesis hash and each next entry to the one before", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const entries: AuditEntry[] = [];
  for (let i = 0; i < 5; i++) entries.push(await log.append(toolCall("echo", { i })));
  await log.close();
  assertEquals(GENESIS_HASH, `sha256:${"0".repeat(64)}`);
  assertEquals(entries.map((e) => e.seq), [1, 2, 3, 4, 5]);
  assertEquals(entries[0].previous_hash, GENESIS_HASH);
  for (let i = 1; i < entries.length; i++) {
    assertEquals(entries[i].previous_hash, entries[i - 1].entry_hash);
  }
  for (const entry of entries) {
    assertMatch(entry.entry_hash, /^sha256:[0-9a-f]{64}$/);
    assertEquals(computeEntryHash(entry), entry.entry_hash);
  }
  assertEquals(await log.head(), { head_seq: 5, head_hash: entries[4].entry_hash });
});

Deno.test("a sealed entry's hash equals the hash of its canonical JSON, whatever its strings", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const entry = await log.append({
    kind: "custom.kind_2",
    tool: 'tööl "quoted" 😀',
    input: { "é": ["\u2028", "\ud800"], z: 1.5e300, a: { "": null } },
    outcome: { anything: ["goes"] },
  });
  await log.close();
  assertEquals(entry.session_id, undefined);
  assert(!("session_id" in (await readRaw(tmp.store, 1))), "no session_id member when absent");
  assertEquals(computeEntryHash(entry), entry.entry_hash);
  assertEquals((await log.verify()).ok, true);
});

Deno.test("head() of an empty log is seq 0 with the genesis hash", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  assertEquals(await log.head(), { head_seq: 0, head_hash: GENESIS_HASH });
  assertEquals(await log.list(), { entries: [], next_after: null });
  assertEquals(await log.get(1), null);
  await log.close();
});

Deno.test("append() rejects a malformed entry with INTERNAL and appends after close with UNAVAILABLE", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const badKind = await assertRejects(
    () => log.append({ ...toolCall("echo"), kind: "Tool Call" }),
    GatewayError,
    "kind",
  );
  assertEquals((badKind as GatewayError).code, "INTERNAL");
  await assertRejects(
    () => log.append({ ...toolCall("echo"), outcome: { ok: true } }),
    GatewayError,
    "latency_ms",
  );
  await assertRejects(
    () => log.append({ ...toolCall("echo"), outcome: { ok: false, error: "boom" } }),
    GatewayError,
    "error_code",
  );
  await assertRejects(
    () =>
      log.append({ kind: "webhook.incoming", tool: "h", input: {}, outcome: { accepted: true } }),
    GatewayError,
    "endpoint_id",
  );
  await assertRejects(() => log.append(toolCall("echo", { n: 1n })), GatewayError, "not JSON");
  const failed = await log.append({
    ...toolCall("echo"),
    outcome: { ok: false, error_code: "TOOL_TIMEOUT", error: "Timed out", attempts: 2 },
  });
  assertEquals(failed.seq, 1, "rejected appends take no seq");
  assertEquals(failed.outcome.attempts, 2, "outcomes keep extra fields");
  await log.close();
  const closed = await assertRejects(() => log.append(toolCall("echo")), GatewayError, "closed");
  assertEquals((closed as GatewayError).code, "UNAVAILABLE");
});

Deno.test("list() pages by seq with after and limit (default 100, at most 1000)", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  await Promise.all(Array.from({ length: 250 }, (_, i) => log.append(toolCall("echo", { i }))));
  const first = await log.list();
  assertEquals(first.entries.map((e) => e.seq), Array.from({ length: 100 }, (_, i) => i + 1));
  assertEquals(first.next_after, 100);
  const second = await log.list({ after: 100, limit: 120 });
  assertEquals(second.entries[0].seq, 101);
  assertEquals(second.entries.length, 120);
  const last = await log.list({ after: 220, limit: 1000 });
  assertEquals(last.entries.map((e) => e.seq), Array.from({ length: 30 }, (_, i) => i + 221));
  assertEquals(last.next_after, null);
  for (const limit of [0, 1001, 1.5]) {
    const error = await assertRejects(() => log.list({ limit }), GatewayError, "Invalid limit");
    assertEquals((error as GatewayError).code, "USAGE");
  }
  await assertRejects(() => log.list({ after: -1 }), GatewayError, "Invalid after");
  assertEquals((await log.get(42))?.input, { i: 41 });
  await log.close();
});

Deno.test("list() and entries() filter by tool, kind and since", async () => {
  await using tmp = await tempStore();
  let clock = T0;
  const log = createAuditLog({ store: tmp.store, now: () => clock });
  for (let i = 0; i < 30; i++) {
    clock = T0 + i * 1000;
    await log.append(i % 3 === 0 ? toolCall("alpha", { i }) : toolCall("beta", { i }));
  }
  await log.append({
    kind: "webhook.incoming",
    tool: "alpha",
    input: { hook: 1 },
    outcome: { accepted: true, endpoint_id: "in_1" },
  });
  const alpha = await log.list({ tool: "alpha" });
  assertEquals(alpha.entries.map((e) => e.seq), [1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31]);
  const hooks = await log.list({ kind: "webhook.incoming" });
  assertEquals(hooks.entries.map((e) => e.seq), [31]);
  const since = await log.list({ since: new Date(T0 + 25_000).toISOString(), tool: "beta" });
  assertEquals(since.entries.map((e) => e.seq), [26, 27, 29, 30]);
  const paged = await log.list({ tool: "alpha", limit: 2, after: 4 });
  assertEquals(paged, { entries: paged.entries, next_after: 10 });
  assertEquals(paged.entries.map((e) => e.seq), [7, 10]);
  const exported: number[] = [];
  for await (const entry of log.entries({ since: T0 + 28_000 })) exported.push(entry.seq);
  assertEquals(exported, [29, 30, 31]);
  await assertRejects(() => log.list({ since: "yesterday" }), GatewayError, "Invalid since");
  await log.close();
});

Deno.test("timestamps never go backwards along the chain, even when the clock does", async () => {
  await using tmp = await tempStore();
  const times = [T0, T0 - 5000, T0 + 10];
  const log = createAuditLog({ store: tmp.store, now: () => times.shift() ?? T0 });
  const stamps: string[] = [];
  for (let i = 0; i < 3; i++) stamps.push((await log.append(toolCall("echo"))).timestamp);
  await log.close();
  assertEquals(stamps, [
    "2025-01-02T03:04:05.678Z",
    "2025-01-02T03:04:05.678Z",
    "2025-01-02T03:04:05.688Z",
  ]);
});

Deno.test("audit.written is emitted for each entry, and append() resolves after its listener", async () => {
  await using tmp = await tempStore();
  const bus = new EventBus();
  const seen: EventEnvelope<EventType>[] = [];
  const persisted: number[] = [];
  bus.subscribe(async (event) => {
    seen.push(event);
    await Promise.resolve();
    persisted.push((event.data as { seq: number }).seq);
  });
  const log = createAuditLog({ store: tmp.store, bus });
  const entries = await Promise.all([1, 2, 3].map((i) => log.append(toolCall(`t${i}`))));
  for (const entry of entries) assert(persisted.includes(entry.seq), "listener done first");
  await log.close();
  assertEquals(seen.map((e) => e.type), ["audit.written", "audit.written", "audit.written"]);
  assertEquals(
    seen.map((e) => e.data),
    entries.map((e) => ({
      seq: e.seq,
      entry_hash: e.entry_hash,
      previous_hash: e.previous_hash,
      tool: e.tool,
      chain_intact: true,
    })),
  );
});

Deno.test("chain_intact is false for the entry written after an altered last entry", async () => {
  await using tmp = await tempStore();
  const first = createAuditLog({ store: tmp.store });
  await first.append(toolCall("echo", { n: 1 }));
  await first.close();
  const stored = await readRaw(tmp.store, 1);
  await writeRaw(tmp.store, 1, { ...stored, input: { n: 2 } });

  const bus = new EventBus();
  const intact: boolean[] = [];
  bus.subscribe((event) => {
    intact.push((event.data as { chain_intact: boolean }).chain_intact);
  });
  const log = createAuditLog({ store: tmp.store, bus });
  const next = await log.append(toolCall("echo", { n: 3 }));
  await log.append(toolCall("echo", { n: 4 }));
  await log.close();
  assertEquals(next.previous_hash, stored.entry_hash, "the chain continues from the head");
  assertEquals(intact, [false, true]);
});

Deno.test("a large input is stored across several KV values; one over the limit is summarized", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const big = { blob: "x".repeat(200_000), more: "é".repeat(50_000) };
  const stored = await log.append(toolCall("upload", big));
  const huge = "y".repeat(MAX_INPUT_BYTES + 1);
  const summarized = await log.append(toolCall("upload", { huge }));
  const small = await log.append(toolCall("echo", { ok: 1 }));
  await log.close();
  assertEquals(stored.input, big);
  assertEquals((await log.get(1))?.input, big);
  const summary = summarized.input as Record<string, unknown>;
  assertEquals(summary[TRUNCATED], true);
  assertEquals(summary.bytes, MAX_INPUT_BYTES + 12);
  assertMatch(String(summary.sha256), /^sha256:[0-9a-f]{64}$/);
  assertEquals(small.seq, 3);
  assertEquals(await log.verify(), {
    ok: true,
    count: 3,
    head_seq: 3,
    head_hash: small.entry_hash,
  });
});

Deno.test("a reopened store continues the same chain", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const first = await log.append(toolCall("echo"));
  await log.close();
  const again = await openStore({ dataDir: tmp.dataDir });
  try {
    const reopened = createAuditLog({ store: again });
    const second = await reopened.append(toolCall("echo"));
    await reopened.close();
    assertEquals(second.seq, 2);
    assertEquals(second.previous_hash, first.entry_hash);
    assertEquals((await reopened.verify()).ok, true);
  } finally {
    again.close();
  }
});
