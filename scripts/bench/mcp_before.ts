/**
 * `mcp_before`: the MCP paths of this checkout against another one
 * (`TOOLGATE_BENCH_BEFORE=<checkout>`) in the same run, for a change to a
 * per-call path: `memory_get` over Streamable HTTP (8 sessions of the 2025
 * era, each call durably audited) and `everything__echo` proxied to the
 * pinned reference server as a stdio upstream (8 sessions). Both servers run
 * side by side and are measured in alternating phases (here, before, before,
 * here, per round), each with its process's CPU time per call from `/proc`
 * (the upstream's own process is not counted), which other processes on the
 * machine do not skew.
 *
 * Run alone: `TOOLGATE_BENCH_BEFORE=<checkout> deno run -A scripts/bench/mcp_before.ts
 * [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { beforeRoot } from "./_before.ts";
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import {
  type McpHttpClients,
  type McpPhase,
  type McpThroughput,
  MEMORY_GET,
  openToolgateClients,
  phaseMs,
  throughput,
  type ToolCall,
} from "./_mcp_http.ts";
import { type ReadyProcess, tempDir } from "./_proc.ts";
import { cpuMicros, median } from "./_rounds.ts";
import { ratio, round3 } from "./_stats.ts";
import { EVERYTHING_PACKAGE, npmServerArgs } from "../npm_servers.ts";

/** One checkout's figures on one path. */
export interface McpSide extends McpThroughput {
  /** Server CPU time per call, in µs (median of the phases); `null` without `/proc`. */
  cpu_us_per_call: number | null;
}

/** One path, both checkouts. */
export interface McpBeforeAfter {
  here: McpSide;
  before: McpSide;
  /** `here / before` calls/s. */
  ratio: number;
  /** `here / before` server CPU per call; `null` without `/proc`. */
  cpu_ratio: number | null;
}

/** Figures of {@linkcode benchMcpBefore}, or why it did not run. */
export type McpBeforeResult =
  | { skipped: string }
  | { sessions: number; rounds: number; memory_get: McpBeforeAfter; proxied_echo: McpBeforeAfter };

const SESSIONS = 8;

type Served = ReadyProcess & { clients: McpHttpClients };

async function measure(
  sides: { here: Served; before: Served },
  rounds: number,
  mode: BenchMode,
): Promise<McpBeforeAfter> {
  const { durationMs, warmupMs } = phaseMs(mode);
  const phases = { here: [] as McpPhase[], before: [] as McpPhase[] };
  const cpu = { here: [] as number[], before: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    for (const name of ["here", "before", "before", "here"] as const) {
      const { child, clients } = sides[name];
      const warm = phases[name].length === 0 ? warmupMs : 0;
      if (warm) await clients.run(warm, 0);
      const startCpu = cpuMicros(child.pid);
      const phase = await clients.run(durationMs / 2, 0);
      const endCpu = cpuMicros(child.pid);
      phases[name].push(phase);
      if (startCpu !== null && endCpu !== null && phase.samples.length) {
        cpu[name].push((endCpu - startCpu) / phase.samples.length);
      }
    }
  }
  const side = (name: "here" | "before"): McpSide => ({
    ...throughput(phases[name]),
    cpu_us_per_call: cpu[name].length ? round3(median(cpu[name])) : null,
  });
  const here = side("here");
  const before = side("before");
  return {
    here,
    before,
    ratio: ratio(here.calls_per_s, before.calls_per_s),
    cpu_ratio: here.cpu_us_per_call && before.cpu_us_per_call
      ? ratio(here.cpu_us_per_call, before.cpu_us_per_call)
      : null,
  };
}

async function both(
  name: string,
  call: ToolCall,
  config: unknown,
  before: string,
  rounds: number,
  mode: BenchMode,
): Promise<McpBeforeAfter> {
  await using hereHome = await tempDir(`${name}-here`);
  await using beforeHome = await tempDir(`${name}-before`);
  const options = { call, clients: SESSIONS, config };
  await using here = await openToolgateClients(hereHome.path, options);
  await using then = await openToolgateClients(beforeHome.path, {
    ...options,
    main: `${before}main.ts`,
  });
  try {
    return await measure({ here, before: then }, rounds, mode);
  } finally {
    await Promise.all([here.clients.close(), then.clients.close()]);
  }
}

/** This checkout's MCP paths against `TOOLGATE_BENCH_BEFORE`'s, in alternating phases. */
export async function benchMcpBefore({ mode }: { mode: BenchMode }): Promise<McpBeforeResult> {
  const before = beforeRoot();
  if (!before) return { skipped: "set TOOLGATE_BENCH_BEFORE=<another checkout>" };
  const rounds = mode === "full" ? 3 : mode === "quick" ? 2 : 1;
  const [command, ...args] = [Deno.execPath(), ...npmServerArgs(EVERYTHING_PACKAGE, "stdio")];
  const upstream = { plugins: { upstreams: { everything: { kind: "mcp", command, args } } } };
  const echo: ToolCall = { name: "everything__echo", arguments: { message: "bench" } };
  return {
    sessions: SESSIONS,
    rounds,
    memory_get: await both("mcp-before-memory", MEMORY_GET, undefined, before, rounds, mode),
    proxied_echo: await both("mcp-before-echo", echo, upstream, before, rounds, mode),
  };
}

if (import.meta.main) {
  console.log(JSON.stringify(await benchMcpBefore({ mode: modeFromArgs(Deno.args) }), null, 2));
}
