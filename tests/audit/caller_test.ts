import { assertEquals, assertRejects } from "../_asserts.ts";
import { computeEntryHash, createAuditLog } from "../../src/audit/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { readRaw, tempStore } from "./_store.ts";
import { auditEntryPartKey } from "../../src/store/kv/keys.ts";

Deno.test("caller: an optional, hashed field; entries without it and with it verify in one chain; list filters by name, id or kind", async () => {
  await using t = await tempStore();
  const log = createAuditLog({ store: t.store });
  const outcome = { ok: true, latency_ms: 1 };
  await log.append({ kind: "tool.call", tool: "echo", input: {}, outcome });
  await log.append({
    kind: "tool.call",
    tool: "echo",
    caller: { kind: "key", name: "ci", id: "key_01" },
    input: {},
    outcome,
  });
  await log.append({
    kind: "tool.call",
    tool: "echo",
    caller: { kind: "admin" },
    input: {},
    outcome,
  });
  await log.close();

  const raw = await readRaw(t.store, 2);
  assertEquals(raw.caller, { kind: "key", name: "ci", id: "key_01" });
  assertEquals(computeEntryHash(raw), raw.entry_hash);
  assertEquals((await readRaw(t.store, 1)).caller, undefined);
  // The caller is covered by the hash: changing it breaks the entry.
  assertEquals(computeEntryHash({ ...raw, caller: { kind: "admin" } }) === raw.entry_hash, false);
  assertEquals((await log.verify()).ok, true);

  const seqs = async (caller: string) =>
    (await log.list({ caller })).entries.map((entry) => entry.seq);
  assertEquals(await seqs("ci"), [2]);
  assertEquals(await seqs("key_01"), [2]);
  assertEquals(await seqs("admin"), [3]);
  assertEquals(await seqs("key"), [2]);
  assertEquals(await seqs("nobody"), []);
});

Deno.test("caller: a malformed caller is refused before anything is written", async () => {
  await using t = await tempStore();
  const log = createAuditLog({ store: t.store });
  const error = await assertRejects(
    () =>
      log.append({
        kind: "tool.call",
        tool: "echo",
        caller: { kind: "key", token: "tg_secret" } as never,
        input: {},
        outcome: { ok: true, latency_ms: 1 },
      }),
    GatewayError,
  );
  assertEquals(error.code, "INTERNAL");
  assertEquals((await log.head()).head_seq, 0);
  await log.close();
});

Deno.test("list() filters find names that JSON escapes, and entries stored in another JSON layout", async () => {
  await using t = await tempStore();
  const log = createAuditLog({ store: t.store });
  const outcome = { ok: true, latency_ms: 1 };
  const odd = 'quote"back\\slash/é\u2028';
  await log.append({ kind: "tool.call", tool: odd, input: { tool: "echo" }, outcome });
  await log.append({
    kind: "tool.call",
    tool: "echo",
    caller: { kind: "key", name: odd, id: "key_02" },
    input: {},
    outcome,
  });
  await log.append({ kind: "prompt.get", tool: "echo", input: {}, outcome });
  await log.close();
  // Entry 3 as another writer might have laid it out: spaces, other key order.
  const third = await readRaw(t.store, 3);
  const spaced = JSON.stringify(Object.fromEntries(Object.entries(third).reverse()), null, 1);
  await t.store.kv.set(
    auditEntryPartKey(3, 0),
    new TextEncoder().encode(spaced),
  );
  const seqs = async (filter: Record<string, string>) =>
    (await log.list({ ...filter, maxScan: 3 })).entries.map((e) => e.seq);
  assertEquals(await seqs({ tool: odd }), [1]);
  assertEquals(await seqs({ tool: "echo" }), [2, 3]);
  assertEquals(await seqs({ caller: odd }), [2]);
  assertEquals(await seqs({ caller: "key_02", tool: "echo" }), [2]);
  assertEquals(await seqs({ kind: "prompt.get" }), [3]);
  assertEquals(await seqs({ kind: "tool.call", tool: "echo" }), [2]);
  // A scan bound shorter than the log gives a short page and says where it stopped.
  assertEquals(await log.list({ kind: "prompt.get", maxScan: 2 }), { entries: [], next_after: 2 });
  await assertRejects(() => log.list({ maxScan: 0 }), GatewayError, "maxScan");
});

Deno.test("list() with a filter reads growing pages and finds every match in order", async () => {
  await using t = await tempStore();
  const log = createAuditLog({ store: t.store });
  const outcome = { ok: true, latency_ms: 1 };
  await Promise.all(
    Array.from(
      { length: 300 },
      (_, i) =>
        log.append({ kind: "tool.call", tool: i % 7 ? "echo" : "rare", input: { i }, outcome }),
    ),
  );
  await log.close();
  const expected = Array.from({ length: 300 }, (_, i) => i + 1).filter((seq) =>
    (seq - 1) % 7 === 0
  );
  const found: number[] = [];
  let after = 0;
  for (let pages = 0; pages < 10; pages++) {
    const page = await log.list({ tool: "rare", limit: 10, after });
    found.push(...page.entries.map((e) => e.seq));
    if (page.next_after === null) break;
    after = page.next_after;
  }
  assertEquals(found, expected);
  const all = await log.list({ kind: "tool.call", limit: 1000 });
  assertEquals(all.entries.length, 300);
  assertEquals(all.next_after, null);
});
