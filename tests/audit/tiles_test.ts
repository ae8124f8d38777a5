import { assertEquals, assertRejects, assertThrows } from "../_asserts.ts";
import {
  consistencyProof,
  inclusionProof,
  leafHash,
  rootOf,
  verifyConsistency,
  verifyInclusion,
} from "../../src/audit/merkle.ts";
import {
  EMPTY_ROOT,
  entryLeafHash,
  type Tile,
  TiledTree,
  type TileRef,
  TreeEdge,
  TreeError,
} from "../../src/audit/tiles.ts";

function leavesOf(count: number): Uint8Array[] {
  return Array.from({ length: count }, (_, i) => leafHash(new TextEncoder().encode(`entry ${i}`)));
}

/**
 * Tiles as a store keeps them: each commit's tiles overwrite the earlier
 * ones; level 0, not written, is read from the leaves (as stored_tiles.ts
 * reads it from the entries).
 */
class TileMap {
  tiles = new Map<string, Uint8Array>();
  leaves: Uint8Array[] = [];
  reads = 0;
  write(tiles: readonly Tile[], leaves: readonly Uint8Array[]): void {
    for (const { level, index, hashes } of tiles) this.tiles.set(`${level}/${index}`, hashes);
    this.leaves.push(...leaves);
  }
  tile(name: string): Uint8Array | null {
    const stored = this.tiles.get(name) ?? null;
    const [level, index] = name.split("/").map(Number);
    if (level !== 0) return stored;
    const some = this.leaves.slice(index * 32, index * 32 + 32);
    if (!some.length) return stored;
    const out = new Uint8Array(some.length * 32);
    some.forEach((leaf, i) => out.set(leaf, i * 32));
    return out;
  }
  source = (refs: readonly TileRef[]) => {
    this.reads++;
    return Promise.resolve(refs.map(({ level, index }) => this.tile(`${level}/${index}`)));
  };
}

/** Appends `leaves` in chunks of the given sizes (cycled), checking the root after each. */
function grow(leaves: readonly Uint8Array[], chunks: readonly number[], map: TileMap): TreeEdge {
  let edge = TreeEdge.empty();
  for (let i = 0, c = 0; edge.size < leaves.length; c++) {
    const take = Math.min(chunks[c % chunks.length], leaves.length - edge.size);
    const next = edge.extend(leaves.slice(i, i + take));
    assertEquals(
      next.tiles.filter((tile) => tile.level === 0),
      [],
      "level 0 is the entries': not written",
    );
    map.write(next.tiles, leaves.slice(i, i + take));
    edge = next.edge;
    i += take;
    // The reference root costs O(n log n): checked on small trees and at the end.
    if (edge.size <= 300 || edge.size === leaves.length) {
      assertEquals(edge.root(), rootOf(leaves.slice(0, edge.size)), `root at ${edge.size}`);
    }
  }
  return edge;
}

Deno.test("TreeEdge.root() is the RFC 9162 root, however the leaves arrive", () => {
  assertEquals(TreeEdge.empty().root(), EMPTY_ROOT);
  assertEquals(EMPTY_ROOT, rootOf([]));
  const leaves = leavesOf(1100);
  for (const chunks of [[1], [7, 1, 31], [33, 64, 1000]]) grow(leaves, chunks, new TileMap());
});

Deno.test("TreeEdge.fromTiles() reloads the edge from stored tiles and goes on as before", () => {
  const leaves = leavesOf(1500);
  const map = new TileMap();
  let edge = grow(leaves.slice(0, 1057), [5, 100], map);
  const refs = TreeEdge.refs(edge.size);
  const reloaded = TreeEdge.fromTiles(
    edge.size,
    refs.map(({ level, index }) => map.tile(`${level}/${index}`)),
  );
  assertEquals(reloaded.root(), edge.root());
  edge = reloaded.extend(leaves.slice(1057)).edge;
  assertEquals(edge.root(), rootOf(leaves));
});

Deno.test("TreeEdge.fromTiles() refuses a missing or short tile, naming it, and reads a longer one's start", () => {
  const map = new TileMap();
  const edge = grow(leavesOf(40), [40], map);
  assertEquals(TreeEdge.refs(40), [{ level: 0, index: 1 }, { level: 1, index: 0 }]);
  const error = assertThrows(() => TreeEdge.fromTiles(edge.size, [null, map.tile("1/0")!]));
  assertEquals(error instanceof TreeError, true);
  assertEquals(error.message, "Audit tree tile 0/1 is missing, a tree of 40 leaves needs 8");
  assertThrows(
    () => TreeEdge.fromTiles(41, [map.tile("0/1")!, map.tile("1/0")!]),
    "holds 8 hashes, a tree of 41 leaves needs 9",
  );
  const earlier = TreeEdge.fromTiles(39, [map.tile("0/1")!, map.tile("1/0")!]);
  assertEquals(earlier.root(), rootOf(leavesOf(39)));
});

Deno.test("TiledTree makes the reference proofs of every size 1–70 against every earlier size", async () => {
  const leaves = leavesOf(70);
  const map = new TileMap();
  grow(leaves, [3, 1, 17], map);
  const tree = new TiledTree(map.source);
  for (let size = 1; size <= 70; size++) {
    const some = leaves.slice(0, size);
    const root = rootOf(some);
    assertEquals(await tree.root(size), root);
    for (let index = 0; index < size; index++) {
      const proof = await tree.inclusionProof(index, size);
      assertEquals(proof, inclusionProof(index, some), `inclusion ${index} in ${size}`);
      assertEquals(verifyInclusion(index, size, leaves[index], proof, root), true);
    }
    for (let first = 0; first <= size; first++) {
      const proof = await tree.consistencyProof(first, size);
      assertEquals(proof, consistencyProof(first, some), `consistency ${first} → ${size}`);
      assertEquals(
        verifyConsistency(first, size, rootOf(leaves.slice(0, first)), root, proof),
        true,
      );
    }
  }
});

Deno.test("TiledTree proves across tile levels with a few reads per proof", async () => {
  const leaves = leavesOf(33_000);
  const map = new TileMap();
  grow(leaves, [999], map);
  const tree = new TiledTree(map.source, { cacheTiles: 0 });
  for (
    const [index, size] of [[0, 33_000], [32_767, 32_768], [32_768, 33_000], [1_023, 1_025], [
      20_000,
      32_999,
    ]]
  ) {
    map.reads = 0;
    const proof = await tree.inclusionProof(index, size);
    assertEquals(map.reads, 1);
    assertEquals(
      verifyInclusion(index, size, leaves[index], proof, rootOf(leaves.slice(0, size))),
      true,
    );
  }
  const proof = await tree.consistencyProof(1_000, 33_000);
  assertEquals(proof, consistencyProof(1_000, leaves));
  assertEquals(await tree.leaves(1_020, 1_030), leaves.slice(1_020, 1_030));
});

Deno.test("TiledTree names a missing tile and refuses sizes past the tree", async () => {
  const map = new TileMap();
  grow(leavesOf(40), [40], map);
  const tree = new TiledTree(map.source);
  await assertRejects(() => tree.inclusionProof(40, 40), RangeError);
  await assertRejects(() => tree.consistencyProof(41, 40), RangeError);
  await assertRejects(
    () => tree.root(41),
    TreeError,
    "tile 0/1 holds 8 hashes, a tree of 41 leaves needs 9",
  );
  map.tiles.delete("1/0");
  await assertRejects(() => tree.root(40), TreeError, "tile 1/0 is missing");
});

Deno.test("entryLeafHash() hashes the entry_hash digest bytes as the leaf", () => {
  const hex = "ab".repeat(32);
  const digest = new Uint8Array(32).fill(0xab);
  assertEquals(entryLeafHash(`sha256:${hex}`), leafHash(digest));
  assertThrows(() => entryLeafHash("sha256:AB"), "Invalid entry hash");
});
