/**
 * PostgreSQL adapter: the durable queue of accepted incoming webhook
 * payloads waiting for their handler tool. A job and its raw body are one
 * row of `toolgate_incoming_jobs`, so a job exists exactly when its whole
 * body does and no body is ever orphaned. Completing a job deletes its row:
 * of several instances completing the same job, exactly one deletes it.
 *
 * Instances share the jobs by claims kept in the row (`claimed_by`,
 * `claim_expires_at`): {@linkcode IncomingStore.claim} takes the oldest free
 * or lapsed rows with `for update skip locked`, so instances claiming at
 * once never take the same job, and the jobs of an instance that died are
 * taken by another once its claims lapse.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import type { IncomingStore, StagedWrites, StoreCost } from "../store.ts";
import {
  checkIncomingFailure,
  type ClaimIncomingOptions,
  type DedupeReservation,
  INCOMING_LOG_SIZE,
  type IncomingClaim,
  type IncomingFailure,
  type IncomingJob,
  IncomingJobSchema,
  type IncomingLogEntry,
  IncomingLogEntrySchema,
  type ReserveDedupeOptions,
} from "../records.ts";
import { checkClaim, checkClaimOptions } from "../_incoming_contract.ts";
import type { PgContext, Tx } from "./_context.ts";
import type { Sql } from "./connection.ts";

/** Tables of this part, in migration 1. */
export const INCOMING_SCHEMA = `
  create table toolgate_incoming_jobs (
    id text primary key,
    endpoint_id text not null,
    handler text not null,
    received_at text not null,
    audit_seq bigint,
    body bytea not null,
    claimed_by text,
    claim_expires_at bigint,
    attempts jsonb,
    next_attempt_at bigint,
    failed_at text,
    traceparent text
  );
  create index toolgate_incoming_jobs_claimed on toolgate_incoming_jobs (claimed_by)
    where claimed_by is not null;
  create index toolgate_incoming_jobs_failed on toolgate_incoming_jobs (id)
    where failed_at is not null;
  create table toolgate_incoming_log (
    endpoint_id text not null,
    id text not null,
    entry jsonb not null,
    primary key (endpoint_id, id)
  );
  create table toolgate_incoming_dedupe (
    endpoint_id text not null,
    delivery_id text not null,
    job_id text not null,
    reserved_at bigint not null,
    expires_at bigint not null,
    confirmed boolean not null,
    primary key (endpoint_id, delivery_id)
  );
  create index toolgate_incoming_dedupe_expiry on toolgate_incoming_dedupe (expires_at);
`;

/** How often expired delivery ids are deleted, at most (ms). */
const DEDUPE_SWEEP_MS = 60_000;

/**
 * Largest body written in another commit with {@linkcode IncomingStore.stage}
 * (the audit entry's): the Deno KV adapter's limit, so that both adapters
 * stage the same jobs.
 */
export const STAGED_BODY_MAX_BYTES = 128 * 1024;

/** Bytes counted per job row beside its body and fields. */
const ROW_OVERHEAD_BYTES = 200;

/** Type oid of `bytea`, for arrays of bytes. */
const BYTEA_OID = 17;

/** Bytes counted for the row's key. */
const KEY_BYTES = 60;

type NewJob = Omit<IncomingJob, "body_bytes" | "chunks">;

/**
 * A staged job: what {@linkcode applyStagedWrites} writes. Opaque outside
 * this module.
 */
interface PgStagedWrites extends StagedWrites {
  /** The job record, its body and its claim. */
  readonly incomingJob: StagedJob;
}

/** A job to insert: its record, its body and who claims it. */
interface StagedJob {
  readonly job: IncomingJob;
  readonly body: Uint8Array;
  readonly claim?: IncomingClaim;
}

interface JobRow {
  id: string;
  endpoint_id: string;
  handler: string;
  received_at: string;
  audit_seq: number | null;
  body_bytes: number;
  attempts: IncomingJob["attempts"] | null;
  next_attempt_at: number | null;
  failed_at: string | null;
  traceparent: string | null;
}

/** The columns of a job row, as {@linkcode fromRow} reads them. */
const JOB_COLUMNS = `id, endpoint_id, handler, received_at, audit_seq::float8 as audit_seq,
  octet_length(body) as body_bytes, attempts, next_attempt_at::float8 as next_attempt_at,
  failed_at, traceparent`;

/** The stored record of a job (its body is one value: one chunk, none when empty). */
function toJob(job: NewJob, bodyBytes: number): IncomingJob {
  return IncomingJobSchema.parse({ ...job, body_bytes: bodyBytes, chunks: bodyBytes ? 1 : 0 });
}

function fromRow(row: JobRow): IncomingJob | undefined {
  const { audit_seq, attempts, next_attempt_at, failed_at, traceparent, ...fields } = row;
  const parsed = IncomingJobSchema.safeParse({
    ...fields,
    ...(audit_seq === null ? {} : { audit_seq }),
    ...(attempts === null || attempts === undefined ? {} : { attempts }),
    ...(next_attempt_at === null || next_attempt_at === undefined ? {} : { next_attempt_at }),
    ...(failed_at === null || failed_at === undefined ? {} : { failed_at }),
    ...(traceparent === null || traceparent === undefined ? {} : { traceparent }),
    chunks: row.body_bytes ? 1 : 0,
  });
  return parsed.success ? parsed.data : undefined;
}

/** A claim's lapse time as stored: whole ms, rounded up (never earlier than asked). */
function claimMs(at: number): number {
  return Math.ceil(at);
}

/**
 * Inserts jobs with their bodies and claims (replacing a job of the same
 * id, like a KV set).
 */
async function insertJobs(sql: Tx | Sql, jobs: readonly StagedJob[]): Promise<void> {
  // Arrays, not a values list: one statement text (one prepared statement) for any batch.
  const column = <T>(pick: (item: StagedJob) => T) => jobs.map(pick);
  const bodies = sql.array(column(({ body }) => body), BYTEA_OID);
  await sql`
    insert into toolgate_incoming_jobs
      (id, endpoint_id, handler, received_at, audit_seq, body, claimed_by, claim_expires_at,
        attempts, next_attempt_at, failed_at, traceparent)
    select u.id, u.endpoint_id, u.handler, u.received_at, u.audit_seq, u.body, u.claimed_by,
      u.claim_expires_at, u.attempts::jsonb, u.next_attempt_at, u.failed_at, u.traceparent
    from unnest(
      ${column(({ job }) => job.id)}::text[],
      ${column(({ job }) => job.endpoint_id)}::text[],
      ${column(({ job }) => job.handler)}::text[],
      ${column(({ job }) => job.received_at)}::text[],
      ${column(({ job }) => job.audit_seq ?? null)}::bigint[],
      ${bodies}::bytea[],
      ${column(({ claim }) => claim?.owner ?? null)}::text[],
      ${column(({ claim }) => claim ? claimMs(claim.until) : null)}::bigint[],
      ${column(({ job }) => job.attempts ? JSON.stringify(job.attempts) : null)}::text[],
      ${column(({ job }) => job.next_attempt_at ?? null)}::bigint[],
      ${column(({ job }) => job.failed_at ?? null)}::text[],
      ${column(({ job }) => job.traceparent ?? null)}::text[]
    ) as u(id, endpoint_id, handler, received_at, audit_seq, body, claimed_by,
      claim_expires_at, attempts, next_attempt_at, failed_at, traceparent)
    on conflict (id) do update set
      endpoint_id = excluded.endpoint_id, handler = excluded.handler,
      received_at = excluded.received_at, audit_seq = excluded.audit_seq, body = excluded.body,
      claimed_by = excluded.claimed_by, claim_expires_at = excluded.claim_expires_at,
      attempts = excluded.attempts, next_attempt_at = excluded.next_attempt_at,
      failed_at = excluded.failed_at, traceparent = excluded.traceparent`;
}

/**
 * Adds failed jobs to their endpoints' `failed` counters (the webhooks part's
 * stats table), one per entry of `endpointIds`; endpoints in order, so that
 * concurrent transactions lock their counters in the same order.
 */
async function countFailed(tx: Tx, endpointIds: readonly string[]): Promise<void> {
  if (!endpointIds.length) return;
  const counts = new Map<string, number>();
  for (const id of endpointIds) counts.set(id, (counts.get(id) ?? 0) + 1);
  const endpoints = [...counts.keys()].sort();
  await tx`
    insert into toolgate_incoming_stats as s (endpoint_id, failed)
    select * from unnest(${endpoints}::text[], ${endpoints.map((id) => counts.get(id)!)}::bigint[])
    on conflict (endpoint_id) do update set failed = s.failed + excluded.failed`;
}

class PgIncomingStore implements IncomingStore {
  readonly sharedClaims = true;
  readonly stagedBodyMaxBytes = STAGED_BODY_MAX_BYTES;
  #ctx: PgContext;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
  }

  async put(job: NewJob, body: Uint8Array, claim?: IncomingClaim): Promise<IncomingJob> {
    checkClaim(claim);
    const record = toJob(job, body.byteLength);
    await this.#ctx.run((sql) => insertJobs(sql, [{ job: record, body, claim }]));
    return record;
  }

  async readBody(job: IncomingJob): Promise<Uint8Array | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<{ body: Uint8Array }[]>`select body from toolgate_incoming_jobs where id = ${job.id}`
    );
    if (!row) return null;
    if (row.body.byteLength !== job.body_bytes) {
      throw new GatewayError(
        "STORE_CORRUPT",
        `Stored body of incoming job ${job.id} is incomplete`,
      );
    }
    return new Uint8Array(row.body.buffer, row.body.byteOffset, row.body.byteLength);
  }

  async list(options: { limit?: number } = {}): Promise<IncomingJob[]> {
    const { limit } = options;
    // Ids are time-ordered (ULIDs), so id order is oldest first, as in KV.
    const rows = await this.#ctx.run((sql) =>
      sql<JobRow[]>`
        select ${sql.unsafe(JOB_COLUMNS)}
        from toolgate_incoming_jobs where failed_at is null order by id limit ${limit ?? null}`
    );
    // A row that does not make a valid job is skipped, as KV skips it.
    return rows.map(fromRow).filter((job) => job !== undefined);
  }

  async claim(options: ClaimIncomingOptions): Promise<IncomingJob[]> {
    checkClaimOptions(options);
    const { owner, until, limit } = options;
    // Stored times are whole ms: a claim lapsed by a fractional `now` lapsed by its floor.
    const now = Math.floor(options.now);
    // Rows another transaction holds (a claim or a completion in flight) are
    // skipped, not waited for: of instances claiming at once, each gets its own.
    const rows = await this.#ctx.run((sql) =>
      sql<JobRow[]>`
        with picked as (
          select id from toolgate_incoming_jobs
          where (claimed_by is null or claim_expires_at <= ${now}) and failed_at is null
            and (next_attempt_at is null or next_attempt_at <= ${now})
          order by id
          limit ${limit}
          for update skip locked
        ), claimed as (
          update toolgate_incoming_jobs t
          set claimed_by = ${owner}, claim_expires_at = ${claimMs(until)}
          from picked where t.id = picked.id
          returning t.id, t.endpoint_id, t.handler, t.received_at,
            t.audit_seq::float8 as audit_seq, octet_length(t.body) as body_bytes, t.attempts,
            t.next_attempt_at::float8 as next_attempt_at, t.failed_at, t.traceparent
        )
        select * from claimed order by id`
    );
    // A row that does not make a valid job stays claimed and is skipped, as list() skips it.
    return rows.map(fromRow).filter((job) => job !== undefined);
  }

  async renewClaims(owner: string, until: number): Promise<number> {
    const result = await this.#ctx.run((sql) =>
      sql`
        update toolgate_incoming_jobs set claim_expires_at = ${claimMs(until)}
        where claimed_by = ${owner}`
    );
    return result.count;
  }

  async releaseClaims(owner: string, ids?: readonly string[]): Promise<void> {
    if (ids && !ids.length) return;
    await this.#ctx.run((sql) =>
      ids
        ? sql`
          update toolgate_incoming_jobs set claimed_by = null, claim_expires_at = null
          where claimed_by = ${owner} and id = any(${[...ids]}::text[])`
        : sql`
          update toolgate_incoming_jobs set claimed_by = null, claim_expires_at = null
          where claimed_by = ${owner}`
    );
  }

  stage(
    job: NewJob,
    body: Uint8Array,
    claim?: IncomingClaim,
  ): { job: IncomingJob; writes: StagedWrites } | undefined {
    checkClaim(claim);
    if (body.byteLength > STAGED_BODY_MAX_BYTES) return undefined;
    const record = toJob(job, body.byteLength);
    const recordBytes = ROW_OVERHEAD_BYTES + job.id.length + job.endpoint_id.length +
      job.handler.length;
    const cost: StoreCost = {
      mutations: 1,
      bytes: body.byteLength + recordBytes + KEY_BYTES,
      keyBytes: KEY_BYTES,
    };
    const writes: PgStagedWrites = { cost, incomingJob: { job: record, body, claim } };
    return { job: record, writes };
  }

  async complete(items: readonly { job: IncomingJob; failed: boolean }[]): Promise<boolean[]> {
    if (!items.length) return [];
    const ids = items.map(({ job }) => job.id);
    // A row is deleted once: of several callers completing a job, exactly
    // one gets it back (the others wait for its lock, then find it gone).
    const deleted = await this.#ctx.transaction(async (tx) => {
      const rows = await tx<{ id: string }[]>`
        delete from toolgate_incoming_jobs where id = any(${ids}::text[]) and failed_at is null
        returning id`;
      const gone = new Set(rows.map(({ id }) => id));
      await countFailed(
        tx,
        items.filter(({ job, failed }) => failed && gone.has(job.id)).map(({ job }) =>
          job.endpoint_id
        ),
      );
      return gone;
    });
    return items.map(({ job }) => deleted.has(job.id));
  }

  async fail(items: readonly IncomingFailure[]): Promise<boolean[]> {
    if (!items.length) return [];
    items.forEach(checkIncomingFailure);
    const ids = items.map(({ job }) => job.id);
    const changed = await this.#ctx.transaction(async (tx) => {
      // Pending rows, locked in id order (as claims lock them), read then rewritten.
      const rows = await tx<{ id: string; attempts: IncomingJob["attempts"] | null }[]>`
        select id, attempts from toolgate_incoming_jobs
        where id = any(${ids}::text[]) and failed_at is null order by id for update`;
      const found = new Map(rows.map((row) => [row.id, row.attempts ?? []]));
      const updates = items.filter(({ job }) => found.has(job.id)).map((failure) => {
        // A put-off call (no attempt) leaves the attempts as they were.
        const attempts = [
          ...found.get(failure.job.id)!,
          ...(failure.attempt ? [failure.attempt] : []),
        ];
        return {
          id: failure.job.id,
          endpoint_id: failure.job.endpoint_id,
          attempts: attempts.length ? JSON.stringify(attempts) : null,
          next: failure.retry_at === undefined ? null : Math.ceil(failure.retry_at),
          failed_at: failure.retry_at === undefined ? failure.attempt!.at : null,
        };
      });
      if (!updates.length) return new Set<string>();
      await tx`
        update toolgate_incoming_jobs t set attempts = u.attempts::jsonb,
          next_attempt_at = u.next, failed_at = u.failed_at, claimed_by = null,
          claim_expires_at = null
        from unnest(${updates.map((u) => u.id)}::text[], ${updates.map((u) => u.attempts)}::text[],
          ${updates.map((u) => u.next)}::bigint[], ${updates.map((u) => u.failed_at)}::text[])
          as u(id, attempts, next, failed_at)
        where t.id = u.id`;
      await countFailed(
        tx,
        updates.filter((u) => u.failed_at !== null).map((u) => u.endpoint_id),
      );
      return new Set(updates.map((u) => u.id));
    });
    return items.map(({ job }) => changed.has(job.id));
  }

  async get(id: string): Promise<IncomingJob | null> {
    const [row] = await this.#ctx.run((sql) =>
      sql<JobRow[]>`
        select ${sql.unsafe(JOB_COLUMNS)} from toolgate_incoming_jobs where id = ${id}`
    );
    return row ? fromRow(row) ?? null : null;
  }

  async listFailed(
    options: { endpoint_id?: string; limit?: number } = {},
  ): Promise<IncomingJob[]> {
    const { endpoint_id, limit } = options;
    const rows = await this.#ctx.run((sql) =>
      sql<JobRow[]>`
        select ${sql.unsafe(JOB_COLUMNS)} from toolgate_incoming_jobs
        where failed_at is not null
          and (${endpoint_id ?? null}::text is null or endpoint_id = ${endpoint_id ?? null})
        order by id limit ${limit ?? null}`
    );
    return rows.map(fromRow).filter((job) => job !== undefined);
  }

  async replayFailed(ids: readonly string[]): Promise<string[]> {
    if (!ids.length) return [];
    const rows = await this.#ctx.run((sql) =>
      sql<{ id: string }[]>`
        update toolgate_incoming_jobs set attempts = null, next_attempt_at = null,
          failed_at = null, claimed_by = null, claim_expires_at = null
        where id = any(${[...ids]}::text[]) and failed_at is not null
        returning id`
    );
    const replayed = new Set(rows.map(({ id }) => id));
    return ids.filter((id) => replayed.has(id));
  }

  async purgeFailed(options: { ids?: readonly string[]; before?: string } = {}): Promise<number> {
    const { ids, before } = options;
    const rows = await this.#ctx.run((sql) =>
      ids
        ? sql<{ id: string; failed_at: string }[]>`
          delete from toolgate_incoming_jobs
          where id = any(${[...ids]}::text[]) and failed_at is not null returning id, failed_at`
        : sql<{ id: string; failed_at: string }[]>`
          select id, failed_at from toolgate_incoming_jobs where failed_at is not null`
    );
    if (ids) return rows.length;
    // ISO times of different offsets compare as instants, as on Deno KV.
    const old = rows.filter((row) =>
      before === undefined || Date.parse(row.failed_at) < Date.parse(before)
    ).map(({ id }) => id);
    if (!old.length) return 0;
    return await this.purgeFailed({ ids: old });
  }

  async logPayloads(entries: readonly IncomingLogEntry[]): Promise<void> {
    if (!entries.length) return;
    const records = entries.map((entry) => IncomingLogEntrySchema.parse(entry));
    const endpoints = [...new Set(records.map((entry) => entry.endpoint_id))].sort();
    await this.#ctx.transaction(async (tx) => {
      // The last entry of an id wins, as with KV's sets in order.
      const byKey = new Map(records.map((entry) => [`${entry.endpoint_id}\n${entry.id}`, entry]));
      const rows = [...byKey.values()];
      await tx`
        insert into toolgate_incoming_log as l (endpoint_id, id, entry)
        select u.endpoint_id, u.id, u.entry::jsonb
        from unnest(${rows.map((r) => r.endpoint_id)}::text[], ${rows.map((r) => r.id)}::text[],
          ${rows.map((r) => JSON.stringify(r))}::text[]) as u(endpoint_id, id, entry)
        on conflict (endpoint_id, id) do update set entry = excluded.entry`;
      await tx`
        delete from toolgate_incoming_log l
        where l.endpoint_id = any(${endpoints}::text[]) and l.id < coalesce((
          select k.id from toolgate_incoming_log k where k.endpoint_id = l.endpoint_id
          order by k.id desc offset ${INCOMING_LOG_SIZE - 1} limit 1
        ), '')`;
    });
  }

  async readPayloadLog(
    endpointId: string,
    limit: number = INCOMING_LOG_SIZE,
  ): Promise<IncomingLogEntry[]> {
    const most = Math.max(0, Math.min(limit, INCOMING_LOG_SIZE));
    if (!most) return [];
    const rows = await this.#ctx.run((sql) =>
      sql<{ entry: unknown }[]>`
        select entry from toolgate_incoming_log where endpoint_id = ${endpointId}
        order by id desc limit ${most}`
    );
    return rows.flatMap(({ entry }) => {
      const parsed = IncomingLogEntrySchema.safeParse(entry);
      return parsed.success ? [parsed.data] : [];
    });
  }

  sweepOrphanBodies(): Promise<number> {
    // Bodies live in their job's row: none can be left behind.
    return Promise.resolve(0);
  }

  async pendingCounts(): Promise<Record<string, number>> {
    const rows = await this.#ctx.run((sql) =>
      sql<{ endpoint_id: string; count: number }[]>`
        select endpoint_id, count(*)::int as count from toolgate_incoming_jobs
        where failed_at is null group by endpoint_id`
    );
    return Object.fromEntries(rows.map((row) => [row.endpoint_id, Number(row.count)]));
  }

  #sweptAt = -Infinity;

  async reserveDedupeKey(options: ReserveDedupeOptions): Promise<DedupeReservation> {
    const { endpoint_id, delivery_id, job_id, now, ttl_ms, stale_ms } = options;
    if (now - this.#sweptAt >= DEDUPE_SWEEP_MS) {
      this.#sweptAt = now;
      await this.#ctx.run((sql) =>
        sql`delete from toolgate_incoming_dedupe where expires_at <= ${now}`
      );
    }
    // Of several payloads with one id, the insert (or the take-over of an
    // expired or stale reservation) succeeds for one; the others see its row.
    for (let attempt = 0;; attempt++) {
      const taken = await this.#ctx.run((sql) =>
        sql<{ job_id: string }[]>`
          insert into toolgate_incoming_dedupe as d
            (endpoint_id, delivery_id, job_id, reserved_at, expires_at, confirmed)
          values (${endpoint_id}, ${delivery_id}, ${job_id}, ${now}, ${now + ttl_ms}, false)
          on conflict (endpoint_id, delivery_id) do update set
            job_id = excluded.job_id, reserved_at = excluded.reserved_at,
            expires_at = excluded.expires_at, confirmed = false
          where d.expires_at <= ${now}
            or (not d.confirmed and d.reserved_at + ${stale_ms} <= ${now})
          returning job_id`
      );
      if (taken.length) return { status: "reserved" };
      const [held] = await this.#ctx.run((sql) =>
        sql<{ job_id: string; confirmed: boolean }[]>`
          select job_id, confirmed from toolgate_incoming_dedupe
          where endpoint_id = ${endpoint_id} and delivery_id = ${delivery_id}`
      );
      if (held) return { status: "duplicate", job_id: held.job_id, confirmed: held.confirmed };
      // Released between the two statements: try again.
      if (attempt >= 3) {
        throw new GatewayError(
          "STORE_UNAVAILABLE",
          "Cannot reserve a delivery id: it keeps changing",
        );
      }
    }
  }

  async confirmDedupeKey(endpointId: string, deliveryId: string, jobId: string): Promise<void> {
    await this.#ctx.run((sql) =>
      sql`
        update toolgate_incoming_dedupe set confirmed = true
        where endpoint_id = ${endpointId} and delivery_id = ${deliveryId} and job_id = ${jobId}`
    );
  }

  async releaseDedupeKey(endpointId: string, deliveryId: string, jobId: string): Promise<void> {
    await this.#ctx.run((sql) =>
      sql`
        delete from toolgate_incoming_dedupe
        where endpoint_id = ${endpointId} and delivery_id = ${deliveryId} and job_id = ${jobId}`
    );
  }
}

/** The incoming jobs, on PostgreSQL. */
export function createIncomingStore(ctx: PgContext): IncomingStore {
  return new PgIncomingStore(ctx);
}

/**
 * Writes staged incoming jobs inside the caller's transaction (the audit
 * entry's), so that the entry and its job are durable together.
 *
 * @throws {GatewayError} `INTERNAL` when a write was not staged by this adapter.
 */
export async function applyStagedWrites(tx: Tx, writes: readonly StagedWrites[]): Promise<void> {
  const jobs = writes.map((write) => {
    const staged = (write as Partial<PgStagedWrites>).incomingJob;
    if (!staged) {
      throw new GatewayError(
        "INTERNAL",
        "Cannot apply staged writes: they were not staged by the PostgreSQL adapter",
      );
    }
    return staged;
  });
  if (jobs.length) await insertJobs(tx, jobs);
}
