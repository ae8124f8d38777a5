/**
 * Servers measured in turns, for benches that compare configurations of
 * the real server: in each round every server gets a warm-up, a run at
 * `connections` with its process's CPU time read around it (robust against
 * other processes on the machine), and calls paced on one connection (the
 * p50 a caller sees, without the queueing of a saturated server). The order
 * alternates between rounds, so drift of the machine hits all alike.
 * Private to `scripts/bench`.
 *
 * @module
 */
import type { LoadResult } from "./_load.ts";
import { runLoadProcess } from "./_proc.ts";
import { latency, round3 } from "./_stats.ts";
import type { BenchMode, Throughput } from "./http_server.ts";

/** Throughput, and the server process's CPU time per call (`null` without `/proc`). */
export interface Measured extends Throughput {
  cpu_us_per_call: number | null;
}

/** Latency of paced calls. */
export interface Latency {
  calls: number;
  p50_ms: number;
  p99_ms: number;
}

/** What each server is measured with. */
export interface RoundsOptions {
  rounds: number;
  durationMs: number;
  warmupMs: number;
  pacedMs: number;
  /** Paced calls per second on one connection. */
  pacedPerS: number;
  connections: number;
  /** `POST` path and body. */
  path: string;
  body: string;
}

/** Rounds and phase lengths of a mode: full, quick (half), smoke (one short round). */
export function roundSizes(mode: BenchMode) {
  return mode === "full"
    ? { rounds: 6, durationMs: 4000, warmupMs: 1000, pacedMs: 3000 }
    : mode === "quick"
    ? { rounds: 3, durationMs: 2000, warmupMs: 500, pacedMs: 1500 }
    : { rounds: 1, durationMs: 600, warmupMs: 200, pacedMs: 300 };
}

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** User and system CPU time of a process so far, in µs, from `/proc` (Linux); `null` elsewhere. */
export function cpuMicros(pid: number): number | null {
  try {
    const fields = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
    // utime and stime, in clock ticks of 1/100 s.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return null;
  }
}

/** Measures each of `servers` in `options.rounds` alternating rounds. */
export async function measureInRounds<Name extends string>(
  servers: Record<Name, { url: string; child: { pid: number } }>,
  options: RoundsOptions,
): Promise<Record<Name, { measured: Measured; paced: Latency }>> {
  const names = Object.keys(servers) as Name[];
  const throughput = {} as Record<Name, LoadResult[]>;
  const cpu = {} as Record<Name, number[]>;
  const paced = {} as Record<Name, number[]>;
  for (const name of names) [throughput[name], cpu[name], paced[name]] = [[], [], []];
  const load = { path: options.path, body: options.body };
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 ? [...names].reverse() : names;
    for (const name of order) {
      const { url, child } = servers[name];
      await runLoadProcess({
        url,
        ...load,
        connections: options.connections,
        durationMs: options.warmupMs,
        warmupMs: 0,
      });
      const before = cpuMicros(child.pid);
      const result = await runLoadProcess({
        url,
        ...load,
        connections: options.connections,
        durationMs: options.durationMs,
        warmupMs: 0,
      });
      const after = cpuMicros(child.pid);
      throughput[name].push(result);
      if (before !== null && after !== null) cpu[name].push((after - before) / result.requests);
      const light = await runLoadProcess({
        url,
        ...load,
        connections: 1,
        durationMs: options.pacedMs,
        warmupMs: 100,
        intervalMs: 1000 / options.pacedPerS,
        samples: true,
      });
      paced[name].push(...light.samples_ms ?? []);
    }
  }
  const out = {} as Record<Name, { measured: Measured; paced: Latency }>;
  for (const name of names) {
    out[name] = {
      measured: {
        requests_per_s: Math.round(median(throughput[name].map((r) => r.requests_per_s))),
        p50_ms: round3(median(throughput[name].map((r) => r.p50_ms))),
        p99_ms: round3(median(throughput[name].map((r) => r.p99_ms))),
        cpu_us_per_call: cpu[name].length ? Math.round(median(cpu[name])) : null,
      },
      paced: { calls: paced[name].length, ...latency(paced[name]) },
    };
  }
  return out;
}
