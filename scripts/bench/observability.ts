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
import { benchFile, startPortScript, startToolgateHttp, tempDir } from "./_proc.ts";
import { type Latency, type Measured, measureInRounds, roundSizes } from "./_rounds.ts";
import { ratio, round3 } from "./_stats.ts";
import { type BenchMode, modeFromArgs } from "./http_server.ts";

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

const TOOL = "memory_get";
const ARGS = JSON.stringify({ key: "bench/missing-key" });
const PACED_CALLS_PER_S = 100;

/**
 * REST calls/s at 64 connections and the p50 of paced calls with metrics
 * and tracing on, against both off, in alternating rounds.
 */
export async function benchObservabilityCost(
  { mode }: { mode: BenchMode },
): Promise<ObservabilityCostResult> {
  const connections = 64;
  const { rounds, durationMs, warmupMs, pacedMs } = roundSizes(mode);
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
  const measured = await measureInRounds({ off, on, sampled }, {
    rounds,
    durationMs,
    warmupMs,
    pacedMs,
    pacedPerS: PACED_CALLS_PER_S,
    connections,
    path: `/tools/${TOOL}`,
    body: ARGS,
  });
  const summary = (which: keyof typeof measured): Measured => measured[which].measured;
  const pacedOf = (which: keyof typeof measured): Latency => measured[which].paced;
  const offSummary = summary("off");
  const onSummary = summary("on");
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
