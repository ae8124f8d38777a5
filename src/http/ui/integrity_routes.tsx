/** @jsxImportSource hono/jsx */
/**
 * The console's integrity pages: the pins of upstream definitions (their
 * diffs, approve and reject) and the calls held for approval (approve, deny).
 *
 * @module
 */
import { type Approvals, approvalView, callerRef } from "../../approvals/mod.ts";
import { GatewayError } from "../../errors/mod.ts";
import type { ToolPins } from "../../pins/mod.ts";
import {
  approvalFlash,
  ApprovalPage,
  ApprovalsPage,
  pinFlash,
  PinPage,
  PinsPage,
  sortPins,
} from "./integrity.tsx";
import { type ConsolePages, type Ctx, field, html, isRefusal, refusalFlash } from "./_page_kit.tsx";
import { UI } from "./paths.ts";
import type { Flash } from "./views.tsx";

/** Pending approvals shown. */
const PENDING_SHOWN = 100;
/** Approvals read for the recently decided ones (pending ones among them are left out). */
const RECENT_APPROVALS = 50;
/** Longest reason of a decision, in characters (as `POST /approvals/{id}/approve` takes). */
const MAX_REASON_CHARS = 1024;

/** What the integrity pages decide on; each is absent when its feature is off. */
export interface IntegrityPagesOptions {
  /** The pins of upstream definitions. @default none: pinning is off */
  pins?: ToolPins;
  /** The held calls. @default none: the page says so */
  approvals?: Approvals;
}

/** Mounts `/ui/pins…` and `/ui/approvals…` on `pages.app`. */
export function mountIntegrityPages(pages: ConsolePages, options: IntegrityPagesOptions): void {
  const { app, clock, redact, frameOf, deciderOf } = pages;
  const { pins, approvals } = options;

  const pinsOf = (tool: string): ToolPins => {
    // `*` decides every pin at once in ToolPins: the console decides one pin a form.
    if (!pins || tool === "*") {
      const why = pins ? "" : ": pinning is off (plugins.upstream_settings.pinning)";
      throw new GatewayError("NOT_FOUND", `No pin named ${JSON.stringify(tool)}${why}`, {
        details: { tool },
      });
    }
    return pins;
  };
  const pinsPage = async (c: Ctx, flash?: Flash) => {
    const list = pins && sortPins(await pins.list());
    return html(c, <PinsPage frame={frameOf(c, `${UI}/pins`)} pins={list} flash={flash} />);
  };
  const pinPage = async (c: Ctx, tool: string, flash?: Flash, status?: 409) => {
    const pin = await pinsOf(tool).diff(tool);
    const path = `${UI}/pins/${encodeURIComponent(pin.tool)}`;
    return html(c, <PinPage frame={frameOf(c, path)} pin={pin} flash={flash} />, status);
  };
  app.get(`${UI}/pins`, (c) => pinsPage(c));
  app.get(`${UI}/pins/:tool`, (c) => pinPage(c, c.req.param("tool")));
  for (const [action, decision] of [["approve", "approved"], ["reject", "rejected"]] as const) {
    app.post(`${UI}/pins/:tool/${action}`, async (c) => {
      const tool = c.req.param("tool");
      const by = callerRef(deciderOf(c));
      try {
        const decided = action === "approve"
          ? await pinsOf(tool).approve(tool, by)
          : await pinsOf(tool).reject(tool, by);
        return pinsPage(c, pinFlash(decision, decided));
      } catch (error) {
        if (!isRefusal(error, ["CONFLICT"])) throw error;
        return pinPage(c, tool, refusalFlash(error), 409);
      }
    });
  }

  const approvalsPage = async (c: Ctx, flash?: Flash) => {
    const frame = frameOf(c, `${UI}/approvals`);
    const at = clock();
    if (!approvals) return html(c, <ApprovalsPage frame={frame} now={at} flash={flash} />);
    // One after the other: each list expires the pending approvals past their time.
    const pending = await approvals.list({ status: "pending", limit: PENDING_SHOWN });
    const latest = await approvals.list({ limit: RECENT_APPROVALS });
    return html(
      c,
      <ApprovalsPage
        frame={frame}
        pending={pending.map((r) => approvalView(r, redact))}
        recent={latest.filter((r) => r.status !== "pending").map((r) => approvalView(r, redact))}
        now={at}
        flash={flash}
      />,
    );
  };
  const approvalOf = async (id: string) => {
    const record = approvals && /^apr_[0-9A-Za-z]+$/.test(id) ? await approvals.get(id) : null;
    if (!approvals || !record) {
      throw new GatewayError("NOT_FOUND", `No approval ${id}`, { details: { approval_id: id } });
    }
    return { approvals, record };
  };
  const approvalPage = async (c: Ctx, id: string, flash?: Flash, status?: 400 | 403 | 409) => {
    const { record } = await approvalOf(id);
    const path = `${UI}/approvals/${encodeURIComponent(record.id)}`;
    return html(
      c,
      <ApprovalPage
        frame={frameOf(c, path)}
        approval={approvalView(record, redact)}
        now={clock()}
        flash={flash}
      />,
      status,
    );
  };
  app.get(`${UI}/approvals`, (c) => approvalsPage(c));
  app.get(`${UI}/approvals/:id`, (c) => approvalPage(c, c.req.param("id")));
  for (const [action, decision] of [["approve", "approved"], ["deny", "denied"]] as const) {
    app.post(`${UI}/approvals/:id/${action}`, async (c) => {
      const id = c.req.param("id");
      const { approvals } = await approvalOf(id);
      const reason = field(await c.req.parseBody(), "reason")?.trim() || undefined;
      if (reason && reason.length > MAX_REASON_CHARS) {
        const text = `Invalid reason: ${reason.length} characters; at most ${MAX_REASON_CHARS}`;
        return approvalPage(c, id, { kind: "bad", text }, 400);
      }
      const caller = deciderOf(c);
      try {
        const decided = await approvals.decide(id, decision, {
          by: callerRef(caller),
          caller,
          ...(reason ? { reason } : {}),
        });
        return approvalsPage(c, approvalFlash(approvalView(decided, redact)));
      } catch (error) {
        if (!isRefusal(error, ["CONFLICT", "APPROVAL_EXPIRED"])) throw error;
        return approvalPage(c, id, refusalFlash(error), error.status === 409 ? 409 : 403);
      }
    });
  }
}
