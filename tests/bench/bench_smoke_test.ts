/**
 * The benchmark suite's CI smoke: `deno task bench --smoke` runs every
 * scenario briefly and each produces numbers. Speed is never asserted.
 *
 * @module
 */
import { assert, assertEquals } from "../_asserts.ts";
import { ROOT } from "../_helpers.ts";
import type { BenchResults } from "../../scripts/bench/main.ts";

const SCENARIOS = [
  "rest",
  "mcp_stdio",
  "mcp_http",
  "webhooks",
  "webhook_clients",
  "audit",
  "audit_proofs",
  "webhook_latency",
  "incoming",
  "startup",
  "observability_cost",
  "console_pages",
];

Deno.test({
  name: "deno task bench --smoke runs every scenario and each produces numbers",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const out = await Deno.makeTempFile({ prefix: "toolgate-bench-", suffix: ".json" });
    try {
      const run = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--cached-only",
          `${ROOT}scripts/bench/main.ts`,
          "--smoke",
          `--out=${out}`,
        ],
        cwd: ROOT,
        env: { NO_COLOR: "1" },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stdout = new TextDecoder().decode(run.stdout);
      const stderr = new TextDecoder().decode(run.stderr);
      assertEquals(run.code, 0, `bench --smoke failed:\n${stdout}\n${stderr}`);
      const results = JSON.parse(await Deno.readTextFile(out)) as BenchResults;
      assertEquals(results.mode, "smoke");
      const upstream = await Deno.stat(`${ROOT}scripts/bench/mcp_upstream.ts`).then(
        () => true,
        () => false,
      );
      if (upstream) SCENARIOS.push("mcp_upstream");
      for (const name of SCENARIOS) {
        const scenario = results.scenarios[name];
        assert(scenario, `scenario ${name} did not run`);
        assertEquals(scenario.error, undefined, `scenario ${name} failed`);
        const figures = results.figures.filter((f) => f.scenario === name);
        assert(figures.length > 0, `scenario ${name} produced no figures`);
        for (const f of figures) {
          assert(Number.isFinite(f.toolgate), `${name} ${f.figure}: not a number`);
          if (f.baseline !== null) {
            assert(
              Number.isFinite(f.baseline) && f.baseline > 0,
              `${name} ${f.figure}: no baseline`,
            );
          }
        }
      }
      assert(stdout.includes("ratio"), "the table is printed");
    } finally {
      await Deno.remove(out).catch(() => {});
    }
  },
});
