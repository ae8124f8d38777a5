/**
 * Verifies the stored Merkle tree against the entries and against signed
 * checkpoints published earlier: the tree is rebuilt from the entries'
 * hashes and every stored tile compared, then each checkpoint's signature
 * (by a key of the log, or one given) and its root at its size checked. A
 * store smaller than a checkpoint was truncated; one whose entries give
 * another root at that size was rolled back, forked or rewritten.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type { Store } from "../store/mod.ts";
import { parseCheckpoint } from "./checkpoint.ts";
import { verifyConsistency } from "./merkle.ts";
import { openNote, parseVerifierKey } from "./signed_note.ts";
import { decodeEntry, UnreadableEntryError } from "./_codec.ts";
import { storedTiles } from "./stored_tiles.ts";
import { entryLeafHash, type Tile, TiledTree, TreeEdge } from "./tiles.ts";
import { verifierOf } from "./log_key.ts";

/** A checkpoint to check the store against, and where it came from (for messages). */
export interface CheckpointSource {
  note: string;
  source: string;
}

/** Options of {@linkcode verifyAuditTree}. */
export interface VerifyAuditTreeOptions {
  /** Checkpoints published earlier. @default none */
  checkpoints?: readonly CheckpointSource[];
  /** Verifier keys trusted beside the store's own (`--key`). @default none */
  keys?: readonly string[];
  /** Told of progress: entries read so far, of `total`. */
  onProgress?: (progress: { checked: number; total: number }) => void;
}

/** Why the tree check failed. */
export type AuditTreeFailureReason =
  | "tree_behind"
  | "tree_mismatch"
  | "unsigned"
  | "malformed"
  | "truncated"
  | "inconsistent";

/** Result of {@linkcode verifyAuditTree}. */
export type AuditTreeVerifyResult =
  | { ok: true; tree_size: number; root: string; checkpoints: number }
  | { ok: false; reason: AuditTreeFailureReason; message: string };

function equalPrefix(stored: Uint8Array | null, tile: Tile): boolean {
  if (!stored || stored.length < tile.hashes.length) return false;
  return Buffer.compare(stored.subarray(0, tile.hashes.length), tile.hashes) === 0;
}

/** Reads checkpoints from a file's text: one signed note, or a history file (JSON lines). */
export function checkpointsFromText(text: string, source: string): CheckpointSource[] {
  if (!text.trimStart().startsWith("{")) return [{ note: text, source }];
  return text.split("\n").filter((line) => line.trim()).map((line, i) => {
    const parsed = JSON.parse(line) as { note?: unknown };
    if (typeof parsed.note !== "string") {
      throw new Error(`${source} line ${i + 1} has no "note"`);
    }
    return { note: parsed.note, source: `${source} line ${i + 1}` };
  });
}

/**
 * Checks the stored tree against the entries and the given checkpoints.
 *
 * @returns `{ok: true, …}` or the first failure with its reason.
 */
export async function verifyAuditTree(
  store: Store,
  options: VerifyAuditTreeOptions = {},
): Promise<AuditTreeVerifyResult> {
  const { head } = await store.audit.readHead();
  const count = head?.seq ?? 0;
  const size = head?.tree ?? 0;
  if (size !== count) {
    return {
      ok: false,
      reason: "tree_behind",
      message: `The tree covers ${size} of ${count} entries: start the server once to build it`,
    };
  }
  // The checkpoints, signatures checked first.
  const records = await store.audit.readKeys();
  const verifiers = [
    ...records.map(verifierOf),
    ...(options.keys ?? []).map((key) => parseVerifierKey(key)),
  ];
  const wanted: { size: number; root: Uint8Array; source: string }[] = [];
  if (!verifiers.length) {
    // No key to check signatures with: an emptied or replaced store. Its size says enough.
    let largest: { size: number; source: string } | undefined;
    for (const { note, source } of options.checkpoints ?? []) {
      const size = unverifiedSize(note);
      if (size !== undefined && size > (largest?.size ?? count)) largest = { size, source };
    }
    if (largest) {
      return {
        ok: false,
        reason: "truncated",
        message:
          `The log was truncated or replaced: the checkpoint from ${largest.source} covers ` +
          `${largest.size} entries, the store holds ${count} and none of the log's keys`,
      };
    }
  }
  for (const { note, source } of options.checkpoints ?? []) {
    let text: string;
    try {
      text = (await openNote(note, verifiers)).text;
    } catch (error) {
      return {
        ok: false,
        reason: "unsigned",
        message: `The checkpoint from ${source} is not signed by a key of this log: ${
          (error as Error).message
        } (the log's keys were replaced, or it is another log's)`,
      };
    }
    try {
      const checkpoint = parseCheckpoint(text);
      wanted.push({ size: checkpoint.size, root: checkpoint.root, source });
    } catch (error) {
      return { ok: false, reason: "malformed", message: `${source}: ${(error as Error).message}` };
    }
  }
  const largest = wanted.reduce((a, b) => (b.size > a.size ? b : a), { size: 0, source: "" });
  if (largest.size > count) {
    return {
      ok: false,
      reason: "truncated",
      message:
        `The log was truncated: the checkpoint from ${largest.source} covers ${largest.size} entries, ` +
        `the store holds ${count}`,
    };
  }
  // The tree rebuilt from the entries: every stored tile compared, the root at each checkpoint's size kept.
  const sizes = new Set(wanted.map((c) => c.size));
  const tree = new TiledTree(storedTiles(store));
  const roots = new Map<number, Uint8Array>();
  if (sizes.has(0)) roots.set(0, TreeEdge.empty().root());
  let edge = TreeEdge.empty();
  // Pruned entries: their leaves as the tree keeps them, the last one checked against the mark.
  const pruned = await store.audit.readPruned();
  if (pruned) {
    const leaves = await tree.leaves(0, pruned.through);
    if (Buffer.compare(leaves[pruned.through - 1], entryLeafHash(pruned.hash)) !== 0) {
      return {
        ok: false,
        reason: "tree_mismatch",
        message: `The tree's leaf ${pruned.through - 1} is not the last pruned entry's hash`,
      };
    }
    for (let i = 0; i < leaves.length; i += 1024) {
      const grown = edge.extend(leaves.slice(i, i + 1024));
      const bad = await compareTiles(store, grown.tiles);
      if (bad) return bad;
      edge = grown.edge;
    }
    // A checkpoint's size inside the pruned range: its root from the tiles just checked.
    for (const size of sizes) {
      if (size > 0 && size <= pruned.through) roots.set(size, await tree.root(size));
    }
  }
  for await (const page of store.audit.pages({ after: edge.size, before: count + 1 })) {
    const hashes: string[] = [];
    for (const record of page) {
      if (record.seq !== edge.size + hashes.length + 1 || !record.bytes) {
        return {
          ok: false,
          reason: "tree_mismatch",
          message: `Entry ${
            edge.size + hashes.length + 1
          } is missing or unreadable: run the chain check`,
        };
      }
      try {
        hashes.push(decodeEntry(record.bytes).entry.entry_hash);
      } catch (error) {
        if (!(error instanceof UnreadableEntryError)) throw error;
        return { ok: false, reason: "tree_mismatch", message: `Entry ${record.seq} is unreadable` };
      }
      // Stop at each checkpoint's size to keep its root.
      if (sizes.has(edge.size + hashes.length)) {
        const grown = edge.extendEntries(hashes.splice(0));
        const bad = await compareTiles(store, grown.tiles);
        if (bad) return bad;
        edge = grown.edge;
        roots.set(edge.size, edge.root());
      }
    }
    const grown = edge.extendEntries(hashes);
    const bad = await compareTiles(store, grown.tiles);
    if (bad) return bad;
    edge = grown.edge;
    options.onProgress?.({ checked: edge.size, total: count });
  }
  if (edge.size !== count) {
    return {
      ok: false,
      reason: "tree_mismatch",
      message: `The store holds ${edge.size} entries up to its head, which says ${count}`,
    };
  }
  const root = edge.root();
  for (const checkpoint of wanted) {
    const at = roots.get(checkpoint.size)!;
    let consistent = Buffer.compare(at, checkpoint.root) === 0;
    if (consistent) {
      // The proof the log would serve for it, checked as an outside verifier would.
      const proof = await tree.consistencyProof(checkpoint.size, count);
      consistent = verifyConsistency(checkpoint.size, count, checkpoint.root, root, proof);
    }
    if (!consistent) {
      return {
        ok: false,
        reason: "inconsistent",
        message: `The log does not extend the checkpoint from ${checkpoint.source}: its first ` +
          `${checkpoint.size} entries hash to root ${Buffer.from(at).toString("base64")}, the ` +
          `checkpoint says ${Buffer.from(checkpoint.root).toString("base64")} ` +
          "(entries were rolled back, forked or rewritten)",
      };
    }
  }
  return {
    ok: true,
    tree_size: count,
    root: Buffer.from(root).toString("base64"),
    checkpoints: wanted.length,
  };
}

/** The tree size a note claims, signature unchecked (`undefined` when it does not parse). */
function unverifiedSize(note: string): number | undefined {
  const split = note.lastIndexOf("\n\n");
  try {
    return split < 0 ? undefined : parseCheckpoint(note.slice(0, split + 1)).size;
  } catch {
    return undefined;
  }
}

async function compareTiles(
  store: Store,
  tiles: readonly Tile[],
): Promise<AuditTreeVerifyResult | undefined> {
  if (!tiles.length) return undefined;
  const stored = await store.audit.readTiles(tiles);
  for (const [i, tile] of tiles.entries()) {
    if (!equalPrefix(stored[i], tile)) {
      return {
        ok: false,
        reason: "tree_mismatch",
        message: `Audit tree tile ${tile.level}/${tile.index} does not match the entries' hashes`,
      };
    }
  }
  return undefined;
}
