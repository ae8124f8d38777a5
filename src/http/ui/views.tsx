/** @jsxImportSource hono/jsx */
/**
 * The console's pages, rendered on the server with Hono's JSX.
 *
 * @module
 */
import type { Child } from "hono/jsx";
import type { PluginStatus, ToolInfo } from "../../gateway/mod.ts";
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
