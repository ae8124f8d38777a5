/**
 * Audit log benchmark: append throughput (sequential, 16 concurrent, a burst
 * of 1000 in flight) against bare Deno KV atomic commits on the same disk in
 * the same run, and chain verification speed.
 *
 * Run alone: `deno run -A scripts/bench/audit.ts [--quick]` prints JSON.
 *
 * @module
 */
import { type AuditAppendInput, createAuditLog } from "../../src/audit/mod.ts";
import { type KvStore as Store, openKvStore as openStore } from "../../src/store/kv/kv_store.ts";

/** Options of {@linkcode benchAudit}. */
export interface AuditBenchOptions {
  /** Shorter phases and 10k instead of 100k entries to verify. */
  quick: boolean;
}

/** Figures of {@linkcode benchAudit}; rates are per second. */
export interface AuditBenchResult {
  quick: boolean;
  /** Bare KV: one `atomic().check().set().commit()` after another. */
  kv_commits_per_s: number;
  /** `await append()` one after another: one commit per entry. */
  append_sequential_per_s: number;
  /** 16 callers each awaiting `append()` in a loop: group commit of up to 16. */
  append_concurrent_16_per_s: number;
  /** 1000 appends in flight at all times: group commit at its widest. */
  append_burst_1000_per_s: number;
  /** `append_concurrent_16_per_s / kv_commits_per_s`. */
  concurrent_16_vs_kv: number;
  /** Entries in the verified chain. */
  verify_entries: number;
  /** Entries verified per second. */
  verify_entries_per_s: number;
  /** Time to write the chain that was verified, in ms. */
  fill_ms: number;
  /** Whole run, in ms. */
  total_ms: number;
}

/** A typical audited tool call, the `i`-th of a run. */
export function callInput(i: number): AuditAppendInput {
  return {
    kind: "tool.call",
    tool: "http.fetch",
    session_id: "bench-session-0001",
    input: {
      url: `https://example.com/api/items/${i}`,
      method: "POST",
      headers: { accept: "application/json", authorization: "Bearer secret" },
      body: { name: "item", tags: ["a", "b", "c"], count: i, note: "x".repeat(120) },
    },
    outcome: { ok: true, latency_ms: 12, source: "bench" },
  };
}

async function withStore<T>(run: (store: Store) => Promise<T>): Promise<T> {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-bench-audit-" });
  const store = await openStore({ dataDir });
  try {
    return await run(store);
  } finally {
    store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

function rate(count: number, ms: number): number {
  return Math.round(count / (ms / 1000));
}

/** Runs `workers` loops of `step` until `durationMs` passed; returns steps per second. */
async function timed(
  durationMs: number,
  workers: number,
  step: (i: number) => Promise<unknown>,
): Promise<number> {
  let count = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(Array.from({ length: workers }, async () => {
    while (performance.now() < end) await step(count++);
  }));
  return rate(count, performance.now() - start);
}

async function kvCommits(durationMs: number): Promise<number> {
  return await withStore(async (store) => {
    const value = new TextEncoder().encode(JSON.stringify(callInput(0)).padEnd(600, " "));
    return await timed(durationMs, 1, async (i) => {
      await store.kv.atomic().check({ key: ["bench", "head"], versionstamp: null })
        .set(["bench", "entry", i], value).commit();
    });
  });
}

async function appends(durationMs: number, workers: number): Promise<number> {
  return await withStore(async (store) => {
    const log = createAuditLog({ store });
    try {
      return await timed(durationMs, workers, (i) => log.append(callInput(i)));
    } finally {
      await log.close();
    }
  });
}

async function verify(entries: number): Promise<{ fill_ms: number; per_s: number }> {
  return await withStore(async (store) => {
    const log = createAuditLog({ store });
    const fillStart = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: 1000 }, async () => {
      while (next < entries) await log.append(callInput(next++));
    }));
    await log.close();
    const fill_ms = Math.round(performance.now() - fillStart);
    const start = performance.now();
    const result = await log.verify();
    const ms = performance.now() - start;
    if (!result.ok || result.count !== entries) {
      throw new Error(`Benchmark chain did not verify: ${JSON.stringify(result)}`);
    }
    return { fill_ms, per_s: rate(entries, ms) };
  });
}

/**
 * Measures the audit log on this machine. Bounded time: about 15 s in full,
 * 4 s quick.
 */
export async function benchAudit({ quick }: AuditBenchOptions): Promise<AuditBenchResult> {
  const started = performance.now();
  const phaseMs = quick ? 500 : 2000;
  const verifyEntries = quick ? 10_000 : 100_000;
  const kv = await kvCommits(phaseMs);
  const sequential = await appends(phaseMs, 1);
  const concurrent = await appends(phaseMs, 16);
  const burst = await appends(phaseMs, 1000);
  const verified = await verify(verifyEntries);
  return {
    quick,
    kv_commits_per_s: kv,
    append_sequential_per_s: sequential,
    append_concurrent_16_per_s: concurrent,
    append_burst_1000_per_s: burst,
    concurrent_16_vs_kv: Math.round((concurrent / kv) * 100) / 100,
    verify_entries: verifyEntries,
    verify_entries_per_s: verified.per_s,
    fill_ms: verified.fill_ms,
    total_ms: Math.round(performance.now() - started),
  };
}

if (import.meta.main) {
  const result = await benchAudit({ quick: Deno.args.includes("--quick") });
  console.log(JSON.stringify(result, null, 2));
}
