/**
 * Incoming webhooks: named endpoints on the HTTP transport that validate a
 * payload, record it in the audit log, and route it to a handler tool from a
 * durable queue.
 *
 * Works on web-standard `Request`/`Response`, so the HTTP layer only mounts it.
 *
 * Several instances may share one store (PostgreSQL): each runs the jobs it
 * claimed in the store. A job accepted here is written claimed by this
 * router and runs here; jobs left in the store (a full queue, an instance
 * that stopped or died: its claims lapse) are claimed oldest first by
 * whichever instance has room. Claims are renewed while the jobs wait or
 * run, and given back on stop.
 *
 * @module
 */
import { getLog, lineSink } from "../log/mod.ts";
import { createHash } from "node:crypto";
import type { AuditLog } from "../audit/mod.ts";
import type { Config } from "../config/mod.ts";
import { LOOP_HEADER } from "../egress/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { Caller, Gateway } from "../gateway/mod.ts";
import { toErrorResult, toToolResult } from "../gateway/mod.ts";
import { newId } from "../ids.ts";
import type {
  IncomingAttempt,
  IncomingFailure,
  IncomingJob,
  IncomingLogEntry,
  IncomingWebhook,
  Store,
} from "../store/mod.ts";
import { INCOMING_LOG_SIZE } from "../store/mod.ts";
import { bearerMatches, verifyIncoming } from "./incoming_verify.ts";
import { IncomingMapping, type MappedCall } from "./incoming_map.ts";
import { type Admission, PendingJobs } from "./_pending.ts";
import { MAX_RETRIES, retryDelayMs } from "./retry_policy.ts";
import { activeTraceparent, annotate, traced } from "../tracing/mod.ts";

/** The audit log as the router needs it: appends that resolve with the committed entry. */
export type IncomingAuditLog = Pick<AuditLog, "append">;

/** Options of {@linkcode IncomingRouter}. */
export interface IncomingRouterOptions {
  store: Store;
  gateway: Gateway;
  audit: IncomingAuditLog;
  config: Config;
  /** Log sink (stderr). @default the `incoming` logger */
  log?: (message: string) => void;
  /** Handler calls running at once. @default 16 */
  concurrency?: number;
  /**
   * Most jobs queued in memory (each claimed); past it, accepted jobs wait
   * in the store unclaimed, and are claimed oldest first once the queue has
   * drained (here or by another instance sharing the store).
   * @default 10000
   */
  maxQueuedJobs?: number;
  /** Clock in ms. @default Date.now */
  now?: () => number;
  /**
   * Who sent a `?wait=true` request to an endpoint without a secret, from
   * its `Authorization` header: the HTTP transport's own authentication
   * (administrator token, API keys, OAuth), throwing `UNAUTHORIZED` when it
   * does not authenticate. The handler then runs as that caller. Without
   * it, only `TOOLGATE_API_TOKEN` is accepted.
   */
  resolveCaller?: (authorization: string | undefined) => Promise<Caller>;
  /** Random numbers in [0, 1) choosing the jitter of retry delays. @default Math.random */
  random?: () => number;
  /**
   * This deployment's loop marker (the store's deployment id): a request
   * carrying it in `X-Toolgate-Loop` came from this deployment itself (a
   * webhook delivery or an `http_request`) and is refused with
   * `508 LOOP_DETECTED` before anything else is checked, recorded or run.
   * @default none
   */
  loopMarker?: string;
  /** Told how each payload was answered (metrics). @default none */
  onPayload?: (payload: IncomingPayloadObservation) => void;
}

/** An incoming payload's answer as {@linkcode IncomingRouterOptions.onPayload} is told of it. */
export interface IncomingPayloadObservation {
  endpointId: string;
  status: "accepted" | "skipped" | "duplicate" | "rejected";
  /** The error code of a rejected payload. */
  code?: string;
}

const FORM_TYPE = "application/x-www-form-urlencoded";

const encoder = new TextEncoder();

/** How long a sender's delivery id is remembered (`dedupe_header`): 24 hours. */
export const DEDUPE_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * After how long a delivery id whose payload was never accepted (the accept
 * failed, or the process died before confirming it) is free again.
 */
const DEDUPE_STALE_MS = 60_000;

/** Longest delivery id kept as it is; a longer one is kept as its SHA-256. */
const DEDUPE_ID_MAX_CHARS = 200;

/**
 * Shortest life of a claim on a job without renewal (as the dispatcher's:
 * ten polls, at least this); claims are renewed every quarter of it.
 */
const CLAIM_MIN_TTL_MS = 5000;

/**
 * Most payload bytes the queue keeps in memory for jobs accepted by this
 * process (handlers then skip reading them back); past it, jobs read their
 * payload from the store when they run.
 */
const HELD_PAYLOAD_MAX_BYTES = 16 * 1024 * 1024;

/** How often a router sharing its store with other instances counts the waiting jobs (ms). */
const COUNT_EVERY_MS = 1000;

/** Completions written per commit at most (the store groups them by tens). */
const COMPLETIONS_PER_FLUSH = 100;

/** A queued job, with its payload when this process accepted it. */
interface QueuedJob {
  job: IncomingJob;
  payload?: Record<string, unknown>;
}

/** A finished job waiting for its completion (or its failed attempt) to be written. */
interface Completion {
  job: IncomingJob;
  /** The failed call: the job waits for `retry_at`, or without it becomes a failed job. */
  failure?: Omit<IncomingFailure, "job"> & {
    /** Put off by the handler's rate limit: waits for `retry_at`, `attempt` is not recorded. */
    putOff?: boolean;
  };
  settle(): void;
}

/** A handler whose rate limit put calls off: when its next call may go, and the spacing. */
interface Paced {
  /** The next free slot (epoch ms of `now`). */
  next: number;
  /** Time between two calls the limit lets through, in ms. */
  spacingMs: number;
}

/**
 * Error codes of a handler call that fails because of its input: the same
 * arguments fail again, so the job becomes a failed job at once. Any other
 * failure is retried (`TOOL_NOT_FOUND` too: the handler may appear once its
 * upstream connects).
 */
const INPUT_ERROR_CODES: ReadonlySet<string> = new Set(["TOOL_INPUT_INVALID", "INVALID_JSON"]);

/** The argument fields a `TOOL_INPUT_INVALID` names (`details.fields[].path`). */
function errorFields(error: unknown): string[] | undefined {
  if (!(error instanceof GatewayError) || error.code !== "TOOL_INPUT_INVALID") return undefined;
  const fields = (error.details as { fields?: { path?: unknown }[] } | undefined)?.fields;
  if (!Array.isArray(fields)) return undefined;
  const paths = fields.map((field) => field?.path).filter((p): p is string =>
    typeof p === "string"
  );
  return paths.length ? paths : undefined;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

interface StatsDelta {
  received: number;
  rejected: number;
  last?: string;
}

/** Serves every registered incoming endpoint. */
export class IncomingRouter {
  #store: Store;
  #gateway: Gateway;
  #audit: IncomingAuditLog;
  #onPayload: ((payload: IncomingPayloadObservation) => void) | undefined;
  #config: Config;
  #log: (message: string) => void;
  #loopMarker: string | undefined;
  #now: () => number;
  #random: () => number;
  /** Handlers whose rate limit refused a call, until their next slot has passed. */
  #paced = new Map<string, Paced>();
  #concurrency: number;
  #maxQueued: number;
  /** The owner of this router's claims on jobs. */
  #owner = newId("inr");
  /** Whether other instances run jobs of the same store (they leave jobs to claim). */
  #shared: boolean;
  #claimTtlMs: number;
  /** When claims were last renewed (epoch ms). */
  #claimsRenewedAt = -Infinity;
  /** Queue places promised to claims in flight: jobs being accepted, a reload's page. */
  #reserved = 0;
  /** Jobs whose claims go back to the store (not completed here after all). */
  #toRelease = new Set<string>();
  /** Jobs whose handler call (and the writing of its outcome) runs here now. */
  #started = new Set<string>();
  /** Started jobs claimed again meanwhile: their claims go back once the call is done. */
  #reclaimed = new Set<string>();
  #ticking: Promise<void> | null = null;
  /** The last reload failed: the next waits for the poll. */
  #reloadFailed = false;
  #byPath = new Map<string, IncomingWebhook>();
  #resolveCaller: ((authorization: string | undefined) => Promise<Caller>) | undefined;
  /** Jobs waiting for their handler, per endpoint: the queue's bounds. */
  #pendingJobs: PendingJobs;
  /** When the waiting jobs were last counted in the store (epoch ms). */
  #countedAt = -Infinity;
  /** Parsed mappings, by endpoint record (replaced when the registration changes). */
  #mappings = new WeakMap<IncomingWebhook, IncomingMapping>();
  /** Endpoints whose mapping gave a handler invalid arguments (reported once). */
  #badMappings = new Set<string>();
  #buckets = new Map<string, Bucket>();
  #stats = new Map<string, StatsDelta>();
  #version = -1n;
  #timer: ReturnType<typeof setInterval> | undefined;
  #queue: QueuedJob[] = [];
  #queued = new Set<string>();
  /** Payload bytes held by queued jobs. */
  #heldBytes = 0;
  #completions: Completion[] = [];
  #completing: Promise<void> | null = null;
  /** Jobs may be waiting in the store only (the queue was full). */
  #overflow = false;
  #reloading: Promise<void> | null = null;
  #running = new Set<Promise<void>>();
  #stopped = false;
  /** Due times (epoch ms) of the retries this router scheduled, ascending. */
  #dueTimes: number[] = [];
  /** Payload log entries not yet written, by endpoint then entry id (the newest 20 each). */
  #payloads = new Map<string, Map<string, IncomingLogEntry>>();

  /** @param options Store, gateway, audit log and configuration. */
  constructor(options: IncomingRouterOptions) {
    const {
      log = lineSink(getLog("incoming")),
      concurrency = 16,
      maxQueuedJobs = 10_000,
      now = Date.now,
      random = Math.random,
    } = options;
    this.#store = options.store;
    this.#gateway = options.gateway;
    this.#audit = options.audit;
    this.#onPayload = options.onPayload;
    this.#config = options.config;
    this.#log = log;
    this.#loopMarker = options.loopMarker;
    this.#now = now;
    this.#random = random;
    this.#concurrency = concurrency;
    this.#maxQueued = maxQueuedJobs;
    this.#shared = options.store.incoming.sharedClaims;
    this.#claimTtlMs = Math.max(CLAIM_MIN_TTL_MS, options.config.webhooks.poll_ms * 10);
    this.#resolveCaller = options.resolveCaller;
    this.#pendingJobs = new PendingJobs(
      options.config.incoming.max_pending_per_endpoint,
      options.config.incoming.max_pending,
      now,
    );
  }

  /**
   * Loads the endpoints, claims jobs left by an earlier process, and starts
   * polling (every `poll_ms`) for registration changes (CLI edits), for
   * renewing its claims and, on a shared store, for jobs to claim.
   */
  async start(): Promise<void> {
    await this.refresh();
    await this.#store.incoming.sweepOrphanBodies();
    await this.#countPending();
    this.#overflow = true;
    await this.#reload();
    this.#timer = setInterval(() => {
      this.#ticking ??= this.#tick().finally(() => this.#ticking = null);
    }, this.#config.webhooks.poll_ms);
  }

  /** One poll: registrations, counters, claims. */
  async #tick(): Promise<void> {
    await Promise.all([
      this.refresh().catch((e) => this.#log(`incoming: refresh failed: ${(e as Error).message}`)),
      this.#flushStats().catch((e) =>
        this.#log(`incoming: stats flush failed: ${(e as Error).message}`)
      ),
      this.#flushPayloadLog(),
    ]);
    if (this.#stopped) return;
    try {
      const now = this.#now();
      // Claims last claimTtlMs: renewed a few times per life, not on every poll.
      if (
        (this.#queued.size || this.#reserved) &&
        now - this.#claimsRenewedAt >= this.#claimTtlMs / 4
      ) {
        await this.#store.incoming.renewClaims(this.#owner, now + this.#claimTtlMs);
        this.#claimsRenewedAt = now;
      }
      if (this.#toRelease.size) {
        const ids = [...this.#toRelease];
        // Not one claimed again and queued here meanwhile.
        const free = ids.filter((id) => !this.#queued.has(id));
        await this.#store.incoming.releaseClaims(this.#owner, free);
        for (const id of ids) this.#toRelease.delete(id);
        // Those not completed wait in the store again.
        this.#overflow = true;
      }
    } catch (error) {
      this.#log(`incoming: cannot renew claims: ${(error as Error).message}`);
    }
    this.#reloadFailed = false;
    // Other instances accept and finish jobs too: count what waits now and then.
    if (this.#shared && this.#now() - this.#countedAt >= COUNT_EVERY_MS) {
      await this.#countPending().catch((e) =>
        this.#log(`incoming: cannot count waiting jobs: ${(e as Error).message}`)
      );
    }
    // Other instances leave jobs to claim: released, lapsed, or past their queue.
    if (this.#shared) this.#overflow = true;
    // Retries fall due; while idle, look for any due job (replayed failed
    // jobs, retries scheduled by an earlier process).
    if (this.#retriesDue(this.#now()) || this.#idleNow()) this.#overflow = true;
    this.#pump();
  }

  /** Counts the jobs waiting in the store, for the queue's bounds. */
  async #countPending(): Promise<void> {
    this.#countedAt = this.#now();
    this.#pendingJobs.replace(await this.#store.incoming.pendingCounts());
  }

  /** Accepted payloads waiting for their handler: one endpoint's, or all. */
  waiting(endpointId?: string): number {
    return this.#pendingJobs.waiting(endpointId);
  }

  /** A claim made now, for jobs this router takes. */
  #claim(): { owner: string; until: number } {
    return { owner: this.#owner, until: this.#now() + this.#claimTtlMs };
  }

  /** Reloads the endpoints when the registrations changed. */
  async refresh(): Promise<void> {
    const version = await this.#store.registrationsVersion();
    if (version === this.#version) return;
    const endpoints = await this.#store.webhooks.listIncoming();
    this.#byPath = new Map(endpoints.map((endpoint) => [endpoint.path, endpoint]));
    this.#version = version;
  }

  /** The endpoint registered at `path`, if any. */
  match(path: string): IncomingWebhook | undefined {
    return this.#byPath.get(path);
  }

  /** The registered endpoints. */
  endpoints(): IncomingWebhook[] {
    return [...this.#byPath.values()];
  }

  /**
   * Handles a request to an endpoint: its own loop marker 508, method 405,
   * `?wait=true` without the API token on an endpoint without a secret 401,
   * size 413, content type 415 (JSON or form-encoded), signature 401 (the
   * endpoint's scheme, see `incoming_verify.ts`), JSON 400, rate limit 429;
   * then records and accepts (202), or with `?wait=true` runs the handler and
   * answers its result.
   */
  handle(request: Request, endpoint: IncomingWebhook): Promise<Response> {
    // A span per payload; its handler call (now or from the queue) is its child.
    return traced(`incoming_webhook ${endpoint.name}`, {
      attributes: {
        "toolgate.incoming.endpoint": endpoint.name,
        "toolgate.incoming.endpoint_id": endpoint.id,
      },
    }, async (span) => {
      const response = await this.#answer(request, endpoint);
      span.set({ "http.response.status_code": response.status });
      if (response.status >= 400) span.fail(String(response.status));
      return response;
    });
  }

  async #answer(request: Request, endpoint: IncomingWebhook): Promise<Response> {
    try {
      return await this.#handle(request, endpoint);
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      this.#count(endpoint.id, "rejected");
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
      ? await this.#authorizeWait(request, endpoint)
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
    const type = (request.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    const form = type === FORM_TYPE;
    if (!form && type !== "application/json" && !/^application\/[a-z0-9.+-]+\+json$/.test(type)) {
      throw new GatewayError(
        "UNSUPPORTED_MEDIA_TYPE",
        `Unsupported Content-Type "${type || "(none)"}": send application/json (or ` +
          `application/<type>+json) or ${FORM_TYPE}`,
      );
    }
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
    this.#takeToken(endpoint);
    const jobId = newId("inj");
    const receivedAt = new Date(this.#now()).toISOString();
    const call = this.#mappingOf(endpoint).apply(payload, request.headers);
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
        this.#notePayload(endpoint.id, newId("inj"), receivedAt, {
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
    const claim = !wait && this.#queue.length + this.#reserved < this.#maxQueued
      ? this.#claim()
      : undefined;
    if (claim) this.#reserved++;
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
      this.#count(endpoint.id, "received", receivedAt);
      this.#notePayload(endpoint.id, jobId, receivedAt, {
        status: "accepted",
        handler: call.handler,
      });
      this.#onPayload?.({ endpointId: endpoint.id, status: "accepted" });
      if (wait) {
        return await this.#runNow(endpoint, jobId, call.handler, call.args, receivedAt, waitCaller);
      }
      // The job's audit entry is the one whose session_id is the job id.
      const job = staged?.job ?? await this.#store.incoming.put(fields, jobBody, claim);
      admission?.accepted();
      if (claim) {
        this.#enqueue({ job, payload: call.args });
      } else {
        this.#overflow = true;
        this.#pump();
      }
      return Response.json({ id: jobId, status: "accepted" }, { status: 202 });
    } catch (error) {
      // The job may have been written all the same: it goes back to the store.
      if (claim) this.#toRelease.add(jobId);
      throw error;
    } finally {
      if (claim) this.#reserved--;
    }
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
  async #authorizeWait(request: Request, endpoint: IncomingWebhook): Promise<Caller | undefined> {
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
    this.#count(endpoint.id, "received", receivedAt);
    this.#notePayload(endpoint.id, jobId, receivedAt, { status: "skipped", reason });
    this.#onPayload?.({ endpointId: endpoint.id, status: "skipped" });
    return Response.json({ id: jobId, status: "skipped", reason }, { status: 202 });
  }

  /** The endpoint's mapping, parsed once per registration. */
  #mappingOf(endpoint: IncomingWebhook): IncomingMapping {
    let mapping = this.#mappings.get(endpoint);
    if (!mapping) {
      mapping = new IncomingMapping(endpoint, endpoint.handler);
      this.#mappings.set(endpoint, mapping);
    }
    return mapping;
  }

  /** Runs a store write off the request's path, logging a failure. */
  #background(write: Promise<void>, what: string): void {
    write.catch((error) => this.#log(`incoming: ${what}: ${(error as Error).message}`));
  }

  /**
   * Says once per endpoint, on stderr, that its mapping gave the handler
   * arguments it refused, with the fields named.
   */
  #reportBadMapping(endpointId: string, handler: string, error: GatewayError): void {
    const endpoint = [...this.#byPath.values()].find((e) => e.id === endpointId);
    if (!endpoint?.map || this.#badMappings.has(endpointId)) return;
    this.#badMappings.add(endpointId);
    this.#log(
      `incoming ${endpoint.path}: its --map gives ${handler} arguments it refuses: ` +
        `${error.message}; the payloads fail until the mapping (toolgate webhooks show ` +
        `${endpoint.id}) matches ${handler}'s input`,
    );
  }

  async #runNow(
    endpoint: IncomingWebhook,
    jobId: string,
    handler: string,
    args: Record<string, unknown>,
    receivedAt: string,
    caller?: Caller,
  ) {
    try {
      const result = await this.#gateway.call(handler, args, {
        sessionId: jobId,
        source: "webhook",
        ...(caller ? { caller } : {}),
      });
      this.#notePayload(endpoint.id, jobId, receivedAt, { status: "ok", handler, attempts: 1 });
      return Response.json({ id: jobId, status: "completed", result: toToolResult(result) });
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      this.#countFailed(endpoint.id);
      this.#notePayload(endpoint.id, jobId, receivedAt, {
        status: "failed",
        handler,
        attempts: 1,
        ...attemptOf(error, this.#now()),
        at: undefined,
      });
      if (error.code === "TOOL_INPUT_INVALID") this.#reportBadMapping(endpoint.id, handler, error);
      const status = error.code === "TOOL_INPUT_INVALID" ? 422 : error.status;
      return Response.json(
        { id: jobId, status: "failed", error: error.toJSON(), result: toErrorResult(error) },
        { status },
      );
    }
  }

  #takeToken(endpoint: IncomingWebhook): void {
    const rate = endpoint.rate_limit_per_s;
    if (!rate) return;
    const now = this.#now();
    const capacity = Math.max(1, rate);
    const bucket = this.#buckets.get(endpoint.id) ?? { tokens: capacity, updatedAt: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.updatedAt) / 1000) * rate);
    bucket.updatedAt = now;
    this.#buckets.set(endpoint.id, bucket);
    if (bucket.tokens < 1) {
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / rate));
      throw new GatewayError(
        "RATE_LIMITED",
        `Too many requests to ${endpoint.path}: the limit is ${rate}/s; retry after ${retryAfter} s`,
        { details: { retry_after_s: retryAfter } },
      );
    }
    bucket.tokens -= 1;
  }

  #count(id: string, counter: "received" | "rejected", at?: string): void {
    const delta = this.#stats.get(id) ?? { received: 0, rejected: 0 };
    delta[counter]++;
    if (at) delta.last = at;
    this.#stats.set(id, delta);
  }

  #countFailed(id: string): void {
    this.#store.webhooks.addIncomingStats(id, { failed: 1 }).catch((e) =>
      this.#log(`incoming: stats failed: ${(e as Error).message}`)
    );
  }

  async #flushStats(): Promise<void> {
    const pending = [...this.#stats];
    this.#stats.clear();
    for (const [id, delta] of pending) {
      await this.#store.webhooks.addIncomingStats(id, delta, delta.last);
    }
  }

  /** Queues a job claimed by this router (room was reserved for it). */
  #enqueue(queued: QueuedJob): void {
    const { job } = queued;
    if (this.#queued.has(job.id)) {
      // Claimed again while its last call's outcome was being written (a
      // retry due at once): nothing here runs it again, so its claim goes
      // back once that call is done, and it is claimed afresh when due.
      // Otherwise its claim lapsed while it waited here: the queued copy runs.
      if (this.#started.has(job.id)) this.#reclaimed.add(job.id);
      return;
    }
    this.#queued.add(job.id);
    if (queued.payload) {
      if (this.#heldBytes + job.body_bytes > HELD_PAYLOAD_MAX_BYTES) {
        queued = { job };
      } else {
        this.#heldBytes += job.body_bytes;
      }
    }
    this.#queue.push(queued);
    this.#pump();
  }

  /**
   * Claims jobs that wait in the store, oldest first, as many as the queue
   * has room for; when the page was full, more may wait, and the next
   * reload (once the queue is half drained) takes them.
   */
  #reload(): Promise<void> {
    if (this.#reloading) return this.#reloading;
    const room = this.#maxQueued - this.#queue.length - this.#reserved;
    if (room <= 0) {
      // Full, counting the jobs being accepted: the next drain tries again.
      this.#overflow = true;
      return Promise.resolve();
    }
    this.#overflow = false;
    this.#reserved += room;
    this.#reloading = (async () => {
      try {
        const jobs = await this.#store.incoming.claim({
          ...this.#claim(),
          now: this.#now(),
          limit: room,
        });
        for (const job of jobs) this.#enqueue({ job });
        if (jobs.length === room) this.#overflow = true;
      } catch (error) {
        this.#overflow = true;
        // Not again at once: the next poll tries.
        this.#reloadFailed = true;
        this.#log(`incoming: cannot claim queued jobs: ${(error as Error).message}`);
      } finally {
        this.#reserved -= room;
        this.#reloading = null;
        this.#pump();
      }
    })();
    return this.#reloading;
  }

  #pump(): void {
    // Top the queue up from the store once it is half drained.
    if (
      this.#overflow && this.#queue.length <= this.#maxQueued / 2 && !this.#reloading &&
      !this.#reloadFailed && !this.#stopped
    ) {
      void this.#reload();
    }
    while (!this.#stopped && this.#running.size < this.#concurrency && this.#queue.length) {
      const queued = this.#queue.shift()!;
      if (queued.payload) this.#heldBytes -= queued.job.body_bytes;
      const id = queued.job.id;
      this.#started.add(id);
      const run = this.#run(queued).finally(() => {
        this.#running.delete(run);
        this.#queued.delete(id);
        this.#started.delete(id);
        if (this.#reclaimed.delete(id)) this.#toRelease.add(id);
        this.#pump();
      });
      this.#running.add(run);
    }
  }

  async #run({ job, payload }: QueuedJob): Promise<void> {
    let failure: Completion["failure"];
    try {
      let args = payload;
      if (!args) {
        const body = await this.#store.incoming.readBody(job);
        // Completed meanwhile (by an earlier claimer): nothing left to do.
        if (body === null) {
          this.#toRelease.add(job.id);
          return;
        }
        args = parseObject(body);
      }
      // The handler's rate limit is known to refuse it now: wait for a slot, no call made.
      // A job that waited for its time (its slot, or a retry) calls.
      const slot = job.next_attempt_at === undefined ? this.#slotFor(job.handler) : undefined;
      if (slot !== undefined) {
        failure = {
          attempt: rateLimited(job.handler, slot, this.#now()),
          retry_at: slot,
          putOff: true,
        };
      } else {
        await this.#gateway.call(job.handler, args, {
          sessionId: job.id,
          source: "webhook",
          ...(job.traceparent !== undefined ? { trace: job.traceparent } : {}),
        });
      }
    } catch (error) {
      const now = this.#now();
      const attempt = attemptOf(error, now);
      const limited = rateLimitWait(error);
      if (limited !== undefined) {
        // Refused by the tool's rate limit: not a failure. The job waits for its own slot,
        // spaced by the limit, without using up a retry.
        failure = { attempt, retry_at: this.#pace(job.handler, now, limited), putOff: true };
      } else {
        failure = this.#failed(job, error, attempt, now);
      }
    }
    await new Promise<void>((settle) => {
      this.#completions.push({ job, failure, settle });
      this.#completing ??= this.#flushCompletions();
    });
  }

  /**
   * Writes the completions of finished jobs, those waiting together in
   * shared commits, until none is left.
   */
  async #flushCompletions(): Promise<void> {
    // Let the jobs finishing in this turn join the first commit.
    await Promise.resolve();
    try {
      while (this.#completions.length) {
        const batch = this.#completions.splice(0, COMPLETIONS_PER_FLUSH);
        try {
          const done = batch.filter(({ failure }) => !failure);
          const failed: IncomingFailure[] = batch.flatMap(({ job, failure }) =>
            !failure
              ? []
              : failure.putOff
              ? [{ job, retry_at: failure.retry_at }]
              : [{ job, attempt: failure.attempt, retry_at: failure.retry_at }]
          );
          const [removed, changed] = await Promise.all([
            done.length
              ? this.#store.incoming.complete(done.map(({ job }) => ({ job, failed: false })))
              : [],
            failed.length ? this.#store.incoming.fail(failed) : [],
          ]);
          // Done, or failed for good: no longer waiting (a retry still waits).
          removed.forEach((gone, i) => {
            if (gone) this.#pendingJobs.completed(done[i].job.endpoint_id);
          });
          changed.forEach((found, i) => {
            if (found && failed[i].retry_at === undefined) {
              this.#pendingJobs.completed(failed[i].job.endpoint_id);
            }
          });
          for (const { job, failure } of batch) this.#noteOutcome(job, failure);
        } catch (error) {
          const ids = batch.map(({ job }) => job.id);
          this.#log(
            `incoming jobs ${ids.join(", ")}: cannot mark completed: ${
              (error as Error).message
            }; they will run again`,
          );
          // Still in the store: claimable again once their claims are given back.
          for (const id of ids) this.#toRelease.add(id);
        }
        for (const { settle } of batch) settle();
      }
    } finally {
      this.#completing = null;
    }
  }

  /** The failure of a handler call: a retry on the schedule, or a failed job. */
  #failed(
    job: IncomingJob,
    error: unknown,
    attempt: IncomingAttempt,
    now: number,
  ): NonNullable<Completion["failure"]> {
    // Calls made so far, this one included; retry n waits 2^(n-1) × the base.
    const calls = (job.attempts?.length ?? 0) + 1;
    const last = INPUT_ERROR_CODES.has(attempt.code) || calls > MAX_RETRIES;
    const failure = last ? { attempt } : {
      attempt,
      retry_at: now + retryDelayMs(calls, this.#config.incoming.retry_base_ms, this.#random()),
    };
    this.#log(
      `incoming job ${job.id}: handler ${job.handler} failed: ${attempt.code}` +
        (failure.retry_at === undefined
          ? ` (attempt ${calls}); kept as a failed job: toolgate incoming failed show ${job.id}`
          : ` (attempt ${calls}); retry at ${new Date(failure.retry_at).toISOString()}`),
    );
    if (error instanceof GatewayError && attempt.code === "TOOL_INPUT_INVALID") {
      this.#reportBadMapping(job.endpoint_id, job.handler, error);
    }
    return failure;
  }

  /**
   * A slot for a call of `handler` after its rate limit refused one at `now`
   * (`waitMs` until a call may go): the first free one, then the next, one
   * `spacingMs` (the limit's time per call) apart, so the jobs put off wait in
   * turn instead of all trying again at once.
   */
  #pace(handler: string, now: number, limit: { waitMs: number; spacingMs: number }): number {
    const spacingMs = Math.max(1, limit.spacingMs);
    const paced = this.#paced.get(handler);
    const slot = Math.max(
      now + Math.max(1, limit.waitMs),
      paced && paced.next > now ? paced.next : 0,
    );
    this.#paced.set(handler, { next: slot + spacingMs, spacingMs });
    if (!paced || paced.next <= now) {
      this.#log(
        `incoming: handler ${handler} is over its rate limit; its jobs wait ${spacingMs} ms apart`,
      );
    }
    return slot;
  }

  /** The slot of a job of `handler` while its rate limit is known to refuse calls; else none. */
  #slotFor(handler: string): number | undefined {
    const paced = this.#paced.get(handler);
    const now = this.#now();
    if (!paced || paced.next - paced.spacingMs <= now) {
      if (paced && paced.next <= now) this.#paced.delete(handler);
      return undefined;
    }
    const slot = paced.next;
    paced.next = slot + paced.spacingMs;
    return slot;
  }

  /** Notes a finished call's outcome in the payload log; a retry's due time is watched. */
  #noteOutcome(job: IncomingJob, failure: Completion["failure"]): void {
    // A call put off by the rate limit is not counted.
    const calls = (job.attempts?.length ?? 0) + (failure?.putOff ? 0 : 1);
    const base = { handler: job.handler, attempts: calls };
    if (!failure) {
      this.#notePayload(job.endpoint_id, job.id, job.received_at, { status: "ok", ...base });
      return;
    }
    const { at: _at, ...error } = failure.attempt!;
    if (failure.retry_at === undefined) {
      this.#notePayload(job.endpoint_id, job.id, job.received_at, {
        status: "failed",
        ...base,
        ...error,
      });
      return;
    }
    this.#watchDue(failure.retry_at);
    this.#notePayload(job.endpoint_id, job.id, job.received_at, {
      status: "retrying",
      ...base,
      ...error,
      next_attempt_at: new Date(failure.retry_at).toISOString(),
    });
  }

  /** Remembers a retry's due time, to claim it once due. */
  #watchDue(at: number): void {
    const times = this.#dueTimes;
    let i = times.length;
    while (i > 0 && times[i - 1] > at) i--;
    times.splice(i, 0, at);
  }

  /** Whether a watched retry fell due by `now` (those are forgotten: a claim takes them). */
  #retriesDue(now: number): boolean {
    let due = 0;
    while (due < this.#dueTimes.length && this.#dueTimes[due] <= now) due++;
    if (due) this.#dueTimes.splice(0, due);
    return due > 0;
  }

  /** Nothing queued, running, being accepted or claimed. */
  #idleNow(): boolean {
    return !this.#queue.length && !this.#running.size && !this.#reserved && !this.#reloading;
  }

  /**
   * Notes a payload's latest outcome for the endpoint's payload log
   * (written on the next poll, off the request's path); only the newest
   * {@linkcode INCOMING_LOG_SIZE} per endpoint are kept meanwhile.
   */
  #notePayload(
    endpointId: string,
    id: string,
    receivedAt: string,
    outcome: Omit<IncomingLogEntry, "id" | "endpoint_id" | "received_at" | "updated_at"> & {
      at?: unknown;
    },
  ): void {
    const { at: _at, ...fields } = outcome;
    let entries = this.#payloads.get(endpointId);
    if (!entries) this.#payloads.set(endpointId, entries = new Map());
    entries.delete(id);
    entries.set(id, {
      id,
      endpoint_id: endpointId,
      received_at: receivedAt,
      updated_at: new Date(this.#now()).toISOString(),
      ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)),
    } as IncomingLogEntry);
    if (entries.size > INCOMING_LOG_SIZE) {
      let oldest: string | undefined;
      for (const key of entries.keys()) if (oldest === undefined || key < oldest) oldest = key;
      entries.delete(oldest!);
    }
  }

  /** Writes the noted payload log entries. */
  async #flushPayloadLog(): Promise<void> {
    if (!this.#payloads.size) return;
    const entries = [...this.#payloads.values()].flatMap((byId) => [...byId.values()]);
    this.#payloads.clear();
    try {
      await this.#store.incoming.logPayloads(entries);
    } catch (error) {
      this.#log(`incoming: cannot write the payload log: ${(error as Error).message}`);
    }
  }

  /**
   * Looks for due jobs in the store now (a replay queued some), not on the
   * next poll, and counts the waiting jobs again (replayed jobs wait too).
   */
  wake(): void {
    this.#overflow = true;
    this.#pump();
    this.#countPending().catch((e) =>
      this.#log(`incoming: cannot count waiting jobs: ${(e as Error).message}`)
    );
  }

  /** Resolves when no job is queued or running (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#running.size || this.#queue.length || this.#overflow || this.#reloading) {
      if (this.#overflow && !this.#running.size && !this.#queue.length) await this.#reload();
      const pending = [...this.#running, this.#reloading].filter((p) => p !== null);
      // Nothing to wait for yet (jobs being accepted fill the queue): look again shortly.
      if (pending.length) await Promise.all(pending);
      else await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /**
   * Stops polling and new jobs, waits for running handler calls, flushes
   * counters, and gives back the claims on jobs still queued (another
   * instance takes them at once, this one on its next start).
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#ticking;
    await this.#reloading;
    await Promise.all([...this.#running]);
    await this.#completing;
    await this.#flushStats();
    await this.#flushPayloadLog();
    await this.#store.incoming.releaseClaims(this.#owner).catch((e) =>
      this.#log(`incoming: cannot release claims: ${(e as Error).message}`)
    );
  }
}

/** A failed handler call as recorded: when, code, message, and the fields of an input error. */
/**
 * What a `RATE_LIMITED` refusal names, in ms: the wait for the next call and
 * the time between calls once the bucket is empty; `undefined` for other errors.
 */
function rateLimitWait(error: unknown): { waitMs: number; spacingMs: number } | undefined {
  if (!(error instanceof GatewayError) || error.code !== "RATE_LIMITED") return undefined;
  const details = error.details as
    | { retry_after_ms?: unknown; token_interval_ms?: unknown }
    | undefined;
  const ms = (value: unknown) =>
    typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined;
  const waitMs = ms(details?.retry_after_ms) ?? 1000;
  return { waitMs, spacingMs: ms(details?.token_interval_ms) ?? waitMs };
}

/** The payload log's note for a job put off, without a call, until `slot`. */
function rateLimited(handler: string, slot: number, now: number): IncomingAttempt {
  return {
    at: new Date(now).toISOString(),
    code: "RATE_LIMITED",
    message: `Handler ${handler} is over its rate limit: the job waits ${
      Math.max(0, Math.round(slot - now))
    } ms for its turn`,
  };
}

function attemptOf(error: unknown, now: number): IncomingAttempt {
  const fields = errorFields(error);
  return {
    at: new Date(now).toISOString(),
    code: error instanceof GatewayError ? error.code : "INTERNAL",
    message: (error as Error)?.message ?? String(error),
    ...(fields ? { fields } : {}),
  };
}

function tooLarge(limit: number): GatewayError {
  return new GatewayError(
    "PAYLOAD_TOO_LARGE",
    `Request body is over the limit of ${limit} bytes: send a smaller payload`,
    { details: { limit_bytes: limit } },
  );
}

async function readLimited(request: Request, limit: number): Promise<Uint8Array> {
  // A declared length (checked against the limit by the caller) bounds what
  // the server reads: take it in one piece, without creating the body's stream.
  if (request.headers.has("content-length") && !request.headers.has("transfer-encoding")) {
    return new Uint8Array(await request.arrayBuffer());
  }
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

function parseObject(body: Uint8Array): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (error) {
    throw new GatewayError("INVALID_JSON", `Invalid JSON body: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new GatewayError(
      "INVALID_JSON",
      "Invalid JSON body: expected an object, because it becomes the handler's arguments",
    );
  }
  return value as Record<string, unknown>;
}

/**
 * Parses a form-encoded body into an object of its fields (a repeated field
 * becomes an array); a body whose only field is `payload` (GitHub's form
 * option) is the JSON object in it.
 */
function parseForm(body: Uint8Array): Record<string, unknown> {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch {
    throw new GatewayError("USAGE", "Invalid form body: it is not UTF-8 text");
  }
  const fields = new Map<string, string | string[]>();
  for (const [name, value] of new URLSearchParams(text)) {
    const seen = fields.get(name);
    fields.set(name, seen === undefined ? value : [seen, value].flat());
  }
  const payload = fields.get("payload");
  if (fields.size === 1 && typeof payload === "string") {
    try {
      return parseObject(encoder.encode(payload));
    } catch (error) {
      throw new GatewayError(
        "INVALID_JSON",
        `Invalid form field payload: ${
          (error as Error).message.replace(/^Invalid JSON body: /, "")
        }`,
      );
    }
  }
  // fromEntries defines own properties: a field named __proto__ stays a field.
  return Object.fromEntries(fields);
}

function errorResponse(error: GatewayError, headers: Record<string, string>): Response {
  return Response.json({ error: error.toJSON() }, { status: error.status, headers });
}

/**
 * The sender's delivery id of a request, when the endpoint de-duplicates:
 * its `dedupe_header`, else a verified Standard Webhooks `webhook-id`;
 * trimmed, and kept as its SHA-256 when very long.
 */
function dedupeId(
  endpoint: IncomingWebhook,
  headers: Headers,
  signedId: string | undefined,
): string | undefined {
  const value = (endpoint.dedupe_header ? headers.get(endpoint.dedupe_header) : signedId)?.trim();
  if (!value) return undefined;
  if (value.length <= DEDUPE_ID_MAX_CHARS) return value;
  return `sha256:${createHash("sha256").update(value).digest("hex")}`;
}

/** The answer to a payload whose delivery id was seen: nothing runs again. */
function duplicate(
  endpoint: IncomingWebhook,
  deliveryId: string,
  seen: { job_id: string; confirmed: boolean },
): Response {
  if (!seen.confirmed) {
    // The first payload is still being accepted: if that fails, this retry must run.
    throw new GatewayError(
      "UNAVAILABLE",
      `A payload with ${endpoint.dedupe_header ?? "webhook-id"} ${deliveryId} is being ` +
        `accepted right now: retry`,
      { details: { retry_after_s: 1 } },
    );
  }
  return Response.json({ id: seen.job_id, status: "duplicate" }, { status: 200 });
}
