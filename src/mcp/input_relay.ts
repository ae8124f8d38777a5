/**
 * Tool calls that wait for their caller's input between requests.
 *
 * An MCP upstream may ask the caller of a tool for input mid-call
 * (elicitation, sampling, roots). The gateway answers MCP 2026-07-28's way
 * for every client: the `tools/call` request ends with an `input_required`
 * result naming the requests, the call itself keeps running here (parked),
 * and the client sends `tools/call` again with its answers and the opaque
 * `requestState` to pick it up. (For a 2025 client the SDK's legacy shim
 * turns the same result into server-to-client requests and re-enters the
 * handler in process.) The state is signed with a key of this process
 * (HMAC-SHA256, the SDK's codec): a client cannot forge or alter it, nor
 * reach another caller's call, and a state whose call is gone is refused.
 *
 * @module
 */
import { createRequestStateCodec, type RequestStateCodec } from "@modelcontextprotocol/server";
import { GatewayError } from "../errors/mod.ts";
import type { AskCaller, InputMethod, InputRequest } from "../gateway/mod.ts";
import { newId } from "../ids.ts";

/** How long a caller has to answer a request for input, in ms. */
export const ANSWER_TIMEOUT_MS = 10 * 60_000;

/** What toolgate's `requestState` carries: which parked call, for which tool, at which round. */
export interface RelayState {
  call: string;
  tool: string;
  /** Each round's state differs, and only the latest one is accepted. */
  round: number;
}

/** Where a call stands when its request is answered. */
export type Step<T> =
  | { kind: "done"; value: T }
  | { kind: "input"; requests: Record<string, InputRequest>; state: RelayState };

/** One outstanding question of a parked call. */
interface Question {
  requests: Record<string, InputRequest>;
  resolve: (answers: Record<string, unknown>) => void;
  /** Sent to the caller in an `input_required` result already. */
  sent: boolean;
}

/** A running call that may ask its caller for input. */
class RelayedCall<T, R> {
  readonly id = newId("call");
  readonly controller = new AbortController();
  readonly questions: Question[] = [];
  settled: { value: T } | { error: unknown } | undefined;
  /** Times it was parked. */
  round = 0;
  #wake: (() => void) | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    readonly tool: string,
    readonly canAnswer: (method: InputMethod) => boolean,
    /** Where the call's progress and log messages go: the request being served now. */
    public route: R,
  ) {}

  /** The function the tool asks with (see {@linkcode AskCaller}). */
  readonly ask: AskCaller = (requests, signal) => {
    const methods = Object.values(requests).map((request) => request.method);
    const unanswerable = methods.filter((method) => !this.canAnswer(method));
    if (unanswerable.length) {
      return Promise.reject(
        new GatewayError(
          "PLUGIN_REQUEST_FAILED",
          `The caller cannot answer ${
            [...new Set(unanswerable)].join(", ")
          }: its MCP client did not declare that capability`,
          { details: { methods: unanswerable } },
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const drop = () => {
        const index = this.questions.indexOf(question);
        if (index >= 0) this.questions.splice(index, 1);
        reject(signal.reason);
      };
      const question: Question = {
        requests,
        resolve: (answers) => {
          signal.removeEventListener("abort", drop);
          resolve(answers);
        },
        sent: false,
      };
      if (signal.aborted) return reject(signal.reason);
      signal.addEventListener("abort", drop, { once: true });
      this.questions.push(question);
      this.wake();
    });
  };

  wake(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Resolves when the call ends or asks something not yet sent. */
  next(): Promise<void> {
    if (this.settled || this.questions.some((question) => !question.sent)) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#wake = resolve);
  }

  /** Parked: the caller must answer within `timeoutMs`. */
  park(timeoutMs: number, onExpire: () => void): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(onExpire, timeoutMs);
    // A call waiting for an answer does not keep the process alive.
    Deno.unrefTimer(this.#timer);
  }

  unpark(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * The calls of this process that wait for their callers' answers, and the
 * codec that signs the `requestState` naming them.
 */
export class InputRelay {
  readonly codec: RequestStateCodec<RelayState>;
  // deno-lint-ignore no-explicit-any
  #parked = new Map<string, RelayedCall<any, any>>();
  #answerTimeoutMs: number;

  /** @param options How long a caller has to answer. @default {@linkcode ANSWER_TIMEOUT_MS} */
  constructor(options: { answerTimeoutMs?: number } = {}) {
    this.#answerTimeoutMs = options.answerTimeoutMs ?? ANSWER_TIMEOUT_MS;
    const key = crypto.getRandomValues(new Uint8Array(32));
    this.codec = createRequestStateCodec<RelayState>({
      key,
      ttlSeconds: Math.max(1, Math.ceil(this.#answerTimeoutMs / 1000)),
    });
  }

  /** Calls parked now (for tests and status). */
  get parked(): number {
    return this.#parked.size;
  }

  /**
   * Starts a call that may ask its caller for input.
   *
   * @param route Where its progress and log messages go while this request
   * is served (each request that resumes it brings its own).
   * @param run Runs the call with the ask function, the call's own signal
   * (which outlives the request: the call runs on while parked), and the
   * current route.
   * @param signal The request's signal: the caller went away or cancelled.
   */
  async start<T, R>(
    tool: string,
    canAnswer: (method: InputMethod) => boolean,
    route: R,
    run: (ask: AskCaller, signal: AbortSignal, route: () => R) => Promise<T>,
    signal: AbortSignal,
  ): Promise<Step<T>> {
    const call = new RelayedCall<T, R>(tool, canAnswer, route);
    run(call.ask, call.controller.signal, () => call.route).then(
      (value) => call.settled = { value },
      (error) => call.settled = { error },
    ).finally(() => call.wake());
    return await this.#step(call, signal);
  }

  /**
   * Answers a parked call's questions and waits for its next step.
   *
   * @throws {GatewayError} `NOT_FOUND` when the call is no longer waiting
   * (it ended, its caller took too long, or another process parked it), or
   * the state names another tool.
   */
  async resume<T, R>(
    state: RelayState,
    tool: string,
    answers: Record<string, unknown>,
    route: R,
    signal: AbortSignal,
  ): Promise<Step<T>> {
    const call = this.#parked.get(state.call) as RelayedCall<T, R> | undefined;
    if (!call || call.tool !== tool || call.round !== state.round) {
      throw new GatewayError(
        "NOT_FOUND",
        `No call of ${tool} is waiting for this answer: it ended, was answered already, its caller took longer than ${
          this.#answerTimeoutMs / 1000
        } s, or another toolgate instance holds it; call the tool again`,
        { details: { tool } },
      );
    }
    this.#parked.delete(call.id);
    call.unpark();
    call.route = route;
    for (const question of [...call.questions]) {
      if (!question.sent) continue;
      const keys = Object.keys(question.requests);
      if (!keys.every((key) => key in answers)) {
        // Unanswered: asked again in the next input_required result.
        question.sent = false;
        continue;
      }
      call.questions.splice(call.questions.indexOf(question), 1);
      question.resolve(Object.fromEntries(keys.map((key) => [key, answers[key]])));
    }
    return await this.#step(call, signal);
  }

  /** Waits until the call ends or asks; parks it in the second case. */
  async #step<T, R>(call: RelayedCall<T, R>, signal: AbortSignal): Promise<Step<T>> {
    const cancel = () => call.controller.abort(signal.reason);
    signal.addEventListener("abort", cancel, { once: true });
    try {
      await call.next();
    } finally {
      signal.removeEventListener("abort", cancel);
    }
    if (call.settled) {
      if ("error" in call.settled) throw call.settled.error;
      return { kind: "done", value: call.settled.value };
    }
    const requests: Record<string, InputRequest> = {};
    for (const question of call.questions) {
      question.sent = true;
      Object.assign(requests, question.requests);
    }
    this.#parked.set(call.id, call);
    call.round++;
    call.park(this.#answerTimeoutMs, () => {
      if (this.#parked.get(call.id) !== call) return;
      this.#parked.delete(call.id);
      call.controller.abort(
        new GatewayError(
          "CANCELLED",
          `The caller of ${call.tool} did not answer its request for input within ${
            this.#answerTimeoutMs / 1000
          } s`,
          { details: { tool: call.tool } },
        ),
      );
    });
    return {
      kind: "input",
      requests,
      state: { call: call.id, tool: call.tool, round: call.round },
    };
  }

  /** Cancels every parked call (the server is stopping). */
  close(): void {
    for (const call of this.#parked.values()) {
      call.unpark();
      call.controller.abort(new GatewayError("UNAVAILABLE", "The server is shutting down"));
    }
    this.#parked.clear();
  }
}
