/**
 * Audit appends/s of the code in another checkout, measured by this one:
 * the audit log and the store are imported from `--code=<checkout>` (this
 * checkout by default), the load and the clock are this file's, so a
 * before/after run (`audit_before`) differs only in the code under test.
 * 16 concurrent callers and 1000 appends in flight, on Deno KV (a file in
 * the temp dir) and on a throwaway PostgreSQL cluster.
 *
 * Run alone: `deno run -A scripts/bench/audit_code.ts [--quick] [--code=<checkout>]`
 * prints JSON.
 *
 * @module
 */
import { callInput } from "./audit.ts";
import { startBenchPostgres } from "./_postgres.ts";
import { ROOT } from "./_proc.ts";

/** Figures of one run; rates are appends per second. */
export interface AuditCodeResult {
  kv_concurrent_16_per_s: number;
  kv_burst_1000_per_s: number;
  postgres_concurrent_16_per_s: number;
  postgres_burst_1000_per_s: number;
}

interface Log {
  append(input: unknown): Promise<unknown>;
  close(): Promise<void>;
}

interface Code {
  createAuditLog(options: { store: unknown }): Log;
  openStore(options: { dataDir: string; url?: string }): Promise<{ close(): unknown }>;
}

async function load(root: string): Promise<Code> {
  const base = root.endsWith("/") ? root : `${root}/`;
  const audit = await import(`${base}src/audit/mod.ts`);
  const store = await import(`${base}src/store/mod.ts`);
  return { createAuditLog: audit.createAuditLog, openStore: store.openStore };
}

async function rate(
  code: Code,
  url: string | undefined,
  workers: number,
  durationMs: number,
): Promise<number> {
  const dataDir = await Deno.makeTempDir({ prefix: "toolgate-bench-audit-code-" });
  const store = await code.openStore({ dataDir, url });
  const log = code.createAuditLog({ store });
  try {
    let count = 0;
    const run = async (ms: number) => {
      const end = performance.now() + ms;
      await Promise.all(Array.from({ length: workers }, async () => {
        while (performance.now() < end) await log.append(callInput(count++));
      }));
    };
    await run(Math.min(300, durationMs)); // warm-up: compiled code, open connections
    const before = count;
    const start = performance.now();
    await run(durationMs);
    return Math.round((count - before) / ((performance.now() - start) / 1000));
  } finally {
    await log.close();
    await store.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

/** Measures the code at `root`: 0.5 s phases quick, 2 s in full. */
export async function benchAuditCode(
  root: string,
  { quick }: { quick: boolean },
): Promise<AuditCodeResult> {
  const code = await load(root);
  const phaseMs = quick ? 500 : 2000;
  await using pg = await startBenchPostgres();
  return {
    kv_concurrent_16_per_s: await rate(code, undefined, 16, phaseMs),
    kv_burst_1000_per_s: await rate(code, undefined, 1000, phaseMs),
    postgres_concurrent_16_per_s: await rate(code, await pg.database("audit_16"), 16, phaseMs),
    postgres_burst_1000_per_s: await rate(code, await pg.database("audit_1000"), 1000, phaseMs),
  };
}

if (import.meta.main) {
  const code = Deno.args.find((arg) => arg.startsWith("--code="))?.slice("--code=".length);
  const result = await benchAuditCode(code ?? ROOT, { quick: Deno.args.includes("--quick") });
  console.log(JSON.stringify(result, null, 2));
}
