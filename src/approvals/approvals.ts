/**
 * Approvals: a call a policy marks `require_approval` waits for a person.
 *
 * - `approver: "caller"`: the caller confirms it themself. A client that
 *   answers elicitation is asked in the call (MCP 2026-07-28 through an
 *   `input_required` result and its retry; a 2025 client by an elicitation
 *   request during the call); another gets `APPROVAL_REQUIRED` naming an
 *   approval it (or an administrator) may decide at `/approvals/<id>`.
 * - `approvers: [...]`: someone else decides. The call is held in the store
 *   (surviving restarts, reachable from every instance) until an approver
 *   decides or its timeout passes (`APPROVAL_EXPIRED`). REST callers get 202
 *   (or wait with `?wait=<s>`), MCP callers wait in the call with progress
 *   notifications. An approved call runs once: in the process that waits
 *   for it, else in a server's runner; its outcome is kept in the approval.
 *
 * An approval is bound to the caller, the tool, the SHA-256 of the
 * canonical arguments and the policy's version: changed arguments need a new
 * one. Requests, decisions and expiries are audit entries
 * (`approval.requested`, `approval.decided`, `approval.expired`) and the
 * call that ran carries `outcome.approval_id`.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../audit/canonical_json.ts";
import type { AuditAppendInput } from "../audit/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import {
  type ApprovalGate,
  auditCaller,
  type Caller,
  type CallOptions,
  describeCaller,
  type HeldCall,
  type PolicyDecision,
} from "../gateway/mod.ts";
import { ulid } from "../ids.ts";
import { callerMatches, DEFAULT_APPROVAL_TIMEOUT_MS } from "../policies/mod.ts";
import type { ApprovalRecord, Store } from "../store/mod.ts";

/** Where approval entries go: the audit log's `append`. */
export type ApprovalAudit = (input: AuditAppendInput) => Promise<unknown>;

/** Options of {@linkcode Approvals}. */
export interface ApprovalsOptions {
  store: Store;
  /** Records requests, decisions and expiries. @default none */
  audit?: ApprovalAudit;
  /** Told of each request and decision (the opt-in `approval.*` events). @default none */
  onChange?: (kind: "requested" | "decided", record: ApprovalRecord) => void;
  /** This process, as `running.by` names it. @default a new id */
  processId?: string;
  /** How often a waiter reads its approval again, in ms. @default 250 */
  pollMs?: number;
  /**
   * The server's base URL (`http://host:port`), once it listens: a caller
   * whose client answers URL-mode elicitation is pointed at the approval's
   * console page instead of being held with progress. @default none
   */
  baseUrl?: () => string | undefined;
  /** Clock, ms since the epoch. @default Date.now */
  now?: () => number;
}

/** How the caller of a held call waits (from {@linkcode CallOptions}). */
export interface HoldOptions {
  /** Longest wait for another's decision in this request, in ms (`0`: answer at once). */
  waitMs: number;
  signal?: AbortSignal;
  onProgress?: CallOptions["onProgress"];
  input?: CallOptions["input"];
}

/** An approval as the API, the CLI and the console show it: its arguments redacted, its run as `result`. */
export interface ApprovalView extends Omit<ApprovalRecord, "running" | "ran" | "caller_ref"> {
  /** Whether its approved call runs now. */
  running: boolean;
  /** How the approved call ended, once it ran. */
  result: ApprovalRecord["ran"];
}

/** `record` as shown, its arguments through `redact`. */
export function approvalView(
  record: ApprovalRecord,
  redact: (value: unknown) => unknown,
): ApprovalView {
  const { running, ran, caller_ref: _ref, ...rest } = record;
  return {
    ...rest,
    args: redact(record.args) as Record<string, unknown>,
    running: running !== null,
    result: ran,
  };
}

/** How long after a decision a server's runner leaves an approved call to a waiting caller, in ms. */
export const RUNNER_GRACE_MS = 2000;

/** The path where a person decides on approval `id`. */
export function approvalPath(id: string): string {
  return `/approvals/${id}`;
}

/** The caller as an approval is bound to it: `admin`, `local`, `key:<id>`, `oauth:<subject>`. */
export function callerRef(caller: Caller | undefined): string {
  if (!caller || caller.kind === "local") return "local";
  if (caller.kind === "admin") return "admin";
  return `${caller.kind}:${caller.id ?? caller.name ?? "?"}`;
}

/** SHA-256 (hex) of the canonical JSON of `args`. */
export function argsSha256(args: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(args)).digest("hex");
}

/** The refusal a caller gets while its approval is pending (REST answers it 202). */
export class ApprovalPending extends GatewayError {
  /** The approval waiting for a decision. */
  readonly approval: ApprovalRecord;

  /** @param approval The pending approval. */
  constructor(approval: ApprovalRecord) {
    super(
      "APPROVAL_REQUIRED",
      `Call of ${approval.tool} waits for approval ${approval.id} (policy ${approval.policy}${
        approval.reason ? `: ${approval.reason}` : ""
      }); a person decides at ${
        approvalPath(approval.id)
      } or with toolgate approvals approve ${approval.id}`,
      {
        details: {
          approval_id: approval.id,
          status: approval.status,
          url: approvalPath(approval.id),
          policy: approval.policy,
          expires_at: approval.expires_at,
        },
      },
    );
    this.approval = approval;
  }
}

function denied(record: ApprovalRecord): GatewayError {
  return new GatewayError(
    "APPROVAL_DENIED",
    `Call of ${record.tool} was denied by ${record.decided_by ?? "an approver"}${
      record.decision_reason ? `: ${record.decision_reason}` : ""
    } (approval ${record.id})`,
    {
      details: {
        approval_id: record.id,
        decided_by: record.decided_by,
        reason: record.decision_reason,
      },
    },
  );
}

function expired(record: ApprovalRecord): GatewayError {
  return new GatewayError(
    "APPROVAL_EXPIRED",
    `Call of ${record.tool} was not approved in time: approval ${record.id} expired at ${record.expires_at}`,
    { details: { approval_id: record.id, expires_at: record.expires_at } },
  );
}

/** Whether elicitation can reach the caller in this call. */
function canAsk(options: HoldOptions): boolean {
  return options.input?.ask !== undefined && options.input.capabilities?.elicitation !== undefined;
}

/** The approvals of a store: holding calls, deciding, and running approved ones. */
export class Approvals implements ApprovalGate {
  #store: Store;
  #audit: ApprovalAudit | undefined;
  #onChange: ApprovalsOptions["onChange"];
  #pollMs: number;
  #now: () => number;
  #baseUrl: () => string | undefined;
  /** This process, as `running.by` names it. */
  readonly processId: string;

  /** @param options The store and where entries go. */
  constructor(options: ApprovalsOptions) {
    this.#store = options.store;
    this.#audit = options.audit;
    this.#onChange = options.onChange;
    this.#pollMs = options.pollMs ?? 250;
    this.#baseUrl = options.baseUrl ?? (() => undefined);
    this.#now = options.now ?? Date.now;
    this.processId = options.processId ?? `proc_${ulid()}`;
  }

  /**
   * Holds `call` until it may run, as `decision` asks.
   *
   * @returns The approval that lets it run, claimed by this process (run it,
   * then {@linkcode Approvals.finish}).
   * @throws {ApprovalPending} while another's decision is awaited past
   * `options.waitMs`; {@linkcode GatewayError} `APPROVAL_DENIED`,
   * `APPROVAL_EXPIRED`, or `APPROVAL_REQUIRED` (the caller must confirm and
   * its client cannot be asked).
   */
  async hold(
    call: HeldCall,
    decision: PolicyDecision,
    options: HoldOptions,
  ): Promise<ApprovalRecord> {
    const byCaller = decision.approver === "caller";
    let record = await this.#request(call, decision);
    // A caller who must confirm but cannot be asked here: it (or an administrator) decides at the URL.
    if (byCaller && !canAsk(options)) throw new ApprovalPending(record);
    if (byCaller) {
      const answer = await this.#ask(record, options);
      record = await this.decide(record.id, answer.approve ? "approved" : "denied", {
        by: "caller",
        caller: call.caller,
        ...(answer.reason ? { reason: answer.reason } : {}),
      });
      if (record.status !== "approved") throw denied(record);
    } else {
      record = await this.#waitForDecision(record, options);
    }
    const claimed = await this.claim(record);
    if (!claimed) throw new ApprovalPending(record);
    return claimed;
  }

  /**
   * Checks that `record` (an approved approval this process claimed) lets
   * `call` run under `decision` now.
   *
   * @throws {GatewayError} `APPROVAL_REQUIRED` naming what no longer matches.
   */
  check(record: ApprovalRecord, call: HeldCall, decision: PolicyDecision): void {
    const problem = record.status !== "approved"
      ? `it is ${record.status}`
      : record.running?.by !== this.processId
      ? "it is not being run by this process"
      : record.tool !== call.tool
      ? `it is for ${record.tool}`
      : record.caller_ref !== callerRef(call.caller)
      ? `it is for ${record.caller_ref}`
      : record.args_sha256 !== argsSha256(call.args)
      ? "the arguments changed"
      : record.policy_sha256 !== decision.sha256
      ? `policy ${decision.policy} changed since`
      : undefined;
    if (problem) {
      throw new GatewayError(
        "APPROVAL_REQUIRED",
        `Approval ${record.id} does not let this call of ${call.tool} run: ${problem}`,
        { details: { approval_id: record.id } },
      );
    }
  }

  /** An approval, expired first when its time passed. */
  async get(id: string): Promise<ApprovalRecord | null> {
    const record = await this.#store.approvals.get(id);
    return record && await this.#expireDue(record);
  }

  /** Approvals, newest first (see {@linkcode ApprovalStore.list}); pending ones past their time expired. */
  async list(
    options: { status?: ApprovalRecord["status"]; limit?: number } = {},
  ): Promise<ApprovalRecord[]> {
    const records = await this.#store.approvals.list(options);
    const out: ApprovalRecord[] = [];
    for (const record of records) {
      const current = await this.#expireDue(record);
      if (!options.status || current.status === options.status) out.push(current);
    }
    return out;
  }

  /**
   * Whether `caller` may decide on `record`: one of its approvers, the
   * caller itself for `caller`, or an administrator. A Slack user (`by`
   * `slack:<user id>`, from a signed interaction) may when the approvers
   * name `slack` or `slack:<user id>`.
   */
  mayDecide(record: ApprovalRecord, caller: Caller | undefined, by?: string): boolean {
    if (by?.startsWith("slack:")) {
      return record.approvers.includes("slack") || record.approvers.includes(by);
    }
    const who = caller ?? { kind: "local" as const };
    if (who.kind === "admin" || who.kind === "local") return true;
    if (record.approvers.includes("caller") && record.caller_ref === callerRef(who)) return true;
    return callerMatches(who, record.approvers.filter((a) => a !== "caller"));
  }

  /**
   * Approves or denies a pending approval.
   *
   * @param by Who decided, as recorded (`admin`, `key:<id>`, `slack:<user>`, `caller`).
   * @throws {GatewayError} `NOT_FOUND`, `FORBIDDEN` (not an approver),
   * `APPROVAL_EXPIRED`, `CONFLICT` (decided already).
   */
  async decide(
    id: string,
    decision: "approved" | "denied",
    who: { by: string; caller?: Caller; reason?: string },
  ): Promise<ApprovalRecord> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const current = await this.get(id);
      if (!current) {
        throw new GatewayError(
          "NOT_FOUND",
          `No approval ${id} (toolgate approvals list shows them)`,
          {
            details: { approval_id: id },
          },
        );
      }
      if (who.by !== "caller" && !this.mayDecide(current, who.caller, who.by)) {
        const whom = who.by.startsWith("slack:")
          ? `Slack user ${who.by.slice("slack:".length)}`
          : describeCaller(who.caller ?? { kind: "local" });
        throw new GatewayError(
          "FORBIDDEN",
          `Forbidden: ${whom} may not decide approval ${id} (its approvers: ${
            current.approvers.join(", ")
          })`,
          { details: { approval_id: id } },
        );
      }
      if (current.status === "expired") throw expired(current);
      if (current.status !== "pending") {
        throw new GatewayError(
          "CONFLICT",
          `Approval ${id} was ${current.status} already by ${current.decided_by ?? "?"}`,
          { details: { approval_id: id, status: current.status } },
        );
      }
      const next: ApprovalRecord = {
        ...current,
        status: decision,
        decided_by: who.by,
        decided_at: new Date(this.#now()).toISOString(),
        decision_reason: who.reason ?? null,
      };
      if (await this.#store.approvals.update(next, current)) {
        await this.#audit?.({
          kind: "approval.decided",
          tool: next.tool,
          input: {
            approval_id: id,
            decision,
            decided_by: who.by,
            ...(who.reason ? { reason: who.reason } : {}),
          },
          outcome: { ok: true, status: decision },
          ...(who.caller ? { caller: auditCaller(who.caller) } : {}),
        });
        this.#onChange?.("decided", next);
        return next;
      }
    }
    throw new GatewayError("UNAVAILABLE", `Cannot decide approval ${id}: it kept changing`);
  }

  /**
   * Claims an approved approval whose call has not run, for this process to
   * run it. @returns The claimed record, or `null` (another claimed it, or
   * it is not approved).
   */
  async claim(record: ApprovalRecord): Promise<ApprovalRecord | null> {
    let current: ApprovalRecord | null = record;
    for (let attempt = 0; current && attempt < 20; attempt++) {
      if (current.status !== "approved" || current.running || current.ran) return null;
      const next = {
        ...current,
        running: { by: this.processId, since: new Date(this.#now()).toISOString() },
      };
      if (await this.#store.approvals.update(next, current)) return next;
      current = await this.#store.approvals.get(record.id);
    }
    return null;
  }

  /** Records how the approved call ended. */
  async finish(
    record: ApprovalRecord,
    outcome: { output: Record<string, unknown> } | { error: GatewayError },
  ): Promise<void> {
    const ran: NonNullable<ApprovalRecord["ran"]> = "output" in outcome
      ? { at: new Date(this.#now()).toISOString(), ok: true, output: outcome.output }
      : {
        at: new Date(this.#now()).toISOString(),
        ok: false,
        error: { code: outcome.error.code, message: outcome.error.message },
      };
    let current: ApprovalRecord | null = record;
    for (let attempt = 0; current && attempt < 20; attempt++) {
      let next: ApprovalRecord = { ...current, running: null, ran };
      try {
        if (await this.#store.approvals.update(next, current)) return;
      } catch (error) {
        // An output too large to keep: the outcome is recorded without it (the caller got it).
        if (!(error instanceof GatewayError && error.code === "PAYLOAD_TOO_LARGE")) throw error;
        next = { ...next, ran: { at: ran.at, ok: ran.ok } };
        if (await this.#store.approvals.update(next, current)) return;
      }
      current = await this.#store.approvals.get(record.id);
    }
  }

  /**
   * Expires the pending approvals whose time passed, and returns the
   * approved ones whose call nobody runs (a server's runner claims them):
   * decided at least {@linkcode RUNNER_GRACE_MS} ago, so a caller still
   * waiting for the decision (it looks every `pollMs`) runs it itself.
   */
  async sweep(): Promise<ApprovalRecord[]> {
    const waiting: ApprovalRecord[] = [];
    const settled = this.#now() - RUNNER_GRACE_MS;
    for (const record of await this.#store.approvals.list({ limit: 1000 })) {
      const current = await this.#expireDue(record);
      if (
        current.status === "approved" && !current.running && !current.ran &&
        Date.parse(current.decided_at ?? current.created_at) <= settled
      ) {
        waiting.push(current);
      }
    }
    return waiting;
  }

  async #request(call: HeldCall, decision: PolicyDecision): Promise<ApprovalRecord> {
    const now = this.#now();
    const record: ApprovalRecord = {
      id: `apr_${ulid()}`,
      status: "pending",
      tool: call.tool,
      plugin: call.plugin,
      caller: { ...auditCaller(call.caller ?? { kind: "local" }) },
      caller_ref: callerRef(call.caller),
      args: call.args,
      args_sha256: argsSha256(call.args),
      policy: decision.policy,
      policy_sha256: decision.sha256,
      approvers: decision.approver === "caller" ? ["caller"] : [...decision.approvers ?? ["admin"]],
      reason: decision.reason ?? null,
      transport: call.transport,
      server: call.server ?? null,
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + (decision.timeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS)).toISOString(),
      decided_by: null,
      decided_at: null,
      decision_reason: null,
      running: null,
      ran: null,
    };
    // Recorded before anyone can see it: a process killed after that leaves no unrecorded request.
    await this.#audit?.({
      kind: "approval.requested",
      tool: call.tool,
      ...(call.caller ? { caller: auditCaller(call.caller) } : {}),
      input: {
        approval_id: record.id,
        policy: record.policy,
        policy_sha256: record.policy_sha256,
        args_sha256: record.args_sha256,
        approvers: record.approvers,
        expires_at: record.expires_at,
        ...(record.reason ? { reason: record.reason } : {}),
      },
      outcome: { ok: true, status: "pending" },
    });
    await this.#store.approvals.create(record);
    this.#onChange?.("requested", record);
    return record;
  }

  /** Asks the caller to confirm (an elicitation form). */
  async #ask(
    record: ApprovalRecord,
    options: HoldOptions,
  ): Promise<{ approve: boolean; reason?: string }> {
    const signal = options.signal ?? new AbortController().signal;
    const answers = await options.input!.ask!({
      approval: {
        method: "elicitation/create",
        params: {
          mode: "form",
          message: `Run ${record.tool} with ${canonicalJson(record.args)}?` +
            (record.reason ? ` ${record.reason}` : "") +
            ` (policy ${record.policy}, approval ${record.id})`,
          requestedSchema: {
            type: "object",
            properties: {
              approve: { type: "boolean", title: `Run ${record.tool}`, default: false },
              reason: { type: "string", title: "Why (optional)" },
            },
            required: ["approve"],
          },
        },
      },
    }, signal);
    const answer = answers.approval as
      | { action?: string; content?: Record<string, unknown> }
      | undefined;
    const approve = answer?.action === "accept" && answer.content?.approve === true;
    const reason = typeof answer?.content?.reason === "string" && answer.content.reason
      ? answer.content.reason
      : answer?.action && answer.action !== "accept"
      ? `the caller chose ${answer.action}`
      : undefined;
    return { approve, ...(reason ? { reason } : {}) };
  }

  /**
   * Waits up to `options.waitMs` for a decision on `record`: a caller whose
   * client answers URL-mode elicitation is sent the approval's page (MCP
   * 2026-07-28: an `input_required` result; its retry looks again), any
   * other is held with progress notifications.
   */
  async #waitForDecision(record: ApprovalRecord, options: HoldOptions): Promise<ApprovalRecord> {
    const until = Math.min(this.#now() + options.waitMs, Date.parse(record.expires_at));
    const base = this.#baseUrl();
    const elicitation = options.input?.capabilities?.elicitation as
      | Record<string, unknown>
      | undefined;
    const pointAt = base && options.input?.ask && elicitation && "url" in elicitation
      ? `${base.replace(/\/+$/, "")}/ui/approvals/${record.id}`
      : undefined;
    let current = record;
    let beats = 0;
    let nextBeat = this.#now();
    while (current.status === "pending") {
      if (options.signal?.aborted) throw new ApprovalPending(current);
      if (this.#now() >= until) {
        current = await this.#expireDue(current);
        if (current.status === "pending") throw new ApprovalPending(current);
        break;
      }
      if (pointAt) {
        await options.input!.ask!({
          approval: {
            method: "elicitation/create",
            params: {
              mode: "url",
              elicitationId: current.id,
              url: pointAt,
              message: `${current.tool} waits for approval ${current.id} (policy ${current.policy}${
                current.reason ? `: ${current.reason}` : ""
              }); an approver decides at this page. Answer when it is decided.`,
            },
          },
        }, options.signal ?? new AbortController().signal);
        current = (await this.#store.approvals.get(current.id)) ?? current;
        // Still pending after the answer: a short pause before asking again.
        if (current.status === "pending") {
          await new Promise((resolve) => setTimeout(resolve, Math.max(this.#pollMs, 1000)));
          current = (await this.#store.approvals.get(current.id)) ?? current;
        }
        continue;
      }
      if (options.onProgress && this.#now() >= nextBeat) {
        options.onProgress({
          progress: ++beats,
          message: `Waiting for approval ${current.id} (policy ${current.policy}) at ${
            approvalPath(current.id)
          }`,
        });
        nextBeat = this.#now() + 5000;
      }
      await new Promise((resolve) => setTimeout(resolve, this.#pollMs));
      current = (await this.#store.approvals.get(current.id)) ?? current;
    }
    if (current.status === "denied") throw denied(current);
    if (current.status === "expired") throw expired(current);
    return current;
  }

  /** `record`, expired (and recorded so) when it is pending past its time. */
  async #expireDue(record: ApprovalRecord): Promise<ApprovalRecord> {
    if (record.status !== "pending" || Date.parse(record.expires_at) > this.#now()) return record;
    const next: ApprovalRecord = { ...record, status: "expired" };
    if (await this.#store.approvals.update(next, record)) {
      await this.#audit?.({
        kind: "approval.expired",
        tool: record.tool,
        input: { approval_id: record.id, expires_at: record.expires_at },
        outcome: { ok: true, status: "expired" },
      });
      return next;
    }
    return (await this.#store.approvals.get(record.id)) ?? next;
  }
}
