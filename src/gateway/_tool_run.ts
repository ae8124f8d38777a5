/**
 * One admitted tool call, run: validate the input, check the circuit,
 * execute (retrying idempotent tools as configured), count the outcome
 * towards the breaker, and record it (audit entry, `tool.called` /
 * `tool.failed`, receipt, metrics).
 *
 * @module
 */
import type { ErrorCode, GatewayError } from "../errors/mod.ts";
import type { EventBus } from "../events/mod.ts";
import { newId } from "../ids.ts";
import type { Log } from "../log/mod.ts";
import type { Redactor } from "../redact.ts";
import { auditCaller } from "./caller.ts";
import type { CircuitState } from "./circuit_breaker.ts";
import { attachReceipt } from "./result.ts";
import { asToolError, cancelled, circuitOpen, invalidInput } from "./_call_errors.ts";
import type { RegisteredTool } from "./_hosted.ts";
import { executeTool } from "./_tool_execute.ts";
import type { AuditedEntry, AuditSink, CallOptions, CallResult, ReceiptSigner } from "./types.ts";

/** A call as `GatewayOptions.onCall` (gateway.ts) is told of it. */
export interface CallObservation {
  tool: string;
  plugin: string;
  source: string;
  errorCode?: string;
  durationMs: number;
}

/** Codes that count as a tool failure for the circuit breaker. */
const BREAKER_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "TOOL_EXECUTION_FAILED",
  "TOOL_TIMEOUT",
  "PLUGIN_REQUEST_FAILED",
  "INTERNAL",
]);

/** What {@linkcode ToolRunner} records calls with. */
export interface ToolRunnerOptions {
  bus: EventBus;
  audit: AuditSink | undefined;
  receipts: ReceiptSigner | undefined;
  redact: Redactor;
  log: Log;
  now: () => number;
  onCall: ((call: CallObservation) => void) | undefined;
  /** Whether a call emits `tool.called` / `tool.failed` (off only in a benchmark). @default true */
  callEvents?: boolean;
}

/** Runs the calls the pipeline let through, and records their outcomes. */
export class ToolRunner {
  #bus: EventBus;
  #audit: AuditSink | undefined;
  #receipts: ReceiptSigner | undefined;
  #redact: Redactor;
  #log: Log;
  #now: () => number;
  #onCall: ((call: CallObservation) => void) | undefined;
  #callEvents: boolean;

  /** @param options The bus, audit log, receipt signer, redactor, log, clock and metrics hook. */
  constructor(options: ToolRunnerOptions) {
    this.#bus = options.bus;
    this.#audit = options.audit;
    this.#receipts = options.receipts;
    this.#redact = options.redact;
    this.#log = options.log;
    this.#now = options.now;
    this.#onCall = options.onCall;
    this.#callEvents = options.callEvents ?? true;
  }

  /**
   * Runs a call of `tool` (as `name`) and records it; `appended` is called
   * once its audit append was made.
   *
   * @throws {GatewayError} `TOOL_INPUT_INVALID`, `CIRCUIT_OPEN`, `CANCELLED`,
   * `TOOL_TIMEOUT`, `PLUGIN_REQUEST_FAILED`, `TOOL_EXECUTION_FAILED`, or a
   * plugin's own code.
   */
  async run(
    tool: RegisteredTool,
    name: string,
    args: unknown,
    options: CallOptions,
    appended: () => void,
  ): Promise<CallResult> {
    const sessionId = options.sessionId ?? newId("ses");
    const plugin = tool.plugin.definition.name;
    const started = this.#now();
    const parsed = tool.definition.input.safeParse(args ?? {});
    if (!parsed.success) {
      const error = invalidInput(name, parsed.error);
      await this.#fail(tool, error, 1, sessionId, args, options, started, appended);
      throw error;
    }
    const input = parsed.data;
    // The destination whose breaker the call counts towards (tools with `breakerKey` only).
    const key = tool.keyed && this.#breakerKey(tool, input);
    if (this.#circuitState(tool, key) === "open") {
      const error = circuitOpen(tool, name, key);
      await this.#fail(tool, error, 1, sessionId, input, options, started, appended, key);
      throw error;
    }
    const attempts = 1 + tool.retries;
    for (let attempt = 1;; attempt++) {
      try {
        const output = await executeTool(tool, input, sessionId, options);
        if (key === undefined) tool.breaker.recordSuccess();
        else tool.keyed!.recordSuccess(key);
        const latency_ms = Math.max(0, Math.round(this.#now() - started));
        const redactedInput = this.#redact(input);
        const entry = {
          kind: "tool.call",
          tool: name,
          session_id: sessionId,
          ...(options.caller ? { caller: auditCaller(options.caller) } : {}),
          input: redactedInput,
          outcome: {
            ok: true,
            latency_ms,
            source: options.source ?? "api",
            ...(options.approval ? { approval_id: options.approval.id } : {}),
          },
        };
        const called = {
          tool_name: name,
          plugin,
          input: redactedInput,
          output: this.#redact(output),
          latency_ms,
          session_id: sessionId,
        };
        let stored: unknown;
        if (!this.#callEvents) {
          const appending = this.#audit?.append(entry);
          appended();
          stored = await appending;
        } else if (this.#audit?.publishesEvents) {
          // One commit holds the entry and the webhook deliveries of both events.
          const appending = this.#audit.append(entry, {
            events: [{ type: "tool.called", data: called }],
          });
          appended();
          stored = await appending;
        } else {
          const appending = Promise.all([
            this.#audit?.append(entry),
            this.#bus.emit("tool.called", called),
          ]);
          appended();
          [stored] = await appending;
        }
        this.#onCall?.({
          tool: name,
          plugin,
          source: options.source ?? "api",
          durationMs: this.#now() - started,
        });
        const result: CallResult = tool.definition.rawResult
          ? { tool: name, plugin, output, latency_ms, rawResult: true }
          : { tool: name, plugin, output, latency_ms };
        if (this.#receipts && stored) result.receipt = this.#receipts(stored as AuditedEntry);
        return result;
      } catch (thrown) {
        // A caller that leaves (or cancels) aborts the tool; that is not the tool failing.
        const error = options.signal?.aborted ? cancelled(name, thrown) : asToolError(name, thrown);
        if (BREAKER_CODES.has(error.code)) {
          if (key === undefined) tool.breaker.recordFailure();
          else tool.keyed!.recordFailure(key);
        }
        const retry = attempt < attempts && BREAKER_CODES.has(error.code) &&
          this.#circuitState(tool, key) === "closed" && !options.signal?.aborted;
        if (retry) {
          await this.#emitFailed(tool, error, attempt, key);
          continue;
        }
        await this.#fail(tool, error, attempt, sessionId, input, options, started, appended, key);
        throw error;
      }
    }
  }

  /**
   * The destination of a call to a tool with `breakerKey`; `undefined` (the
   * tool's own breaker) when it names none or throws (logged).
   */
  #breakerKey(tool: RegisteredTool, input: Record<string, unknown>): string | undefined {
    try {
      return tool.definition.breakerKey!(input);
    } catch (error) {
      this.#log.warn(
        `tool ${tool.definition.name}: breakerKey failed, the tool's own breaker counts the call: ${
          (error as Error).message
        }`,
        { tool: tool.definition.name },
      );
      return undefined;
    }
  }

  /** The state of the breaker a call counts towards: its destination's, else the tool's. */
  #circuitState(tool: RegisteredTool, key: string | undefined): CircuitState {
    return key === undefined ? tool.breaker.state : tool.keyed!.state(key);
  }

  #emitFailed(
    tool: RegisteredTool,
    error: GatewayError,
    attempt: number,
    key: string | undefined,
  ): Promise<unknown> {
    return this.#bus.emit("tool.failed", {
      tool_name: tool.definition.name,
      plugin: tool.plugin.definition.name,
      error: this.#redact(error.message),
      error_code: error.code,
      circuit_state: this.#circuitState(tool, key),
      attempt,
    });
  }

  async #fail(
    tool: RegisteredTool,
    error: GatewayError,
    attempt: number,
    sessionId: string,
    input: unknown,
    options: CallOptions,
    started: number,
    appended: () => void,
    key?: string,
  ): Promise<void> {
    const latency_ms = Math.max(0, Math.round(this.#now() - started));
    const recorded = Promise.all([
      this.#audit?.append({
        kind: "tool.call",
        tool: tool.definition.name,
        session_id: sessionId,
        ...(options.caller ? { caller: auditCaller(options.caller) } : {}),
        input: this.#redact(input),
        outcome: {
          ok: false,
          error_code: error.code,
          error: error.message,
          latency_ms,
          attempts: attempt,
          source: options.source ?? "api",
          ...(options.approval ? { approval_id: options.approval.id } : {}),
        },
      }),
      this.#emitFailed(tool, error, attempt, key),
    ]);
    appended();
    const [stored] = await recorded;
    if (this.#receipts && stored) attachReceipt(error, this.#receipts(stored as AuditedEntry));
    this.#onCall?.({
      tool: tool.definition.name,
      plugin: tool.plugin.definition.name,
      source: options.source ?? "api",
      errorCode: error.code,
      durationMs: this.#now() - started,
    });
  }
}
