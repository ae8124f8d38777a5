/** @jsxImportSource hono/jsx */
/**
 * Console views of outgoing webhooks: the webhooks page with tests and
 * secret rotation, and the dead-letter queue. Rendered server-side with Hono
 * JSX, in the frame of {@link ./views.tsx}.
 *
 * @module
 */
import type { Child } from "hono/jsx";
import type {
  DeliveryLogEntry,
  DlqEntry,
  ReplayDlqResult,
  TestWebhookResult,
  WebhookView,
} from "../../webhooks/mod.ts";
import type { OverlapChoice, RotationTimes } from "./rotation.ts";
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
