/**
 * Failed incoming jobs: payloads whose handler call failed for good (an
 * input error at once, any other error after the last of its 5 retries),
 * kept with their endpoint, handler, arguments and attempts. Listed, shown,
 * replayed (pending again with a fresh schedule, same job id and arguments,
 * through the normal pipeline) and purged by the CLI (`toolgate incoming
 * failed …`) and the management API (`/incoming/failed`).
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { IncomingAttempt, IncomingJob, Store } from "../store/mod.ts";

/** A failed job as listed and shown. */
export interface FailedJobView {
  /** The job id (`inj_…`), also the session id of its audit entries. */
  id: string;
  endpoint_id: string;
  /** The endpoint's path, when it is still registered. */
  endpoint_path?: string;
  handler: string;
  received_at: string;
  failed_at: string;
  /** Every handler call, oldest first: when, error code, message (and fields of an input error). */
  attempts: IncomingAttempt[];
  /** The arguments the handler was called with (`show` only). */
  arguments?: unknown;
}

/** What to replay: one job, one endpoint's failed jobs, or all. */
export type FailedReplayTarget = string | { endpoint: string } | "all";

/** The outcome of a replay. */
export interface FailedReplayResult {
  /** Jobs queued again. */
  replayed: string[];
}

const decoder = new TextDecoder();

function view(job: IncomingJob, paths: Map<string, string>): FailedJobView {
  return {
    id: job.id,
    endpoint_id: job.endpoint_id,
    ...(paths.has(job.endpoint_id) ? { endpoint_path: paths.get(job.endpoint_id) } : {}),
    handler: job.handler,
    received_at: job.received_at,
    failed_at: job.failed_at ?? "",
    attempts: job.attempts ?? [],
  };
}

async function endpointPaths(store: Store): Promise<Map<string, string>> {
  const endpoints = await store.webhooks.listIncoming();
  return new Map(endpoints.map((endpoint) => [endpoint.id, endpoint.path]));
}

/** Refuses an endpoint id that is not an incoming endpoint's. */
async function checkEndpoint(store: Store, id: string): Promise<void> {
  if (await store.webhooks.getIncoming(id)) return;
  // A removed endpoint's failed jobs may still be there: listing them is fine.
  if ((await store.incoming.listFailed({ endpoint_id: id, limit: 1 })).length) return;
  throw new GatewayError(
    "NOT_FOUND",
    `No incoming endpoint ${id} (and no failed jobs of it): see toolgate webhooks list --incoming`,
  );
}

/**
 * Failed jobs, oldest first: all, or those of one endpoint.
 *
 * @throws {GatewayError} `NOT_FOUND` for an unknown endpoint.
 */
export async function listFailedJobs(
  store: Store,
  options: { endpoint?: string } = {},
): Promise<FailedJobView[]> {
  if (options.endpoint !== undefined) await checkEndpoint(store, options.endpoint);
  const jobs = await store.incoming.listFailed(
    options.endpoint !== undefined ? { endpoint_id: options.endpoint } : {},
  );
  const paths = await endpointPaths(store);
  return jobs.map((job) => view(job, paths));
}

/**
 * One failed job with its arguments.
 *
 * @throws {GatewayError} `NOT_FOUND` when no failed job has that id (a pending job says so).
 */
export async function showFailedJob(store: Store, id: string): Promise<FailedJobView> {
  const job = await store.incoming.get(id);
  if (!job || job.failed_at === undefined) throw notFailed(id, job);
  const body = await store.incoming.readBody(job);
  let args: unknown = null;
  if (body) {
    try {
      args = JSON.parse(decoder.decode(body));
    } catch {
      args = decoder.decode(body);
    }
  }
  return { ...view(job, await endpointPaths(store)), arguments: args };
}

function notFailed(id: string, job: IncomingJob | null): GatewayError {
  if (job) {
    return new GatewayError(
      "NOT_FOUND",
      `Incoming job ${id} is not a failed job: it is still queued` +
        (job.next_attempt_at !== undefined
          ? `, retry due at ${new Date(job.next_attempt_at).toISOString()}`
          : ""),
    );
  }
  return new GatewayError(
    "NOT_FOUND",
    `No failed incoming job ${id}: see toolgate incoming failed list`,
  );
}

/**
 * Queues failed jobs again with a fresh retry schedule, same job id and
 * arguments; a running server runs them through the normal pipeline.
 *
 * @throws {GatewayError} `NOT_FOUND` for an unknown job or endpoint.
 */
export async function replayFailedJobs(
  store: Store,
  target: FailedReplayTarget,
): Promise<FailedReplayResult> {
  let ids: string[];
  if (typeof target === "string" && target !== "all") {
    const job = await store.incoming.get(target);
    if (!job || job.failed_at === undefined) throw notFailed(target, job);
    ids = [target];
  } else {
    const endpoint = target === "all" ? undefined : target.endpoint;
    if (endpoint !== undefined) await checkEndpoint(store, endpoint);
    ids = (await store.incoming.listFailed(endpoint !== undefined ? { endpoint_id: endpoint } : {}))
      .map((job) => job.id);
  }
  return { replayed: await store.incoming.replayFailed(ids) };
}

/**
 * Deletes failed jobs: one by id, those failed before `before`, or all.
 *
 * @returns How many were deleted.
 * @throws {GatewayError} `NOT_FOUND` when `id` is not a failed job.
 */
export async function purgeFailedJobs(
  store: Store,
  options: { id?: string; before?: Date } = {},
): Promise<number> {
  if (options.id !== undefined) {
    const count = await store.incoming.purgeFailed({ ids: [options.id] });
    if (!count) throw notFailed(options.id, await store.incoming.get(options.id));
    return count;
  }
  return await store.incoming.purgeFailed(
    options.before ? { before: options.before.toISOString() } : {},
  );
}
