/**
 * Relays what an upstream sends its client back to the caller of the call it
 * belongs to: requests for input (2025 requests, 2026 `input_required`
 * results), progress and log messages.
 *
 * @module
 */
import {
  CLIENT_CAPABILITIES_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
} from "@modelcontextprotocol/client";
import type { JSONRPCMessage } from "@modelcontextprotocol/client";
import { GatewayError } from "../../errors/mod.ts";
import type {
  AskCaller,
  InputCapabilities,
  InputMethod,
  InputRequest,
  LogMessage,
} from "../../gateway/mod.ts";
import { isModern, type Live } from "./_live.ts";

/** Most rounds of input (2026 `input_required` results) one call may ask for. */
const MAX_INPUT_ROUNDS = 10;

/** The client requests an upstream may send (2025) or embed in `input_required` (2026). */
export const INPUT_METHODS: InputMethod[] = [
  "elicitation/create",
  "sampling/createMessage",
  "roots/list",
];

/** A 2026-07-28 `input_required` result. */
export interface InputRequiredResult {
  resultType: "input_required";
  inputRequests?: Record<string, InputRequest>;
  requestState?: string;
}

/** Whether `result` asks for input (2026-07-28). */
function isInputRequired(result: object): result is InputRequiredResult {
  return (result as { resultType?: unknown }).resultType === "input_required";
}

/** Asks callers for the input their upstream requests, over one upstream's connections. */
export class CallerRelay {
  #plugin: string;
  #log: (message: string) => void;
  /** Keys given to a 2025 upstream's requests for input when they are relayed. */
  #inputKeys = 0;

  /**
   * @param plugin The plugin's name (for errors).
   * @param log Log sink.
   */
  constructor(plugin: string, log: (message: string) => void) {
    this.#plugin = plugin;
    this.#log = log;
  }

  /**
   * Sends a request the upstream may answer by asking the caller for input:
   * a 2025 upstream with requests of its own while this one runs (relayed
   * by {@linkcode CallerRelay.answer} to this caller), a 2026 one
   * with `input_required` results: the caller answers their requests, and
   * the request is sent again with the answers and the upstream's state.
   * A 2026 upstream is told which kinds of input the caller can give.
   */
  async withInput<R extends object>(
    live: Live,
    subject: string,
    params: Record<string, unknown>,
    input: { ask?: AskCaller; capabilities?: InputCapabilities; signal: AbortSignal },
    send: (params: Record<string, unknown>) => Promise<R | InputRequiredResult>,
  ): Promise<R> {
    const { ask, capabilities = {}, signal } = input;
    const asker = ask ? { ask, signal } : undefined;
    if (asker) live.askers.add(asker);
    try {
      const meta = params._meta as Record<string, unknown> | undefined;
      let current: Record<string, unknown> = isModern(live)
        ? { ...params, _meta: { ...meta, [CLIENT_CAPABILITIES_META_KEY]: ask ? capabilities : {} } }
        : params;
      for (let round = 0;; round++) {
        const result = await send(current);
        if (!isInputRequired(result)) return result;
        const requests = result.inputRequests ?? {};
        const methods = Object.values(requests).map((request) => request.method);
        if (round === MAX_INPUT_ROUNDS) {
          throw new GatewayError(
            "PLUGIN_REQUEST_FAILED",
            `Upstream ${subject} still asked for input after ${MAX_INPUT_ROUNDS} rounds`,
            { details: { plugin: this.#plugin } },
          );
        }
        if (!ask && methods.length) {
          throw new GatewayError(
            "PLUGIN_REQUEST_FAILED",
            `Upstream ${subject} asks its caller for input (${
              [...new Set(methods)].join(", ")
            }): only an MCP client can answer, and this caller is not one`,
            { details: { plugin: this.#plugin, methods } },
          );
        }
        const answers = methods.length ? await ask!(requests, signal) : {};
        current = {
          ...current,
          ...(Object.keys(answers).length ? { inputResponses: answers } : {}),
          ...(result.requestState !== undefined ? { requestState: result.requestState } : {}),
        };
      }
    } finally {
      if (asker) live.askers.delete(asker);
    }
  }

  /**
   * Answers a 2025 upstream's request for input (elicitation, sampling,
   * roots) by asking the caller of the call it belongs to. A 2025 request
   * names no call: it is relayed when exactly one call that can ask is in
   * flight on this connection, and refused when several are (the wrong
   * caller must never see it). Roots asked outside any call are none.
   */
  async answer(
    live: Live,
    method: InputMethod,
    params: Record<string, unknown> | undefined,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const askers = [...live.askers];
    if (askers.length !== 1) {
      if (method === "roots/list" && askers.length === 0) return { roots: [] };
      const why = askers.length === 0
        ? `no call that can ask its caller for input is in flight`
        : `${askers.length} calls that can ask their callers are in flight and the request names none of them`;
      this.#log(`its ${method} request was refused: ${why}`);
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `toolgate cannot relay ${method}: ${why}`,
      );
    }
    const [{ ask, signal: callSignal }] = askers;
    const key = `toolgate-${++this.#inputKeys}`;
    const request: InputRequest = { method, ...(params ? { params } : {}) };
    const answers = await ask({ [key]: request }, AbortSignal.any([signal, callSignal]));
    const answer = answers[key];
    if (answer === null || typeof answer !== "object") {
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `toolgate's caller gave no answer to ${method}`,
      );
    }
    return answer as Record<string, unknown>;
  }
}

/**
 * Hands the upstream's `notifications/progress` for our tokens to the calls
 * that sent them, and its `notifications/message` to every call in flight
 * (or to `unclaimed` when none is), as the transport delivers them: in order,
 * before the call's response. (The SDK's own `onprogress` can see a last
 * progress notification after the response it preceded, and then drops it.)
 */
export function watchCallNotifications(live: Live, unclaimed: (message: LogMessage) => void): void {
  type OnMessage = (message: JSONRPCMessage, extra?: unknown) => void;
  const transport = live.transport as unknown as { onmessage?: OnMessage };
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if ("method" in message && message.method === "notifications/progress") {
      const params = (message.params ?? {}) as Record<string, unknown>;
      const listener = live.progress.get(String(params.progressToken));
      if (listener && typeof params.progress === "number") {
        listener({
          progress: params.progress,
          ...(typeof params.total === "number" ? { total: params.total } : {}),
          ...(typeof params.message === "string" ? { message: params.message } : {}),
        });
        return;
      }
    }
    if ("method" in message && message.method === "notifications/message") {
      const params = (message.params ?? {}) as unknown as LogMessage;
      const log: LogMessage = {
        level: params.level,
        data: params.data,
        ...(params.logger !== undefined ? { logger: params.logger } : {}),
      };
      if (live.logs.size) { for (const listener of live.logs) listener(log); }
      else unclaimed(log);
    }
    deliver?.(message, extra);
  };
}
