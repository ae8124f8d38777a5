/**
 * Proofs of a large verifiable audit log: `leaves` small synthetic entries
 * and the tiles of their tree are written straight into a KV store (proofs
 * read level 0 from the entries, the levels above from tiles), then
 * inclusion proofs of random entries against
 * the whole tree, and consistency proofs, are timed; and receipt signing,
 * the per-call cost a REST or MCP call pays with `audit.receipts` on.
 *
 * Run alone: `deno run -A scripts/bench/audit_proofs.ts [--quick]` prints JSON.
 *
 * @module
 */
import { AuditProofs, loadLogKeys } from "../../src/audit/mod.ts";
import { TreeEdge } from "../../src/audit/tiles.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";

/** Figures of {@linkcode benchAuditProofs}; times in ms. */
export interface AuditProofsBenchResult {
  leaves: number;
  /** Time to build and store the tree. */
  build_ms: number;
  inclusion_p50_ms: number;
  inclusion_p99_ms: number;
  consistency_p50_ms: number;
  /** One receipt signed (Ed25519, `node:crypto`), p50 in ms. */
  receipt_p50_ms: number;
}

function percentile(values: number[], p: number): number {
  const sorted = values.toSorted((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] * 1000) /
    1000;
}

/** Entry `seq` as canonical bytes begin (the tree reads only its `entry_hash`). */
function syntheticEntry(seq: number): { seq: number; bytes: Uint8Array; hash: string } {
  const hash = `sha256:${seq.toString(16).padStart(64, "0")}`;
  const text = `{"entry_hash":"${hash}","kind":"tool.call","seq":${seq},"tool":"bench"}`;
  return { seq, bytes: new TextEncoder().encode(text), hash };
}

/** Runs the proof bench on a tree of `leaves` (1 000 000 in full runs). */
export async function benchAuditProofs(
  options: { quick: boolean; leaves?: number },
): Promise<AuditProofsBenchResult> {
  // Not a multiple of 32: the newest level-0 tile is incomplete, as it mostly is.
  const leaves = options.leaves ?? (options.quick ? 100_017 : 1_000_017);
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-bench-proofs-" });
  const store = await openKvStore({ dataDir });
  try {
    const started = performance.now();
    let edge = TreeEdge.empty();
    let stamp: string | null = null;
    // Entries and the tiles they grow, in commits of 800 (as the widest group commits).
    const batch = 800;
    for (let done = 0; done < leaves; done += batch) {
      const count = Math.min(batch, leaves - done);
      const entries = Array.from({ length: count }, (_, i) => syntheticEntry(done + i + 1));
      const grown = edge.extendEntries(entries.map((entry) => entry.hash));
      edge = grown.edge;
      stamp = await store.audit.commit(
        { headVersionstamp: stamp, tailSeq: 0, tailVersionstamps: [] },
        entries,
        {
          seq: edge.size,
          hash: entries[count - 1].hash,
          timestamp: new Date().toISOString(),
          tree: edge.size,
        },
        undefined,
        [],
        grown.tiles,
      );
      if (stamp === null) throw new Error("Bench tree commit lost a race");
    }
    const buildMs = performance.now() - started;
    // A fresh reader each time would read every tile: one cache, as a server has.
    const proofs = new AuditProofs(store);
    const rounds = options.quick ? 500 : 2000;
    const inclusion: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const seq = 1 + Math.floor(Math.random() * leaves);
      const t = performance.now();
      await proofs.inclusion(seq, leaves);
      inclusion.push(performance.now() - t);
    }
    const consistency: number[] = [];
    for (let i = 0; i < rounds / 4; i++) {
      const from = 1 + Math.floor(Math.random() * (leaves - 1));
      const t = performance.now();
      await proofs.consistency(from, leaves);
      consistency.push(performance.now() - t);
    }
    const keys = await loadLogKeys({ store, name: "toolgate/bench" });
    const signing: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const t = performance.now();
      keys.receipt({
        seq: i + 1,
        entry_hash: `sha256:${"a".repeat(64)}`,
        timestamp: new Date().toISOString(),
      });
      signing.push(performance.now() - t);
    }
    return {
      leaves,
      build_ms: Math.round(buildMs),
      inclusion_p50_ms: percentile(inclusion, 0.5),
      inclusion_p99_ms: percentile(inclusion, 0.99),
      consistency_p50_ms: percentile(consistency, 0.5),
      receipt_p50_ms: percentile(signing, 0.5),
    };
  } finally {
    store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

if (import.meta.main) {
  console.log(
    JSON.stringify(await benchAuditProofs({ quick: Deno.args.includes("--quick") }), null, 2),
  );
}
