/**
 * The Merkle tree the audit log keeps in the store as it appends: always the
 * RFC 9162 tree over the entries' hashes, built for a log written before
 * the tree existed, and refused when its tiles are damaged.
 *
 * @module
 */
import { assertEquals, assertRejects } from "../_asserts.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { rootOf } from "../../src/audit/merkle.ts";
import { storedTiles } from "../../src/audit/stored_tiles.ts";
import { entryLeafHash, TiledTree } from "../../src/audit/tiles.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { auditHeadKey, auditTileKey } from "../../src/store/kv/keys.ts";
import { openStore, type Store } from "../../src/store/mod.ts";
import { tempStore, toolCall } from "./_store.ts";

/** The leaf hashes of the stored entries, from their entry_hash. */
async function entryLeaves(store: Store): Promise<Uint8Array[]> {
  const log = createAuditLog({ store });
  const leaves: Uint8Array[] = [];
  for await (const entry of log.entries()) leaves.push(entryLeafHash(entry.entry_hash));
  return leaves;
}

/** Checks that the stored tree covers the chain and is the tree over its entries. */
async function assertTreeMatches(
  store: Store,
  count: number,
  { staleLevel0 = false } = {},
): Promise<void> {
  const { head } = await store.audit.readHead();
  assertEquals(head?.seq, count);
  assertEquals(head?.tree, count, "the tree covers the chain");
  const leaves = await entryLeaves(store);
  const tree = new TiledTree(storedTiles(store));
  assertEquals(await tree.root(count), rootOf(leaves));
  assertEquals(await tree.leaves(0, count), leaves);
  // Level 0 is not stored: its leaves are the entries'.
  const level0 = await store.audit.readTiles([{ level: 0, index: 0 }, { level: 0, index: 1 }]);
  if (!staleLevel0) assertEquals(level0, [null, null]);
}

Deno.test("the stored tree is the tree over the entries after concurrent group commits", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  await Promise.all(Array.from({ length: 700 }, (_, i) => log.append(toolCall("t", { i }))));
  for (let i = 0; i < 40; i++) await log.append(toolCall("one", { i }));
  await log.close();
  await assertTreeMatches(tmp.store, 740);
});

Deno.test("two logs on separate handles of one file keep one tree", async () => {
  await using tmp = await tempStore();
  const other = await openStore({ dataDir: tmp.dataDir });
  try {
    const a = createAuditLog({ store: tmp.store });
    const b = createAuditLog({ store: other });
    await Promise.all(
      Array.from({ length: 300 }, (_, i) => (i % 2 ? a : b).append(toolCall("x", { i }))),
    );
    await Promise.all([a.close(), b.close()]);
    await assertTreeMatches(tmp.store, 300);
  } finally {
    other.close();
  }
});

Deno.test("a log written before the tree gets its tree built on the next append", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  // More than one build commit's worth (8192 leaves).
  for (let done = 0; done < 8300; done += 830) {
    await Promise.all(Array.from({ length: 830 }, (_, i) => log.append(toolCall("old", { i }))));
  }
  await log.close();
  // As an earlier release left it: no tiles, a head without `tree`.
  for await (const tile of tmp.store.kv.list({ prefix: ["audit", "tile"] })) {
    await tmp.store.kv.delete(tile.key);
  }
  const head = (await tmp.store.kv.get<Record<string, unknown>>(auditHeadKey())).value!;
  delete head.tree;
  await tmp.store.kv.set(auditHeadKey(), head);
  const next = createAuditLog({ store: tmp.store });
  assertEquals((await next.append(toolCall("new", {}))).seq, 8301);
  await next.close();
  await assertTreeMatches(tmp.store, 8301);
});

Deno.test("an append on a tree whose edge tile is gone fails STORE_CORRUPT naming the tile", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  for (let i = 0; i < 40; i++) await log.append(toolCall("t", { i }));
  await log.close();
  await tmp.store.kv.delete(auditTileKey(1, 0));
  const next = createAuditLog({ store: tmp.store });
  const error = await assertRejects(() => next.append(toolCall("t", {})), GatewayError);
  assertEquals(error.code, "STORE_CORRUPT");
  assertEquals(
    error.message,
    "Cannot append to the audit log: audit tree tile 1/0 is missing, a tree of 40 leaves needs 1; run toolgate audit verify",
  );
  await next.close();
});

Deno.test("level 0 comes from the entries, whatever an earlier release left stored for it", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  for (let i = 0; i < 40; i++) await log.append(toolCall("t", { i }));
  await log.close();
  // Releases before this one stored level 0; a stale partial copy, and a damaged full one.
  await tmp.store.kv.set(auditTileKey(0, 1), new Uint8Array(3 * 32).fill(7));
  await tmp.store.kv.set(auditTileKey(0, 0), new Uint8Array(32 * 32).fill(7));
  const next = createAuditLog({ store: tmp.store });
  for (let i = 0; i < 5; i++) await next.append(toolCall("t", { i }));
  await next.close();
  await assertTreeMatches(tmp.store, 45, { staleLevel0: true });
});
