/** @jsxImportSource hono/jsx */
/**
 * The console's pages of what an administrator decides on: the pins of
 * upstream definitions (a quarantined one's diff, approve or reject) and
 * the calls held for approval (approve or deny, with a reason).
 *
 * @module
 */
import type { ApprovalView } from "../../approvals/mod.ts";
import type { PinDiff, PinView } from "../../pins/mod.ts";
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

/** How a pin's status reads: `changed` is quarantined, `new` is held. */
const PIN_STATUS: Record<PinView["status"], { label: string; tone: string }> = {
  pinned: { label: "pinned", tone: "ok" },
  changed: { label: "quarantined", tone: "bad" },
  new: { label: "held", tone: "warn" },
  rejected: { label: "rejected", tone: "bad" },
};

/** Where each status comes in the list: those waiting for a decision first. */
const PIN_ORDER: Record<PinView["status"], number> = { changed: 0, new: 1, rejected: 2, pinned: 3 };

const APPROVAL_TONE: Record<ApprovalView["status"], string> = {
  pending: "warn",
  approved: "ok",
  denied: "bad",
  expired: "muted",
};

/** Longest arguments shown in a list's cell, in characters (the approval's page shows them all). */
const ARGS_SHOWN = 120;

/** Whether a pin has a definition waiting for a decision (approve or reject it). */
function isWaiting(pin: PinView): boolean {
  return pin.status === "changed" || pin.status === "new";
}

/** Pins in the order the list shows them: waiting first, then rejected, then pinned; latest first. */
export function sortPins(pins: readonly PinView[]): PinView[] {
  return [...pins].sort((a, b) =>
    PIN_ORDER[a.status] - PIN_ORDER[b.status] || b.updated_at.localeCompare(a.updated_at) ||
    a.tool.localeCompare(b.tool)
  );
}

function pinHref(tool: string): string {
  return `${UI}/pins/${encodeURIComponent(tool)}`;
}

function approvalHref(id: string): string {
  return `${UI}/approvals/${encodeURIComponent(id)}`;
}

function PinStatus({ status }: { status: PinView["status"] }) {
  const { label, tone } = PIN_STATUS[status];
  return <span class={`pill ${tone}`}>{label}</span>;
}

/** The pins page: every pin, those waiting first; `pins` absent: pinning is off. */
export function PinsPage(props: { frame: PageFrame; pins?: PinView[]; flash?: Flash }) {
  const { pins } = props;
  const waiting = pins?.filter(isWaiting).length ?? 0;
  return (
    <Layout title="Pins" page="pins" frame={props.frame} flash={props.flash}>
      {!pins
        ? (
          <p>
            Pinning is off (<code>plugins.upstream_settings.pinning: off</code>): what upstreams
            offer is listed as it comes, neither pinned nor quarantined.
          </p>
        )
        : (
          <div id="pins" data-live>
            <p class={waiting ? "warn" : "muted"}>
              {waiting} waiting for a decision; {pins.length}{" "}
              pins of upstream tools, prompts and resource templates.
            </p>
            {pins.length === 0 ? <p>No pins yet: no upstream has offered anything.</p> : (
              <DataTable
                head={["Status", "Tool", "Kind", "Plugin", "Changed", "Updated", "Decided by"]}
                label="Pins"
              >
                {pins.map((pin) => (
                  <tr class="pin">
                    <td>
                      <PinStatus status={pin.status} />
                    </td>
                    <td>
                      <a href={pinHref(pin.tool)}>{pin.tool}</a>
                    </td>
                    <td>{pin.kind}</td>
                    <td>{pin.plugin}</td>
                    <td>{pin.changed.join(", ")}</td>
                    <td>
                      <Time iso={pin.updated_at} />
                    </td>
                    <td>{pin.decided_by ?? <span class="muted">—</span>}</td>
                  </tr>
                ))}
              </DataTable>
            )}
          </div>
        )}
    </Layout>
  );
}

/** The class of a line of a unified diff: added, removed, a hunk's head, a file's head, context. */
function diffClass(line: string): string | undefined {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("===")) {
    return "diff-file";
  }
  if (line.startsWith("+")) return "diff-add";
  if (line.startsWith("-")) return "diff-del";
  if (line.startsWith("@@")) return "diff-hunk";
  return undefined;
}

/** A unified diff, its added and removed lines marked (`diff-add`, `diff-del`). */
function Diff({ diff, label }: { diff: string; label: string }) {
  const lines = diff.replace(/\n$/, "").split("\n");
  return (
    <pre class="diff" tabindex={0} aria-label={label}>
      {lines.map((line, i) => <span key={i} class={diffClass(line)}>{`${line}\n`}</span>)}
    </pre>
  );
}

/** A pin: what changed, the diff of the pinned definition against the offered one, and the decision. */
export function PinPage(props: { frame: PageFrame; pin: PinDiff; flash?: Flash }) {
  const { pin, frame } = props;
  const base = pinHref(pin.tool);
  return (
    <Layout title={pin.tool} page="pins" frame={frame} flash={props.flash}>
      <p>
        <PinStatus status={pin.status} /> {pin.kind} <code>{pin.name}</code> of plugin{" "}
        {pin.plugin}, updated <Time iso={pin.updated_at} />
        {pin.decided_by ? `, last decided by ${pin.decided_by}` : ""}.
      </p>
      {pin.status === "pinned" && <p>Nothing waits for a decision: what is offered is the pin.</p>}
      {pin.status === "rejected" && (
        <p>
          The offered definition was rejected: it stays out while its upstream offers it. Approving
          it now makes it the pin.
        </p>
      )}
      {pin.status !== "pinned" && (
        <>
          <p>
            Changed:{" "}
            {pin.changed.join(", ")}. Approving pins what the upstream offers now (it is listed
            again); rejecting keeps it out while it is offered.
          </p>
          <div class="actions">
            <Action
              action={`${base}/approve`}
              csrf={frame.csrf}
              label="Approve"
              primary
              name={`Approve ${pin.tool}`}
            />
            {isWaiting(pin) && (
              <Action
                action={`${base}/reject`}
                csrf={frame.csrf}
                label="Reject"
                name={`Reject ${pin.tool}`}
              />
            )}
          </div>
          <h2>Diff</h2>
          <p class="muted">
            <span class="diff-del">-</span> pinned, <span class="diff-add">+</span> offered now.
          </p>
          <Diff diff={pin.diff} label={`Diff of ${pin.tool}`} />
        </>
      )}
      <h2>SHA-256</h2>
      <p>
        Pinned: <code>{pin.pinned_sha256 ?? "none yet"}</code>
        <br />
        Offered: <code>{pin.pending_sha256 ?? "the pinned one"}</code>
      </p>
      <p>
        <a href={`${UI}/pins`}>All pins</a>
      </p>
    </Layout>
  );
}

/** How long ago `iso` was, in the largest whole unit (`42 s`, `3 min`, `5 h`, `2 d`). */
export function age(iso: string, now: number): string {
  const seconds = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h`;
  return `${Math.floor(seconds / 86_400)} d`;
}

function callerOf(approval: ApprovalView): string {
  const { kind, name, id } = approval.caller as { kind?: string; name?: string; id?: string };
  return name ?? id ?? kind ?? "?";
}

/** Arguments on one line, cut to {@linkcode ARGS_SHOWN} characters. */
function ArgsCell({ args }: { args: Record<string, unknown> }) {
  const text = JSON.stringify(args);
  return <code>{text.length > ARGS_SHOWN ? `${text.slice(0, ARGS_SHOWN - 1)}…` : text}</code>;
}

function ApprovalStatus({ status }: { status: ApprovalView["status"] }) {
  return <span class={`pill ${APPROVAL_TONE[status]}`}>{status}</span>;
}

/**
 * The approvals page: pending approvals, then recently decided or expired
 * ones; `pending` absent: approvals are not served here.
 *
 * @param now The clock the ages are counted from, ms since the epoch.
 */
export function ApprovalsPage(
  props: {
    frame: PageFrame;
    pending?: ApprovalView[];
    recent?: ApprovalView[];
    now: number;
    flash?: Flash;
  },
) {
  const { pending, recent = [], now } = props;
  return (
    <Layout title="Approvals" page="approvals" frame={props.frame} flash={props.flash}>
      {!pending ? <p>Approvals are not served by this console.</p> : (
        <>
          <section aria-labelledby="pending-h" id="approvals-pending" data-live>
            <h2 id="pending-h">Pending ({pending.length})</h2>
            {pending.length === 0 ? <p>No call waits for approval.</p> : (
              <DataTable
                head={["Tool", "Arguments", "Caller", "Policy", "Reason", "Age", "Expires"]}
                label="Pending approvals"
              >
                {pending.map((a) => (
                  <tr class="approval">
                    <td>
                      <a href={approvalHref(a.id)} aria-label={`${a.tool} (${a.id})`}>
                        {a.tool}
                      </a>
                    </td>
                    <td>
                      <ArgsCell args={a.args} />
                    </td>
                    <td>{callerOf(a)}</td>
                    <td>{a.policy}</td>
                    <td>{a.reason ?? <span class="muted">—</span>}</td>
                    <td>
                      <time datetime={a.created_at}>{age(a.created_at, now)}</time>
                    </td>
                    <td>
                      <Time iso={a.expires_at} />
                    </td>
                  </tr>
                ))}
              </DataTable>
            )}
          </section>
          <section aria-labelledby="recent-h" id="approvals-recent" data-live>
            <h2 id="recent-h">Recently decided or expired</h2>
            {recent.length === 0 ? <p>None yet.</p> : (
              <DataTable
                head={["Status", "Tool", "Arguments", "Caller", "Policy", "Decided", "Result"]}
                label="Decided approvals"
              >
                {recent.map((a) => (
                  <tr class="approval">
                    <td>
                      <ApprovalStatus status={a.status} />
                    </td>
                    <td>
                      <a href={approvalHref(a.id)} aria-label={`${a.tool} (${a.id})`}>
                        {a.tool}
                      </a>
                    </td>
                    <td>
                      <ArgsCell args={a.args} />
                    </td>
                    <td>{callerOf(a)}</td>
                    <td>{a.policy}</td>
                    <td>
                      {a.status === "expired"
                        ? (
                          <>
                            expired <Time iso={a.expires_at} />
                          </>
                        )
                        : (
                          <>
                            by {a.decided_by ?? "?"} <Time iso={a.decided_at ?? undefined} />
                            {a.decision_reason ? `: ${a.decision_reason}` : ""}
                          </>
                        )}
                    </td>
                    <td>
                      <ApprovalResult approval={a} />
                    </td>
                  </tr>
                ))}
              </DataTable>
            )}
          </section>
        </>
      )}
    </Layout>
  );
}

/** What became of an approval's call: running, its outcome, or nothing (not approved). */
function ApprovalResult({ approval: a }: { approval: ApprovalView }) {
  if (a.running) return <span class="warn">running</span>;
  if (a.result) {
    return a.result.ok
      ? <span class="ok">ran</span>
      : <span class="bad">failed: {a.result.error?.code ?? "?"}</span>;
  }
  return a.status === "approved"
    ? <span class="muted">not run yet</span>
    : <span class="muted">—</span>;
}

/**
 * An approval: its call's arguments and, while it is pending, the form
 * that approves or denies it with a reason.
 *
 * @param now The clock the age is counted from, ms since the epoch.
 */
export function ApprovalPage(
  props: { frame: PageFrame; approval: ApprovalView; now: number; flash?: Flash },
) {
  const { approval: a, frame } = props;
  const base = approvalHref(a.id);
  return (
    <Layout title={`Approval of ${a.tool}`} page="approvals" frame={frame} flash={props.flash}>
      <p>
        <ApprovalStatus status={a.status} /> <code>{a.id}</code>: a call of <code>{a.tool}</code>
        {" "}
        (plugin {a.plugin}) by {callerOf(a)} over {a.transport}
        {a.server ? ` through server ${a.server}` : ""}, held by policy <code>{a.policy}</code>
        {a.reason ? `: ${a.reason}` : ""}.
      </p>
      <DataTable head={["Requested", "Age", "Expires", "Approvers", "Decided", "Result"]}>
        <tr>
          <td>
            <Time iso={a.created_at} />
          </td>
          <td>{age(a.created_at, props.now)}</td>
          <td>
            <Time iso={a.expires_at} />
          </td>
          <td>{a.approvers.join(", ")}</td>
          <td>
            {a.decided_by
              ? (
                <>
                  {a.status} by {a.decided_by} <Time iso={a.decided_at ?? undefined} />
                  {a.decision_reason ? `: ${a.decision_reason}` : ""}
                </>
              )
              : <span class="muted">{a.status === "expired" ? "expired" : "not yet"}</span>}
          </td>
          <td>
            <ApprovalResult approval={a} />
          </td>
        </tr>
      </DataTable>
      {a.status === "pending" && (
        <form method="post" action={`${base}/approve`} class="card decision">
          <Csrf token={frame.csrf} />
          <label for="reason">Reason (optional, recorded with the decision)</label>
          <input id="reason" name="reason" maxlength={1024} />
          <p class="actions">
            <button type="submit" class="primary">Approve</button>
            <button type="submit" formaction={`${base}/deny`}>Deny</button>
          </p>
        </form>
      )}
      <h2>Arguments</h2>
      <p class="muted">
        Redacted as the audit log redacts them; the call runs with its own. SHA-256{" "}
        <code>{a.args_sha256}</code>.
      </p>
      <pre id="approval-args" tabindex={0} aria-label="Arguments">{json(a.args)}</pre>
      {a.result && (
        <>
          <h2>Result</h2>
          <pre id="approval-result" tabindex={0} aria-label="Result">{json(a.result)}</pre>
        </>
      )}
      <p>
        <a href={`${UI}/approvals`}>All approvals</a>
      </p>
    </Layout>
  );
}

/** The flash of a pin decided from the console. */
export function pinFlash(decision: "approved" | "rejected", pins: PinView[]): Flash {
  const names = pins.map((pin) => pin.tool).join(", ");
  return decision === "approved"
    ? { kind: "ok", text: `Approved ${names}: its offered definition is pinned and listed again` }
    : { kind: "ok", text: `Rejected ${names}: it stays out while its upstream offers it` };
}

/** The flash of an approval decided from the console. */
export function approvalFlash(approval: ApprovalView): Flash {
  const reason = approval.decision_reason ? ` (${approval.decision_reason})` : "";
  return approval.status === "approved"
    ? {
      kind: "ok",
      text:
        `Approved the call of ${approval.tool}${reason}: it runs once (approval ${approval.id})`,
    }
    : {
      kind: "ok",
      text: `Denied the call of ${approval.tool}${reason}: its caller gets APPROVAL_DENIED ` +
        `(approval ${approval.id})`,
    };
}
