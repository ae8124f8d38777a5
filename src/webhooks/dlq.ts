/**
 * Dead-letter queue operations for the CLI (`toolgate dlq list | replay |
 * purge`) and the `dlq.json` mirror in the data directory.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { EventEnvelope } from "../events/mod.ts";
import type { AttemptRecord, DlqRecord, Store } from "../store/mod.ts";

/** File name of the DLQ mirror in the data directory. */
export const DLQ_FILE = "dlq.json";

/** A dead-lettered delivery, as listed and mirrored to `dlq.json`. */
export interface DlqEntry {
  /** Identifier used by `dlq replay`. */
  dlq_id: string;
  /** The webhook the event failed to reach. */
  webhook_id: string;
  /** Its URL at the time of failure. */
  url: string;
  /** The event envelope, parsed from the exact bytes that were sent. */
  event: EventEnvelope;
  /** Every attempt of the last delivery run. */
  attempts: AttemptRecord[];
  /** ISO-8601 time the last retry failed. */
  failed_at: string;
}

const decoder = new TextDecoder();

async function toEntry(
  store: Store,
  record: DlqRecord,
  body?: Uint8Array,
): Promise<DlqEntry> {
  body ??= await store.deliveries.readDlqBody(record);
  let event: EventEnvelope;
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
    failed_at: record.failed_at,
  };
}

/**
 * Every dead-lettered delivery, oldest failure first.
 *
 * @example
 * ```ts
 * for (const entry of await listDlq(store)) console.log(entry.dlq_id, entry.event.type);
 * ```
 */
export async function listDlq(store: Store): Promise<DlqEntry[]> {
  const records = await store.deliveries.listDlq();
  records.sort((a, b) =>
    a.failed_at < b.failed_at ? -1 : a.failed_at > b.failed_at ? 1 : a.dlq_id < b.dlq_id ? -1 : 1
  );
  return await Promise.all(records.map((record) => toEntry(store, record)));
}

/**
 * Rewrites `<dataDir>/dlq.json` (a JSON array of {@linkcode DlqEntry}) from
 * the store, atomically: temp file with mode 0600, then rename.
 *
 * @param dataDir Directory of the mirror. @default store.dataDir
 */
export async function writeDlqMirror(store: Store, dataDir: string = store.dataDir): Promise<void> {
  const entries = await listDlq(store);
  const path = `${dataDir}/${DLQ_FILE}`;
  const temp = `${dataDir}/.${DLQ_FILE}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeTextFile(temp, JSON.stringify(entries, null, 2) + "\n", { mode: 0o600 });
    await Deno.chmod(temp, 0o600);
    await Deno.rename(temp, path);
  } catch (error) {
    await Deno.remove(temp).catch(() => undefined);
    throw new GatewayError(
      "STORE_CORRUPT",
      `Cannot write ${path}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** Options of {@linkcode replayDlq}. */
export interface ReplayDlqOptions {
  /** Clock, epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Called after each record (for progress on stderr). */
  onProgress?: (done: number, total: number) => void;
}

/** Outcome of {@linkcode replayDlq}. */
export interface ReplayDlqResult {
  /** Records queued for a fresh delivery. */
  queued: string[];
  /** Records whose replay was already pending. */
  already_queued: string[];
  /** Records left alone (with `"all"`): their webhook was removed. */
  skipped: { dlq_id: string; reason: string }[];
}

/**
 * Queues dead-lettered deliveries again, with the same event id and body and
 * a fresh retry schedule. A running dispatcher picks them up within its poll
 * interval; each record is removed once its delivery succeeds (and updated
 * with the new attempts if it fails again).
 *
 * @param target A `dlq_id`, or `"all"`.
 * @throws {GatewayError} `NOT_FOUND` when the record, or its webhook, does not exist.
 */
export async function replayDlq(
  store: Store,
  target: string,
  options: ReplayDlqOptions = {},
): Promise<ReplayDlqResult> {
  const { now = Date.now, onProgress } = options;
  let records: DlqRecord[];
  if (target === "all") {
    records = await store.deliveries.listDlq();
  } else {
    const record = await store.deliveries.getDlq(target);
    if (!record) {
      throw new GatewayError("NOT_FOUND", `Cannot replay ${target}: no such DLQ record`);
    }
    records = [record];
  }
  const result: ReplayDlqResult = { queued: [], already_queued: [], skipped: [] };
  let done = 0;
  for (const record of records) {
    if (!await store.webhooks.getOutgoing(record.webhook_id)) {
      const reason = `webhook ${record.webhook_id} was removed`;
      if (target !== "all") {
        throw new GatewayError("NOT_FOUND", `Cannot replay ${record.dlq_id}: ${reason}`);
      }
      result.skipped.push({ dlq_id: record.dlq_id, reason });
    } else {
      const body = await store.deliveries.readDlqBody(record);
      const entry = await toEntry(store, record, body);
      const outcome = await store.deliveries.requeueDlq(record, body, entry.event.timestamp, now());
      result[outcome].push(record.dlq_id);
    }
    onProgress?.(++done, records.length);
  }
  return result;
}

/** Options of {@linkcode purgeDlq}. */
export interface PurgeDlqOptions {
  /** Only records that failed before this time. @default every record */
  before?: Date | string;
  /** Directory of `dlq.json`. @default store.dataDir */
  dataDir?: string;
}

/**
 * Deletes dead-letter records and rewrites `dlq.json`.
 *
 * @returns How many records were deleted.
 * @throws {GatewayError} `USAGE` when `before` is not a date.
 */
export async function purgeDlq(store: Store, options: PurgeDlqOptions = {}): Promise<number> {
  const { before, dataDir = store.dataDir } = options;
  let limit = Infinity;
  if (before !== undefined) {
    limit = before instanceof Date ? before.getTime() : Date.parse(before);
    if (Number.isNaN(limit)) {
      throw new GatewayError("USAGE", `Invalid --before: "${String(before)}" is not a date`);
    }
  }
  const records = (await store.deliveries.listDlq()).filter((r) => Date.parse(r.failed_at) < limit);
  await store.deliveries.deleteDlq(records);
  await writeDlqMirror(store, dataDir);
  return records.length;
}
