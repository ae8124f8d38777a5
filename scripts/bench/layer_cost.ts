/**
 * `layer_cost` (issue 38 item 1): what each per-call layer costs a call, in
 * µs of server CPU, on the default configuration (nothing configured: no
 * API keys, no rate limits, no policies, tracing off, metrics on, no
 * webhooks). One real server with every layer on, one per layer with that
 * layer switched off (`TOOLGATE_BENCH_LAYERS_OFF`, src/config/bench_layers.ts),
 * and one with all of them off, side by side; in each round every server
 * takes its turn (the order alternates between rounds) at 64 REST
 * connections calling `POST /tools/memory_get`, then at 8 MCP Streamable
 * HTTP sessions (2025 era) calling `tools/call memory_get`, with the server
 * process's CPU time read from `/proc` around each turn. A layer's cost is
 * the CPU per call with everything on minus that with the layer off (the
 * medians of the rounds); the all-off server shows what is left: HTTP,
 * routing, the tool's KV read and the audit append; a control server, a
 * second one with every layer on, shows how far a figure of zero scatters.
 *
 * Run alone: `deno run -A scripts/bench/layer_cost.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { BENCH_LAYERS, type BenchLayer } from "../../src/config/bench_layers.ts";
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import { type McpHttpClients, MEMORY_GET, openMcpHttpClients } from "./_mcp_http.ts";
import { type ReadyProcess, runLoadProcess, startToolgateHttp, tempDir } from "./_proc.ts";
import { cpuMicros, median } from "./_rounds.ts";
import { round3 } from "./_stats.ts";

/** One transport's figures: server CPU µs per call of each server, and each layer's cost. */
export interface LayerCosts {
  /** CPU µs per call with every layer on. */
  all_on: number;
  /** CPU µs per call with every layer off. */
  all_off: number;
  /**
   * A second server with every layer on, started last: `all_on - control` paired
   * like a layer's cost, the bias and noise a layer's figure carries.
   */
  control_us: number;
  /** CPU µs per call with each layer off. */
  off: Record<BenchLayer, number>;
  /**
   * What the layer costs a call, µs: the median over the rounds of the mean of
   * the two all-on servers minus `off[layer]`, within the round (noise can make it negative).
   */
  cost_us: Record<BenchLayer, number>;
  /** Calls per second with every layer on and with every layer off (medians). */
  calls_per_s: { all_on: number; all_off: number };
}

/** Figures of {@linkcode benchLayerCost}. */
export interface LayerCostResult {
  rounds: number;
  rest: LayerCosts;
  mcp_http: LayerCosts;
}

type Variant = "all_on" | "all_off" | "control" | BenchLayer;

const REST_CONNECTIONS = 64;
const MCP_SESSIONS = 8;
const BODY = JSON.stringify({ key: "bench/missing-key" });

function sizes(mode: BenchMode) {
  return mode === "full"
    ? { rounds: 6, durationMs: 2500, warmupMs: 1000 }
    : mode === "quick"
    ? { rounds: 2, durationMs: 1500, warmupMs: 500 }
    : { rounds: 1, durationMs: 300, warmupMs: 100 };
}

interface Server {
  process: ReadyProcess & { url: string };
  mcp: McpHttpClients;
}

function costs(
  cpu: Record<Variant, number[]>,
  rates: Record<Variant, number[]>,
): LayerCosts {
  const at = (variant: Variant) => round3(median(cpu[variant]));
  const off = Object.fromEntries(BENCH_LAYERS.map((layer) => [layer, at(layer)])) as Record<
    BenchLayer,
    number
  >;
  // Paired within each round (the machine drifts between rounds more than a layer costs),
  // against the mean of the two all-on servers (the first one started measures cheaper).
  const on = (round: number) => (cpu.all_on[round] + cpu.control[round]) / 2;
  const cost = (layer: BenchLayer) =>
    round3(median(cpu[layer].map((off, round) => on(round) - off)));
  return {
    all_on: at("all_on"),
    all_off: at("all_off"),
    control_us: round3(median(cpu.all_on.map((on, round) => on - cpu.control[round]))),
    off,
    cost_us: Object.fromEntries(BENCH_LAYERS.map((layer) => [layer, cost(layer)])) as Record<
      BenchLayer,
      number
    >,
    calls_per_s: {
      all_on: Math.round(median(rates.all_on)),
      all_off: Math.round(median(rates.all_off)),
    },
  };
}

/** Every layer's cost per call, REST and MCP HTTP, in alternating rounds. */
export async function benchLayerCost({ mode }: { mode: BenchMode }): Promise<LayerCostResult> {
  const { rounds, durationMs, warmupMs } = sizes(mode);
  const variants: Variant[] = ["all_on", ...BENCH_LAYERS, "all_off", "control"];
  await using home = await tempDir("layer-cost");
  const servers = {} as Record<Variant, Server>;
  try {
    for (const variant of variants) {
      const dir = `${home.path}/${variant}`;
      await Deno.mkdir(dir);
      const off = variant === "all_on" || variant === "control"
        ? ""
        : variant === "all_off"
        ? BENCH_LAYERS.join(",")
        : variant;
      const process = await startToolgateHttp(dir, { TOOLGATE_BENCH_LAYERS_OFF: off });
      servers[variant] = {
        process,
        mcp: await openMcpHttpClients({
          endpoint: `${process.url}/mcp`,
          clients: MCP_SESSIONS,
          call: MEMORY_GET,
        }),
      };
    }
    const empty = () =>
      Object.fromEntries(variants.map((variant) => [variant, [] as number[]])) as Record<
        Variant,
        number[]
      >;
    const rest = { cpu: empty(), rates: empty() };
    const mcp = { cpu: empty(), rates: empty() };
    for (const variant of variants) {
      const { process, mcp: clients } = servers[variant];
      await runLoadProcess({
        url: process.url,
        path: "/tools/memory_get",
        body: BODY,
        connections: REST_CONNECTIONS,
        durationMs: warmupMs,
        warmupMs: 0,
      });
      await clients.run(warmupMs, 0);
    }
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? [...variants].reverse() : variants;
      for (const variant of order) {
        const { process, mcp: clients } = servers[variant];
        const pid = process.child.pid;
        let before = cpuMicros(pid);
        const load = await runLoadProcess({
          url: process.url,
          path: "/tools/memory_get",
          body: BODY,
          connections: REST_CONNECTIONS,
          durationMs,
          warmupMs: 0,
        });
        let after = cpuMicros(pid);
        if (before !== null && after !== null) {
          rest.cpu[variant].push((after - before) / load.requests);
        }
        rest.rates[variant].push(load.requests_per_s);
        before = cpuMicros(pid);
        const phase = await clients.run(durationMs, 0);
        after = cpuMicros(pid);
        if (before !== null && after !== null && phase.samples.length) {
          mcp.cpu[variant].push((after - before) / phase.samples.length);
        }
        mcp.rates[variant].push(phase.samples.length / (phase.elapsedMs / 1000));
      }
    }
    return {
      rounds,
      rest: costs(rest.cpu, rest.rates),
      mcp_http: costs(mcp.cpu, mcp.rates),
    };
  } finally {
    for (const server of Object.values(servers)) {
      await server.mcp.close();
      await server.process.stop();
    }
  }
}

if (import.meta.main) {
  console.log(JSON.stringify(await benchLayerCost({ mode: modeFromArgs(Deno.args) }), null, 2));
}
