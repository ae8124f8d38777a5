/**
 * The tiles of the stored tree, as proofs, checkpoints, `audit verify` and an
 * appender read them. Appends do not write level 0: its hashes are the leaf
 * hashes of the entries, which the same commits store. (Writing level-0
 * tiles, the partial one rewritten in every commit, added 32 to 60 bytes to
 * every entry's write and cost appends 12–25 % of their throughput on disk.)
 * So a level-0 tile is made here from the entries it covers; for entries
 * pruned away the store keeps their level-0 tiles (the prune writes them
 * first), and those hashes are used.
 *
 * @module
 */
import type { AuditTileWrite, Store } from "../store/mod.ts";
import { entryHashOf, UnreadableEntryError } from "./_codec.ts";
import { HASH_BYTES } from "./merkle.ts";
import { entryLeafHash, TILE_BYTES, TILE_WIDTH, type TileSource, TreeError } from "./tiles.ts";

/** Reads the tiles of the tree in `store`, level 0 from the entries. */
export function storedTiles(store: Store): TileSource {
  return async (refs) => {
    const tiles = await store.audit.readTiles(refs);
    await Promise.all(refs.map(async (ref, i) => {
      if (ref.level === 0) tiles[i] = await levelZeroTile(store, ref.index, tiles[i]);
    }));
    return tiles;
  };
}

/**
 * Level-0 tile `index` from the entries it covers. Entries missing at its
 * start (pruned) take their hashes from `stored`, what the store keeps of
 * the tile; the tile ends at the first entry not found after them.
 *
 * @throws {TreeError} when an entry is unreadable.
 */
async function levelZeroTile(
  store: Store,
  index: number,
  stored: Uint8Array | null,
): Promise<Uint8Array | null> {
  const first = index * TILE_WIDTH + 1;
  const out = new Uint8Array(TILE_BYTES);
  let next = first;
  for await (
    const page of store.audit.pages({ after: first - 1, before: first + TILE_WIDTH, pageSize: 32 })
  ) {
    for (const record of page) {
      if (record.seq !== next) {
        // A gap after the first entries: the tile ends there (its reader names what is short).
        if (next !== first) return out.slice(0, (next - first) * HASH_BYTES);
        // Entries at its start are pruned: the kept tile holds their hashes.
        const kept = (record.seq - first) * HASH_BYTES;
        if (!stored || stored.length < kept) return stored;
        out.set(stored.subarray(0, kept));
      }
      out.set(leafOf(record.seq, record.bytes), (record.seq - first) * HASH_BYTES);
      next = record.seq + 1;
    }
  }
  if (next === first) return stored;
  return out.slice(0, (next - first) * HASH_BYTES);
}

function leafOf(seq: number, bytes: Uint8Array | null): Uint8Array {
  try {
    if (!bytes) throw new UnreadableEntryError("a part is missing or is not bytes");
    return entryLeafHash(entryHashOf(bytes));
  } catch (error) {
    if (!(error instanceof UnreadableEntryError) && !(error instanceof TreeError)) throw error;
    throw new TreeError(`Audit entry ${seq} is unreadable (${(error as Error).message})`);
  }
}

/** Level-0 tiles a {@linkcode PrunedTiles} stores in one call. */
const KEEP_BATCH = 100;

/**
 * The level-0 tiles of entries a prune is about to delete: collected from
 * their hashes in seq order and stored (the store's `audit.keepTiles`) a
 * batch at a time, the part of a tile not full yet included, before the
 * prune mark moves.
 */
export class PrunedTiles {
  #store: Store;
  #next: number;
  #tile = new Uint8Array(TILE_BYTES);
  #batch: AuditTileWrite[] = [];

  private constructor(store: Store, next: number) {
    this.#store = store;
    this.#next = next;
  }

  /**
   * Starts after entry `from` (0, or pruned through before): the kept part
   * of its tile is read back.
   *
   * @throws {TreeError} when the store lacks it.
   */
  static async after(store: Store, from: number): Promise<PrunedTiles> {
    const tiles = new PrunedTiles(store, from + 1);
    const kept = from % TILE_WIDTH;
    if (kept) {
      const index = Math.floor(from / TILE_WIDTH);
      const [tile] = await store.audit.readTiles([{ level: 0, index }]);
      if (!tile || tile.length < kept * HASH_BYTES) {
        throw new TreeError(
          `Audit tree tile 0/${index} lacks the leaves of entries pruned before (up to ${from})`,
        );
      }
      tiles.#tile.set(tile.subarray(0, kept * HASH_BYTES));
    }
    return tiles;
  }

  /**
   * Adds entry `seq` by its `entry_hash`.
   *
   * @throws {TreeError} when `seq` is not the next entry (one is missing).
   */
  async add(seq: number, entryHash: string): Promise<void> {
    if (seq !== this.#next) throw new TreeError(`Audit entry ${this.#next} is missing`);
    const at = (seq - 1) % TILE_WIDTH;
    this.#tile.set(entryLeafHash(entryHash), at * HASH_BYTES);
    this.#next++;
    if (at === TILE_WIDTH - 1) {
      this.#batch.push({
        level: 0,
        index: (seq - 1 - at) / TILE_WIDTH,
        hashes: this.#tile.slice(),
      });
      if (this.#batch.length === KEEP_BATCH) await this.#flush();
    }
  }

  /** Stores what is collected, the last tile's part too. */
  async finish(): Promise<void> {
    const filled = (this.#next - 1) % TILE_WIDTH;
    if (filled) {
      this.#batch.push({
        level: 0,
        index: Math.floor((this.#next - 1) / TILE_WIDTH),
        hashes: this.#tile.slice(0, filled * HASH_BYTES),
      });
    }
    await this.#flush();
  }

  async #flush(): Promise<void> {
    const batch = this.#batch;
    this.#batch = [];
    await this.#store.audit.keepTiles(batch);
  }
}
