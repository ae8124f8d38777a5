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
 *   the tool is `echo`;
 * - mcp-proxy (`mcp-proxy@6.7.19`, its defaults: stateful Streamable HTTP
 *   with its event store) wrapping the same, the same way.
 *
 * 8 sessions, each calling sequentially, with the raw JSON-RPC `fetch`
 * client of `_mcp_http.ts`; the servers run side by side and are measured
 * in alternating phases (toolgate, supergateway, mcp-proxy, mcp-proxy,
 * supergateway, toolgate).
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
  openToolgateClients,
  startMcpProxy,
  startSupergateway,
} from "./_mcp_http.ts";
import { type ReadyProcess, tempDir } from "./_proc.ts";
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
  /** `null` when mcp-proxy could not be started (reason in `mcp_proxy_error`). */
  mcp_proxy: McpThroughput | null;
  mcp_proxy_error?: string;
  /** `toolgate / mcp-proxy` calls/s; 0 when it did not run. */
  vs_mcp_proxy: number;
}

const SESSIONS = 8;
const ECHO_ARGUMENTS = { message: "bench" };

/** `server-everything stdio` as a command line: Deno running the pinned package from the cache. */
function everythingStdio(): string[] {
  return [Deno.execPath(), ...npmServerArgs(EVERYTHING_PACKAGE, "stdio")];
}

/** toolgate with the everything server as its one upstream, and its clients, ready to call. */
function openToolgate(home: string): Promise<ReadyProcess & { clients: McpHttpClients }> {
  const [command, ...args] = everythingStdio();
  return openToolgateClients(home, {
    call: { name: "everything__echo", arguments: ECHO_ARGUMENTS },
    clients: SESSIONS,
    config: { plugins: { upstreams: { everything: { kind: "mcp", command, args } } } },
  });
}

/** A peer in front of the reference server with its clients, or why it could not start. */
async function openPeer(
  start: () => Promise<ReadyProcess & { endpoint: string }>,
): Promise<{ server?: ReadyProcess & { clients: McpHttpClients }; error?: string }> {
  try {
    const gateway = await start();
    try {
      const clients = await openMcpHttpClients({
        endpoint: gateway.endpoint,
        clients: SESSIONS,
        call: { name: "echo", arguments: ECHO_ARGUMENTS },
      });
      return { server: Object.assign(gateway, { clients }) };
    } catch (error) {
      await gateway.stop();
      throw error;
    }
  } catch (error) {
    return { error: (error as Error).message.slice(0, 500) };
  }
}

/** The three gateways in front of the reference server, 8 sessions each, in alternating phases. */
export async function benchMcpUpstreamHttp(
  { mode }: McpUpstreamHttpBenchOptions,
): Promise<McpUpstreamHttpBenchResult> {
  await using home = await tempDir("mcp-upstream-http");
  await using toolgate = await openToolgate(home.path);
  const peer = await openPeer(() => startSupergateway(everythingStdio()));
  const proxy = await openPeer(() => startMcpProxy(everythingStdio()));
  try {
    type Side = "toolgate" | "supergateway" | "mcp_proxy";
    const clients: Partial<Record<Side, McpHttpClients>> = {
      toolgate: toolgate.clients,
      supergateway: peer.server?.clients,
      mcp_proxy: proxy.server?.clients,
    };
    const peers = (["supergateway", "mcp_proxy"] as const).filter((side) => clients[side]);
    const measured = await alternate(
      clients as Record<Side, McpHttpClients>,
      ["toolgate", ...peers, ...peers.toReversed(), "toolgate"],
      mode,
    );
    await Promise.all([
      toolgate.clients.close(),
      peer.server?.clients.close(),
      proxy.server?.clients.close(),
    ]);
    const supergateway = measured.supergateway ?? null;
    const mcpProxy = measured.mcp_proxy ?? null;
    return {
      sessions: SESSIONS,
      toolgate: measured.toolgate,
      supergateway,
      ...(peer.error ? { supergateway_error: peer.error } : {}),
      vs_supergateway: supergateway
        ? ratio(measured.toolgate.calls_per_s, supergateway.calls_per_s)
        : 0,
      mcp_proxy: mcpProxy,
      ...(proxy.error ? { mcp_proxy_error: proxy.error } : {}),
      vs_mcp_proxy: mcpProxy ? ratio(measured.toolgate.calls_per_s, mcpProxy.calls_per_s) : 0,
    };
  } finally {
    await peer.server?.stop();
    await proxy.server?.stop();
  }
}

if (import.meta.main) {
  console.log(
    JSON.stringify(await benchMcpUpstreamHttp({ mode: modeFromArgs(Deno.args) }), null, 2),
  );
}
