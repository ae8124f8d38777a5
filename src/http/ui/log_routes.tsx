/** @jsxImportSource hono/jsx */
/**
 * The console's log pages: incoming endpoints with their recent payloads and
 * failed jobs (replay), and the audit log (filters, verify, its progress stream).
 *
 * @module
 */
import { AUDIT_KINDS, type AuditEntry, verifyAuditChain } from "../../audit/mod.ts";
import { GatewayError } from "../../errors/mod.ts";
import { listFailedJobs, replayFailedJobs } from "../../webhooks/mod.ts";
import { AuditPage, IncomingPage, type IncomingPayload } from "./log_views.tsx";
import { type ConsolePages, type Ctx, html } from "./_page_kit.tsx";
import { UI } from "./paths.ts";
import type { Flash } from "./views.tsx";

/** Entries the incoming page reads back from the audit log's head. */
const INCOMING_SCAN = 500;
/** Recent incoming payloads shown. */
const INCOMING_SHOWN = 50;
/** Failed incoming jobs shown (the count shows them all). */
const FAILED_SHOWN = 100;
/** Entries per audit page. */
const AUDIT_PAGE = 50;
/**
 * Most entries a filtered audit page reads (about 20 ms on a 2-core
 * machine): a rare filter gives a short page and **Next entries** searches on.
 */
const AUDIT_SCAN = 2000;

/** What the log pages need besides the shared kit. */
export interface LogPagesOptions {
  /** Tells the incoming router that replayed jobs wait. @default none */
  wakeIncoming?: () => void;
  /** Aborts when the server stops: ends a running verify's stream. */
  stopping: AbortSignal;
}

/** `datetime-local` (taken as UTC) or ISO 8601 → ISO 8601, or undefined when empty. */
function sinceOf(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(raw)
    ? `${raw}${raw.length === 16 ? ":00" : ""}Z`
    : raw;
  if (Number.isNaN(Date.parse(iso))) {
    throw new GatewayError(
      "USAGE",
      `Invalid since: ${JSON.stringify(raw)} is not a time; use YYYY-MM-DDTHH:MM (UTC)`,
    );
  }
  return new Date(iso).toISOString();
}

/** Mounts `/ui/incoming…` and `/ui/audit…` on `pages.app`. */
export function mountLogPages(pages: ConsolePages, options: LogPagesOptions): void {
  const { app, store, audit, frameOf, pathOf } = pages;

  const incomingPage = async (c: Ctx, flash?: Flash) => {
    const endpoints = await store.webhooks.listIncoming();
    const [rows, failed, head] = await Promise.all([
      Promise.all(endpoints.map(async (endpoint) => ({
        endpoint,
        stats: await store.webhooks.incomingStats(endpoint.id),
      }))),
      listFailedJobs(store),
      audit.head(),
    ]);
    const after = Math.max(0, head.head_seq - INCOMING_SCAN);
    const { entries } = await audit.list({ after, limit: INCOMING_SCAN });
    const calls = new Map<string, AuditEntry>();
    for (const entry of entries) {
      if (entry.kind === "tool.call" && entry.session_id) calls.set(entry.session_id, entry);
    }
    const payloads: IncomingPayload[] = entries
      .filter((e) => e.kind === "webhook.incoming")
      .reverse()
      .slice(0, INCOMING_SHOWN)
      .map((entry) => ({
        entry,
        handled: entry.session_id ? calls.get(entry.session_id) : undefined,
      }));
    return html(
      c,
      <IncomingPage
        frame={frameOf(c, `${UI}/incoming`)}
        rows={rows}
        payloads={payloads}
        scanned={entries.length}
        failed={failed.slice(0, FAILED_SHOWN)}
        failedCount={failed.length}
        flash={flash}
      />,
    );
  };
  app.get(`${UI}/incoming`, (c) => incomingPage(c));
  const replayIncoming = async (c: Ctx, target: string) => {
    const { replayed } = await replayFailedJobs(store, target);
    if (replayed.length) options.wakeIncoming?.();
    return incomingPage(c, {
      kind: replayed.length ? "ok" : "info",
      text: `Replay: ${replayed.length} failed payload${replayed.length === 1 ? "" : "s"} queued ` +
        "for their handlers again",
    });
  };
  app.post(`${UI}/incoming/failed/replay`, (c) => replayIncoming(c, "all"));
  app.post(`${UI}/incoming/failed/:id/replay`, (c) => replayIncoming(c, c.req.param("id")));

  const auditPage = async (c: Ctx, flash?: Flash) => {
    const tool = c.req.query("tool") || undefined;
    const rawKind = c.req.query("kind") || undefined;
    if (rawKind && !AUDIT_KINDS.includes(rawKind)) {
      throw new GatewayError(
        "USAGE",
        `Invalid kind: ${JSON.stringify(rawKind)}; expected one of ${AUDIT_KINDS.join(", ")}`,
      );
    }
    const caller = c.req.query("caller") || undefined;
    const sinceRaw = c.req.query("since") || undefined;
    const since = sinceOf(sinceRaw);
    const afterRaw = c.req.query("after");
    const head = await audit.head();
    let after = afterRaw === undefined ? undefined : Number(afterRaw);
    if (after !== undefined && (!Number.isInteger(after) || after < 0)) {
      throw new GatewayError("USAGE", `Invalid after: ${JSON.stringify(afterRaw)} is not a seq`);
    }
    // Unfiltered, the page starts with the latest entries; filtered, from the start.
    if (after === undefined && !tool && !rawKind && !caller && !since) {
      after = Math.max(0, head.head_seq - AUDIT_PAGE);
    }
    const page = await audit.list({
      after,
      tool,
      kind: rawKind,
      caller,
      since,
      limit: AUDIT_PAGE,
      maxScan: AUDIT_SCAN,
    });
    return html(
      c,
      <AuditPage
        frame={frameOf(c, pathOf(c).startsWith(`${UI}/audit/`) ? `${UI}/audit` : pathOf(c))}
        kinds={AUDIT_KINDS}
        filters={{ tool, kind: rawKind, caller, since: sinceRaw }}
        entries={page.entries}
        next={page.next_after}
        headSeq={head.head_seq}
        pageSize={AUDIT_PAGE}
        flash={flash}
      />,
    );
  };
  app.get(`${UI}/audit`, (c) => auditPage(c));
  app.post(`${UI}/audit/verify`, async (c) => {
    const result = await verifyAuditChain(store, { signal: c.req.raw.signal });
    const flash: Flash = result.ok
      ? {
        kind: "ok",
        text: `Intact: ${result.count} entries verified up to seq ${result.head_seq}`,
      }
      : {
        kind: "bad",
        text: `Broken at seq ${result.seq} (${result.reason}): ${result.message}`,
      };
    return auditPage(c, flash);
  });
  app.get(`${UI}/audit/verify/stream`, (c) => {
    const encoder = new TextEncoder();
    const signal = AbortSignal.any([c.req.raw.signal, options.stopping]);
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        const send = (event: string, data: unknown) => {
          try {
            controller.enqueue(
              encoder.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
            );
          } catch {
            // The client went away.
          }
        };
        try {
          const result = await verifyAuditChain(store, {
            signal,
            onProgress: (progress) => send("progress", progress),
          });
          send("done", result);
        } catch (error) {
          send("done", {
            ok: false,
            seq: 0,
            reason: "stopped",
            message: (error as Error).message,
          });
        }
        try {
          controller.close();
        } catch {
          // Already cancelled.
        }
      },
    });
    return new Response(body, {
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
      },
    });
  });
}
