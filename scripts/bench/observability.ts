/**
 * What watching the gateway costs (issue 23, item 5): REST calls of
 * `memory_get` (audit on) through two real servers in the same rounds, one
 * with metrics and tracing switched off (`metrics.enabled: false`, no
 * `OTEL_DENO`), one with both on (prom-client metrics, and Deno's
 * OpenTelemetry exporting every span, sampler always on, over OTLP/HTTP
 * protobuf to a sink in another process), and a third with one trace in ten
 * sampled: throughput at 64 connections with the server's CPU time per call
 * (robust against other processes on the machine), and
 * the latency of calls paced at 100/s on one connection (the p50 a caller
 * sees, without the queueing of a saturated server). The servers take
 * turns, so drift of the machine hits both alike.
 *
 * Run alone: `deno run -A scripts/bench/observability.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import type { LoadResult } from "./_load.ts";
import { benchFile, runLoadProcess, startPortScript, startToolgateHttp, tempDir } from "./_proc.ts";
import { latency, ratio, round3 } from "./_stats.ts";
import { type BenchMode, modeFromArgs, type Throughput } from "./http_server.ts";

/** The result of {@linkcode benchObservabilityCost}. */
export interface ObservabilityCostResult {
  tool: string;
  connections: number;
  rounds: number;
  /** Throughput at 64 connections (medians of the rounds): metrics and tracing off. */
  off: Measured;
  /** The same with metrics on, tracing on and exporting every span. */
  on: Measured;
  /** Metrics on, tracing on with one trace in ten sampled (`parentbased_traceidratio`, 0.1). */
  sampled: Measured;
  /** `on.requests_per_s / off.requests_per_s`. */
  ratio: number;
  /** `on.cpu_us_per_call / off.cpu_us_per_call`: the cost, free of other processes' noise. */
  cpu_ratio: number | null;
  /** Latency of paced calls on one connection (pooled over the rounds). */
  paced: { calls_per_s: number; off: Latency; on: Latency; sampled: Latency };
  /** `paced.on.p50_ms - paced.off.p50_ms`. */
  added_p50_ms: number;
  /** OTLP export requests the sink received (proof that spans were sent). */
  exports: number;
}

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

const TOOL = "memory_get";
const ARGS = JSON.stringify({ key: "bench/missing-key" });
const PACED_CALLS_PER_S = 100;

function sizes(mode: BenchMode) {
  return mode === "full"
    ? { rounds: 6, durationMs: 4000, warmupMs: 1000, pacedMs: 3000 }
    : mode === "quick"
    ? { rounds: 3, durationMs: 2000, warmupMs: 500, pacedMs: 1500 }
    : { rounds: 1, durationMs: 600, warmupMs: 200, pacedMs: 300 };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** User and system CPU time of a process so far, in µs, from `/proc` (Linux); `null` elsewhere. */
function cpuMicros(pid: number): number | null {
  try {
    const fields = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
    // utime and stime, in clock ticks of 1/100 s.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return null;
  }
}

/**
 * REST calls/s at 64 connections and the p50 of paced calls with metrics
 * and tracing on, against both off, in alternating rounds.
 */
export async function benchObservabilityCost(
  { mode }: { mode: BenchMode },
): Promise<ObservabilityCostResult> {
  const connections = 64;
  const { rounds, durationMs, warmupMs, pacedMs } = sizes(mode);
  await using sink = await startPortScript([
    "run",
    "-A",
    "--cached-only",
    benchFile("_otlp_sink.ts"),
  ]);
  await using offHome = await tempDir("observability-off");
  await using onHome = await tempDir("observability-on");
  await Deno.writeTextFile(
    `${offHome.path}/config.json`,
    JSON.stringify({ metrics: { enabled: false } }),
  );
  // OTEL_DENO is set either way: a variable in the bench's own environment changes neither.
  await using off = await startToolgateHttp(offHome.path, { OTEL_DENO: "false" });
  await using on = await startToolgateHttp(onHome.path, {
    OTEL_DENO: "true",
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
    OTEL_SERVICE_NAME: "toolgate-bench",
  });
  await using sampledHome = await tempDir("observability-sampled");
  await using sampled = await startToolgateHttp(sampledHome.path, {
    OTEL_DENO: "true",
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
    OTEL_SERVICE_NAME: "toolgate-bench",
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.1",
  });
  const servers = { off, on, sampled };
  type Which = keyof typeof servers;
  const names = Object.keys(servers) as Which[];
  const throughput: Record<Which, LoadResult[]> = { off: [], on: [], sampled: [] };
  const cpu: Record<Which, number[]> = { off: [], on: [], sampled: [] };
  const paced: Record<Which, number[]> = { off: [], on: [], sampled: [] };
  for (let round = 0; round < rounds; round++) {
    // Alternate the order, so no server always gets the warmer machine.
    const order = round % 2 ? [...names].reverse() : names;
    for (const which of order) {
      const { url, child } = servers[which];
      const path = `/tools/${TOOL}`;
      // Warm, then measured with the server's CPU time read around the run.
      await runLoadProcess({
        url,
        path,
        body: ARGS,
        connections,
        durationMs: warmupMs,
        warmupMs: 0,
      });
      const before = cpuMicros(child.pid);
      const result = await runLoadProcess({
        url,
        path,
        body: ARGS,
        connections,
        durationMs,
        warmupMs: 0,
      });
      const after = cpuMicros(child.pid);
      throughput[which].push(result);
      if (before !== null && after !== null) cpu[which].push((after - before) / result.requests);
      const light = await runLoadProcess({
        url,
        path,
        body: ARGS,
        connections: 1,
        durationMs: pacedMs,
        warmupMs: 100,
        intervalMs: 1000 / PACED_CALLS_PER_S,
        samples: true,
      });
      paced[which].push(...light.samples_ms ?? []);
    }
  }
  const summary = (which: Which): Measured => ({
    requests_per_s: Math.round(median(throughput[which].map((r) => r.requests_per_s))),
    p50_ms: round3(median(throughput[which].map((r) => r.p50_ms))),
    p99_ms: round3(median(throughput[which].map((r) => r.p99_ms))),
    cpu_us_per_call: cpu[which].length ? Math.round(median(cpu[which])) : null,
  });
  const offSummary = summary("off");
  const onSummary = summary("on");
  const pacedOf = (which: Which) => ({ calls: paced[which].length, ...latency(paced[which]) });
  const pacedOff = pacedOf("off");
  const pacedOn = pacedOf("on");
  // The sink counts on exit: stop the traced server first so its last spans are flushed.
  await on.stop();
  const sinkLog = await sink.stop();
  const exports = Number(/otlp sink: (\d+) exports/.exec(sinkLog)?.[1] ?? 0);
  if (!exports) throw new Error("The traced server exported nothing to the OTLP sink");
  return {
    tool: TOOL,
    connections,
    rounds,
    off: offSummary,
    on: onSummary,
    sampled: summary("sampled"),
    ratio: ratio(onSummary.requests_per_s, offSummary.requests_per_s),
    cpu_ratio: onSummary.cpu_us_per_call && offSummary.cpu_us_per_call
      ? ratio(onSummary.cpu_us_per_call, offSummary.cpu_us_per_call)
      : null,
    paced: {
      calls_per_s: PACED_CALLS_PER_S,
      off: pacedOff,
      on: pacedOn,
      sampled: pacedOf("sampled"),
    },
    added_p50_ms: round3(pacedOn.p50_ms - pacedOff.p50_ms),
    exports,
  };
}

if (import.meta.main) {
  console.log(
    JSON.stringify(await benchObservabilityCost({ mode: modeFromArgs(Deno.args) }), null, 2),
  );
}
