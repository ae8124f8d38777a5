/**
 * The `?wait=true` path of an incoming payload: who may ask for the
 * handler's output, and the handler call run in the request whose result is
 * the answer. Private to `src/webhooks`.
 *
 * @module
 */
import type { Config } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller, Gateway } from "../gateway/mod.ts";
import { toErrorResult, toToolResult } from "../gateway/mod.ts";
import type { IncomingWebhook } from "../store/mod.ts";
import { bearerMatches } from "./incoming_verify.ts";
import { attemptOf } from "./_incoming_attempts.ts";
import type { IncomingEndpoints } from "./_incoming_endpoints.ts";
import type { PayloadLog } from "./_incoming_payload_log.ts";
import type { IncomingStats } from "./_incoming_stats.ts";

/** What {@linkcode WaitingCalls} works with. */
export interface WaitingCallsOptions {
  gateway: Gateway;
  config: Config;
  now: () => number;
  resolveCaller: ((authorization: string | undefined) => Promise<Caller>) | undefined;
  endpoints: IncomingEndpoints;
  stats: IncomingStats;
  payloadLog: PayloadLog;
}

/** Authorizes and runs the handler calls of `?wait=true` requests. */
export class WaitingCalls {
  #gateway: Gateway;
  #config: Config;
  #now: () => number;
  #resolveCaller: ((authorization: string | undefined) => Promise<Caller>) | undefined;
  #endpoints: IncomingEndpoints;
  #stats: IncomingStats;
  #payloadLog: PayloadLog;

  /** @param options Gateway, configuration and the router's parts a call updates. */
  constructor(options: WaitingCallsOptions) {
    this.#gateway = options.gateway;
    this.#config = options.config;
    this.#now = options.now;
    this.#resolveCaller = options.resolveCaller;
    this.#endpoints = options.endpoints;
    this.#stats = options.stats;
    this.#payloadLog = options.payloadLog;
  }

  /**
   * `?wait=true` answers the handler's output, so on an endpoint without a
   * secret it needs what the rest of the HTTP API needs: the API token, an
   * API key or an OAuth access token (`resolveCaller`); a server with none
   * of them configured (loopback only, where every route is open) lets it
   * through.
   *
   * @returns The caller the handler runs as, when one authenticated.
   * @throws {GatewayError} `UNAUTHORIZED` saying what to send.
   */
  async authorize(request: Request, endpoint: IncomingWebhook): Promise<Caller | undefined> {
    const header = request.headers.get("authorization") ?? undefined;
    const refuse = (why: string) =>
      new GatewayError(
        "UNAUTHORIZED",
        `Unauthorized: ?wait=true on ${endpoint.path} answers the handler's output, so it needs ` +
          `${why} or an endpoint with a secret (webhooks create --secret); without ?wait=true ` +
          `the payload is accepted with 202`,
      );
    if (this.#resolveCaller) {
      try {
        return await this.#resolveCaller(header);
      } catch (error) {
        if (error instanceof GatewayError && error.code === "UNAUTHORIZED") {
          throw refuse(
            "a token that authenticates (TOOLGATE_API_TOKEN, an API key or an OAuth " +
              "access token)",
          );
        }
        throw error;
      }
    }
    const token = this.#config.apiToken;
    if (!token) return undefined;
    if (bearerMatches(header ?? null, token)) return undefined;
    throw refuse(header ? "the right bearer token" : "Authorization: Bearer <TOOLGATE_API_TOKEN>");
  }

  /** Runs the handler in the request and answers its result (no job is stored). */
  async run(
    endpoint: IncomingWebhook,
    jobId: string,
    handler: string,
    args: Record<string, unknown>,
    receivedAt: string,
    caller?: Caller,
  ): Promise<Response> {
    try {
      const result = await this.#gateway.call(handler, args, {
        sessionId: jobId,
        source: "webhook",
        ...(caller ? { caller } : {}),
      });
      this.#payloadLog.note(endpoint.id, jobId, receivedAt, {
        status: "ok",
        handler,
        attempts: 1,
      });
      return Response.json({ id: jobId, status: "completed", result: toToolResult(result) });
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      this.#stats.countFailed(endpoint.id);
      this.#payloadLog.note(endpoint.id, jobId, receivedAt, {
        status: "failed",
        handler,
        attempts: 1,
        ...attemptOf(error, this.#now()),
        at: undefined,
      });
      if (error.code === "TOOL_INPUT_INVALID") {
        this.#endpoints.reportBadMapping(endpoint.id, handler, error);
      }
      const status = error.code === "TOOL_INPUT_INVALID" ? 422 : error.status;
      return Response.json(
        { id: jobId, status: "failed", error: error.toJSON(), result: toErrorResult(error) },
        { status },
      );
    }
  }
}
