/** @jsxImportSource hono/jsx */
/**
 * Console views of what was received and recorded: incoming endpoints with
 * their payloads and failed jobs, and the audit log. Rendered server-side
 * with Hono JSX, in the frame of {@link ./views.tsx}.
 *
 * @module
 */
import type { AuditEntry } from "../../audit/mod.ts";
import type { IncomingStats, IncomingWebhook } from "../../store/mod.ts";
import type { FailedJobView } from "../../webhooks/mod.ts";
import { UI } from "./paths.ts";
import {
  Action,
  Csrf,
  DataTable,
  type Flash,
  json,
  Layout,
  type PageFrame,
  Time,
} from "./views.tsx";

/** An incoming endpoint and its counters. */
export interface IncomingRow {
  endpoint: IncomingWebhook;
  stats: IncomingStats;
}

/** A recent incoming payload from the audit log, with its handler's outcome when found. */
export interface IncomingPayload {
  entry: AuditEntry;
  handled?: AuditEntry;
}

/** Incoming endpoints, their counters and recent payloads. */
export function IncomingPage(
  props: {
    frame: PageFrame;
    rows: IncomingRow[];
    payloads: IncomingPayload[];
    scanned: number;
    failed: FailedJobView[];
    failedCount: number;
    flash?: Flash;
  },
) {
  const { csrf } = props.frame;
  return (
    <Layout title="Incoming webhooks" page="incoming" frame={props.frame} flash={props.flash}>
      <div id="incoming" data-live>
        {props.rows.length === 0
          ? (
            <p>
              No incoming endpoints. Add one with <code>toolgate webhooks create</code>.
            </p>
          )
          : (
            <DataTable
              head={[
                "Endpoint",
                "Path",
                "Handler",
                "Received",
                "Rejected",
                "Failed",
                "Last received",
              ]}
            >
              {props.rows.map(({ endpoint: e, stats: s }) => (
                <tr>
                  <td>{e.name}</td>
                  <td>
                    <code>{e.path}</code>
                  </td>
                  <td>{e.handler}</td>
                  <td>{s.received}</td>
                  <td class={s.rejected ? "warn" : undefined}>{s.rejected}</td>
                  <td class={s.failed ? "bad" : undefined}>{s.failed}</td>
                  <td>
                    <Time iso={s.last_received_at} />
                  </td>
                </tr>
              ))}
            </DataTable>
          )}
        <h2>Recent payloads</h2>
        <p class="muted">
          From the last {props.scanned} audit entries: each accepted payload and its handler's call.
        </p>
        {props.payloads.length === 0
          ? <p>No payloads among them.</p>
          : (
            <DataTable head={["At", "Endpoint", "Handler", "Outcome", "Payload"]}>
              {props.payloads.map(({ entry, handled }) => {
                const o = entry.outcome as Record<string, unknown>;
                const h = handled?.outcome as Record<string, unknown> | undefined;
                const outcome = o.skipped
                  ? <span class="muted">skipped: {String(o.skipped)}</span>
                  : !h
                  ? <span class="warn">accepted, not handled yet</span>
                  : h.ok
                  ? <span class="ok">handled in {String(h.latency_ms)} ms</span>
                  : <span class="bad">failed: {String(h.error_code)} {String(h.error)}</span>;
                return (
                  <tr>
                    <td>
                      <Time iso={entry.timestamp} />
                    </td>
                    <td>{String(o.endpoint ?? o.endpoint_id ?? "")}</td>
                    <td>{entry.tool}</td>
                    <td>{outcome}</td>
                    <td>
                      <details>
                        <summary>Show</summary>
                        <pre>{json(entry.input)}</pre>
                      </details>
                    </td>
                  </tr>
                );
              })}
            </DataTable>
          )}
      </div>
      <section aria-labelledby="failed-h" id="incoming-failed" data-live>
        <h2 id="failed-h">Failed payloads ({props.failedCount})</h2>
        {props.failed.length === 0
          ? <p>No failed payloads: every accepted payload was handled or is still being retried.</p>
          : (
            <>
              <Action
                action={`${UI}/incoming/failed/replay`}
                csrf={csrf}
                label="Replay all"
                primary
              />
              <DataTable
                head={["Failed at", "Endpoint", "Handler", "Attempts", "Last error", "Actions"]}
              >
                {props.failed.map((job) => {
                  const last = job.attempts.at(-1);
                  return (
                    <tr class="failed-job">
                      <td>
                        <Time iso={job.failed_at} />
                      </td>
                      <td>
                        <code>{job.endpoint_path ?? job.endpoint_id}</code>
                      </td>
                      <td>{job.handler}</td>
                      <td>{job.attempts.length}</td>
                      <td class="bad">{last ? `${last.code}: ${last.message}` : ""}</td>
                      <td>
                        <Action
                          action={`${UI}/incoming/failed/${encodeURIComponent(job.id)}/replay`}
                          csrf={csrf}
                          label="Replay"
                          name={`Replay payload ${job.id}`}
                        />
                      </td>
                    </tr>
                  );
                })}
              </DataTable>
            </>
          )}
      </section>
    </Layout>
  );
}

/** Filters of the audit page. */
export interface AuditFilters {
  tool?: string;
  kind?: string;
  /** An API key's name or id, or a caller kind (`admin`, `key`, `local`). */
  caller?: string;
  since?: string;
}

/** The audit log, a page at a time, with filters and a verify. */
export function AuditPage(
  props: {
    frame: PageFrame;
    kinds: readonly string[];
    filters: AuditFilters;
    entries: AuditEntry[];
    next: number | null;
    headSeq: number;
    /** Entries a full page holds. */
    pageSize: number;
    flash?: Flash;
  },
) {
  const { filters } = props;
  const query = (after: number) => {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(filters)) if (value) params.set(key, value);
    params.set("after", String(after));
    return `${UI}/audit?${params}`;
  };
  return (
    <Layout title="Audit log" page="audit" frame={props.frame} flash={props.flash}>
      <section aria-labelledby="verify-h" class="card">
        <h2 id="verify-h" style="margin-top:0">Verify the chain</h2>
        <form
          id="verify-form"
          method="post"
          action={`${UI}/audit/verify`}
          data-stream={`${UI}/audit/verify/stream`}
        >
          <Csrf token={props.frame.csrf} />
          <button type="submit">Verify all {props.headSeq} entries</button>
        </form>
        <progress id="verify-progress" hidden aria-label="Verification progress"></progress>
        <p id="verify-status" role="status"></p>
      </section>
      <form
        method="get"
        action={`${UI}/audit`}
        class="filters"
        role="search"
        aria-label="Filter the audit log"
      >
        <div>
          <label for="f-tool">Tool</label>
          <input id="f-tool" name="tool" value={filters.tool ?? ""} />
        </div>
        <div>
          <label for="f-kind">Kind</label>
          <select id="f-kind" name="kind">
            <option value="">any</option>
            {props.kinds.map((k) => (
              <option key={k} value={k} selected={filters.kind === k}>{k}</option>
            ))}
          </select>
        </div>
        <div>
          <label for="f-caller">Caller</label>
          <input
            id="f-caller"
            name="caller"
            value={filters.caller ?? ""}
            aria-describedby="f-caller-help"
          />
          <span id="f-caller-help" class="sr-only">
            An API key's name or id, or admin, key or local
          </span>
        </div>
        <div>
          <label for="f-since">Since (UTC)</label>
          <input
            id="f-since"
            name="since"
            type="datetime-local"
            step="1"
            value={filters.since ?? ""}
          />
        </div>
        <div>
          <button type="submit">Filter</button> <a href={`${UI}/audit`}>Reset</a>
        </div>
      </form>
      <div id="audit" data-live>
        {props.next !== null && props.entries.length < props.pageSize && (
          <p>
            Searched up to seq {props.next} of {props.headSeq}: fewer than {props.pageSize}{" "}
            entries match so far; <strong>Next entries</strong> searches on.
          </p>
        )}
        {props.entries.length === 0
          ? <p>No entries match{props.next !== null ? " up to there" : ""}.</p>
          : (
            <DataTable head={["Seq", "At", "Kind", "Tool", "Caller", "Outcome", "Details"]}>
              {props.entries.map((e) => {
                const o = e.outcome as Record<string, unknown>;
                const ok = o.ok === true || o.accepted === true;
                return (
                  <tr class="audit-entry">
                    <td>{e.seq}</td>
                    <td>
                      <Time iso={e.timestamp} />
                    </td>
                    <td>{e.kind}</td>
                    <td>{e.tool}</td>
                    <td>{e.caller ? (e.caller.name ?? e.caller.kind) : ""}</td>
                    <td class={ok ? "ok" : "bad"}>
                      {ok ? "ok" : String(o.error_code ?? "failed")}
                    </td>
                    <td>
                      <details>
                        <summary>Show</summary>
                        <pre>{json({ session_id: e.session_id, input: e.input, outcome: e.outcome, entry_hash: e.entry_hash })}</pre>
                      </details>
                    </td>
                  </tr>
                );
              })}
            </DataTable>
          )}
      </div>
      <p class="actions">
        {props.next !== null && <a href={query(props.next)}>Next entries</a>}
        <a href={query(Math.max(0, props.headSeq - 50))}>Latest entries</a>
      </p>
    </Layout>
  );
}
