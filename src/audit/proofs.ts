/**
 * Proofs over the stored tree, for `GET /audit/proof/*` and `toolgate audit
 * prove`: an entry's inclusion in a tree size, and the consistency of two
 * tree sizes (RFC 9162 §2.1.3, §2.1.4), checked against what the store holds.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { GatewayError } from "../errors/mod.ts";
import type { Store } from "../store/mod.ts";
import { storedTiles } from "./stored_tiles.ts";
import { TiledTree, TreeError } from "./tiles.ts";

/** An inclusion proof, as served: hashes base64, from the leaf up. */
export interface InclusionProof {
  leaf_index: number;
  tree_size: number;
  hashes: string[];
}

/** A consistency proof, as served: hashes base64, RFC 9162 order. */
export interface ConsistencyProof {
  hashes: string[];
}

function checkCount(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new GatewayError("USAGE", `Invalid ${name} ${value}: use a whole number of 0 or more`);
  }
  return value;
}

function base64(hashes: readonly Uint8Array[]): string[] {
  return hashes.map((hash) => Buffer.from(hash).toString("base64"));
}

/** Proofs of the log in a store. */
export class AuditProofs {
  #store: Store;
  #tree: TiledTree;

  /** @param store The store holding the log's tree. */
  constructor(store: Store) {
    this.#store = store;
    this.#tree = new TiledTree(storedTiles(store));
  }

  /** The size of the stored tree (entries it covers). */
  async treeSize(): Promise<number> {
    const { head } = await this.#store.audit.readHead();
    return head?.tree ?? 0;
  }

  /**
   * The inclusion proof of entry `seq` (leaf `seq - 1`) in the tree of `size` leaves.
   *
   * @throws {GatewayError} `USAGE` when `seq` is not in a tree of `size`,
   * `NOT_FOUND` when the stored tree is smaller than `size`.
   */
  async inclusion(seq: number, size: number): Promise<InclusionProof> {
    checkCount(seq, "seq");
    checkCount(size, "size");
    if (seq < 1 || seq > size) {
      throw new GatewayError(
        "USAGE",
        `Invalid seq ${seq}: a tree of ${size} entries holds seq 1 to ${size}`,
      );
    }
    await this.#checkSize(size, "size");
    const hashes = await this.#guard(() => this.#tree.inclusionProof(seq - 1, size));
    return { leaf_index: seq - 1, tree_size: size, hashes: base64(hashes) };
  }

  /**
   * The consistency proof from the tree of `from` leaves to the tree of `to`.
   *
   * @throws {GatewayError} `USAGE` when `from` is past `to`, `NOT_FOUND` when
   * the stored tree is smaller than `to`.
   */
  async consistency(from: number, to: number): Promise<ConsistencyProof> {
    checkCount(from, "from");
    checkCount(to, "to");
    if (from > to) {
      throw new GatewayError("USAGE", `Invalid from ${from}: it is past to (${to})`);
    }
    await this.#checkSize(to, "to");
    return { hashes: base64(await this.#guard(() => this.#tree.consistencyProof(from, to))) };
  }

  async #checkSize(size: number, name: string): Promise<void> {
    const stored = await this.treeSize();
    if (size > stored) {
      throw new GatewayError(
        "NOT_FOUND",
        `No tree of ${size} entries: ${name} is past the log's ${stored}`,
        { details: { tree_size: stored } },
      );
    }
  }

  async #guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof TreeError)) throw error;
      throw new GatewayError(
        "STORE_CORRUPT",
        `Cannot make the proof: ${error.message}; run toolgate audit verify`,
        { cause: error },
      );
    }
  }
}
