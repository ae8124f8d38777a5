/**
 * The appender's side of the Merkle tree: loads the right edge of the stored
 * tree, builds the tree of a log written before it existed, and bounds what
 * a commit's tiles cost. Private to `src/audit`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { AuditHead, AuditTileWrite, Store } from "../store/mod.ts";
import { decodeEntry, UnreadableEntryError } from "./_codec.ts";
import { storedTiles } from "./stored_tiles.ts";
import { entryLeafHash, TILE_WIDTH, TreeEdge, TreeError } from "./tiles.ts";

/** Leaves whose tiles one commit writes while an older log's tree is built. */
const BUILD_LEAVES_PER_COMMIT = 8192;

/** Tile levels counted for any commit: a tree of up to 2^40 leaves. */
const LEVELS_BOUND = 8;

/**
 * What the tiles of a commit of `count` entries cost at most: the level-0
 * tiles they fill or grow, one more per level above.
 */
export function treeCostBound(
  store: Store,
  count: number,
): { mutations: number; bytes: number; keyBytes: number } {
  const tiles = Math.ceil(count / TILE_WIDTH) + Math.ceil(count / TILE_WIDTH ** 2) + LEVELS_BOUND;
  return store.audit.tileCost(tiles, tiles * TILE_WIDTH * 32);
}

/** What the commit of `tiles` costs. */
export function treeCost(
  store: Store,
  tiles: readonly AuditTileWrite[],
): { mutations: number; bytes: number; keyBytes: number } {
  return store.audit.tileCost(tiles.length, tiles.reduce((sum, t) => sum + t.hashes.length, 0));
}

function corrupt(error: TreeError): GatewayError {
  return new GatewayError(
    "STORE_CORRUPT",
    `Cannot append to the audit log: ${
      error.message[0].toLowerCase() + error.message.slice(1)
    }; run toolgate audit verify`,
    { cause: error },
  );
}

/** The stored edge of the tree of `size` leaves. */
export async function readEdge(store: Store, size: number): Promise<TreeEdge> {
  const refs = TreeEdge.refs(size);
  try {
    return TreeEdge.fromTiles(size, refs.length ? await storedTiles(store)(refs) : []);
  } catch (error) {
    if (error instanceof TreeError) throw corrupt(error);
    throw error;
  }
}

/** The chain as an appender read it. */
export interface ChainRead {
  head: AuditHead;
  headVersionstamp: string | null;
  tailVersionstamps: readonly string[];
}

/**
 * The edge of the tree over the whole chain. A log written before the tree
 * (its head's `tree` short of its seq) has the rest of its tree built from
 * the stored entries' hashes first, in commits of their own guarded like
 * appends.
 *
 * @returns The edge and the head's stamp after the build (or `null` when
 * another writer moved the head meanwhile: read the chain again).
 * @throws {GatewayError} `STORE_CORRUPT` when a tile or an entry is unreadable.
 */
export async function edgeOfChain(
  store: Store,
  chain: ChainRead,
): Promise<{ edge: TreeEdge; headVersionstamp: string | null } | { edge: null }> {
  const { head } = chain;
  const built = head.tree ?? 0;
  let edge = await readEdge(store, Math.min(built, head.seq));
  let stamp = chain.headVersionstamp;
  if (built > head.seq) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot append to the audit log: its tree has ${built} leaves, its chain ${head.seq} entries; ` +
        "run toolgate audit verify",
    );
  }
  if (built === head.seq) return { edge, headVersionstamp: stamp };
  let leaves: Uint8Array[] = [];
  const flush = async (): Promise<boolean> => {
    const next = edge.extend(leaves);
    if (!next.tiles.length) {
      // Leaves of the newest level-0 tile only: the append that follows writes the head's size.
      edge = next.edge;
      leaves = [];
      return true;
    }
    const written = await store.audit.commit(
      { headVersionstamp: stamp, tailSeq: head.seq, tailVersionstamps: chain.tailVersionstamps },
      [],
      { ...head, tree: next.edge.size },
      undefined,
      [],
      next.tiles,
    );
    if (written === null) return false;
    stamp = written;
    edge = next.edge;
    leaves = [];
    return true;
  };
  for await (const page of store.audit.pages({ after: edge.size, before: head.seq + 1 })) {
    for (const record of page) {
      if (record.seq !== edge.size + leaves.length + 1) {
        throw new GatewayError(
          "STORE_CORRUPT",
          `Cannot build the audit tree: entry ${edge.size + leaves.length + 1} is missing; ` +
            "run toolgate audit verify",
        );
      }
      leaves.push(leafOf(record.seq, record.bytes));
      if (leaves.length === BUILD_LEAVES_PER_COMMIT && !await flush()) return { edge: null };
    }
  }
  if (edge.size + leaves.length !== head.seq) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot build the audit tree: entry ${edge.size + leaves.length + 1} is missing; ` +
        "run toolgate audit verify",
    );
  }
  if (leaves.length && !await flush()) return { edge: null };
  return { edge, headVersionstamp: stamp };
}

function leafOf(seq: number, bytes: Uint8Array | null): Uint8Array {
  try {
    if (!bytes) throw new UnreadableEntryError("a part is missing or is not bytes");
    return entryLeafHash(decodeEntry(bytes).entry.entry_hash);
  } catch (error) {
    if (!(error instanceof UnreadableEntryError) && !(error instanceof TreeError)) throw error;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot build the audit tree: entry ${seq} is unreadable; run toolgate audit verify`,
      { cause: error },
    );
  }
}
