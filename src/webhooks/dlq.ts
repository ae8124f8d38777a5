/**
 * Dead-letter queue operations for the CLI (`toolgate dlq list | replay |
 * purge`) and the `dlq.json` mirror in the data directory.
 *
 * The mirror is a JSON array of {@linkcode DlqEntry}, kept current without
 * rewriting it whole per record: a dead letter is appended in place
 * ({@linkcode appendDlqMirror}, O(entry) bytes); removals (a replayed record
 * delivered, `dlq purge`) rebuild it from the store page by page
 * ({@linkcode writeDlqMirror}). Writes are serialized within a
 * process and, through a lock file, across processes; a torn append (kill -9)
 * and leftover temp files are repaired by the first write of the next process
 * ({@linkcode repairDlqMirror} and {@linkcode cleanDlqMirrorTemps} do it at start).
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import {
  appendMirror,
  type AppendOutcome,
  cleanMirrorTemps,
  DLQ_FILE,
  type MirrorPages,
  rebuildMirror,
  repairMirror,
} from "./_dlq_mirror.ts";
import type { EventEnvelope } from "../events/mod.ts";
import {
  type AttemptRecord,
  dlqAfter,
  type DlqPosition,
  type DlqRecord,
  type OutgoingWebhook,
  type Store,
} from "../store/mod.ts";
import { idTime } from "../ids.ts";

export { DLQ_FILE } from "./_dlq_mirror.ts";
export type { AppendOutcome } from "./_dlq_mirror.ts";

/**
 * Records per page when something goes through the whole queue: list,
 * replay, purge, and a mirror rebuild (each page written before the next is read).
 */
const DLQ_PAGE_SIZE = 256;

/** Which records {@linkcode dlqPages} reads. */
interface DlqPageFilter {
  /** Only this webhook's records. */
  webhook?: string;
  /** Only records after this position. */
  after?: DlqPosition;
  /** Only records that failed at or after this ISO time. */
  from?: string;
  /** Only records that failed before this ISO time. */
  before?: string;
  /** Only records up to this position (the queue's end when the command started). */
  until?: DlqPosition;
  /** Records per page. */
  pageSize: number;
}

/**
 * The dead-letter records a command goes through, a page at a time, oldest
 * failure first, so that a long queue is never held in memory whole. The
 * position of a page's last record, not its key, leads to the next page:
 * records the caller deletes or requeues meanwhile do not shift it.
 */
async function* dlqPages(store: Store, filter: DlqPageFilter): AsyncGenerator<DlqRecord[]> {
  const { webhook, from, before, until, pageSize } = filter;
  // Every record that failed at or after `from` comes after this position.
  let after = from === undefined || (filter.after && filter.after.failed_at >= from)
    ? filter.after
    : { failed_at: from, dlq_id: "" };
  while (true) {
    const page = await store.deliveries.listDlq({ webhook, after, limit: pageSize });
    const past = (record: DlqRecord) =>
      (before !== undefined && record.failed_at >= before) ||
      (until !== undefined && dlqAfter(record, until));
    const kept = page.filter((record) =>
      (from === undefined || record.failed_at >= from) && !past(record)
    );
    if (kept.length) yield kept;
    // Oldest failure first: once one record is past the end, every later one is.
    if (page.length < pageSize || past(page.at(-1)!)) return;
    const last = page.at(-1)!;
    after = { failed_at: last.failed_at, dlq_id: last.dlq_id };
  }
}

/**
 * How many records `filter` selects now, and where the last one stands: a
 * command that changes the queue as it goes stops there, so records that
 * fail again meanwhile (with a later `failed_at`) are not taken twice.
 */
async function snapshot(
  store: Store,
  filter: DlqPageFilter,
): Promise<{ count: number; until?: DlqPosition }> {
  let count = 0;
  let until: DlqPosition | undefined;
  for await (const page of dlqPages(store, filter)) {
    count += page.length;
    const last = page.at(-1)!;
    until = { failed_at: last.failed_at, dlq_id: last.dlq_id };
  }
  return { count, until };
}

/** A dead-lettered delivery, as listed and mirrored to `dlq.json`. */
export interface DlqEntry {
  /** Identifier used by `dlq replay`. */
  dlq_id: string;
  /** The webhook the event failed to reach. */
  webhook_id: string;
  /** Its URL at the time of failure. */
  url: string;
  /**
   * The event envelope, parsed from the exact bytes that were sent; of a
   * record whose body was lost (`body_lost`), only its `id` and `type`.
   */
  event: EventEnvelope | LostEnvelope;
  /** The event's body was lost before it was sent: the record cannot be replayed. */
  body_lost?: true;
  /** Every attempt of the last delivery run (none when the webhook was disabled). */
  attempts: AttemptRecord[];
  /** Why it is here besides its attempts: the webhook was disabled, or answered 410 Gone. */
  reason?: string;
  /** ISO-8601 time the last retry failed. */
  failed_at: string;
}

/** What is known of an event whose body was lost: its id and type. */
export interface LostEnvelope {
  id: string;
  type: string;
}

const decoder = new TextDecoder();

/** The fields of a dead-letter record that a {@linkcode DlqEntry} shows. */
export type DlqEntryRecord =
  & Pick<DlqRecord, "dlq_id" | "webhook_id" | "url" | "attempts" | "failed_at" | "reason">
  & Partial<Pick<DlqRecord, "event_id" | "event_type" | "body_lost">>;

/**
 * The {@linkcode DlqEntry} of a dead-letter record and the exact bytes that
 * were sent, e.g. to {@linkcode appendDlqMirror} a record just written.
 *
 * @throws {GatewayError} `STORE_CORRUPT` when the body is not JSON.
 */
export function dlqEntry(record: DlqEntryRecord, body: Uint8Array): DlqEntry {
  let event: EventEnvelope | LostEnvelope;
  if (record.body_lost) {
    return {
      dlq_id: record.dlq_id,
      webhook_id: record.webhook_id,
      url: record.url,
      event: { id: record.event_id ?? "", type: record.event_type ?? "" },
      body_lost: true,
      attempts: record.attempts,
      ...(record.reason !== undefined ? { reason: record.reason } : {}),
      failed_at: record.failed_at,
    };
  }
  try {
    event = JSON.parse(decoder.decode(body));
  } catch (error) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Stored DLQ record ${record.dlq_id} is unreadable: its event is not JSON`,
      { cause: error },
    );
  }
  return {
    dlq_id: record.dlq_id,
    webhook_id: record.webhook_id,
    url: record.url,
    event,
    attempts: record.attempts,
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    failed_at: record.failed_at,
  };
}

async function toEntry(
  store: Store,
  record: DlqRecord,
  body?: Uint8Array,
): Promise<DlqEntry> {
  return dlqEntry(record, body ?? await store.deliveries.readDlqBody(record));
}

/**
 * The position a page continues from: that of the record `after`, or when
 * it left the queue meanwhile (replayed and delivered, deleted), the time its
 * id was made, which is never after it failed, so nothing is skipped.
 */
async function positionAfter(store: Store, after: string): Promise<DlqPosition> {
  const record = await store.deliveries.getDlq(after);
  if (record) return { failed_at: record.failed_at, dlq_id: record.dlq_id };
  const made = idTime(after);
  return { failed_at: made === undefined ? "" : new Date(made).toISOString(), dlq_id: after };
}

/**
 * Dead-lettered deliveries, oldest failure first: every one, or with
 * `limit` one page of them (read through the store's index: a page costs
 * about `limit` records however long the queue is).
 *
 * @example
 * ```ts
 * for (const entry of await listDlq(store)) console.log(entry.dlq_id, entry.event.type);
 * const page = await listDlq(store, { limit: 50 });
 * const next = await listDlq(store, { limit: 50, after: page.at(-1)?.dlq_id });
 * ```
 */
export async function listDlq(store: Store, options: ListDlqOptions = {}): Promise<DlqEntry[]> {
  const { webhook, after, limit } = options;
  const position = after === undefined ? undefined : await positionAfter(store, after);
  if (limit !== undefined && limit !== Infinity) {
    const records = await store.deliveries.listDlq({ webhook, after: position, limit });
    return await Promise.all(records.map((record) => toEntry(store, record)));
  }
  // The whole queue: bodies are read a page at a time, not all at once.
  const entries: DlqEntry[] = [];
  for await (
    const page of entryPages(store, { webhook, after: position, pageSize: DLQ_PAGE_SIZE })
  ) {
    entries.push(...page);
  }
  return entries;
}

/** How many dead-letter records there are, without reading them. */
export async function countDlq(store: Store): Promise<number> {
  return await store.deliveries.countDlq();
}

/** Options of {@linkcode listDlq}. */
export interface ListDlqOptions {
  /** Only records of this webhook. @default every webhook */
  webhook?: string;
  /** Only records listed after this one (a page's last `dlq_id`). @default from the oldest */
  after?: string;
  /** At most this many. @default all */
  limit?: number;
}

/**
 * One dead-lettered delivery.
 *
 * @throws {GatewayError} `NOT_FOUND` when there is no such record.
 */
export async function getDlqEntry(store: Store, dlqId: string): Promise<DlqEntry> {
  const record = await store.deliveries.getDlq(dlqId);
  if (!record) throw new GatewayError("NOT_FOUND", `No DLQ record ${dlqId}: see toolgate dlq list`);
  return await toEntry(store, record);
}

/**
 * Deletes one dead-letter record and rewrites `dlq.json`.
 *
 * @param dataDir Directory of `dlq.json`. @default store.dataDir
 * @throws {GatewayError} `NOT_FOUND` when there is no such record.
 */
export async function deleteDlqEntry(
  store: Store,
  dlqId: string,
  dataDir: string = store.dataDir,
): Promise<void> {
  const record = await store.deliveries.getDlq(dlqId);
  if (!record) throw new GatewayError("NOT_FOUND", `No DLQ record ${dlqId}: see toolgate dlq list`);
  await store.deliveries.deleteDlq([record]);
  await writeDlqMirror(store, dataDir);
}

/** The records `filter` selects as entries, oldest failure first, bodies read a page at a time. */
async function* entryPages(store: Store, filter: DlqPageFilter): AsyncGenerator<DlqEntry[]> {
  for await (const page of dlqPages(store, filter)) {
    yield await Promise.all(page.map((record) => toEntry(store, record)));
  }
}

/** The store's DLQ as mirror pages. */
function mirrorPages(store: Store): MirrorPages {
  return () => entryPages(store, { pageSize: DLQ_PAGE_SIZE });
}

/** Runs a mirror operation, reporting a file-system failure as `STORE_CORRUPT`. */
async function mirrorWrite<T>(dataDir: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot write ${dataDir}/${DLQ_FILE}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/**
 * Rewrites `<dataDir>/dlq.json` (a JSON array of {@linkcode DlqEntry}, oldest
 * failure first) from the store: page by page into a temp file with mode
 * 0600, then rename. For removals and start-up; a new record is
 * {@linkcode appendDlqMirror}ed.
 *
 * @param dataDir Directory of the mirror. @default store.dataDir
 * @throws {GatewayError} `STORE_CORRUPT` when the file cannot be written or a record read.
 */
export async function writeDlqMirror(store: Store, dataDir: string = store.dataDir): Promise<void> {
  await mirrorWrite(dataDir, () => rebuildMirror(dataDir, mirrorPages(store)));
}

/**
 * Appends entries to `<dataDir>/dlq.json` in place, writing only their bytes.
 * It rebuilds the file from the store instead (which the entries must already
 * be in) when the file is not exactly as this process last wrote it (first
 * write of the process, rebuilt by another process, torn by a kill, missing)
 * or already holds one of the entries' ids (a record failing again after a
 * replay, or listed by a rebuild since it was written).
 *
 * @param entries Records just committed to the store (see {@linkcode dlqEntry}).
 * @param dataDir Directory of the mirror. @default store.dataDir
 * @returns `"appended"`, or `"rebuilt"` when the file was rewritten from the store.
 * @throws {GatewayError} `STORE_CORRUPT` when the file cannot be written or a record read.
 * @example
 * ```ts
 * // After committing a put_dlq op for `record` with the sent `body`:
 * await appendDlqMirror(store, [dlqEntry(record, body)], dataDir);
 * ```
 */
export async function appendDlqMirror(
  store: Store,
  entries: readonly DlqEntry[],
  dataDir: string = store.dataDir,
): Promise<AppendOutcome> {
  return await mirrorWrite(dataDir, () => appendMirror(dataDir, entries, mirrorPages(store)));
}

/**
 * Rebuilds `<dataDir>/dlq.json` from the store if it does not end as a
 * complete JSON array (an append torn by a kill); a complete or missing file
 * is left as it is. A cheap start-up check that keeps the file readable; it
 * does not find records missing from a complete file (a kill between the
 * store write and the append): {@linkcode writeDlqMirror} does, and the
 * first {@linkcode appendDlqMirror} of a process rebuilds anyway.
 *
 * @param dataDir Directory of the mirror. @default store.dataDir
 * @returns Whether the file was rebuilt.
 * @throws {GatewayError} `STORE_CORRUPT` when the file cannot be written or a record read.
 */
export async function repairDlqMirror(
  store: Store,
  dataDir: string = store.dataDir,
): Promise<boolean> {
  return await mirrorWrite(dataDir, () => repairMirror(dataDir, mirrorPages(store)));
}

/**
 * Removes the temp files (`.dlq.json.<uuid>.tmp`) that a rebuild killed
 * midway left in `dataDir`; nothing else. Safe while other processes write
 * the mirror: it waits for their rebuilds. The first mirror write of a
 * process does the same.
 *
 * @returns The file names removed.
 * @throws {GatewayError} `STORE_CORRUPT` when the directory cannot be read or a file removed.
 */
export async function cleanDlqMirrorTemps(dataDir: string): Promise<string[]> {
  return await mirrorWrite(dataDir, () => cleanMirrorTemps(dataDir));
}

/** Options of {@linkcode replayDlq}. */
export interface ReplayDlqOptions {
  /** Clock, epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Called after each record (for progress on stderr). */
  onProgress?: (done: number, total: number) => void;
  /** Records read from the store at a time (`"all"` and a webhook's records). @default 256 */
  pageSize?: number;
}

/** Which records {@linkcode replayDlq} queues again. */
export type ReplayTarget =
  | string
  | "all"
  | {
    /** Every record of this webhook. */
    webhook: string;
    /** Only records that failed at or after this time. @default every record */
    since?: Date | string;
  };

/** Outcome of {@linkcode replayDlq}. */
export interface ReplayDlqResult {
  /** Records queued for a fresh delivery. */
  queued: string[];
  /** Records whose replay was already pending. */
  already_queued: string[];
  /** Records left alone (with `"all"`): their webhook was removed or is disabled. */
  skipped: { dlq_id: string; reason: string }[];
}

function parseSince(since: Date | string | undefined): number {
  if (since === undefined) return -Infinity;
  const at = since instanceof Date ? since.getTime() : Date.parse(since);
  if (Number.isNaN(at)) {
    throw new GatewayError(
      "USAGE",
      `Invalid --since "${String(since)}": expected an ISO time, e.g. 2026-11-01T00:00:00Z`,
    );
  }
  return at;
}

/**
 * Queues dead-lettered deliveries again, with the same event id and body and
 * a fresh retry schedule. A running dispatcher picks them up within its poll
 * interval; each record is removed once its delivery succeeds (and updated
 * with the new attempts if it fails again). Records of a disabled webhook
 * are not queued: enable it first (`webhooks enable`).
 *
 * @param target A `dlq_id`, `"all"`, or `{ webhook, since? }`: every record
 * of one webhook, e.g. to catch up after it was disabled.
 * @throws {GatewayError} `NOT_FOUND` when the record, or its webhook, does
 * not exist; `CONFLICT` when the one record's webhook is disabled; `USAGE`
 * for a bad `since`.
 */
export async function replayDlq(
  store: Store,
  target: ReplayTarget,
  options: ReplayDlqOptions = {},
): Promise<ReplayDlqResult> {
  const { now = Date.now, onProgress, pageSize = DLQ_PAGE_SIZE } = options;
  const result: ReplayDlqResult = { queued: [], already_queued: [], skipped: [] };
  if (typeof target === "string" && target !== "all") {
    const record = await store.deliveries.getDlq(target);
    if (!record) {
      throw new GatewayError("NOT_FOUND", `Cannot replay ${target}: no such DLQ record`);
    }
    const webhook = await store.webhooks.getOutgoing(record.webhook_id);
    const reason = unreplayable(record, webhook);
    if (reason !== undefined) {
      throw new GatewayError(
        webhook || record.body_lost ? "CONFLICT" : "NOT_FOUND",
        `Cannot replay ${record.dlq_id}: ${reason}`,
      );
    }
    result[await requeue(store, record, now())].push(record.dlq_id);
    onProgress?.(1, 1);
    return result;
  }
  const filter: DlqPageFilter = { pageSize };
  if (typeof target === "object") {
    const since = parseSince(target.since);
    const webhook = await store.webhooks.getOutgoing(target.webhook);
    if (!webhook) {
      throw new GatewayError("NOT_FOUND", `Cannot replay: no webhook with id ${target.webhook}`);
    }
    if (webhook.disabled) {
      throw new GatewayError(
        "CONFLICT",
        `Cannot replay the dead letters of ${webhook.id}: it is disabled ` +
          `(${webhook.disabled.reason}); enable it first with \`toolgate webhooks enable ${webhook.id}\``,
      );
    }
    filter.webhook = webhook.id;
    if (since !== -Infinity) filter.from = new Date(since).toISOString();
  }
  const { count: total, until } = await snapshot(store, filter);
  if (until === undefined) return result;
  filter.until = until;
  const webhooks = new Map<string, OutgoingWebhook | null>();
  let done = 0;
  for await (const page of dlqPages(store, filter)) {
    for (const record of page) {
      let webhook = webhooks.get(record.webhook_id);
      if (webhook === undefined) {
        webhook = await store.webhooks.getOutgoing(record.webhook_id);
        webhooks.set(record.webhook_id, webhook);
      }
      const reason = unreplayable(record, webhook);
      if (reason !== undefined) result.skipped.push({ dlq_id: record.dlq_id, reason });
      else result[await requeue(store, record, now())].push(record.dlq_id);
      onProgress?.(++done, total);
    }
  }
  return result;
}

/** Why a record cannot be replayed now (its webhook was removed or is disabled), if so. */
function unreplayable(record: DlqRecord, webhook: OutgoingWebhook | null): string | undefined {
  if (record.body_lost) return "its event's body was lost before it was sent: nothing to send";
  if (!webhook) return `webhook ${record.webhook_id} was removed`;
  if (!webhook.disabled) return undefined;
  return `webhook ${record.webhook_id} is disabled (${webhook.disabled.reason}): ` +
    `enable it first with \`toolgate webhooks enable ${record.webhook_id}\``;
}

/** Queues one record's event again with its stored body. */
async function requeue(
  store: Store,
  record: DlqRecord,
  now: number,
): Promise<"queued" | "already_queued"> {
  const body = await store.deliveries.readDlqBody(record);
  const entry = await toEntry(store, record, body);
  const { timestamp } = entry.event as EventEnvelope;
  return await store.deliveries.requeueDlq(record, body, timestamp, now);
}

/** Options of {@linkcode purgeDlq}. */
export interface PurgeDlqOptions {
  /** Only records that failed before this time. @default every record */
  before?: Date | string;
  /** Directory of `dlq.json`. @default store.dataDir */
  dataDir?: string;
  /** Records deleted at a time. @default 256 */
  pageSize?: number;
}

/**
 * Deletes dead-letter records and rewrites `dlq.json`.
 *
 * @returns How many records were deleted.
 * @throws {GatewayError} `USAGE` when `before` is not a date.
 */
export async function purgeDlq(store: Store, options: PurgeDlqOptions = {}): Promise<number> {
  const { before, dataDir = store.dataDir, pageSize = DLQ_PAGE_SIZE } = options;
  const filter: DlqPageFilter = { pageSize };
  if (before !== undefined) {
    const at = before instanceof Date ? before.getTime() : Date.parse(before);
    if (Number.isNaN(at)) {
      throw new GatewayError("USAGE", `Invalid --before: "${String(before)}" is not a date`);
    }
    filter.before = new Date(at).toISOString();
  }
  // Records that fail while this runs are not purged: nobody has seen them yet.
  filter.until = (await snapshot(store, filter)).until;
  let deleted = 0;
  for await (const page of filter.until ? dlqPages(store, filter) : []) {
    await store.deliveries.deleteDlq(page);
    deleted += page.length;
  }
  await writeDlqMirror(store, dataDir);
  return deleted;
}
