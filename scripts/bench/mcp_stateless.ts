/**
 * `mcp_stateless`: stateless 2026-07-28 `tools/call` over Streamable HTTP
 * against the 2025 session path, both at the same `/mcp` of the same
 * toolgate process, in the same run:
 *
 * - 2025: 8 clients, each with its own session (`initialize`,
 *   `Mcp-Session-Id`), calling `memory_get` one call after another;
 * - 2026-07-28: 8 clients without a session, each call carrying the `_meta`
 *   envelope (protocol version, client info, capabilities) and the
 *   `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
 *
 * Both paths use the same raw JSON-RPC `fetch` client (`_mcp_http.ts`) and
 * are measured in alternating phases (2025, 2026, 2026, 2025), pooling each
 * path's latencies, so that drift of the shared machine falls on both. The
 * same is done against the bare SDK v2 server (`_bare_mcp_v2.ts`, the SDK
 * toolgate serves `/mcp` with, routing both eras as toolgate does, no
 * audit): what the SDK itself makes of the two paths.
 *
 * Run alone: `deno run -A scripts/bench/mcp_stateless.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import {
  alternate,
  type McpEra,
  type McpThroughput,
  MEMORY_GET,
  openMcpHttpClients,
  SESSION_PROTOCOL,
  STATELESS_PROTOCOL,
} from "./_mcp_http.ts";
import { benchFile, startPortScript, startToolgateHttp, tempDir } from "./_proc.ts";
import { ratio } from "./_stats.ts";

/** Options of {@linkcode benchMcpStateless}. */
export interface McpStatelessBenchOptions {
  /** `full`, `quick` or `smoke`. */
  mode: BenchMode;
}

/** Both paths of one server. */
export interface EraComparison {
  /** 2025: one session per client. */
  session_2025: McpThroughput;
  /** 2026-07-28: no session, the envelope on every call. */
  stateless_2026: McpThroughput;
  /** `stateless_2026.calls_per_s / session_2025.calls_per_s`. */
  ratio: number;
}

/** Figures of {@linkcode benchMcpStateless}. */
export interface McpStatelessBenchResult {
  /** Clients calling at once, each sequentially. */
  clients: number;
  toolgate: EraComparison;
  /** The bare SDK v2 server: both eras, no audit. */
  bare_sdk_v2: EraComparison;
  /** toolgate's 2026 calls/s against the bare SDK v2 server's. */
  stateless_vs_bare_sdk_v2: number;
}

const CLIENTS = 8;

/** Measures both paths of one endpoint in alternating phases: 2025, 2026, 2026, 2025. */
async function compareEras(endpoint: string, mode: BenchMode): Promise<EraComparison> {
  const open = (era: McpEra) =>
    openMcpHttpClients({ endpoint, clients: CLIENTS, call: MEMORY_GET, era });
  const clients = {
    session_2025: await open(SESSION_PROTOCOL),
    stateless_2026: await open(STATELESS_PROTOCOL),
  };
  const measured = await alternate(
    clients,
    ["session_2025", "stateless_2026", "stateless_2026", "session_2025"],
    mode,
  );
  await Promise.all(Object.values(clients).map((c) => c.close()));
  return {
    ...measured,
    ratio: ratio(measured.stateless_2026.calls_per_s, measured.session_2025.calls_per_s),
  };
}

/** Stateless 2026-07-28 calls against 2025 sessions, on toolgate and on the bare SDK v2 server. */
export async function benchMcpStateless(
  { mode }: McpStatelessBenchOptions,
): Promise<McpStatelessBenchResult> {
  await using dir = await tempDir("mcp-stateless");
  let bare_sdk_v2: EraComparison;
  {
    await using bare = await startPortScript([
      "run",
      "-A",
      "--cached-only",
      benchFile("_bare_mcp_v2.ts"),
      `${dir.path}/bare-v2.kv`,
    ]);
    bare_sdk_v2 = await compareEras(`${bare.url}/mcp`, mode);
  }
  let toolgate: EraComparison;
  {
    await using home = await tempDir("mcp-stateless-home");
    await using server = await startToolgateHttp(home.path);
    toolgate = await compareEras(`${server.url}/mcp`, mode);
  }
  return {
    clients: CLIENTS,
    toolgate,
    bare_sdk_v2,
    stateless_vs_bare_sdk_v2: ratio(
      toolgate.stateless_2026.calls_per_s,
      bare_sdk_v2.stateless_2026.calls_per_s,
    ),
  };
}

if (import.meta.main) {
  console.log(JSON.stringify(await benchMcpStateless({ mode: modeFromArgs(Deno.args) }), null, 2));
}
