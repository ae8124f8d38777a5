/**
 * The answer to one request to an incoming endpoint: the checks in order
 * (loop, method, size, type, signature, JSON, rate limit), the mapping,
 * de-duplication, and the accepted payload recorded and queued. Private to
 * `src/webhooks`.
 *
 * @module
 */
import type { Config } from "../config/mod.ts";
import { LOOP_HEADER } from "../egress/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller } from "../gateway/mod.ts";
import { newId } from "../ids.ts";
import type { IncomingWebhook, Store } from "../store/mod.ts";
import { activeTraceparent, annotate } from "../tracing/mod.ts";
import type { AuditLog } from "../audit/mod.ts";
import type { MappedCall } from "./incoming_map.ts";
import { verifyIncoming } from "./incoming_verify.ts";
import type { Admission, PendingJobs } from "./_pending.ts";
import { isFormBody, parseForm, parseObject, readLimited, tooLarge } from "./_incoming_body.ts";
import type { JobClaims } from "./_incoming_claims.ts";
import { DEDUPE_STALE_MS, DEDUPE_TTL_MS, dedupeId, duplicate } from "./_incoming_dedupe.ts";
import type { IncomingEndpoints } from "./_incoming_endpoints.ts";
import type { PayloadLog } from "./_incoming_payload_log.ts";
import type { JobQueue } from "./_incoming_queue.ts";
import type { EndpointRateLimit } from "./_incoming_rate_limit.ts";
import type { IncomingStats } from "./_incoming_stats.ts";
import type { WaitingCalls } from "./_incoming_wait.ts";

const encoder = new TextEncoder();

/** The audit log as the router needs it: appends that resolve with the committed entry. */
export type IncomingAuditLog = Pick<AuditLog, "append">;

/** An incoming payload's answer as `IncomingRouterOptions.onPayload` is told of it. */
export interface IncomingPayloadObservation {
  endpointId: string;
  status: "accepted" | "skipped" | "duplicate" | "rejected";
  /** The error code of a rejected payload. */
  code?: string;
}

/** What {@linkcode IncomingIntake} works with. */
export interface IncomingIntakeOptions {
  store: Store;
  audit: IncomingAuditLog;
  config: Config;
  log: (message: string) => void;
  now: () => number;
  loopMarker: string | undefined;
  onPayload: ((payload: IncomingPayloadObservation) => void) | undefined;
  pendingJobs: PendingJobs;
  endpoints: IncomingEndpoints;
  rateLimit: EndpointRateLimit;
  stats: IncomingStats;
  payloadLog: PayloadLog;
  claims: JobClaims;
  jobs: JobQueue;
  waiting: WaitingCalls;
}

/** Answers the requests to incoming endpoints: refused, skipped, duplicate, or accepted. */
export class IncomingIntake {
  #store: Store;
  #audit: IncomingAuditLog;
  #config: Config;
  #log: (message: string) => void;
  #now: () => number;
  #loopMarker: string | undefined;
  #onPayload: ((payload: IncomingPayloadObservation) => void) | undefined;
  #pendingJobs: PendingJobs;
  #endpoints: IncomingEndpoints;
  #rateLimit: EndpointRateLimit;
  #stats: IncomingStats;
  #payloadLog: PayloadLog;
  #claims: JobClaims;
  #jobs: JobQueue;
  #waiting: WaitingCalls;

  /** @param options Store, audit log, configuration and the router's parts a payload updates. */
  constructor(options: IncomingIntakeOptions) {
    this.#store = options.store;
    this.#audit = options.audit;
    this.#config = options.config;
    this.#log = options.log;
    this.#now = options.now;
    this.#loopMarker = options.loopMarker;
    this.#onPayload = options.onPayload;
    this.#pendingJobs = options.pendingJobs;
    this.#endpoints = options.endpoints;
    this.#rateLimit = options.rateLimit;
    this.#stats = options.stats;
    this.#payloadLog = options.payloadLog;
    this.#claims = options.claims;
    this.#jobs = options.jobs;
    this.#waiting = options.waiting;
  }

  /** The answer to a request: a refusal (a {@linkcode GatewayError}) becomes its error response. */
  async answer(request: Request, endpoint: IncomingWebhook): Promise<Response> {
    try {
      return await this.#handle(request, endpoint);
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      this.#stats.count(endpoint.id, "rejected");
      this.#onPayload?.({ endpointId: endpoint.id, status: "rejected", code: error.code });
      this.#log(`incoming ${endpoint.path}: rejected ${error.status} ${error.code}`);
      const headers: Record<string, string> = {};
      const details = error.details as { allow?: string; retry_after_s?: number } | undefined;
      if (details?.allow) headers["Allow"] = details.allow;
      if (details?.retry_after_s) headers["Retry-After"] = String(details.retry_after_s);
      return errorResponse(error, headers);
    }
  }

  async #handle(request: Request, endpoint: IncomingWebhook): Promise<Response> {
    const marker = this.#loopMarker;
    if (marker !== undefined && request.headers.get(LOOP_HEADER) === marker) {
      throw new GatewayError(
        "LOOP_DETECTED",
        `Refused: the request to ${endpoint.path} came from this toolgate deployment itself ` +
          `(${LOOP_HEADER}: ${marker}), so handling it could loop; point the webhook or ` +
          `http_request at another receiver`,
      );
    }
    if (request.method !== "POST") {
      throw new GatewayError(
        "METHOD_NOT_ALLOWED",
        `Method ${request.method} is not allowed on ${endpoint.path}: use POST`,
        { details: { allow: "POST" } },
      );
    }
    const wait = new URL(request.url).searchParams.get("wait") === "true";
    // An endpoint with a secret answers ?wait=true once the signature verified.
    const waitCaller = wait && !endpoint.secret
      ? await this.#waiting.authorize(request, endpoint)
      : undefined;
    // Backpressure: a payload that would wait past the queue's bound is
    // refused before its body is read (?wait=true leaves no job to wait).
    const admission = wait ? undefined : this.#pendingJobs.admit(endpoint.id, endpoint.path);
    try {
      return await this.#receive(request, endpoint, wait, admission, waitCaller);
    } finally {
      admission?.abandoned(); // No-op once the job was accepted.
    }
  }

  /** The rest of a request, once it may be accepted: body, signature, mapping, dedupe. */
  async #receive(
    request: Request,
    endpoint: IncomingWebhook,
    wait: boolean,
    admission: Admission | undefined,
    waitCaller?: Caller,
  ): Promise<Response> {
    const limit = this.#config.incoming.body_limit_bytes;
    const declared = Number(request.headers.get("content-length") ?? NaN);
    if (declared > limit) throw tooLarge(limit);
    const form = isFormBody(request.headers);
    const body = await readLimited(request, limit);
    let signedId: string | undefined;
    if (endpoint.secret) {
      // Over the raw bytes, before parsing; the result's id (Standard
      // Webhooks' webhook-id) is the signed delivery id.
      ({ id: signedId } = verifyIncoming(request.headers, body, {
        scheme: endpoint.verify ?? "hmac-sha256",
        secret: endpoint.secret,
        ...(endpoint.signature_header ? { signatureHeader: endpoint.signature_header } : {}),
        ...(endpoint.tolerance_s ? { toleranceS: endpoint.tolerance_s } : {}),
        now: this.#now(),
      }));
    }
    const payload = form ? parseForm(body) : parseObject(body);
    this.#rateLimit.take(endpoint);
    const jobId = newId("inj");
    const receivedAt = new Date(this.#now()).toISOString();
    const call = this.#endpoints.mappingOf(endpoint).apply(payload, request.headers);
    if ("skip" in call) return await this.#skip(endpoint, jobId, payload, call.skip, receivedAt);
    // A job's body is its handler's arguments as JSON: the payload's bytes as
    // they came, a form body as the object it was parsed into, or the
    // arguments a mapping built.
    const jobBody = call.args === payload && !form
      ? body
      : encoder.encode(JSON.stringify(call.args));
    const deliveryId = dedupeId(endpoint, request.headers, signedId);
    if (deliveryId !== undefined) {
      const seen = await this.#store.incoming.reserveDedupeKey({
        endpoint_id: endpoint.id,
        delivery_id: deliveryId,
        job_id: jobId,
        now: this.#now(),
        ttl_ms: DEDUPE_TTL_MS,
        stale_ms: DEDUPE_STALE_MS,
      });
      if (seen.status === "duplicate") {
        const answer = duplicate(endpoint, deliveryId, seen);
        this.#payloadLog.note(endpoint.id, newId("inj"), receivedAt, {
          status: "duplicate",
          job_id: seen.job_id,
        });
        this.#onPayload?.({ endpointId: endpoint.id, status: "duplicate" });
        return answer;
      }
    }
    try {
      const response = await this.#accept(
        endpoint,
        jobId,
        payload,
        jobBody,
        call,
        receivedAt,
        wait,
        admission,
        waitCaller,
      );
      if (deliveryId !== undefined) {
        // Confirmed before the reply: a retry the sender makes after it is a
        // duplicate, never "still being accepted". A failed write only means
        // the id is free again after a minute (the job is durable already).
        await this.#store.incoming.confirmDedupeKey(endpoint.id, deliveryId, jobId).catch(
          (error) =>
            this.#log(
              `incoming: cannot confirm delivery id ${deliveryId}: ${(error as Error).message}`,
            ),
        );
      }
      return response;
    } catch (error) {
      if (deliveryId !== undefined) {
        // Not accepted: the sender's retry must be, not answered as a duplicate.
        this.#background(
          this.#store.incoming.releaseDedupeKey(endpoint.id, deliveryId, jobId),
          `cannot release delivery id ${deliveryId}`,
        );
      }
      throw error;
    }
  }

  /** Records an accepted payload and queues (or, with `wait`, runs) its call. */
  async #accept(
    endpoint: IncomingWebhook,
    jobId: string,
    payload: Record<string, unknown>,
    jobBody: Uint8Array,
    call: Extract<MappedCall, { handler: string }>,
    receivedAt: string,
    wait: boolean,
    admission: Admission | undefined,
    waitCaller?: Caller,
  ): Promise<Response> {
    const traceparent = activeTraceparent();
    annotate({ "toolgate.incoming.job_id": jobId });
    const fields = {
      id: jobId,
      endpoint_id: endpoint.id,
      handler: call.handler,
      received_at: receivedAt,
      ...(traceparent !== undefined ? { traceparent } : {}),
    };
    // With ?wait=true the handler runs in this request and no job is stored.
    // Otherwise the job is written claimed by this router, which runs it;
    // past the queue's room it is written unclaimed, for whoever has room.
    const claim = wait ? undefined : this.#jobs.reserve();
    try {
      // A small payload's job is written in its audit entry's commit: both are
      // durable together, at the cost of one commit shared with other calls.
      const staged = wait ? undefined : this.#store.incoming.stage(fields, jobBody, claim);
      await this.#audit.append({
        kind: "webhook.incoming",
        tool: call.handler,
        session_id: jobId,
        input: payload,
        outcome: {
          accepted: true,
          endpoint_id: endpoint.id,
          endpoint: endpoint.name,
          job_id: jobId,
        },
      }, staged ? { writes: staged.writes } : {});
      this.#stats.count(endpoint.id, "received", receivedAt);
      this.#payloadLog.note(endpoint.id, jobId, receivedAt, {
        status: "accepted",
        handler: call.handler,
      });
      this.#onPayload?.({ endpointId: endpoint.id, status: "accepted" });
      if (wait) {
        return await this.#waiting.run(
          endpoint,
          jobId,
          call.handler,
          call.args,
          receivedAt,
          waitCaller,
        );
      }
      // The job's audit entry is the one whose session_id is the job id.
      const job = staged?.job ?? await this.#store.incoming.put(fields, jobBody, claim);
      admission?.accepted();
      if (claim) {
        this.#jobs.enqueue({ job, payload: call.args });
      } else {
        this.#jobs.markOverflow();
        this.#jobs.pump();
      }
      return Response.json({ id: jobId, status: "accepted" }, { status: 202 });
    } catch (error) {
      // The job may have been written all the same: it goes back to the store.
      if (claim) this.#claims.release(jobId);
      throw error;
    } finally {
      if (claim) this.#jobs.unreserve();
    }
  }

  /**
   * Records a payload that `--when` filtered out: accepted (202) and audited
   * as skipped, with no job and no handler call.
   */
  async #skip(
    endpoint: IncomingWebhook,
    jobId: string,
    payload: Record<string, unknown>,
    reason: string,
    receivedAt: string,
  ): Promise<Response> {
    await this.#audit.append({
      kind: "webhook.incoming",
      tool: endpoint.handler,
      session_id: jobId,
      input: payload,
      outcome: {
        accepted: true,
        skipped: reason,
        endpoint_id: endpoint.id,
        endpoint: endpoint.name,
        job_id: jobId,
      },
    });
    this.#stats.count(endpoint.id, "received", receivedAt);
    this.#payloadLog.note(endpoint.id, jobId, receivedAt, { status: "skipped", reason });
    this.#onPayload?.({ endpointId: endpoint.id, status: "skipped" });
    return Response.json({ id: jobId, status: "skipped", reason }, { status: 202 });
  }

  /** Runs a store write off the request's path, logging a failure. */
  #background(write: Promise<void>, what: string): void {
    write.catch((error) => this.#log(`incoming: ${what}: ${(error as Error).message}`));
  }
}

function errorResponse(error: GatewayError, headers: Record<string, string>): Response {
  return Response.json({ error: error.toJSON() }, { status: error.status, headers });
}
