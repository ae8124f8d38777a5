/**
 * Retention: pruning drops old entries' bodies after exporting them and
 * keeps what the tree needs, so the chain (from the first kept entry), the
 * tree, proofs and earlier checkpoints still verify.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import {
  AuditProofs,
  createAuditLog,
  formatCheckpoint,
  loadLogKeys,
  pruneAuditLog,
  TiledTree,
  verifyAuditTree,
} from "../../src/audit/mod.ts";
import { verifyInclusion } from "../../src/audit/merkle.ts";
import { signNote } from "../../src/audit/signed_note.ts";
import { storedTiles } from "../../src/audit/stored_tiles.ts";
import { entryLeafHash } from "../../src/audit/tiles.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { auditPrunedKey } from "../../src/store/kv/keys.ts";
import { Buffer } from "node:buffer";
import { tempStore, toolCall } from "./_store.ts";

Deno.test("prune exports and drops old entries; chain, tree, proofs and earlier checkpoints still verify", async () => {
  await using tmp = await tempStore();
  const store = tmp.store;
  const log = createAuditLog({ store });
  const entries = [];
  for (let i = 0; i < 100; i++) entries.push(await log.append(toolCall("t", { i })));
  const keys = await loadLogKeys({ store, name: "toolgate/test" });
  const tree = new TiledTree(storedTiles(store));
  const checkpoint = async (size: number) => ({
    note: await signNote(
      formatCheckpoint({ origin: "toolgate/test", size, root: await tree.root(size) }),
      [keys.signer],
    ),
    source: `checkpoint ${size}`,
  });
  const checkpoints = [await checkpoint(30), await checkpoint(60), await checkpoint(100)];

  const lines: string[] = [];
  const result = await pruneAuditLog(log, store, {
    before: 50,
    exportLine: (line) => Promise.resolve(void lines.push(line)),
  });
  assertEquals(result.through, 49);
  assertEquals(result.pruned, 49);
  assertEquals(lines.map((line) => JSON.parse(line).seq), entries.slice(0, 49).map((e) => e.seq));
  assertEquals(result.entry?.seq, 101);
  assertEquals(result.entry?.kind, "audit.pruned");
  assertEquals(
    (result.entry?.input as Record<string, unknown>).through_hash,
    entries[48].entry_hash,
  );
  assertEquals(await log.get(10), null);
  assertEquals((await log.get(50))?.seq, 50);

  const chain = await log.verify();
  assert(chain.ok);
  assertEquals(chain.count, 52);
  assertEquals(chain.pruned_through, 49);
  const verified = await verifyAuditTree(store, { checkpoints });
  assertEquals(verified.ok, true, JSON.stringify(verified));
  // A pruned entry is still proven in the tree.
  const proof = await new AuditProofs(store).inclusion(10, 100);
  assertEquals(
    verifyInclusion(
      9,
      100,
      entryLeafHash(entries[9].entry_hash),
      proof.hashes.map((h) => new Uint8Array(Buffer.from(h, "base64"))),
      await tree.root(100),
    ),
    true,
  );
  // Nothing more to prune before the same seq; the last entry is never pruned.
  assertEquals((await pruneAuditLog(log, store, { before: 50 })).pruned, 0);
  assertEquals((await pruneAuditLog(log, store, { before: 1000 })).through, 100);
  assertEquals((await log.verify()).ok, true);
  await assertRejects(
    () => pruneAuditLog(log, store, { before: 0 }),
    GatewayError,
    "Invalid before",
  );

  // A prune mark that does not match the entries breaks the chain where it links.
  const mark = (await store.kv.get<Record<string, unknown>>(auditPrunedKey())).value!;
  await store.kv.set(auditPrunedKey(), { ...mark, hash: entries[5].entry_hash });
  const broken = await log.verify();
  assertEquals(broken.ok, false);
  assert(!broken.ok && broken.reason === "link_broken", JSON.stringify(broken));
  assertEquals((await verifyAuditTree(store, { checkpoints })).ok, false);
  await log.close();
});

Deno.test("a prune keeps the leaves of what it deletes, inside a tile too; a restarted appender goes on", async () => {
  await using tmp = await tempStore();
  const store = tmp.store;
  const log = createAuditLog({ store });
  const hashes: string[] = [];
  for (let i = 0; i < 40; i++) hashes.push((await log.append(toolCall("t", { i }))).entry_hash);
  const keys = await loadLogKeys({ store, name: "toolgate/test" });
  const tree = new TiledTree(storedTiles(store));
  const note = await signNote(
    formatCheckpoint({ origin: "toolgate/test", size: 40, root: await tree.root(40) }),
    [keys.signer],
  );
  const pruned = await pruneAuditLog(log, store, { before: 38 });
  assertEquals(pruned.through, 37);
  hashes.push(pruned.entry!.entry_hash);
  await log.close();
  // Entries 1–37 are gone; the prune stored their leaves: tile 0/0 and 5 of 0/1.
  const kept = await store.audit.readTiles([{ level: 0, index: 0 }, { level: 0, index: 1 }]);
  assertEquals(kept.map((tile) => tile?.length), [32 * 32, 5 * 32]);

  const next = createAuditLog({ store });
  for (let i = 0; i < 30; i++) hashes.push((await next.append(toolCall("u", { i }))).entry_hash);
  await next.close();
  const leaves = hashes.map(entryLeafHash);
  const [full] = await storedTiles(store)([{ level: 0, index: 1 }]);
  assertEquals(
    full,
    new Uint8Array(Buffer.concat(leaves.slice(32, 64))),
    "the kept leaves, then the entries'",
  );
  const verified = await verifyAuditTree(store, {
    checkpoints: [{ note, source: "checkpoint 40" }],
  });
  assertEquals(verified.ok, true, JSON.stringify(verified));
  const fresh = new TiledTree(storedTiles(store));
  const proof = await fresh.inclusionProof(34, 71);
  assertEquals(verifyInclusion(34, 71, leaves[34], proof, await fresh.root(71)), true);
  assertEquals((await next.verify()).ok, true);
});
