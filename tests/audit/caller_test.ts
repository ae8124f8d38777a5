import { assertEquals, assertRejects } from "../_asserts.ts";
import { computeEntryHash, createAuditLog } from "../../src/audit/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { readRaw, tempStore } from "./_store.ts";

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
