/**
 * The call pipeline, from a caller's call to the run of the tool: its span,
 * the caller's virtual server and tool patterns, the tool (or why it is not
 * there), policies and approvals, rate limits; a refused call is audited.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { newId } from "../ids.ts";
import type { Redactor } from "../redact.ts";
import { traced } from "../tracing/mod.ts";
import { auditCaller, forbiddenCall, mayCall } from "./caller.ts";
import type { RateLimiter } from "./rate_limit.ts";
import { attachReceipt } from "./result.ts";
import { notOnServer, type VirtualServers } from "./virtual_servers.ts";
import { asToolError, refusedBy } from "./_call_errors.ts";
import type { PluginHost } from "./_plugin_host.ts";
import type { ToolRegistry } from "./_tool_registry.ts";
import type { CallObservation, ToolRunner } from "./_tool_run.ts";
import type {
  ApprovalGate,
  AuditedEntry,
  AuditSink,
  CallOptions,
  CallResult,
  HeldApproval,
  HeldCall,
  PolicyGuard,
  ReceiptSigner,
} from "./types.ts";

const NOTHING = () => {};

/** What {@linkcode CallPipeline} decides and records calls with. */
export interface CallPipelineOptions {
  /** The tools on offer. */
  tools: ToolRegistry;
  /** Says why a tool that is not on offer cannot be called. */
  plugins: PluginHost;
  servers: VirtualServers;
  limiter: RateLimiter;
  policies: PolicyGuard | undefined;
  approvals: ApprovalGate | undefined;
  audit: AuditSink | undefined;
  receipts: ReceiptSigner | undefined;
  redact: Redactor;
  onCall: ((call: CallObservation) => void) | undefined;
  /** Runs the calls let through. */
  runner: ToolRunner;
}

/** Decides whether each call may run now, then has it run. */
export class CallPipeline {
  #tools: ToolRegistry;
  #plugins: PluginHost;
  #servers: VirtualServers;
  #limiter: RateLimiter;
  #policies: PolicyGuard | undefined;
  #approvals: ApprovalGate | undefined;
  #audit: AuditSink | undefined;
  #receipts: ReceiptSigner | undefined;
  #redact: Redactor;
  #onCall: ((call: CallObservation) => void) | undefined;
  #runner: ToolRunner;

  /** @param options The tools, plugins, servers, limits, guards and recorders of calls. */
  constructor(options: CallPipelineOptions) {
    this.#tools = options.tools;
    this.#plugins = options.plugins;
    this.#servers = options.servers;
    this.#limiter = options.limiter;
    this.#policies = options.policies;
    this.#approvals = options.approvals;
    this.#audit = options.audit;
    this.#receipts = options.receipts;
    this.#redact = options.redact;
    this.#onCall = options.onCall;
    this.#runner = options.runner;
  }

  /**
   * Calls a tool through the pipeline: caller's rights → rate limits →
   * validate input → circuit check →
   * execute with timeout (retrying idempotent tools as configured) → audit →
   * events.
   *
   * @throws {GatewayError} `TOOL_NOT_FOUND`, `PLUGIN_NOT_CONFIGURED` or
   * `PLUGIN_INIT_FAILED` (see {@linkcode PluginHost.unavailable}), `FORBIDDEN`
   * (outside `options.caller`'s tool patterns; audited, no event), `RATE_LIMITED`
   * (past the caller's or the tool's rate; audited, no event, not counted by
   * the breaker), `TOOL_NOT_FOUND`
   * also when the tool is not on the caller's virtual server (audited), `CANCELLED`
   * (`options.signal` aborted: not counted by the breaker), `TOOL_INPUT_INVALID`,
   * `CIRCUIT_OPEN`, `TOOL_TIMEOUT`, `PLUGIN_REQUEST_FAILED`,
   * `TOOL_EXECUTION_FAILED`, or a plugin's own code.
   */
  call(name: string, args: unknown, options: CallOptions): Promise<CallResult> {
    // One span per call (OpenTelemetry GenAI `execute_tool`), a child of the caller's trace.
    const caller = options.caller;
    return traced(`execute_tool ${name}`, {
      parent: options.trace,
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "toolgate.tool": name,
        "toolgate.transport": options.source ?? "api",
        "toolgate.caller": caller ? (caller.name ?? caller.id ?? caller.kind) : undefined,
      },
    }, async (span) => {
      try {
        const result = await this.#callTool(name, args, options);
        span.set({ "toolgate.plugin": result.plugin, "toolgate.outcome": "ok" });
        return result;
      } catch (error) {
        span.set({
          "toolgate.plugin": this.#tools.get(name)?.plugin.definition.name,
          "toolgate.outcome": error instanceof GatewayError ? error.code : "INTERNAL",
        });
        throw error;
      }
    });
  }

  async #callTool(name: string, args: unknown, options: CallOptions): Promise<CallResult> {
    const server = options.caller?.server;
    // Not on the caller's virtual server: the tool does not exist there.
    if (server !== undefined && !this.#servers.has(server, name)) {
      return await this.#refuse(name, args, options, notOnServer(server, name));
    }
    // Outside the caller's patterns whether the tool exists or not, so a
    // refusal says nothing about what is on offer.
    if (options.caller && !mayCall(options.caller, name)) {
      return await this.#refuse(name, args, options, forbiddenCall(options.caller, name));
    }
    const tool = this.#tools.get(name);
    if (!tool) {
      throw this.#plugins.unavailable(name) ??
        new GatewayError("TOOL_NOT_FOUND", `Unknown tool ${JSON.stringify(name)}`, {
          details: { tool: name },
        });
    }
    // A policy that denies it: refused (and audited) before anything runs; one that asks for
    // an approval: held until a person decides.
    let approval: HeldApproval | undefined;
    // toolgate's own approval notices (to Slack) are not held by policies: they would hold themselves.
    if (this.#policies?.active && options.source !== "approvals") {
      const held: HeldCall = {
        tool: name,
        plugin: tool.plugin.definition.name,
        args: args !== null && typeof args === "object" && !Array.isArray(args)
          ? args as Record<string, unknown>
          : {},
        caller: options.caller,
        transport: options.source ?? "api",
        server: options.caller?.server,
      };
      const decision = this.#policies.decide({
        ...held,
        annotations: tool.definition.mcpListing?.annotations as Record<string, unknown> | undefined,
      });
      if (
        decision?.effect === "deny" || (decision?.effect === "require_approval" && !this.#approvals)
      ) {
        return await this.#refuse(name, args, options, refusedBy(name, decision));
      }
      if (decision?.effect === "require_approval") {
        if (options.approval) {
          this.#approvals!.check(options.approval, held, decision);
          approval = options.approval;
        } else {
          try {
            approval = await this.#approvals!.hold(held, decision, {
              waitMs: options.approvalWaitMs ?? 0,
              signal: options.signal,
              onProgress: options.onProgress,
              input: options.input,
            });
          } catch (error) {
            // Denied or expired: a call that does not run, recorded as such; pending: not yet.
            if (
              error instanceof GatewayError &&
              (error.code === "APPROVAL_DENIED" || error.code === "APPROVAL_EXPIRED")
            ) {
              return await this.#refuse(name, args, options, error);
            }
            throw error;
          }
        }
        options = { ...options, approval };
      }
    }
    // Past the caller's or the tool's rate: refused before anything runs (no breaker count).
    if (this.#limiter.active || options.caller?.rate) {
      try {
        await this.#limiter.check(name, options.caller);
      } catch (error) {
        if (!(error instanceof GatewayError && error.code === "RATE_LIMITED")) throw error;
        this.#onCall?.({
          tool: name,
          plugin: tool.plugin.definition.name,
          source: options.source ?? "api",
          errorCode: error.code,
          durationMs: 0,
        });
        return await this.#refuse(name, args, options, error);
      }
    }
    // Concurrent calls share audit commits: the log briefly waits for the announced appends.
    const appended = this.#audit?.expect?.() ?? NOTHING;
    try {
      if (!approval) return await this.#runner.run(tool, name, args, options, appended);
      // One approval runs one call: its outcome is kept with it.
      let result: CallResult;
      try {
        result = await this.#runner.run(tool, name, args, options, appended);
      } catch (error) {
        await this.#approvals!.finish(approval, {
          error: error instanceof GatewayError ? error : asToolError(name, error),
        });
        throw error;
      }
      await this.#approvals!.finish(approval, { output: result.output });
      return result;
    } finally {
      appended();
    }
  }

  /**
   * Records a refused call in the audit log, then throws its error:
   * `FORBIDDEN` (outside the caller's rights) unless `error` is given
   * (`RATE_LIMITED`).
   */
  async #refuse(
    name: string,
    args: unknown,
    options: CallOptions,
    error: GatewayError = forbiddenCall(options.caller!, name),
  ): Promise<never> {
    const caller = options.caller;
    const stored = await this.#audit?.append({
      kind: "tool.call",
      tool: name,
      session_id: options.sessionId ?? newId("ses"),
      ...(caller ? { caller: auditCaller(caller) } : {}),
      input: this.#redact(args ?? {}),
      outcome: {
        ok: false,
        error_code: error.code,
        error: error.message,
        latency_ms: 0,
        attempts: 0,
        source: options.source ?? "api",
        // A denied or expired approval: the entry links to it.
        ...(typeof (error.details as { approval_id?: unknown } | undefined)?.approval_id ===
            "string"
          ? { approval_id: (error.details as { approval_id: string }).approval_id }
          : {}),
      },
    });
    if (this.#receipts && stored) attachReceipt(error, this.#receipts(stored as AuditedEntry));
    throw error;
  }
}
