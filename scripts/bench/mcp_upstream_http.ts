/**
 * `mcp_upstream_http`: toolgate in front of the reference MCP server against
 * supergateway in front of the same server, both on Streamable HTTP, in the
 * same run:
 *
 * - toolgate: `toolgate mcp start --transport http` with the pinned
 *   `@modelcontextprotocol/server-everything` declared as a stdio upstream in
 *   `config.json` (one upstream process for all sessions), each call durably
 *   audited; the tool is `everything__echo`;
 * - supergateway (`supergateway@4.0.0`, stateful, streamableHttp) wrapping
 *   `server-everything stdio` (one process per session, as it runs them);
 *   the tool is `echo`.
 *
 * 8 sessions, each calling sequentially, with the raw JSON-RPC `fetch`
 * client of `_mcp_http.ts`; both servers run side by side and are measured
 * in alternating phases (toolgate, supergateway, supergateway, toolgate).
 *
 * Run alone: `deno run -A scripts/bench/mcp_upstream_http.ts [--quick|--smoke]` prints JSON.
 *
 * @module
 */
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import {
  alternate,
  type McpHttpClients,
  type McpThroughput,
  openMcpHttpClients,
  startSupergateway,
  type ToolCall,
  untilCallable,
} from "./_mcp_http.ts";
import { type ReadyProcess, startToolgateHttp, tempDir } from "./_proc.ts";
import { ratio } from "./_stats.ts";
import { EVERYTHING_PACKAGE, npmServerArgs } from "../npm_servers.ts";

/** Options of {@linkcode benchMcpUpstreamHttp}. */
export interface McpUpstreamHttpBenchOptions {
  /** `full`, `quick` or `smoke`. */
  mode: BenchMode;
}

/** Figures of {@linkcode benchMcpUpstreamHttp}. */
export interface McpUpstreamHttpBenchResult {
  /** Sessions calling at once, each sequentially. */
  sessions: number;
  toolgate: McpThroughput;
  /** `null` when supergateway could not be started (reason in `supergateway_error`). */
  supergateway: McpThroughput | null;
  supergateway_error?: string;
  /** `toolgate / supergateway` calls/s; 0 when it did not run. */
  vs_supergateway: number;
}

const SESSIONS = 8;
const ECHO_ARGUMENTS = { message: "bench" };

/** `server-everything stdio` as a command line: Deno running the pinned package from the cache. */
function everythingStdio(): string[] {
  return [Deno.execPath(), ...npmServerArgs(EVERYTHING_PACKAGE, "stdio")];
}

/** toolgate with the everything server as its one upstream, and its clients, ready to call. */
async function openToolgate(home: string): Promise<ReadyProcess & { clients: McpHttpClients }> {
  const [command, ...args] = everythingStdio();
  await Deno.writeTextFile(
    `${home}/config.json`,
    JSON.stringify({ plugins: { upstreams: { everything: { kind: "mcp", command, args } } } }),
  );
  const server = await startToolgateHttp(home);
  try {
    const call: ToolCall = { name: "everything__echo", arguments: ECHO_ARGUMENTS };
    const endpoint = `${server.url}/mcp`;
    const probe = await openMcpHttpClients({ endpoint, clients: 1, call });
    await untilCallable(probe, 60_000);
    await probe.close();
    return Object.assign(server, {
      clients: await openMcpHttpClients({ endpoint, clients: SESSIONS, call }),
    });
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/** Both gateways in front of the reference server, 8 sessions each, in alternating phases. */
export async function benchMcpUpstreamHttp(
  { mode }: McpUpstreamHttpBenchOptions,
): Promise<McpUpstreamHttpBenchResult> {
  await using home = await tempDir("mcp-upstream-http");
  await using toolgate = await openToolgate(home.path);
  let peer: (ReadyProcess & { clients: McpHttpClients }) | undefined;
  let supergateway_error: string | undefined;
  try {
    const gateway = await startSupergateway(everythingStdio());
    try {
      const clients = await openMcpHttpClients({
        endpoint: gateway.endpoint,
        clients: SESSIONS,
        call: { name: "echo", arguments: ECHO_ARGUMENTS },
      });
      peer = Object.assign(gateway, { clients });
    } catch (error) {
      await gateway.stop();
      throw error;
    }
  } catch (error) {
    supergateway_error = (error as Error).message.slice(0, 500);
  }
  try {
    const clients: Partial<Record<"toolgate" | "supergateway", McpHttpClients>> = {
      toolgate: toolgate.clients,
      supergateway: peer?.clients,
    };
    const measured = await alternate(
      clients as Record<"toolgate" | "supergateway", McpHttpClients>,
      peer ? ["toolgate", "supergateway", "supergateway", "toolgate"] : ["toolgate", "toolgate"],
      mode,
    );
    await Promise.all([toolgate.clients.close(), peer?.clients.close()]);
    const supergateway = measured.supergateway ?? null;
    return {
      sessions: SESSIONS,
      toolgate: measured.toolgate,
      supergateway,
      ...(supergateway_error ? { supergateway_error } : {}),
      vs_supergateway: supergateway
        ? ratio(measured.toolgate.calls_per_s, supergateway.calls_per_s)
        : 0,
    };
  } finally {
    await peer?.stop();
  }
}

if (import.meta.main) {
  console.log(
    JSON.stringify(await benchMcpUpstreamHttp({ mode: modeFromArgs(Deno.args) }), null, 2),
  );
}
