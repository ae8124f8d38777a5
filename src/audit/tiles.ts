/**
 * The audit log's Merkle tree as the store keeps it: in tiles, as C2SP
 * tlog-tiles does. A tile at level `L` holds up to {@linkcode TILE_WIDTH}
 * consecutive node hashes of height `L × TILE_HEIGHT` (level 0: the leaf
 * hashes; level 1: the roots of complete runs of 32 leaves; …). A tile is
 * rewritten as it grows and never changes once full. Level 0 is not
 * written: its hashes are the leaf hashes of the entries, which the store
 * holds already ({@link ./stored_tiles.ts} reads them). Every complete node of
 * the tree is one tile read and at most 15 hashes away, so the root at any
 * size and every proof take O(log n) tile reads, fetched together.
 *
 * {@linkcode TreeEdge} is what an appender holds: the partial tile of each
 * level, from which it makes the tiles a commit writes and the root.
 * {@linkcode TiledTree} reads tiles from the store to make roots and the
 * RFC 9162 proofs of {@link ./merkle.ts} without reading every leaf.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { HASH_BYTES, leafHashInto, nodeHash, nodeHashInto } from "./merkle.ts";

/** Height of the subtree a tile covers: a tile holds 2^5 hashes. */
export const TILE_HEIGHT = 5;

/** Hashes in a full tile. */
export const TILE_WIDTH = 2 ** TILE_HEIGHT;

/** Bytes of a full tile. */
export const TILE_BYTES = TILE_WIDTH * HASH_BYTES;

/** Where a tile sits: its level and its index along that level. */
export interface TileRef {
  level: number;
  index: number;
}

/** A tile's contents: the hashes one after another (32 bytes each). */
export interface Tile extends TileRef {
  hashes: Uint8Array;
}

/** Reads tiles by ref; `null` for a tile not stored. */
export type TileSource = (refs: readonly TileRef[]) => Promise<(Uint8Array | null)[]>;

/** A stored tree that does not agree with itself or with the size asked for. */
export class TreeError extends Error {
  /** @param message What is wrong, naming the tile. */
  constructor(message: string) {
    super(message);
    this.name = "TreeError";
  }
}

/** The hash of the empty tree: `SHA-256()`. */
export const EMPTY_ROOT: Uint8Array = new Uint8Array(createHash("sha256").digest());

/** The leaf hash of an entry: its `entry_hash` digest (`sha256:<hex>`) as leaf data. */
export function entryLeafHash(entryHash: string): Uint8Array {
  const out = new Uint8Array(HASH_BYTES);
  entryLeafHashInto(entryHash, out, 0);
  return out;
}

/** Writes {@linkcode entryLeafHash} to `out[at, at + 32)`, allocating nothing. */
function entryLeafHashInto(entryHash: string, out: Uint8Array, at: number): void {
  if (entryHash.length !== 71 || !entryHash.startsWith("sha256:")) {
    throw new TreeError(`Invalid entry hash "${entryHash}"`);
  }
  for (let i = 0; i < HASH_BYTES; i++) {
    const high = HEX_VALUE[entryHash.charCodeAt(7 + 2 * i)];
    const low = HEX_VALUE[entryHash.charCodeAt(8 + 2 * i)];
    if (high === undefined || low === undefined || high > 15 || low > 15) {
      throw new TreeError(`Invalid entry hash "${entryHash}"`);
    }
    digest[i] = (high << 4) | low;
  }
  leafHashInto(digest, 0, out, at);
}

/** Scratch of {@linkcode entryLeafHashInto} (hashed before it returns). */
const digest = new Uint8Array(HASH_BYTES);

/** Value of each lowercase hex digit by char code; 255 for anything else. */
const HEX_VALUE = new Uint8Array(128).fill(255);
for (let i = 0; i < 16; i++) HEX_VALUE["0123456789abcdef".charCodeAt(i)] = i;

/** Scratch of {@linkcode tileRootInto}: the rows of a full tile's subtree. */
const rows = new Uint8Array(TILE_BYTES / 2);

/** Writes the root of the full tile `tile` (a perfect subtree of 32 hashes) to `out[at, at + 32)`. */
function tileRootInto(tile: Uint8Array, out: Uint8Array, at: number): void {
  for (let i = 0; i < TILE_WIDTH / 2; i++) {
    nodeHashInto(tile, 2 * i * HASH_BYTES, tile, (2 * i + 1) * HASH_BYTES, rows, i * HASH_BYTES);
  }
  for (let width = TILE_WIDTH / 4; width >= 1; width /= 2) {
    for (let i = 0; i < width; i++) {
      nodeHashInto(rows, 2 * i * HASH_BYTES, rows, (2 * i + 1) * HASH_BYTES, rows, i * HASH_BYTES);
    }
  }
  out.set(rows.subarray(0, HASH_BYTES), at);
}

/** Nodes of height `level × TILE_HEIGHT` in a tree of `size` leaves. */
function nodesAt(size: number, level: number): number {
  return Math.floor(size / 2 ** (level * TILE_HEIGHT));
}

/** The root of a perfect subtree over `hashes` (a power of two of them). */
function perfectRoot(hashes: readonly Uint8Array[]): Uint8Array {
  let row = hashes;
  while (row.length > 1) {
    const next: Uint8Array[] = [];
    for (let i = 0; i < row.length; i += 2) next.push(nodeHash(row[i], row[i + 1]));
    row = next;
  }
  return row[0];
}

function split(bytes: Uint8Array, count: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < count; i++) out.push(bytes.subarray(i * HASH_BYTES, (i + 1) * HASH_BYTES));
  return out;
}

function tileName({ level, index }: TileRef): string {
  return `${level}/${index}`;
}

/**
 * The right edge of a tree: the partial tile of each level. Immutable:
 * {@linkcode TreeEdge.extend} returns a new edge, so a commit that loses a
 * race leaves the old one as it was.
 */
export class TreeEdge {
  /** Leaves in the tree. */
  readonly size: number;
  /** Per level, a full tile's room holding the level's partial tile at its start. */
  #levels: readonly Uint8Array[];

  /**
   * Use {@linkcode TreeEdge.empty} or {@linkcode TreeEdge.fromTiles}.
   *
   * @param size Leaves in the tree.
   * @param levels Per level, TILE_BYTES holding its partial tile's hashes first.
   */
  constructor(size: number, levels: readonly Uint8Array[]) {
    this.size = size;
    this.#levels = levels;
  }

  /** The edge of the empty tree. */
  static empty(): TreeEdge {
    return new TreeEdge(0, []);
  }

  /** The partial tiles to read for the edge of a tree of `size` leaves. */
  static refs(size: number): TileRef[] {
    const refs: TileRef[] = [];
    for (let level = 0; nodesAt(size, level) > 0; level++) {
      const nodes = nodesAt(size, level);
      if (nodes % TILE_WIDTH) refs.push({ level, index: Math.floor(nodes / TILE_WIDTH) });
    }
    return refs;
  }

  /**
   * The edge of a tree of `size` leaves from its partial tiles, as read for
   * {@linkcode TreeEdge.refs} (in that order).
   *
   * A tile holding more hashes than the size needs is a later state of it
   * (another writer appended since): its first hashes are used.
   *
   * @throws {TreeError} when a tile is missing or holds too few hashes.
   */
  static fromTiles(size: number, tiles: readonly (Uint8Array | null)[]): TreeEdge {
    const refs = TreeEdge.refs(size);
    const levels: Uint8Array[] = [];
    for (let level = 0; nodesAt(size, level) > 0; level++) levels.push(new Uint8Array(TILE_BYTES));
    for (const [i, ref] of refs.entries()) {
      const count = nodesAt(size, ref.level) % TILE_WIDTH;
      const tile = tiles[i];
      // A longer tile is a later state (another writer appended since the head was read).
      if (!tile || tile.length < count * HASH_BYTES) {
        throw new TreeError(
          `Audit tree tile ${tileName(ref)} ${
            tile ? `holds ${tile.length / HASH_BYTES} hashes` : "is missing"
          }, a tree of ${size} leaves needs ${count}`,
        );
      }
      levels[ref.level].set(tile.subarray(0, count * HASH_BYTES));
    }
    return new TreeEdge(size, levels);
  }

  /**
   * The edge with `leaves` (leaf hashes) appended, and the tiles to store
   * (level 0 is the entries'): the ones that filled, and the partial tile of
   * each level that grew.
   */
  extend(leaves: readonly Uint8Array[]): { edge: TreeEdge; tiles: Tile[] } {
    return this.#grow(leaves.length, (i, out, at) => out.set(leaves[i], at));
  }

  /** As {@linkcode TreeEdge.extend}, for entries by their `entry_hash` (`sha256:<hex>`). */
  extendEntries(entryHashes: readonly string[]): { edge: TreeEdge; tiles: Tile[] } {
    return this.#grow(
      entryHashes.length,
      (i, out, at) => entryLeafHashInto(entryHashes[i], out, at),
    );
  }

  #grow(
    count: number,
    leaf: (i: number, out: Uint8Array, at: number) => void,
  ): { edge: TreeEdge; tiles: Tile[] } {
    const levels = this.#levels.map((level) => level.slice());
    const counts = levels.map((_, level) => nodesAt(this.size, level));
    const grew: boolean[] = [];
    const tiles: Tile[] = [];
    const room = (level: number): Uint8Array => {
      if (level === levels.length) {
        levels.push(new Uint8Array(TILE_BYTES));
        counts.push(0);
      }
      return levels[level];
    };
    for (let i = 0; i < count; i++) {
      let level = 0;
      let tile = room(0);
      leaf(i, tile, (counts[0] % TILE_WIDTH) * HASH_BYTES);
      // Each full tile is written (but level 0's), and its root goes up a level.
      while (++counts[level] % TILE_WIDTH === 0) {
        if (level > 0) {
          tiles.push({ level, index: counts[level] / TILE_WIDTH - 1, hashes: tile.slice() });
        }
        grew[level] = false;
        const above = room(level + 1);
        tileRootInto(tile, above, (counts[level + 1] % TILE_WIDTH) * HASH_BYTES);
        level++;
        tile = above;
      }
      grew[level] = true;
    }
    // The partial tile of each level above 0 that grew.
    for (const [level, did] of grew.entries()) {
      const filled = counts[level] % TILE_WIDTH;
      if (did && filled && level > 0) {
        tiles.push({
          level,
          index: Math.floor(counts[level] / TILE_WIDTH),
          hashes: levels[level].slice(0, filled * HASH_BYTES),
        });
      }
    }
    return { edge: new TreeEdge(this.size + count, levels), tiles };
  }

  /** The root hash of the tree (RFC 9162 §2.1.1). */
  root(): Uint8Array {
    // The complete subtrees of the right edge, largest first, folded from the right.
    const subtrees: Uint8Array[] = [];
    for (let level = this.#levels.length - 1; level >= 0; level--) {
      const filled = nodesAt(this.size, level) % TILE_WIDTH;
      const tile = split(this.#levels[level], filled);
      let offset = 0;
      for (let width = TILE_WIDTH / 2; width >= 1; width /= 2) {
        if (filled & width) {
          subtrees.push(perfectRoot(tile.slice(offset, offset + width)));
          offset += width;
        }
      }
    }
    if (!subtrees.length) return EMPTY_ROOT;
    let root = subtrees[subtrees.length - 1];
    for (let i = subtrees.length - 2; i >= 0; i--) root = nodeHash(subtrees[i], root);
    return root;
  }
}

/** A range of leaves `[start, end)` whose tree hash is one proof element. */
type Range = readonly [start: number, end: number];

/** The largest power of two smaller than `n` (n ≥ 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** A complete node: height and index along that height. */
type Node = readonly [height: number, index: number];

/** The complete nodes whose hashes make the tree hash of `[start, end)` (RFC 9162 §2.1.1). */
function nodesOf([start, end]: Range, out: Node[]): void {
  const n = end - start;
  if (Number.isInteger(Math.log2(n))) {
    out.push([Math.log2(n), start / n]);
    return;
  }
  const k = splitPoint(n);
  nodesOf([start, start + k], out);
  nodesOf([start + k, end], out);
}

/** The ranges of an inclusion proof of leaf `m` of `[start, end)` (§2.1.3.1), leaf up. */
function inclusionRanges(m: number, start: number, end: number, out: Range[]): void {
  const n = end - start;
  if (n === 1) return;
  const k = splitPoint(n);
  if (m < k) {
    inclusionRanges(m, start, start + k, out);
    out.push([start + k, end]);
  } else {
    inclusionRanges(m - k, start + k, end, out);
    out.push([start, start + k]);
  }
}

/** The ranges of a consistency subproof (§2.1.4.1). */
function consistencyRanges(m: number, start: number, end: number, whole: boolean, out: Range[]) {
  const n = end - start;
  if (m === n) {
    if (!whole) out.push([start, end]);
    return;
  }
  const k = splitPoint(n);
  if (m <= k) {
    consistencyRanges(m, start, start + k, whole, out);
    out.push([start + k, end]);
  } else {
    consistencyRanges(m - k, start + k, end, false, out);
    out.push([start, start + k]);
  }
}

/** Options of {@linkcode TiledTree}. */
export interface TiledTreeOptions {
  /** Full tiles kept in memory (they never change). @default 4096 */
  cacheTiles?: number;
}

/**
 * Roots and proofs of the tree over the stored tiles. Full tiles are cached;
 * partial ones are read each time (the tree grows).
 */
export class TiledTree {
  #source: TileSource;
  #cache = new Map<string, Uint8Array>();
  #cacheTiles: number;

  /**
   * @param source Reads tiles from the store.
   * @param options Cache size.
   */
  constructor(source: TileSource, options: TiledTreeOptions = {}) {
    const { cacheTiles = 4096 } = options;
    this.#source = source;
    this.#cacheTiles = cacheTiles;
  }

  /**
   * The root hash of the tree of its first `size` leaves.
   *
   * @throws {TreeError} when a tile it needs is missing or short.
   */
  async root(size: number): Promise<Uint8Array> {
    checkSize(size, "size");
    if (size === 0) return EMPTY_ROOT;
    const [root] = await this.#hashes([[0, size]], size);
    return root;
  }

  /**
   * The inclusion proof of leaf `index` in the tree of `size` leaves
   * (RFC 9162 §2.1.3.1), leaf up.
   *
   * @throws {RangeError} when `index` is not below `size`.
   * @throws {TreeError} when a tile it needs is missing or short.
   */
  async inclusionProof(index: number, size: number): Promise<Uint8Array[]> {
    checkSize(size, "size");
    if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
      throw new RangeError(`Invalid leaf index ${index}: the tree has ${size} leaves`);
    }
    const ranges: Range[] = [];
    inclusionRanges(index, 0, size, ranges);
    return await this.#hashes(ranges, size);
  }

  /**
   * The consistency proof from the tree of `first` leaves to the tree of
   * `second` (RFC 9162 §2.1.4.1); empty when they are equal or `first` is 0.
   *
   * @throws {RangeError} when `first` is past `second`.
   * @throws {TreeError} when a tile it needs is missing or short.
   */
  async consistencyProof(first: number, second: number): Promise<Uint8Array[]> {
    checkSize(first, "first");
    checkSize(second, "second");
    if (first > second) {
      throw new RangeError(`Invalid size ${first}: past the second tree's ${second} leaves`);
    }
    if (first === 0 || first === second) return [];
    const ranges: Range[] = [];
    consistencyRanges(first, 0, second, true, ranges);
    return await this.#hashes(ranges, second);
  }

  /**
   * The leaf hashes `[start, end)`, read a level-0 tile at a time.
   *
   * @throws {TreeError} when a tile is missing or short.
   */
  async leaves(start: number, end: number): Promise<Uint8Array[]> {
    const refs: TileRef[] = [];
    for (let index = Math.floor(start / TILE_WIDTH); index * TILE_WIDTH < end; index++) {
      refs.push({ level: 0, index });
    }
    const tiles = await this.#tiles(refs);
    const out: Uint8Array[] = [];
    for (let leaf = start; leaf < end; leaf++) {
      const tile = tiles.get(tileName({ level: 0, index: Math.floor(leaf / TILE_WIDTH) }));
      const offset = (leaf % TILE_WIDTH) * HASH_BYTES;
      if (!tile || tile.length < offset + HASH_BYTES) {
        throw new TreeError(
          `Audit tree tile 0/${Math.floor(leaf / TILE_WIDTH)} lacks leaf ${leaf}`,
        );
      }
      out.push(tile.subarray(offset, offset + HASH_BYTES));
    }
    return out;
  }

  /** The tree hash of each range, all tiles read in one go. */
  async #hashes(ranges: readonly Range[], size: number): Promise<Uint8Array[]> {
    const nodes = ranges.map((range) => {
      const out: Node[] = [];
      nodesOf(range, out);
      return out;
    });
    const refs = new Map<string, TileRef>();
    for (const [height, index] of nodes.flat()) {
      const ref = nodeTile(height, index);
      refs.set(tileName(ref), ref);
    }
    const tiles = await this.#tiles([...refs.values()]);
    return nodes.map((parts) => {
      const hashes = parts.map(([height, index]) => nodeFromTiles(height, index, tiles, size));
      let hash = hashes[hashes.length - 1];
      for (let i = hashes.length - 2; i >= 0; i--) hash = nodeHash(hashes[i], hash);
      return hash;
    });
  }

  /** The tiles of `refs`, by name, from the cache or the store. */
  async #tiles(refs: readonly TileRef[]): Promise<Map<string, Uint8Array>> {
    const out = new Map<string, Uint8Array>();
    const missing: TileRef[] = [];
    for (const ref of refs) {
      const cached = this.#cache.get(tileName(ref));
      if (cached) out.set(tileName(ref), cached);
      else missing.push(ref);
    }
    if (!missing.length) return out;
    const read = await this.#source(missing);
    for (const [i, ref] of missing.entries()) {
      const tile = read[i];
      if (!tile) continue;
      out.set(tileName(ref), tile);
      if (tile.length === TILE_BYTES) {
        if (this.#cache.size >= this.#cacheTiles) {
          this.#cache.delete(this.#cache.keys().next().value as string);
        }
        this.#cache.set(tileName(ref), tile);
      }
    }
    return out;
  }
}

function checkSize(size: number, name: string): void {
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new RangeError(`Invalid ${name} ${size}: use a whole number of 0 or more`);
  }
}

/** The tile holding the hashes a complete node is made of. */
function nodeTile(height: number, index: number): TileRef {
  const level = Math.floor(height / TILE_HEIGHT);
  const first = index * 2 ** (height - level * TILE_HEIGHT);
  return { level, index: Math.floor(first / TILE_WIDTH) };
}

function nodeFromTiles(
  height: number,
  index: number,
  tiles: ReadonlyMap<string, Uint8Array>,
  size: number,
): Uint8Array {
  const ref = nodeTile(height, index);
  const width = 2 ** (height - ref.level * TILE_HEIGHT);
  const offset = index * width - ref.index * TILE_WIDTH;
  const tile = tiles.get(tileName(ref));
  if (!tile || tile.length < (offset + width) * HASH_BYTES) {
    throw new TreeError(
      `Audit tree tile ${tileName(ref)} ${
        tile ? `holds ${tile.length / HASH_BYTES} hashes` : "is missing"
      }, a tree of ${size} leaves needs ${offset + width}`,
    );
  }
  return perfectRoot(split(tile.subarray(offset * HASH_BYTES), width));
}
