/** @jsxImportSource hono/jsx */
/**
 * The console's pages, rendered on the server with Hono's JSX.
 *
 * @module
 */
import type { Child } from "hono/jsx";
import type { AuditEntry } from "../../audit/mod.ts";
import type { PluginStatus, ToolInfo } from "../../gateway/mod.ts";
import type { IncomingStats, IncomingWebhook } from "../../store/mod.ts";
import type {
  DeliveryLogEntry,
  DlqEntry,
  FailedJobView,
  ReplayDlqResult,
  TestWebhookResult,
  WebhookView,
} from "../../webhooks/mod.ts";
import type { OverlapChoice, RotationTimes } from "./rotation.ts";
import type { MinuteStats } from "./stats.ts";

import { UI } from "./paths.ts";

/** Pages of the navigation. */
const NAV = [
  ["overview", "Overview", `${UI}`],
  ["tools", "Tools", `${UI}/tools`],
  ["pins", "Pins", `${UI}/pins`],
  ["approvals", "Approvals", `${UI}/approvals`],
  ["webhooks", "Webhooks", `${UI}/webhooks`],
  ["dlq", "Dead letters", `${UI}/dlq`],
  ["incoming", "Incoming", `${UI}/incoming`],
  ["audit", "Audit log", `${UI}/audit`],
] as const;

/** A page key of the navigation. */
export type PageKey = typeof NAV[number][0];

/** What every page needs besides its content. */
export interface PageFrame {
  /** The CSRF token of the session's forms. */
  csrf: string;
  /** Whether sign-out is offered (an API token is configured). */
  signedIn: boolean;
  /** The page's own GET address (live refreshes read it; a form's answer shows it). */
  path: string;
}

/** A message shown above a page's content. */
export interface Flash {
  kind: "ok" | "bad" | "info";
  text: Child;
}

/** The hidden field carrying a form's CSRF token. */
export function Csrf({ token }: { token: string }) {
  return <input type="hidden" name="_csrf" value={token} />;
}

/** A POST form with one button. */
export function Action(
  props: { action: string; csrf: string; label: string; primary?: boolean; name?: string },
) {
  return (
    <form method="post" action={props.action} class="inline">
      <Csrf token={props.csrf} />
      <button type="submit" class={props.primary ? "primary" : undefined} aria-label={props.name}>
        {props.label}
      </button>
    </form>
  );
}

/** A JSX node as Hono builds one (only what {@linkcode labelCells} reads). */
interface JsxNode {
  tag: unknown;
  props: Record<string, unknown>;
  children: unknown[];
}

function isNode(value: unknown): value is JsxNode {
  return typeof value === "object" && value !== null && "tag" in value && "children" in value;
}

/**
 * Gives each cell of the rows the name of its column (`data-label`): on a
 * narrow screen rows are stacked, each cell shown beside its column's name.
 */
function labelCells(rows: unknown, head: readonly string[]): void {
  if (Array.isArray(rows)) {
    for (const row of rows) labelCells(row, head);
    return;
  }
  if (!isNode(rows)) return;
  if (rows.tag !== "tr") {
    labelCells(rows.children, head);
    return;
  }
  let column = 0;
  const visit = (cells: unknown[]) => {
    for (const cell of cells) {
      if (Array.isArray(cell)) visit(cell);
      else if (isNode(cell) && (cell.tag === "td" || cell.tag === "th")) {
        const span = Number(cell.props.colspan ?? 1);
        if (span === 1 && head[column] && cell.props["data-label"] === undefined) {
          cell.props["data-label"] = head[column];
        }
        column += span;
      }
    }
  };
  visit(rows.children);
}

/** A table in its scrolling wrapper: column headers, then the rows given. */
export function DataTable(
  props: { head: string[]; label?: string; children?: unknown },
) {
  labelCells(props.children, props.head);
  return (
    <div class="table">
      <table aria-label={props.label}>
        <thead>
          <tr>
            {props.head.map((name) => <th key={name} scope="col">{name}</th>)}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

/** A value as the pages show it: indented JSON. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? "";
}

/** A time in UTC, or a dash when there is none. */
export function Time({ iso }: { iso: string | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  return <time datetime={iso}>{iso.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC")}</time>;
}

/** The page around every console view. */
export function Layout(
  props: {
    title: string;
    page?: PageKey;
    frame?: PageFrame;
    flash?: Flash;
    children?: Child;
  },
) {
  const { frame } = props;
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{props.title} · toolgate</title>
        <link rel="stylesheet" href={`${UI}/assets/console.css`} />
        <script src={`${UI}/assets/console.js`} defer></script>
      </head>
      <body data-events={frame ? `${UI}/events` : undefined} data-page={frame?.path}>
        <a class="skip" href="#main">Skip to content</a>
        <header>
          <a class="brand" href={UI}>toolgate</a>
          {frame && (
            <nav aria-label="Console">
              <ul>
                {NAV.map(([key, label, href]) => (
                  <li>
                    <a href={href} aria-current={props.page === key ? "page" : undefined}>
                      {label}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
          )}
          {frame?.signedIn && (
            <form method="post" action={`${UI}/logout`}>
              <Csrf token={frame.csrf} />
              <button type="submit">Sign out</button>
            </form>
          )}
        </header>
        <main id="main" tabindex={-1}>
          <h1>{props.title}</h1>
          {props.flash && (
            <div
              class={`notice ${props.flash.kind}`}
              role={props.flash.kind === "bad" ? "alert" : "status"}
            >
              {props.flash.text}
            </div>
          )}
          {props.children}
        </main>
      </body>
    </html>
  );
}

/** The sign-in form. */
export function SignInPage(props: { error?: string; next: string }) {
  return (
    <Layout
      title="Sign in"
      flash={props.error ? { kind: "bad", text: props.error } : undefined}
    >
      <form method="post" action={`${UI}/login`} class="signin card">
        <p>
          Enter the server's API token (<code>TOOLGATE_API_TOKEN</code>).
        </p>
        <input type="hidden" name="next" value={props.next} />
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="current-password"
          required
          autofocus
        />
        <p>
          <button type="submit" class="primary">Sign in</button>
        </p>
      </form>
    </Layout>
  );
}

/** Bars of calls per minute and a line of mean latency, as inline SVG. */
function CallChart({ minutes }: { minutes: MinuteStats[] }) {
  const width = 600, height = 120, step = width / minutes.length;
  const top = Math.max(1, ...minutes.map((m) => m.ok + m.failed));
  const slowest = Math.max(1, ...minutes.map((m) => m.mean_ms));
  const total = minutes.reduce((sum, m) => sum + m.ok + m.failed, 0);
  const failed = minutes.reduce((sum, m) => sum + m.failed, 0);
  const okCalls = minutes.filter((m) => m.ok > 0);
  const mean = okCalls.length
    ? Math.round(
      okCalls.reduce((s, m) => s + m.mean_ms * m.ok, 0) / okCalls.reduce((s, m) => s + m.ok, 0),
    )
    : 0;
  const line = minutes.map((m, i) =>
    `${(i * step + step / 2).toFixed(1)},${
      (height - (m.mean_ms / slowest) * (height - 4)).toFixed(1)
    }`
  ).join(" ");
  const summary = `${total} calls in the last hour, ${failed} failed, mean latency ${mean} ms; ` +
    `busiest minute ${top === 1 && total === 0 ? 0 : top} calls, slowest mean ${slowest} ms`;
  return (
    <figure>
      <div class="plot">
        <div class="y" aria-hidden="true">
          <span>{top === 1 && total === 0 ? 0 : top}/min</span>
          <span>0</span>
        </div>
        <svg
          class="chart"
          viewBox={`0 0 ${width} ${height}`}
          preserveAspectRatio="none"
          role="img"
          aria-label={summary}
        >
          {minutes.map((m, i) => {
            const okH = (m.ok / top) * height, badH = (m.failed / top) * height;
            return (
              <g>
                <rect class="ok" x={i * step + 1} width={step - 2} y={height - okH} height={okH} />
                <rect
                  class="bad"
                  x={i * step + 1}
                  width={step - 2}
                  y={height - okH - badH}
                  height={badH}
                />
              </g>
            );
          })}
          <polyline class="lat" points={line} />
        </svg>
        <div class="x" aria-hidden="true">
          <span>60 min ago</span>
          <span>30 min ago</span>
          <span>now</span>
        </div>
      </div>
      <figcaption class="muted">
        {summary}. Bars: calls per minute (red: failed), from 0 to the busiest minute; line: mean
        latency, from 0 to {slowest} ms. Counts the calls this instance served (pid {Deno.pid} on
        {" "}
        {Deno.hostname()}); other instances on the same database are not included.
      </figcaption>
    </figure>
  );
}

/** What the overview shows. */
export interface OverviewData {
  status: string;
  version: string;
  uptimeMs: number;
  toolCount: number;
  plugins: PluginStatus[];
  /** `destination`: the one destination whose circuit is open (`http_request`). */
  openCircuits: { tool_name: string; plugin: string; destination?: string; closes_at: string }[];
  minutes: MinuteStats[];
  webhooks: number;
  disabledWebhooks: number;
  dlqCount: number;
}

function stateClass(state: string): string {
  if (state === "ready" || state === "connected") return "ok";
  if (state === "error" || state === "closed") return "bad";
  return "warn";
}

/** The overview: health, plugins and upstreams, circuits, calls and latency. */
export function OverviewPage(props: { frame: PageFrame; data: OverviewData }) {
  const { data } = props;
  const minutes = Math.floor(data.uptimeMs / 60_000);
  return (
    <Layout title="Overview" page="overview" frame={props.frame}>
      <section aria-labelledby="health-h" id="health" data-live>
        <h2 id="health-h" class="sr-only">Health</h2>
        <div class="grid">
          <div class="card">
            <div class="muted">Status</div>
            <div class={`big ${data.status === "ok" ? "ok" : "warn"}`}>{data.status}</div>
            <div class="muted">v{data.version}, up {minutes} min</div>
          </div>
          <div class="card">
            <div class="muted">Tools</div>
            <div class="big">{data.toolCount}</div>
            <div class="muted">{data.plugins.length} plugins</div>
          </div>
          <div class="card">
            <div class="muted">Open circuits</div>
            <div class={`big ${data.openCircuits.length ? "bad" : "ok"}`}>
              {data.openCircuits.length}
            </div>
          </div>
          <div class="card">
            <div class="muted">Outgoing webhooks</div>
            <div class="big">{data.webhooks}</div>
            <div class={data.disabledWebhooks ? "warn" : "muted"}>
              {data.disabledWebhooks} disabled
            </div>
          </div>
          <div class="card">
            <div class="muted">Dead letters</div>
            <div class={`big ${data.dlqCount ? "bad" : "ok"}`}>
              {data.dlqCount}
            </div>
            <a href={`${UI}/dlq`}>Inspect</a>
          </div>
        </div>
        <h2>Calls per minute, last hour</h2>
        <CallChart minutes={data.minutes} />
        {data.openCircuits.length > 0 && (
          <>
            <h2>Open circuits</h2>
            <DataTable head={["Tool", "Plugin", "Destination", "Closes at"]}>
              {data.openCircuits.map((c) => (
                <tr>
                  <td>{c.tool_name}</td>
                  <td>{c.plugin}</td>
                  <td>{c.destination ?? <span class="muted">all calls</span>}</td>
                  <td>
                    <Time iso={c.closes_at} />
                  </td>
                </tr>
              ))}
            </DataTable>
          </>
        )}
        <h2>Plugins and upstreams</h2>
        <DataTable head={["Plugin", "State", "Tools", "Upstream", "Last error"]}>
          {data.plugins.map((p) => (
            <tr>
              <td>
                {p.name} <span class="muted">{p.version}</span>
              </td>
              <td>
                <span class={`pill ${stateClass(p.state)}`}>{p.state}</span>
              </td>
              <td>{p.tool_count}</td>
              <td>
                {p.upstream
                  ? (
                    <>
                      {p.upstream.transport}{" "}
                      <span class={`pill ${stateClass(p.upstream.connection)}`}>
                        {p.upstream.connection}
                      </span>
                      {p.upstream.restarts ? ` ${p.upstream.restarts} restarts` : ""}
                    </>
                  )
                  : <span class="muted">built-in</span>}
              </td>
              <td>{p.error ?? p.last_error ?? p.upstream?.last_error ?? ""}</td>
            </tr>
          ))}
        </DataTable>
      </section>
      <section aria-labelledby="live-h">
        <h2 id="live-h">Live events</h2>
        <p id="live-status" class="muted" role="status">Live: connecting…</p>
        <ul id="live-feed" aria-live="polite" aria-label="Recent events, newest first"></ul>
      </section>
    </Layout>
  );
}

/** The list of tools. */
export function ToolsPage(props: { frame: PageFrame; tools: ToolInfo[] }) {
  return (
    <Layout title="Tools" page="tools" frame={props.frame}>
      <DataTable head={["Tool", "Plugin", "Description"]}>
        {props.tools.map((t) => (
          <tr>
            <td>
              <a href={`${UI}/tools/${encodeURIComponent(t.name)}`}>{t.name}</a>
            </td>
            <td>{t.plugin}</td>
            <td>{t.description}</td>
          </tr>
        ))}
      </DataTable>
    </Layout>
  );
}

/** A tool's schema and a form to call it. */
export function ToolPage(
  props: {
    frame: PageFrame;
    tool: ToolInfo;
    args: string;
    result?: { ok: boolean; body: unknown; latencyMs?: number };
    flash?: Flash;
  },
) {
  const { tool, result } = props;
  return (
    <Layout title={tool.name} page="tools" frame={props.frame} flash={props.flash}>
      <p>
        {tool.description} <span class="muted">(plugin {tool.plugin})</span>
      </p>
      <h2>Try it</h2>
      <form method="post" action={`${UI}/tools/${encodeURIComponent(tool.name)}`}>
        <Csrf token={props.frame.csrf} />
        <label for="arguments">Arguments (a JSON object)</label>
        <textarea
          id="arguments"
          name="arguments"
          spellcheck={false}
          aria-describedby="arguments-help"
        >
          {props.args}
        </textarea>
        <p id="arguments-help" class="muted">
          Checked against the input schema below; the call is audited like any other.
        </p>
        <button type="submit" class="primary">Call {tool.name}</button>
      </form>
      {result && (
        <section aria-labelledby="result-h">
          <h2 id="result-h">
            Result{" "}
            <span class={`pill ${result.ok ? "ok" : "bad"}`}>{result.ok ? "ok" : "error"}</span>
            {result.latencyMs !== undefined && <span class="muted">{result.latencyMs} ms</span>}
          </h2>
          <pre id="tool-result" tabindex={0}>{json(result.body)}</pre>
        </section>
      )}
      <h2>Input schema</h2>
      <pre tabindex={0}>{json(tool.inputSchema)}</pre>
    </Layout>
  );
}

/** An outgoing webhook and its recent attempts. */
export interface WebhookRow {
  webhook: WebhookView;
  attempts: DeliveryLogEntry[];
}

/** Outgoing webhooks with their attempts and actions. */
export function WebhooksPage(
  props: { frame: PageFrame; rows: WebhookRow[]; flash?: Flash },
) {
  const { csrf } = props.frame;
  return (
    <Layout title="Outgoing webhooks" page="webhooks" frame={props.frame} flash={props.flash}>
      {props.rows.length === 0 && (
        <p>
          No outgoing webhooks. Add one with <code>toolgate webhooks add --url &lt;url&gt;</code> or
          {" "}
          <code>POST /webhooks</code>.
        </p>
      )}
      <div id="webhooks" data-live>
        {props.rows.map(({ webhook: w, attempts }) => {
          const base = `${UI}/webhooks/${encodeURIComponent(w.id)}`;
          return (
            <section class="card" aria-labelledby={`h-${w.id}`} style="margin-bottom:1rem">
              <h2 id={`h-${w.id}`} style="margin-top:0">
                <code>{w.url}</code> {w.disabled
                  ? <span class="pill bad">disabled ({w.disabled.reason})</span>
                  : <span class="pill ok">enabled</span>}
              </h2>
              <p class="muted">
                {w.id} · events {w.events === "*" ? "all" : w.events.join(", ")} ·{" "}
                {w.has_secret ? "signed" : "unsigned"}
                {w.description ? ` · ${w.description}` : ""}
              </p>
              <div class="actions">
                <Action
                  action={`${base}/test`}
                  csrf={csrf}
                  label="Send test"
                  name={`Send test to ${w.url}`}
                />
                {w.disabled
                  ? (
                    <Action
                      action={`${base}/enable`}
                      csrf={csrf}
                      label="Enable"
                      name={`Enable ${w.url}`}
                    />
                  )
                  : (
                    <Action
                      action={`${base}/disable`}
                      csrf={csrf}
                      label="Disable"
                      name={`Disable ${w.url}`}
                    />
                  )}
                <form method="get" action={`${base}/rotate`} class="inline">
                  <button type="submit" aria-label={`Rotate secret of ${w.url}`}>
                    Rotate secret…
                  </button>
                </form>
                <a
                  href={`${UI}/dlq?webhook=${encodeURIComponent(w.id)}`}
                  aria-label={`Dead letters of ${w.url}`}
                >
                  Dead letters
                </a>
              </div>
              <h3>Recent attempts</h3>
              {attempts.length === 0 ? <p class="muted">No attempts yet.</p> : (
                <DataTable
                  head={["At", "Event", "Attempt", "Result", "Latency", "Error"]}
                  label={`Recent attempts to ${w.url}`}
                >
                  {attempts.map((a) => (
                    <tr class="attempt">
                      <td>
                        <Time iso={a.at} />
                      </td>
                      <td>
                        {a.event_type} <span class="muted">{a.event_id}</span>
                      </td>
                      <td>{a.attempt}</td>
                      <td class={a.ok ? "ok" : "bad"}>
                        {a.status ?? "—"} {a.ok ? "delivered" : "failed"}
                      </td>
                      <td>{a.latency_ms} ms</td>
                      <td>{a.error ?? ""}</td>
                    </tr>
                  ))}
                </DataTable>
              )}
            </section>
          );
        })}
      </div>
    </Layout>
  );
}

/** The flash of a webhook test. */
export function testFlash(result: TestWebhookResult): Flash {
  return result.ok
    ? { kind: "ok", text: `Test delivered: HTTP ${result.status} in ${result.latency_ms} ms` }
    : {
      kind: "bad",
      text: `Test failed${result.status ? `: HTTP ${result.status}` : ""}${
        result.error ? `: ${result.error}` : ""
      } (${result.latency_ms} ms)`,
    };
}

/** What a rotation changes, and when, in words (the confirmation's and the flash's). */
function RotationEffect(props: { times: RotationTimes; hadSecret: boolean }) {
  const { previousUntil, switchAt, runningUntil } = props.times;
  const standard = <code>webhook-signature</code>;
  const spec = <code>X-Service-Signature</code>;
  const at = (ms: number) => <Time iso={new Date(ms).toISOString()} />;
  const before = "give the new secret to the receiver before then.";
  if (!props.hadSecret) {
    return (
      <>
        Deliveries are signed with the new secret from the next attempt (both {standard} and{" "}
        {spec}); give it to the receiver first.
      </>
    );
  }
  const first = previousUntil !== undefined
    ? <>{standard} carries both secrets until {at(previousUntil)};</>
    : <>{standard} drops the old secret at once;</>;
  let second: Child;
  if (switchAt === undefined) {
    second = (
      <>
        {spec}{" "}
        switches to the new secret at once: a receiver still holding the old one rejects deliveries
        (they are retried, then dead-lettered) until it has the new one.
      </>
    );
  } else if (runningUntil === undefined) {
    second = (
      <>
        {spec} keeps the old secret until {at(switchAt)}, then switches to the new one: {before}
      </>
    );
  } else if (switchAt > runningUntil) {
    second = (
      <>
        {spec} keeps the secret from before the earlier rotation until{" "}
        {at(runningUntil)}, then the old one until {at(switchAt)}, then switches to the new one:
        {" "}
        {before}
      </>
    );
  } else {
    second = (
      <>
        {spec} keeps the secret from before the earlier rotation until{" "}
        {at(switchAt)}, then switches to the new one: {before}
      </>
    );
  }
  return <>{first} {second}</>;
}

/**
 * The flash showing a rotated secret once, and when the headers switch.
 *
 * @param times When the rotation that made it changes the headers; absent: not said.
 * @param hadSecret Whether the webhook was signed before.
 */
export function secretFlash(
  url: string,
  secret: string,
  times?: RotationTimes,
  hadSecret = true,
): Flash {
  return {
    kind: "ok",
    text: (
      <>
        New secret of {url}, shown only now: <code id="new-secret">{secret}</code>
        {times && (
          <>
            {". "}
            <RotationEffect times={times} hadSecret={hadSecret} />
          </>
        )}
      </>
    ),
  };
}

/** An overlap offered by the rotation's confirmation, with what it changes when. */
export interface RotationOption {
  choice: OverlapChoice;
  times: RotationTimes;
  /** The one checked at first (the default). */
  checked?: boolean;
}

/**
 * The confirmation before a rotation: what changes when for each overlap
 * offered, and the form that rotates (`POST …/rotate` with `confirm`).
 *
 * @param runningUntil When an earlier rotation's last overlap ends, if one is running (epoch ms).
 */
export function RotateSecretPage(
  props: {
    frame: PageFrame;
    webhook: WebhookView;
    options: RotationOption[];
    runningUntil?: number;
  },
) {
  const { webhook: w, frame } = props;
  const base = `${UI}/webhooks/${encodeURIComponent(w.id)}`;
  return (
    <Layout title="Rotate the signing secret" page="webhooks" frame={frame}>
      <p>
        Webhook <code>{w.url}</code>{" "}
        <span class="muted">({w.id})</span>. Confirming replaces its signing secret with a new one,
        shown once on the page that answers.
      </p>
      {props.runningUntil !== undefined && (
        <p class="notice info">
          An earlier rotation's overlap is still running: until{" "}
          <Time iso={new Date(props.runningUntil).toISOString()} />,{" "}
          <code>X-Service-Signature</code>{" "}
          is keyed with the secret from before it, the one receivers of that header still hold.
        </p>
      )}
      <form method="post" action={`${base}/rotate`} class="card">
        <Csrf token={frame.csrf} />
        <input type="hidden" name="confirm" value="rotate" />
        {w.has_secret
          ? (
            <fieldset class="choices">
              <legend>Overlap: how long the old secret keeps signing</legend>
              {props.options.map(({ choice, times, checked }) => {
                const id = `overlap-${choice.value}`;
                return (
                  <div class="choice">
                    <input
                      type="radio"
                      id={id}
                      name="overlap"
                      value={choice.value}
                      checked={checked}
                      aria-describedby={`${id}-effect`}
                    />
                    <div>
                      <label for={id}>
                        {choice.label}
                        {checked ? " (default)" : ""}
                      </label>
                      <p id={`${id}-effect`} class="muted">
                        <RotationEffect times={times} hadSecret />
                      </p>
                    </div>
                  </div>
                );
              })}
            </fieldset>
          )
          : (
            <p id="rotation-effect">
              This webhook is unsigned. <RotationEffect times={{}} hadSecret={false} />
            </p>
          )}
        <p class="actions">
          <button
            type="submit"
            class="primary"
            aria-label={`Confirm rotating the secret of ${w.url}`}
          >
            Confirm
          </button>
          <a href={`${UI}/webhooks`}>Cancel</a>
        </p>
      </form>
    </Layout>
  );
}

/** The flash of a replay. */
export function replayFlash(result: ReplayDlqResult): Flash {
  const parts = [`${result.queued.length} queued for delivery`];
  if (result.already_queued.length) parts.push(`${result.already_queued.length} already queued`);
  if (result.skipped.length) {
    parts.push(
      `${result.skipped.length} skipped (${result.skipped.map((s) => s.reason).join("; ")})`,
    );
  }
  return { kind: result.queued.length ? "ok" : "info", text: `Replay: ${parts.join(", ")}` };
}

/** The dead-letter queue, a page at a time. */
export function DlqPage(
  props: {
    frame: PageFrame;
    records: DlqEntry[];
    webhook?: string;
    next: string | null;
    flash?: Flash;
  },
) {
  const { csrf } = props.frame;
  return (
    <Layout title="Dead-letter queue" page="dlq" frame={props.frame} flash={props.flash}>
      <div class="actions">
        {props.records.length > 0 && (
          <Action
            action={`${UI}/dlq/replay${
              props.webhook ? `?webhook=${encodeURIComponent(props.webhook)}` : ""
            }`}
            csrf={csrf}
            label={props.webhook ? "Replay this webhook's records" : "Replay all"}
            primary
          />
        )}
        {props.webhook && <a href={`${UI}/dlq`}>All webhooks</a>}
      </div>
      <div id="dlq" data-live>
        {props.records.length === 0 ? <p>The dead-letter queue is empty.</p> : (
          <DataTable
            head={["Failed at", "Event", "Webhook", "Attempts", "Last error", "Actions"]}
          >
            {props.records.map((r) => {
              const last = r.attempts.at(-1);
              return (
                <tr class="dlq-record">
                  <td>
                    <Time iso={r.failed_at} />
                  </td>
                  <td>
                    <a href={`${UI}/dlq/${encodeURIComponent(r.dlq_id)}`}>{r.event.type}</a>{" "}
                    <span class="muted">{r.event.id}</span>
                  </td>
                  <td>
                    <code>{r.url}</code>
                  </td>
                  <td>{r.attempts.length}</td>
                  <td>
                    {r.reason ?? (last ? `${last.status ?? ""} ${last.error ?? ""}` : "")}
                  </td>
                  <td>
                    <Action
                      action={`${UI}/dlq/${encodeURIComponent(r.dlq_id)}/replay`}
                      csrf={csrf}
                      label="Replay"
                      name={`Replay ${r.event.type} ${r.event.id}`}
                    />
                  </td>
                </tr>
              );
            })}
          </DataTable>
        )}
        {props.next && (
          <p>
            <a
              href={`${UI}/dlq?after=${encodeURIComponent(props.next)}${
                props.webhook ? `&webhook=${encodeURIComponent(props.webhook)}` : ""
              }`}
            >
              Next page
            </a>
          </p>
        )}
      </div>
    </Layout>
  );
}

/** One dead-lettered delivery: its event and attempts. */
export function DlqRecordPage(props: { frame: PageFrame; record: DlqEntry; flash?: Flash }) {
  const { record: r, frame } = props;
  return (
    <Layout title={`Dead letter ${r.dlq_id}`} page="dlq" frame={frame} flash={props.flash}>
      <p>
        {r.event.type} to <code>{r.url}</code>, failed at <Time iso={r.failed_at} />
        {r.reason ? ` (${r.reason})` : ""}
      </p>
      <Action
        action={`${UI}/dlq/${encodeURIComponent(r.dlq_id)}/replay`}
        csrf={frame.csrf}
        label="Replay"
        primary
      />
      <h2>Attempts</h2>
      <DataTable head={["#", "At", "Status", "Error", "Duration"]}>
        {r.attempts.map((a) => (
          <tr>
            <td>{a.attempt}</td>
            <td>
              <Time iso={a.at} />
            </td>
            <td>{a.status ?? "—"}</td>
            <td>{a.error ?? ""}</td>
            <td>{a.duration_ms} ms</td>
          </tr>
        ))}
      </DataTable>
      <h2>Payload</h2>
      <pre tabindex={0} aria-label="Event payload">{json(r.event)}</pre>
    </Layout>
  );
}

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

/** A failed request, as a page: what went wrong and the way back. */
export function ErrorPage(
  props: { frame?: PageFrame; status: number; code: string; message: string },
) {
  return (
    <Layout
      title={props.status === 404 ? "Not found" : "Something went wrong"}
      frame={props.frame}
      flash={{ kind: "bad", text: props.message }}
    >
      <p class="muted">
        HTTP {props.status}, error code <code>{props.code}</code> (see docs/error-codes.md).
      </p>
      <p>
        <a href={UI}>Back to the overview</a>
      </p>
    </Layout>
  );
}
