/**
 * `deno task bench`: runs every benchmark scenario against its baseline in
 * the same run on the same machine, prints each figure next to its baseline
 * as a ratio with the target, and writes everything to `bench/results.json`.
 *
 * ```sh
 * deno task bench            # full run, a few minutes (bounded: < 10 min)
 * deno task bench --quick    # shorter phases (< 2 min)
 * deno task bench --smoke    # seconds per scenario: only checks that each runs
 * deno task bench --only=rest,mcp_stdio --out=/tmp/r.json
 * ```
 *
 * Exit code 1 when a scenario failed to run; speed is never asserted.
 * `BENCHMARKS.md` describes the scenarios and the latest results.
 *
 * @module
 */
import { benchAudit } from "./audit.ts";
import { benchAuditProofs } from "./audit_proofs.ts";
import type { AuditCodeResult } from "./audit_code.ts";
import type { GatewayCodeResult } from "./gateway_code.ts";
import { benchPolicyCost } from "./policies.ts";
import { alternate, beforeRoot, median } from "./_before.ts";
import { benchConsolePages, consolePagesFigures } from "./console_pages.ts";
import {
  benchIncoming,
  benchIncomingBackpressure,
  type BenchMode,
  benchRest,
  benchWebhookLatency,
  modeFromArgs,
  REST_TOOL,
} from "./http_server.ts";
import { benchMcpHttp, benchMcpStdio, benchStartup } from "./mcp.ts";
import { benchLayerCost, type LayerCostResult } from "./layer_cost.ts";
import { benchMcpBefore, type McpBeforeResult } from "./mcp_before.ts";
import { benchMcpStateless } from "./mcp_stateless.ts";
import { benchMcpUpstream, type UpstreamComparison } from "./mcp_upstream.ts";
import { benchMcpUpstreamHttp } from "./mcp_upstream_http.ts";
import { benchObservabilityCost } from "./observability.ts";
import { ROOT } from "./_proc.ts";
import { benchStoreAudit, benchStoreDeliveries } from "./storage.ts";
import { backlogFigures, benchStoreBacklog, benchStoreRest } from "./storage_server.ts";
import { benchWebhookClients } from "./webhook_clients.ts";
import { benchWebhooks } from "./webhooks.ts";
import { VERSION } from "../../src/version.ts";

export type { Figure } from "./_figure.ts";
import type { Figure } from "./_figure.ts";

/** A scenario: a name and how to run it. */
interface Scenario {
  name: string;
  run(mode: BenchMode): Promise<unknown>;
  figures(result: never): Figure[];
}

/** What `bench/results.json` holds. */
export interface BenchResults {
  version: string;
  started_at: string;
  mode: BenchMode;
  machine: Record<string, string | number>;
  duration_s: number;
  scenarios: Record<string, { result?: unknown; error?: string; duration_s: number }>;
  figures: Figure[];
}

function figure(
  scenario: string,
  name: string,
  toolgate: number,
  baselineName: string,
  baseline: number | null,
  target?: { min?: number; max?: number },
): Figure {
  const ratio = baseline ? Math.round((toolgate / baseline) * 100) / 100 : null;
  let text = "";
  let met: boolean | null = null;
  if (target?.min !== undefined && target.max !== undefined) {
    text = `${target.min}–${target.max}×`;
    met = ratio !== null && ratio >= target.min && ratio <= target.max;
  } else if (target?.min !== undefined) {
    text = `≥ ${target.min}×`;
    met = ratio !== null && ratio >= target.min;
  } else if (target?.max !== undefined) {
    text = `≤ ${target.max}×`;
    met = ratio !== null && ratio <= target.max;
  }
  return {
    scenario,
    figure: name,
    toolgate,
    baseline_name: baselineName,
    baseline,
    ratio,
    target: text,
    met,
  };
}

/**
 * An absolute target on a difference (ms) from a baseline, e.g. added
 * latency < 0.2 ms (`below`) or ≤ 0.6 ms (`atMost`).
 */
function added(
  scenario: string,
  name: string,
  value: number,
  baselineName: string,
  limit: { below: number } | { atMost: number },
): Figure {
  const [target, met] = "below" in limit
    ? [`< ${limit.below} ms`, value < limit.below]
    : [`≤ ${limit.atMost} ms`, value <= limit.atMost];
  return {
    scenario,
    figure: name,
    toolgate: value,
    baseline_name: baselineName,
    baseline: null,
    ratio: null,
    target,
    met,
  };
}

const SCENARIOS: Scenario[] = [
  {
    name: "rest",
    run: (mode) => benchRest({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchRest>>) => [
      figure(
        "rest",
        `POST /tools/${REST_TOOL} req/s`,
        r.toolgate.requests_per_s,
        "bare Hono",
        r.bare_hono.requests_per_s,
        { min: 0.5 },
      ),
      figure(
        "rest",
        `POST /tools/${REST_TOOL} req/s`,
        r.toolgate.requests_per_s,
        "bare Hono + KV read",
        r.bare_hono_read.requests_per_s,
      ),
      figure(
        "rest",
        `POST /tools/${REST_TOOL} req/s`,
        r.toolgate.requests_per_s,
        "bare Hono + KV read + 1 commit/req",
        r.bare_hono_commit.requests_per_s,
      ),
      figure("rest", "p50 ms", r.toolgate.p50_ms, "bare Hono", r.bare_hono.p50_ms),
      figure("rest", "p99 ms", r.toolgate.p99_ms, "bare Hono", r.bare_hono.p99_ms),
    ],
  },
  {
    name: "mcp_stdio",
    run: (mode) => benchMcpStdio({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchMcpStdio>>) => [
      figure(
        "mcp_stdio",
        "sequential calls/s",
        r.toolgate.calls_per_s,
        "bare SDK",
        r.bare_sdk.calls_per_s,
        { min: 0.6 },
      ),
      figure(
        "mcp_stdio",
        "sequential calls/s",
        r.toolgate.calls_per_s,
        "bare SDK + 1 KV commit/call",
        r.bare_sdk_commit.calls_per_s,
      ),
      figure("mcp_stdio", "p50 ms", r.toolgate.p50_ms, "bare SDK", r.bare_sdk.p50_ms),
      figure("mcp_stdio", "p99 ms", r.toolgate.p99_ms, "bare SDK", r.bare_sdk.p99_ms),
    ],
  },
  {
    name: "mcp_http",
    run: (mode) => benchMcpHttp({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchMcpHttp>>) => [
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "bare SDK transport",
        r.bare_sdk.calls_per_s,
        { min: 0.8 },
      ),
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "bare SDK transport + 1 commit/call",
        r.bare_sdk_commit.calls_per_s,
      ),
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "bare SDK transport, JSON replies",
        r.bare_sdk_json.calls_per_s,
      ),
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "supergateway",
        r.supergateway?.calls_per_s ?? null,
        { min: 2.5 },
      ),
      figure(
        "mcp_http",
        `calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "mcp-proxy",
        r.mcp_proxy?.calls_per_s ?? null,
      ),
      figure("mcp_http", "p50 ms", r.toolgate.p50_ms, "bare SDK transport", r.bare_sdk.p50_ms),
      figure("mcp_http", "p99 ms", r.toolgate.p99_ms, "bare SDK transport", r.bare_sdk.p99_ms),
    ],
  },
  {
    name: "mcp_stateless",
    run: (mode) => benchMcpStateless({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchMcpStateless>>) => [
      figure(
        "mcp_stateless",
        `2026-07-28 stateless calls/s (${r.clients} clients)`,
        r.toolgate.stateless_2026.calls_per_s,
        "2025 sessions, same server",
        r.toolgate.session_2025.calls_per_s,
      ),
      figure(
        "mcp_stateless",
        "2026-07-28 p50 ms",
        r.toolgate.stateless_2026.p50_ms,
        "2025 sessions",
        r.toolgate.session_2025.p50_ms,
      ),
      figure(
        "mcp_stateless",
        "2026-07-28 p99 ms",
        r.toolgate.stateless_2026.p99_ms,
        "2025 sessions",
        r.toolgate.session_2025.p99_ms,
      ),
      figure(
        "mcp_stateless",
        `2026-07-28 stateless calls/s (${r.clients} clients)`,
        r.toolgate.stateless_2026.calls_per_s,
        "bare SDK v2, 2026-07-28",
        r.bare_sdk_v2.stateless_2026.calls_per_s,
      ),
      figure(
        "mcp_stateless",
        "bare SDK v2: 2026-07-28 calls/s",
        r.bare_sdk_v2.stateless_2026.calls_per_s,
        "bare SDK v2, 2025 sessions",
        r.bare_sdk_v2.session_2025.calls_per_s,
      ),
    ],
  },
  {
    name: "mcp_upstream_http",
    run: (mode) => benchMcpUpstreamHttp({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchMcpUpstreamHttp>>) => [
      figure(
        "mcp_upstream_http",
        `everything echo calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "supergateway",
        r.supergateway?.calls_per_s ?? null,
        { min: 2 },
      ),
      figure(
        "mcp_upstream_http",
        `everything echo calls/s (${r.sessions} sessions)`,
        r.toolgate.calls_per_s,
        "mcp-proxy",
        r.mcp_proxy?.calls_per_s ?? null,
      ),
      figure(
        "mcp_upstream_http",
        "p50 ms",
        r.toolgate.p50_ms,
        "supergateway",
        r.supergateway?.p50_ms ?? null,
      ),
      figure(
        "mcp_upstream_http",
        "p99 ms",
        r.toolgate.p99_ms,
        "supergateway",
        r.supergateway?.p99_ms ?? null,
      ),
    ],
  },
  {
    name: "webhooks",
    run: (mode) => benchWebhooks({ quick: mode !== "full" }),
    figures: (r: Awaited<ReturnType<typeof benchWebhooks>>) =>
      r.phases.flatMap((p) => [
        figure(
          "webhooks",
          `signed deliveries/s, ${p.receivers} receiver(s)`,
          p.dispatcher_per_s,
          "bare signed fetch",
          p.bare_signed_fetch_per_s,
          { min: 0.3 },
        ),
        ...(p.dispatcher_bytes_per_delivery && p.bare_bytes_per_request
          ? [figure(
            "webhooks",
            `KB allocated per delivery, ${p.receivers} receivers`,
            Math.round(p.dispatcher_bytes_per_delivery / 102.4) / 10,
            "bare signed fetch",
            Math.round(p.bare_bytes_per_request / 102.4) / 10,
          )]
          : []),
      ]),
  },
  {
    name: "webhook_clients",
    run: (mode) => benchWebhookClients({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchWebhookClients>>) => {
      const { http1, fetch_tuned, undici } = r.clients;
      const kb = (bytes: number) => Math.round(bytes / 102.4) / 10;
      return [fetch_tuned, undici].flatMap((peer) => {
        const name = peer === fetch_tuned ? "fetch + tuned HttpClient" : "undici Agent";
        return [
          figure(
            "webhook_clients",
            "_http1.ts: signed POSTs/s",
            http1.posts_per_s,
            name,
            peer.posts_per_s,
            { min: 1 },
          ),
          figure(
            "webhook_clients",
            "_http1.ts: CPU µs per POST",
            http1.cpu_us_per_post,
            name,
            peer.cpu_us_per_post,
            { max: 1 },
          ),
          figure(
            "webhook_clients",
            "_http1.ts: KB allocated per POST",
            kb(http1.bytes_per_post),
            name,
            kb(peer.bytes_per_post),
            { max: 1 },
          ),
          figure(
            "webhook_clients",
            "_http1.ts: peak RSS MiB",
            http1.peak_rss_mib,
            name,
            peer.peak_rss_mib,
            { max: 1 },
          ),
        ];
      });
    },
  },
  {
    name: "audit",
    run: (mode) => benchAudit({ quick: mode !== "full" }),
    figures: (r: Awaited<ReturnType<typeof benchAudit>>) => [
      figure(
        "audit",
        "appends/s, 16 concurrent",
        r.append_concurrent_16_per_s,
        "bare KV commits/s",
        r.kv_commits_per_s,
        { min: 3 },
      ),
      figure(
        "audit",
        "appends/s, sequential",
        r.append_sequential_per_s,
        "bare KV commits/s",
        r.kv_commits_per_s,
      ),
      figure(
        "audit",
        "appends/s, 1000 in flight",
        r.append_burst_1000_per_s,
        "bare KV commits/s",
        r.kv_commits_per_s,
      ),
      figure("audit", `verify entries/s (${r.verify_entries})`, r.verify_entries_per_s, "", null),
    ],
  },
  {
    // Appends before and after a change, alternating processes (TOOLGATE_BENCH_BEFORE only):
    // this checkout's harness, each side's audit log and store.
    name: "audit_before",
    run: async (mode) => {
      const before = beforeRoot();
      if (!before) return { skipped: "set TOOLGATE_BENCH_BEFORE=<another checkout>" };
      const runs = await alternate<AuditCodeResult>(
        before,
        "scripts/bench/audit_code.ts",
        mode === "full" ? [] : ["--quick"],
        mode === "smoke" ? 1 : 3,
        { harness: "here" },
      );
      const pick = (key: keyof AuditCodeResult) => ({
        after: median(runs.after.map((r) => r[key])),
        before: median(runs.before.map((r) => r[key])),
      });
      return {
        kv_concurrent: pick("kv_concurrent_16_per_s"),
        kv_burst: pick("kv_burst_1000_per_s"),
        postgres_concurrent: pick("postgres_concurrent_16_per_s"),
        postgres_burst: pick("postgres_burst_1000_per_s"),
      };
    },
    figures: (
      r: { skipped?: string } & Partial<Record<string, { after: number; before: number }>>,
    ) =>
      r.skipped ? [] : ([
        ["kv_concurrent", "KV appends/s, 16 concurrent (median)"],
        ["kv_burst", "KV appends/s, 1000 in flight (median)"],
        ["postgres_concurrent", "PostgreSQL appends/s, 16 concurrent (median)"],
        ["postgres_burst", "PostgreSQL appends/s, 1000 in flight (median)"],
      ] as const).map(([key, label]) =>
        figure("audit_before", label, r[key]!.after, "before", r[key]!.before, { min: 0.9 })
      ),
  },
  {
    // The gateway's call path in process before and after a change (TOOLGATE_BENCH_BEFORE only):
    // this checkout's harness, each side's runtime.
    name: "gateway_before",
    run: async (mode) => {
      const before = beforeRoot();
      if (!before) return { skipped: "set TOOLGATE_BENCH_BEFORE=<another checkout>" };
      const runs = await alternate<GatewayCodeResult>(
        before,
        "scripts/bench/gateway_code.ts",
        mode === "full" ? [] : ["--quick"],
        mode === "full" ? 6 : mode === "quick" ? 3 : 1,
        { harness: "here" },
      );
      // Paired rounds: the machine drifts by more than a small change costs.
      const ratios = runs.after.map((after, i) =>
        after.cpu_us_per_call / runs.before[i].cpu_us_per_call
      );
      return {
        after: median(runs.after.map((r) => r.cpu_us_per_call)),
        before: median(runs.before.map((r) => r.cpu_us_per_call)),
        paired_cpu_ratio: Math.round(median(ratios) * 1000) / 1000,
        calls_per_s: {
          after: median(runs.after.map((r) => r.calls_per_s)),
          before: median(runs.before.map((r) => r.calls_per_s)),
        },
      };
    },
    figures: (
      r: { skipped?: string; after?: number; before?: number; paired_cpu_ratio?: number } & {
        calls_per_s?: { after: number; before: number };
      },
    ) =>
      r.skipped ? [] : [
        figure(
          "gateway_before",
          "in-process memory_get, CPU µs per call (median)",
          r.after!,
          "before",
          r.before!,
        ),
        figure(
          "gateway_before",
          "paired CPU ratio (median of rounds)",
          r.paired_cpu_ratio!,
          "",
          null,
        ),
        figure(
          "gateway_before",
          "in-process memory_get calls/s (median)",
          r.calls_per_s!.after,
          "before",
          r.calls_per_s!.before,
        ),
      ],
  },
  {
    // MCP over HTTP and the proxied call before and after a change (TOOLGATE_BENCH_BEFORE only).
    name: "mcp_before",
    run: (mode) => benchMcpBefore({ mode }),
    figures: (r: McpBeforeResult) =>
      "skipped" in r ? [] : ([
        ["memory_get", "MCP HTTP memory_get"],
        ["proxied_echo", "MCP HTTP proxied everything__echo"],
      ] as const).flatMap(([key, label]) => [
        figure(
          "mcp_before",
          `${label} calls/s`,
          r[key].here.calls_per_s,
          "before",
          r[key].before.calls_per_s,
        ),
        figure(
          "mcp_before",
          `${label} server CPU µs per call`,
          r[key].here.cpu_us_per_call ?? 0,
          "before",
          r[key].before.cpu_us_per_call,
        ),
      ]),
  },
  {
    name: "audit_proofs",
    run: (mode) =>
      benchAuditProofs({ quick: mode !== "full", leaves: mode === "smoke" ? 20_000 : undefined }),
    figures: (r: Awaited<ReturnType<typeof benchAuditProofs>>) => [
      figure(
        "audit_proofs",
        `inclusion proof p50 ms, ${r.leaves} entries (target < 2)`,
        r.inclusion_p50_ms,
        "",
        null,
      ),
      figure("audit_proofs", "consistency proof p50 ms", r.consistency_p50_ms, "", null),
      figure(
        "audit_proofs",
        "receipt signature p50 ms (target ≤ 0.05)",
        r.receipt_p50_ms,
        "",
        null,
      ),
    ],
  },
  {
    name: "webhook_latency",
    run: (mode) => benchWebhookLatency({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchWebhookLatency>>) => [
      added("webhook_latency", "added p50 ms, 10 webhooks", r.added_p50_ms, "0 webhooks", {
        below: 0.2,
      }),
      // A quarter of the host's own single-call p99, measured in the same rounds.
      added("webhook_latency", "added p99 ms, 10 webhooks", r.added_p99_ms, "0 webhooks", {
        atMost: r.p99_budget_ms,
      }),
      figure("webhook_latency", "p99 ms, 0 webhooks", r.no_webhooks.p99_ms, "", null),
      ...(r.before
        ? [
          figure(
            "webhook_latency",
            "before (TOOLGATE_BENCH_BEFORE): added p50 ms",
            r.before.added_p50_ms,
            "",
            null,
          ),
          figure(
            "webhook_latency",
            "before (TOOLGATE_BENCH_BEFORE): added p99 ms",
            r.before.added_p99_ms,
            "",
            null,
          ),
        ]
        : []),
    ],
  },
  {
    name: "observability_cost",
    run: (mode) => benchObservabilityCost({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchObservabilityCost>>) => [
      figure(
        "observability_cost",
        "REST req/s, metrics + tracing on (every span exported)",
        r.on.requests_per_s,
        "both off",
        r.off.requests_per_s,
        { min: 0.9 },
      ),
      ...(r.on.cpu_us_per_call !== null && r.off.cpu_us_per_call !== null
        ? [
          figure(
            "observability_cost",
            "server CPU µs per call, on",
            r.on.cpu_us_per_call,
            "both off",
            r.off.cpu_us_per_call,
            { max: 1.11 },
          ),
        ]
        : []),
      added("observability_cost", "added p50 ms, paced calls", r.added_p50_ms, "both off", {
        atMost: 0.1,
      }),
      figure(
        "observability_cost",
        "REST req/s, 1 trace in 10 sampled",
        r.sampled.requests_per_s,
        "both off",
        r.off.requests_per_s,
      ),
    ],
  },
  {
    // Each per-call layer switched off in turn (TOOLGATE_BENCH_LAYERS_OFF), REST and MCP HTTP.
    name: "layer_cost",
    run: (mode) => benchLayerCost({ mode }),
    figures: (r: LayerCostResult) =>
      (["rest", "mcp_http"] as const).flatMap((transport) => {
        const costs = r[transport];
        const label = transport === "rest" ? "REST" : "MCP HTTP";
        return [
          figure(
            "layer_cost",
            `${label} server CPU µs per call, every layer off`,
            costs.all_off,
            "every layer on",
            costs.all_on,
          ),
          ...Object.entries(costs.cost_us).map(([layer, us]) =>
            figure("layer_cost", `${label} µs per call: ${layer}`, us, "", null)
          ),
          figure(
            "layer_cost",
            `${label} µs per call: control (a second all-on server: the noise)`,
            costs.control_us,
            "",
            null,
          ),
        ];
      }),
  },
  {
    name: "policy_cost",
    run: (mode) => benchPolicyCost({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchPolicyCost>>) => [
      added(
        "policy_cost",
        "added p50 ms, 50 rules (10 CEL per call), paced",
        r.added_p50_ms,
        "no rules",
        {
          atMost: 0.05,
        },
      ),
      figure(
        "policy_cost",
        "server CPU µs per call, 50 rules",
        r.fifty.measured.cpu_us_per_call ?? 0,
        "no rules",
        r.none.measured.cpu_us_per_call,
      ),
      figure(
        "policy_cost",
        "REST req/s, 50 rules",
        r.fifty.measured.requests_per_s,
        "no rules",
        r.none.measured.requests_per_s,
      ),
      ...(r.before
        ? [
          figure(
            "policy_cost",
            "REST req/s, no rules (this checkout)",
            r.none.measured.requests_per_s,
            "before (TOOLGATE_BENCH_BEFORE)",
            r.before.measured.requests_per_s,
          ),
          figure(
            "policy_cost",
            "server CPU µs per call, no rules (this checkout)",
            r.none.measured.cpu_us_per_call ?? 0,
            "before (TOOLGATE_BENCH_BEFORE)",
            r.before.measured.cpu_us_per_call,
          ),
        ]
        : []),
    ],
  },
  {
    name: "incoming",
    run: (mode) => benchIncoming({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchIncoming>>) => [
      figure(
        "incoming",
        "202 accepted/s",
        r.toolgate.requests_per_s,
        "bare Hono",
        r.bare_hono.requests_per_s,
      ),
      figure("incoming", "p99 ms", r.toolgate.p99_ms, "bare Hono", r.bare_hono.p99_ms),
      figure(
        "incoming",
        `handler calls/s draining ${r.backlog_at_end} jobs`,
        r.handled_per_s,
        "",
        null,
      ),
    ],
  },
  {
    name: "incoming_backpressure",
    run: (mode) => benchIncomingBackpressure({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchIncomingBackpressure>>) => [
      figure(
        "incoming_backpressure",
        `202 accepted/s with the queue full (bound ${r.bound})`,
        r.accepted_per_s,
        "handler calls/s",
        r.handled_per_s,
        { min: 0.7, max: 1.3 },
      ),
      figure("incoming_backpressure", "503 QUEUE_FULL/s", r.refused_per_s, "", null),
      figure(
        "incoming_backpressure",
        `jobs waiting at the end (bound ${r.bound})`,
        r.backlog_at_end,
        "",
        null,
      ),
    ],
  },
  {
    name: "mcp_upstream",
    run: (mode) => benchMcpUpstream({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchMcpUpstream>>) => [
      ...upstreamFigures("stdio", r),
      ...(r.http ? upstreamFigures("HTTP", r.http) : []),
      figure("mcp_upstream", "floor: 1 bare KV commit, p50 ms", r.commit_p50_ms, "", null),
    ],
  },
  {
    name: "startup",
    run: (mode) => benchStartup({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchStartup>>) => [
      figure(
        "startup",
        "stdio cold start ms",
        r.toolgate_cold_start_ms,
        "bare SDK",
        r.bare_sdk_cold_start_ms,
        { max: 1.3 },
      ),
      figure(
        "startup",
        "idle RSS MiB",
        r.toolgate_idle_rss_mib,
        "bare SDK",
        r.bare_sdk_idle_rss_mib,
        { max: 1.5 },
      ),
    ],
  },
  {
    name: "store_deliveries",
    run: (mode) => benchStoreDeliveries({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchStoreDeliveries>>) => [
      figure(
        "store_deliveries",
        `PostgreSQL: deliveries/s via dispatcher, ${r.receivers} receivers`,
        r.postgres.dispatcher_per_s,
        "KV adapter",
        r.kv.dispatcher_per_s,
      ),
      figure(
        "store_deliveries",
        `PostgreSQL: outbox events/s via writer(), ${r.receivers} deliveries each`,
        r.postgres.outbox_events_per_s,
        "KV adapter",
        r.kv.outbox_events_per_s,
      ),
      figure(
        "store_deliveries",
        "PostgreSQL: emit() p50 ms",
        r.postgres.emit_p50_ms,
        "KV adapter",
        r.kv.emit_p50_ms,
      ),
      figure(
        "store_deliveries",
        "PostgreSQL: emit() p99 ms",
        r.postgres.emit_p99_ms,
        "KV adapter",
        r.kv.emit_p99_ms,
      ),
    ],
  },
  {
    name: "store_audit",
    run: (mode) => benchStoreAudit({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchStoreAudit>>) => [
      figure(
        "store_audit",
        `PostgreSQL: appends/s, ${r.concurrency} concurrent`,
        r.postgres.appends_concurrent_per_s,
        `1-row INSERT commits/s, ${r.concurrency} connections`,
        r.postgres.insert_commits_concurrent_per_s,
        { min: 3 },
      ),
      figure(
        "store_audit",
        `PostgreSQL: appends/s, ${r.concurrency} concurrent`,
        r.postgres.appends_concurrent_per_s,
        "1-row INSERT commits/s, 1 connection",
        r.postgres.insert_commits_sequential_per_s,
      ),
      figure(
        "store_audit",
        "PostgreSQL: appends/s, sequential",
        r.postgres.appends_sequential_per_s,
        "1-row INSERT commits/s, 1 connection",
        r.postgres.insert_commits_sequential_per_s,
      ),
      figure(
        "store_audit",
        "PostgreSQL: appends/s, 1000 in flight",
        r.postgres.appends_burst_1000_per_s,
        `1-row INSERT commits/s, ${r.concurrency} connections`,
        r.postgres.insert_commits_concurrent_per_s,
      ),
      figure(
        "store_audit",
        `PostgreSQL: entries per commit, ${r.concurrency} concurrent`,
        r.postgres.entries_per_commit_concurrent,
        "",
        null,
      ),
      figure(
        "store_audit",
        `PostgreSQL: appends/s, ${r.concurrency} concurrent`,
        r.postgres.appends_concurrent_per_s,
        `KV adapter, ${r.concurrency} concurrent`,
        r.kv.appends_concurrent_per_s,
      ),
      figure(
        "store_audit",
        `KV: appends/s, ${r.concurrency} concurrent`,
        r.kv.appends_concurrent_per_s,
        "bare KV commits/s",
        r.kv.kv_commits_per_s,
      ),
    ],
  },
  {
    name: "store_rest",
    run: (mode) => benchStoreRest({ mode }),
    figures: (r: Awaited<ReturnType<typeof benchStoreRest>>) => [
      figure(
        "store_rest",
        `PostgreSQL: POST /tools/${r.tool} req/s`,
        r.postgres.requests_per_s,
        "KV adapter",
        r.kv.requests_per_s,
      ),
      figure(
        "store_rest",
        "PostgreSQL, 2 instances: req/s",
        r.postgres_two_instances.requests_per_s,
        "1 instance",
        r.postgres.requests_per_s,
      ),
      figure("store_rest", "PostgreSQL: p50 ms", r.postgres.p50_ms, "KV adapter", r.kv.p50_ms),
      figure("store_rest", "PostgreSQL: p99 ms", r.postgres.p99_ms, "KV adapter", r.kv.p99_ms),
      figure(
        "store_rest",
        "PostgreSQL, 2 instances: p99 ms",
        r.postgres_two_instances.p99_ms,
        "1 instance",
        r.postgres.p99_ms,
      ),
      figure(
        "store_rest",
        "PostgreSQL, 2 instances: rolled-back transactions",
        r.postgres_two_instances_transactions.rollbacks,
        "1 instance",
        r.postgres_transactions.rollbacks,
      ),
    ],
  },
  {
    name: "store_backlog",
    run: (mode) => benchStoreBacklog({ mode }),
    figures: backlogFigures,
  },
  {
    name: "console_pages",
    run: (mode) => benchConsolePages({ mode }),
    figures: consolePagesFigures,
  },
];

/** Figures of the MCP upstream scenario on one transport: through toolgate against direct. */
function upstreamFigures(transport: string, r: UpstreamComparison): Figure[] {
  return [
    figure(
      "mcp_upstream",
      `${transport} sequential calls/s via toolgate`,
      r.via_gateway.calls_per_s,
      "upstream direct",
      r.direct.calls_per_s,
    ),
    figure(
      "mcp_upstream",
      `${transport} p50 ms`,
      r.via_gateway.p50_ms,
      "upstream direct",
      r.direct.p50_ms,
    ),
    figure(
      "mcp_upstream",
      `${transport} p99 ms`,
      r.via_gateway.p99_ms,
      "upstream direct",
      r.direct.p99_ms,
    ),
    added("mcp_upstream", `${transport} added p50 ms`, r.added_p50_ms, "upstream direct", {
      atMost: 0.6,
    }),
  ];
}

async function machine(): Promise<Record<string, string | number>> {
  const cpu = await Deno.readTextFile("/proc/cpuinfo").then(
    (text) => /model name\s*:\s*(.+)/.exec(text)?.[1] ?? "unknown",
    () => "unknown",
  );
  const memory = Deno.systemMemoryInfo();
  const tmp = Deno.env.get("TMPDIR") ?? "/tmp";
  const fs = await new Deno.Command("df", { args: ["-T", tmp], stdout: "piped", stderr: "null" })
    .output()
    .then(
      (o) => new TextDecoder().decode(o.stdout).split("\n")[1]?.split(/\s+/)[1] ?? "unknown",
      () => "unknown",
    );
  return {
    cpu,
    cores: navigator.hardwareConcurrency,
    memory_gib: Math.round(memory.total / 2 ** 30),
    os: `${Deno.build.os} ${Deno.osRelease()}`,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    temp_dir: tmp,
    temp_dir_fs: fs,
  };
}

function cell(value: number | null): string {
  return value === null ? "" : String(value);
}

/** Renders figures as an aligned text table. */
export function renderTable(figures: readonly Figure[]): string {
  const headers = ["scenario", "figure", "toolgate", "baseline", "", "ratio", "target", "met"];
  const rows = figures.map((f) => [
    f.scenario,
    f.figure,
    cell(f.toolgate),
    f.baseline_name,
    cell(f.baseline),
    f.ratio === null ? "" : `${f.ratio}×`,
    f.target,
    f.met === null ? "" : f.met ? "yes" : "NO",
  ]);
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/** Options of {@linkcode runBenchmarks}. */
export interface RunBenchmarksOptions {
  mode: BenchMode;
  /** Scenario names to run. @default all */
  only?: readonly string[];
  /** Progress sink. @default stderr */
  log?: (line: string) => void;
}

/**
 * Runs the scenarios one after another (never two at once: they share the
 * machine's cores).
 */
export async function runBenchmarks(options: RunBenchmarksOptions): Promise<BenchResults> {
  const { mode, only, log = (line: string) => console.error(line) } = options;
  const started = performance.now();
  const scenarios = SCENARIOS;
  const unknown = only?.filter((name) => !scenarios.some((s) => s.name === name)) ?? [];
  if (unknown.length) {
    throw new Error(
      `Unknown scenario ${unknown.join(", ")}: use ${scenarios.map((s) => s.name).join(", ")}`,
    );
  }
  const results: BenchResults = {
    version: VERSION,
    started_at: new Date().toISOString(),
    mode,
    machine: await machine(),
    duration_s: 0,
    scenarios: {},
    figures: [],
  };
  for (const scenario of scenarios) {
    if (only && !only.includes(scenario.name)) continue;
    log(`bench: ${scenario.name} (${mode}) …`);
    const t = performance.now();
    try {
      const result = await scenario.run(mode);
      const duration_s = Math.round((performance.now() - t) / 100) / 10;
      results.scenarios[scenario.name] = { result, duration_s };
      results.figures.push(...scenario.figures(result as never));
      log(`bench: ${scenario.name} done in ${duration_s} s`);
    } catch (error) {
      const duration_s = Math.round((performance.now() - t) / 100) / 10;
      const message = error instanceof Error ? error.stack ?? error.message : String(error);
      results.scenarios[scenario.name] = { error: message, duration_s };
      log(`bench: ${scenario.name} FAILED: ${message}`);
    }
  }
  results.duration_s = Math.round((performance.now() - started) / 100) / 10;
  return results;
}

if (import.meta.main) {
  const args = Deno.args;
  const mode = modeFromArgs(args);
  const only = args.find((a) => a.startsWith("--only="))?.slice(7).split(",").filter(Boolean);
  const out = args.find((a) => a.startsWith("--out="))?.slice(6) ?? `${ROOT}bench/results.json`;
  const results = await runBenchmarks({ mode, only });
  await Deno.mkdir(out.slice(0, out.lastIndexOf("/")) || ".", { recursive: true });
  await Deno.writeTextFile(out, JSON.stringify(results, null, 2) + "\n");
  console.log(renderTable(results.figures));
  const failed = Object.entries(results.scenarios).filter(([, s]) => s.error).map(([name]) => name);
  console.log(`\n${results.mode} run in ${results.duration_s} s; results in ${out}`);
  if (failed.length) {
    console.log(`failed: ${failed.join(", ")}`);
    Deno.exit(1);
  }
}
