/**
 * `console_pages`: how fast the web console's pages answer on a full store
 * (issue 23 item 5: under 50 ms with 100k audit entries and 10k dead
 * letters). For each adapter (Deno KV in a temp dir, PostgreSQL on a
 * throwaway cluster, `_postgres.ts`), the store is filled before the server
 * starts: 100k audit entries through the audit log's group commit (1000
 * appends in flight; tool calls from five tools, five callers, successes and
 * failures, and incoming payloads with their handler calls, spread over a
 * week) and 10k dead letters over four webhooks through the deliveries'
 * group-committing writer (with a full delivery log per webhook). Then the
 * real server (`toolgate mcp start --transport http`, with an API token)
 * starts, the bench signs in through the form, and requests each page one
 * after another: median and p95 over a bounded number of requests per page
 * (after a few unmeasured ones), each timed to its last body byte.
 *
 * Run alone: `deno run -A scripts/bench/console_pages.ts [--quick|--smoke]
 * [--adapters=kv,postgres] [--audit=N] [--dlq=N]` prints JSON.
 *
 * @module
 */
import { type BenchMode, modeFromArgs } from "./http_server.ts";
import type { Figure } from "./_figure.ts";
import { startBenchPostgres } from "./_postgres.ts";
import { startToolgateHttp, tempDir } from "./_proc.ts";
import { percentile, round3 } from "./_stats.ts";
import { type AuditAppendInput, createAuditLog } from "../../src/audit/mod.ts";
import { type DeliveryOp, newDlqId, newLogEntryId, openStore } from "../../src/store/mod.ts";

/** Options of {@linkcode benchConsolePages}. */
export interface ConsolePagesBenchOptions {
  /** `full`, `quick` or `smoke`. */
  mode: BenchMode;
  /** Audit entries written. @default 100000 (full, quick), 5000 (smoke) */
  auditEntries?: number;
  /** Dead letters written. @default 10000 (full, quick), 500 (smoke) */
  deadLetters?: number;
  /** Measured requests per page. @default 100 (full), 30 (quick), 3 (smoke) */
  requests?: number;
  /** Adapters to measure. @default ["kv", "postgres"] */
  adapters?: readonly ("kv" | "postgres")[];
}

/** Timings of one page. */
export interface PageFigures {
  /** The path requested. */
  path: string;
  median_ms: number;
  p95_ms: number;
  max_ms: number;
  /** Bytes of the page's body. */
  bytes: number;
}

/** Figures of one adapter. */
export interface ConsoleAdapterFigures {
  audit_entries: number;
  dead_letters: number;
  /** Time to write the audit entries, ms. */
  audit_fill_ms: number;
  /** Time to write the dead letters, ms. */
  dlq_fill_ms: number;
  /** By page name. */
  pages: Record<string, PageFigures>;
}

/** Figures of {@linkcode benchConsolePages}. */
export interface ConsolePagesResult {
  requests_per_page: number;
  kv?: ConsoleAdapterFigures;
  postgres?: ConsoleAdapterFigures;
  postgres_version?: string;
}

/** The target of issue 23 item 5: every page under this, median. */
export const CONSOLE_PAGE_LIMIT_MS = 50;

const TOKEN = "bench-console-token-0123456789abcdef";
const TOOLS = ["memory_get", "memory_set", "http_request", "github__search_issues"];
/** A rare tool: one entry in 400. */
const RARE_TOOL = "jira__create_issue";
const CALLERS = [
  { kind: "admin" },
  { kind: "key", name: "ci", id: "key_01ci" },
  { kind: "key", name: "deploy", id: "key_01deploy" },
  { kind: "oauth", name: "client-a", id: "client-a" },
  { kind: "local" },
] as const;
const WEEK_MS = 7 * 24 * 3600_000;
const WEBHOOKS = 4;

/** The `i`-th audit entry of the fill: mostly tool calls, one in ten an incoming payload. */
function auditInput(i: number): AuditAppendInput {
  const caller = CALLERS[i % CALLERS.length];
  if (i % 10 === 9) {
    return {
      kind: "webhook.incoming",
      tool: "memory_set",
      session_id: `inc_${Math.floor(i / 10)}`,
      input: { order: { id: i, total: i % 997, items: ["a", "b"] } },
      outcome: { accepted: true, endpoint_id: "in_bench" },
    };
  }
  if (i % 10 === 0 && i > 0) {
    // The handler call of the payload just before it.
    return {
      kind: "tool.call",
      tool: "memory_set",
      session_id: `inc_${Math.floor(i / 10) - 1}`,
      input: { key: `orders/${i}`, value: { total: i % 997 } },
      outcome: i % 30 === 0
        ? { ok: false, error_code: "TOOL_INPUT_INVALID", error: "Invalid input: value" }
        : { ok: true, latency_ms: 3 },
    };
  }
  const tool = i % 400 === 7 ? RARE_TOOL : TOOLS[i % TOOLS.length];
  return {
    kind: "tool.call",
    tool,
    session_id: `ses_${i % 1000}`,
    caller: { ...caller },
    input: { url: `https://example.com/api/items/${i}`, body: { count: i, note: "x".repeat(80) } },
    outcome: i % 17 === 0
      ? { ok: false, error_code: "PLUGIN_REQUEST_FAILED", error: "Upstream answered 502" }
      : { ok: true, latency_ms: 5 + (i % 40) },
  };
}

interface Filled {
  webhooks: string[];
  dlqId: string;
  /** A seq in the middle of the chain, for a later audit page. */
  middleSeq: number;
  /** A time a day before the last entry (UTC `YYYY-MM-DDTHH:MM`). */
  dayAgo: string;
  auditMs: number;
  dlqMs: number;
}

/**
 * Writes the webhooks, incoming endpoint, audit entries and dead letters
 * straight to the store, before the server starts.
 */
async function fill(
  home: string,
  url: string | undefined,
  auditEntries: number,
  deadLetters: number,
): Promise<Filled> {
  const store = await openStore({ dataDir: home, url });
  try {
    const webhooks: string[] = [];
    for (let w = 0; w < WEBHOOKS; w++) {
      // Subscribed to nothing the bench triggers: no delivery runs meanwhile.
      const hook = await store.webhooks.addOutgoing({
        url: `http://127.0.0.1:9/hooks/${w}`,
        events: ["circuit.opened"],
        secret: `bench-secret-${w}`,
      });
      webhooks.push(hook.id);
    }
    await store.webhooks.addIncoming({
      name: "orders",
      path: "/hooks/orders",
      handler: "memory_set",
    });

    const end = Date.now() - 60_000;
    const start = end - WEEK_MS;
    const step = WEEK_MS / auditEntries;
    let ticks = 0;
    // Timestamps never decrease along the chain: one tick per sealed entry.
    const log = createAuditLog({ store, now: () => Math.floor(start + step * ticks++) });
    const auditStart = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: 1000 }, async () => {
      while (next < auditEntries) await log.append(auditInput(next++));
    }));
    await log.close();
    const auditMs = Math.round(performance.now() - auditStart);

    const writer = store.deliveries.writer();
    const dlqStart = performance.now();
    let dlqId = "";
    const dlqStep = WEEK_MS / deadLetters;
    const batch = 1000;
    for (let done = 0; done < deadLetters; done += batch) {
      const writes: Promise<unknown>[] = [];
      for (let i = done; i < Math.min(deadLetters, done + batch); i++) {
        const webhook = webhooks[i % WEBHOOKS];
        const at = start + Math.floor(dlqStep * i);
        const eventId = `evt_${String(i).padStart(26, "0")}`;
        const timestamp = new Date(at - 31_000).toISOString();
        const body = new TextEncoder().encode(JSON.stringify({
          id: eventId,
          type: "tool.called",
          timestamp,
          data: { tool: TOOLS[i % TOOLS.length], latency_ms: 12, session_id: `ses_${i}` },
        }));
        const attempts = Array.from({ length: 6 }, (_, a) => ({
          attempt: a + 1,
          at: new Date(at - 31_000 + 1000 * (2 ** a - 1)).toISOString(),
          ...(a % 2 ? { status: 503 } : { error: "ECONNREFUSED: connection refused" }),
          duration_ms: 3 + a,
        }));
        const id = newDlqId();
        if (i === Math.floor(deadLetters / 2)) dlqId = id;
        const op: DeliveryOp = {
          op: "put_dlq",
          record: {
            dlq_id: id,
            webhook_id: webhook,
            url: `http://127.0.0.1:9/hooks/${i % WEBHOOKS}`,
            event_id: eventId,
            event_type: "tool.called",
            attempts,
            failed_at: new Date(at).toISOString(),
          },
          body,
        };
        writes.push(writer.write([op]));
      }
      await Promise.all(writes);
    }
    // A full delivery log per webhook (the webhooks page shows its last 20 attempts).
    for (const webhook of webhooks) {
      const ops: DeliveryOp[] = Array.from({ length: 20 }, (_, i) => {
        const at = end - (20 - i) * 60_000;
        return {
          op: "log",
          webhook_id: webhook,
          entry_id: newLogEntryId(at),
          entry: {
            at: new Date(at).toISOString(),
            attempt: 1 + (i % 6),
            ok: false,
            status: 503,
            latency_ms: 4,
            event_id: `evt_${String(i).padStart(26, "0")}`,
            event_type: "tool.called",
          },
        };
      });
      await writer.write(ops);
    }
    await writer.flush();
    const dlqMs = Math.round(performance.now() - dlqStart);
    const { head } = await store.audit.readHead();
    return {
      webhooks,
      dlqId,
      middleSeq: Math.floor((head?.seq ?? 0) / 2),
      dayAgo: new Date(end - 24 * 3600_000).toISOString().slice(0, 16),
      auditMs,
      dlqMs,
    };
  } finally {
    await store.close();
  }
}

/** Signs in through the console's form; returns the session cookie. */
async function signIn(base: string): Promise<string> {
  const response = await fetch(`${base}/ui/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
    body: new URLSearchParams({ token: TOKEN, next: "/ui" }),
  });
  await response.body?.cancel();
  const cookie = response.headers.get("set-cookie")?.split(";")[0];
  if (response.status !== 303 || !cookie) {
    throw new Error(`Console sign-in failed: HTTP ${response.status}`);
  }
  return cookie;
}

/** Requests `path` `warmup + requests` times one after another; times the measured ones. */
async function measure(
  base: string,
  cookie: string,
  path: string,
  requests: number,
  warmup: number,
): Promise<PageFigures> {
  const samples: number[] = [];
  let bytes = 0;
  for (let i = 0; i < warmup + requests; i++) {
    const start = performance.now();
    const response = await fetch(`${base}${path}`, { headers: { cookie }, redirect: "manual" });
    const body = await response.arrayBuffer();
    const ms = performance.now() - start;
    if (response.status !== 200) {
      throw new Error(`GET ${path}: HTTP ${response.status}: ${new TextDecoder().decode(body)}`);
    }
    bytes = body.byteLength;
    if (i >= warmup) samples.push(ms);
  }
  samples.sort((a, b) => a - b);
  return {
    path,
    median_ms: percentile(samples, 0.5),
    p95_ms: percentile(samples, 0.95),
    max_ms: round3(samples.at(-1) ?? 0),
    bytes,
  };
}

/** Waits until the server's start-up rewrite of `dlq.json` is done (bounded). */
async function mirrorWritten(home: string): Promise<void> {
  const end = performance.now() + 60_000;
  let last = -1;
  while (performance.now() < end) {
    const size = await Deno.stat(`${home}/dlq.json`).then((s) => s.size, () => -1);
    if (size > 0 && size === last) return;
    last = size;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** The pages measured, by name. */
function pages(filled: Filled): Record<string, string> {
  const hook = filled.webhooks[1];
  const since = encodeURIComponent(filled.dayAgo);
  return {
    overview: "/ui",
    tools: "/ui/tools",
    tool: "/ui/tools/memory_get",
    webhooks: "/ui/webhooks",
    dlq: "/ui/dlq",
    dlq_webhook: `/ui/dlq?webhook=${hook}`,
    dlq_record: `/ui/dlq/${filled.dlqId}`,
    incoming: "/ui/incoming",
    audit: "/ui/audit",
    audit_tool: "/ui/audit?tool=http_request",
    audit_kind: "/ui/audit?kind=webhook.incoming",
    audit_caller: "/ui/audit?caller=deploy",
    audit_since: `/ui/audit?since=${since}`,
    audit_rare: `/ui/audit?tool=${RARE_TOOL}&caller=deploy`,
    audit_later: `/ui/audit?after=${filled.middleSeq}`,
  };
}

async function adapterRun(
  url: string | undefined,
  auditEntries: number,
  deadLetters: number,
  requests: number,
): Promise<ConsoleAdapterFigures> {
  await using home = await tempDir(`console-${url ? "pg" : "kv"}`);
  const filled = await fill(home.path, url, auditEntries, deadLetters);
  await using server = await startToolgateHttp(home.path, {
    TOOLGATE_API_TOKEN: TOKEN,
    ...(url ? { TOOLGATE_DATABASE_URL: url } : {}),
  });
  await mirrorWritten(home.path);
  const cookie = await signIn(server.url);
  const out: Record<string, PageFigures> = {};
  for (const [name, path] of Object.entries(pages(filled))) {
    out[name] = await measure(server.url, cookie, path, requests, Math.min(3, requests));
  }
  // The dead-letter page after the last one (its `after` cursor).
  const page = await fetch(`${server.url}/ui/dlq`, { headers: { cookie } }).then((r) => r.text());
  const after = /href="\/ui\/dlq\?after=([^"&]+)/.exec(page)?.[1];
  if (after) {
    out.dlq_next = await measure(server.url, cookie, `/ui/dlq?after=${after}`, requests, 1);
  }
  return {
    audit_entries: auditEntries,
    dead_letters: deadLetters,
    audit_fill_ms: filled.auditMs,
    dlq_fill_ms: filled.dlqMs,
    pages: out,
  };
}

/**
 * Console page timings with a full store, KV and PostgreSQL. Bounded:
 * filling takes about 10 to 30 s per adapter; each page gets `requests`
 * sequential requests.
 */
export async function benchConsolePages(
  options: ConsolePagesBenchOptions,
): Promise<ConsolePagesResult> {
  const {
    mode,
    auditEntries = mode === "smoke" ? 5000 : 100_000,
    deadLetters = mode === "smoke" ? 500 : 10_000,
    requests = mode === "full" ? 100 : mode === "quick" ? 30 : 3,
    adapters = ["kv", "postgres"],
  } = options;
  for (
    const [name, value] of [["auditEntries", auditEntries], ["deadLetters", deadLetters], [
      "requests",
      requests,
    ]] as const
  ) {
    if (!Number.isInteger(value) || value < 1) {
      throw new RangeError(`Invalid ${name}: ${value} is not a positive integer`);
    }
  }
  const result: ConsolePagesResult = { requests_per_page: requests };
  if (adapters.includes("kv")) {
    result.kv = await adapterRun(undefined, auditEntries, deadLetters, requests);
  }
  if (adapters.includes("postgres")) {
    await using pg = await startBenchPostgres();
    const url = await pg.database("console_pages");
    result.postgres = await adapterRun(url, auditEntries, deadLetters, requests);
    result.postgres_version = pg.version;
  }
  return result;
}

/** The table rows of {@linkcode benchConsolePages}: each page's median against the target. */
export function consolePagesFigures(r: ConsolePagesResult): Figure[] {
  const out: Figure[] = [];
  for (const adapter of ["kv", "postgres"] as const) {
    const f = r[adapter];
    if (!f) continue;
    const name = adapter === "kv" ? "KV" : "PostgreSQL";
    const size = `${Math.round(f.audit_entries / 1000)}k audit, ${
      Math.round(f.dead_letters / 1000)
    }k DLQ`;
    for (const [page, p] of Object.entries(f.pages)) {
      out.push({
        scenario: "console_pages",
        figure: `${name}: ${page} median ms (${size})`,
        toolgate: p.median_ms,
        baseline_name: "p95",
        baseline: p.p95_ms,
        ratio: null,
        target: `< ${CONSOLE_PAGE_LIMIT_MS} ms`,
        met: p.median_ms < CONSOLE_PAGE_LIMIT_MS,
      });
    }
  }
  return out;
}

if (import.meta.main) {
  const args = Deno.args;
  const mode = modeFromArgs(args);
  const number = (flag: string) => {
    const raw = args.find((a) => a.startsWith(`--${flag}=`))?.slice(flag.length + 3);
    return raw === undefined ? undefined : Number(raw);
  };
  const adapters = args.find((a) => a.startsWith("--adapters="))?.slice(11).split(",") as
    | ("kv" | "postgres")[]
    | undefined;
  const result = await benchConsolePages({
    mode,
    auditEntries: number("audit"),
    deadLetters: number("dlq"),
    adapters,
  });
  console.log(JSON.stringify(result, null, 2));
}
