import { assert, assertEquals, assertMatch, assertRejects } from "../_asserts.ts";
import { type AuditLog, createAuditLog, GENESIS_HASH } from "../../src/audit/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import type { KvStore } from "../../src/store/kv/kv_store.ts";
import { auditEntryPartKey, auditHeadKey } from "../../src/store/kv/keys.ts";
import { deleteRaw, readRaw, tempStore, toolCall, writeRaw } from "./_store.ts";

async function fill(store: KvStore, count: number): Promise<AuditLog> {
  const log = createAuditLog({ store });
  await Promise.all(Array.from({ length: count }, (_, i) => log.append(toolCall("echo", { i }))));
  return log;
}

Deno.test("verify() reports ok and the count on an intact chain, and on an empty one", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  assertEquals(await log.verify(), { ok: true, count: 0, head_seq: 0, head_hash: GENESIS_HASH });
  await Promise.all(Array.from({ length: 10 }, () => log.append(toolCall("echo"))));
  const head = await log.head();
  assertEquals(await log.verify(), {
    ok: true,
    count: 10,
    head_seq: 10,
    head_hash: head.head_hash,
  });
  await log.close();
});

Deno.test("verify() names the first seq whose field was changed as content_changed", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 10);
  for (const seq of [7, 4]) {
    const stored = await readRaw(tmp.store, seq);
    await writeRaw(tmp.store, seq, { ...stored, tool: "other" });
  }
  const result = await log.verify();
  assertEquals(result.ok, false);
  if (result.ok) return;
  assertEquals([result.seq, result.reason, result.count], [4, "content_changed", 3]);
  assertMatch(result.message, /^Entry 4 does not match its entry_hash/);
  await log.close();
});

Deno.test("verify() detects an added field as content_changed", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 3);
  await writeRaw(tmp.store, 2, { ...(await readRaw(tmp.store, 2)), extra: true });
  const result = await log.verify();
  assertEquals(result.ok ? null : [result.seq, result.reason], [2, "content_changed"]);
  await log.close();
});

Deno.test("verify() names a deleted entry as seq_gap", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 10);
  await deleteRaw(tmp.store, 6);
  const result = await log.verify();
  assertEquals(result.ok ? null : [result.seq, result.reason], [6, "seq_gap"]);
  await log.close();
});

Deno.test("verify() names swapped entries as link_broken at the first of them", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 10);
  const [third, fourth] = [await readRaw(tmp.store, 3), await readRaw(tmp.store, 4)];
  await writeRaw(tmp.store, 3, fourth);
  await writeRaw(tmp.store, 4, third);
  const result = await log.verify();
  assertEquals(result.ok ? null : [result.seq, result.reason], [3, "link_broken"]);
  await log.close();
});

Deno.test("verify() names a re-hashed forged entry by the broken link after it", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 5);
  const stored = await readRaw(tmp.store, 2);
  const { computeEntryHash } = await import("../../src/audit/mod.ts");
  const forged = { ...stored, input: { i: 99 } };
  await writeRaw(tmp.store, 2, { ...forged, entry_hash: computeEntryHash(forged) });
  const result = await log.verify();
  assertEquals(result.ok ? null : [result.seq, result.reason], [3, "link_broken"]);
  await log.close();
});

Deno.test("verify() reports missing last entries as seq_gap and a head on another hash as head_mismatch", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 5);
  await deleteRaw(tmp.store, 5);
  const gap = await log.verify();
  assertEquals(gap.ok ? null : [gap.seq, gap.reason], [5, "seq_gap"]);

  const head = await tmp.store.kv.get<{ seq: number; hash: string; timestamp: string }>(
    auditHeadKey(),
  );
  await tmp.store.kv.set(auditHeadKey(), {
    ...head.value!,
    seq: 4,
    hash: `sha256:${"1".repeat(64)}`,
  });
  const mismatch = await log.verify();
  assertEquals(mismatch.ok ? null : [mismatch.seq, mismatch.reason], [4, "head_mismatch"]);
  await log.close();
});

Deno.test("verify() reports entries stored past the head as head_mismatch, and append() refuses to overwrite them", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 5);
  await log.close();
  const fourth = await readRaw(tmp.store, 4);
  await tmp.store.kv.set(auditHeadKey(), {
    seq: 4,
    hash: fourth.entry_hash,
    timestamp: fourth.timestamp,
  });
  const result = await log.verify();
  assertEquals(result.ok ? null : [result.seq, result.reason], [5, "head_mismatch"]);

  const writer = createAuditLog({ store: tmp.store });
  const error = await assertRejects(() => writer.append(toolCall("echo")), GatewayError, "entry 5");
  assertEquals((error as GatewayError).code, "STORE_CORRUPT");
  await writer.close();
  assertEquals((await readRaw(tmp.store, 5)).seq, 5, "entry 5 is untouched");
});

Deno.test("verify() names an entry that is not JSON as unreadable", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 4);
  await tmp.store.kv.set(auditEntryPartKey(2, 0), new TextEncoder().encode("{not json"));
  const result = await log.verify();
  assertEquals(result.ok ? null : [result.seq, result.reason], [2, "unreadable"]);
  await tmp.store.kv.set(auditEntryPartKey(2, 0), "a string, not bytes");
  const again = await log.verify();
  assertEquals(again.ok ? null : [again.seq, again.reason], [2, "unreadable"]);
  await assertRejects(() => log.list(), GatewayError, "Audit entry 2 is unreadable");
  await log.close();
});

Deno.test("verify() streams page by page and reports progress", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 2500);
  const progress: { checked: number; total: number }[] = [];
  const result = await log.verify({ onProgress: (p) => progress.push(p) });
  assertEquals(result.ok && result.count, 2500);
  assert(progress.length >= 3, "one report per page of at most 1000 entries, then a last one");
  assert(
    progress.every((p, i) => p.total === 2500 && (i === 0 || p.checked >= progress[i - 1].checked)),
  );
  assert(progress[0].checked <= 1000);
  assertEquals(progress[progress.length - 1], { checked: 2500, total: 2500 });
  const controller = new AbortController();
  controller.abort(new Error("stopped"));
  await assertRejects(() => log.verify({ signal: controller.signal }), Error, "stopped");
  await log.close();
});

Deno.test("verify() reports entries without a head as head_mismatch at seq 1", async () => {
  await using tmp = await tempStore();
  const log = await fill(tmp.store, 3);
  await log.close();
  await tmp.store.kv.delete(auditHeadKey());
  const result = await log.verify();
  assertEquals(result.ok ? null : [result.seq, result.reason], [1, "head_mismatch"]);
  const writer = createAuditLog({ store: tmp.store });
  await assertRejects(() => writer.append(toolCall("echo")), GatewayError, "entry 1 is stored");
  await writer.close();
});
