/**
 * Claiming due deliveries on Deno KV: the walk of the due index from the
 * earliest entry, each entry checked against its record, stale entries
 * deleted as they are met.
 *
 * @module
 */
import { deliveryKey, outboxDueBound, outboxDuePrefix, outboxFanoutKey } from "./keys.ts";
import {
  type ClaimDueOptions,
  DeliveryRecordSchema,
  fanoutDeliveries,
  FanoutRecordSchema,
  type StoredDelivery,
} from "../records.ts";
import { parseRecord } from "../_records.ts";
import { checkClaimOptions, compareDueOrder } from "../_delivery_contract.ts";
import { claimKey, type DeliveryHandle } from "./_delivery_claims.ts";
import { ownDeliveryWebhooks } from "./_outbox_reads.ts";

/** Due index entries one claim reads beyond its limit and the claims held (stale or excluded ones). */
export const CLAIM_SCAN_SLACK = 2048;

/** Due index entries read per KV list of a claim. */
const CLAIM_SCAN_PAGE = 256;

/** Records read at once while claiming. */
const CLAIM_READ_CHUNK = 64;

/** Most stale index entries one claim deletes (the rest go on later claims). */
const MAX_STALE_DELETES = 512;

type DueHit =
  | { kind: "own"; key: Deno.KvKey; at: number; eventId: string; webhookId: string }
  | { kind: "fanout"; key: Deno.KvKey; at: number; eventId: string }
  | { kind: "bad"; key: Deno.KvKey };

function parseDueKey(key: Deno.KvKey): DueHit {
  const [, , at, eventId, last] = key;
  if (key.length !== 5 || typeof at !== "number" || typeof eventId !== "string") {
    return { kind: "bad", key };
  }
  if (last === true) return { kind: "fanout", key, at, eventId };
  if (typeof last === "string") return { kind: "own", key, at, eventId, webhookId: last };
  return { kind: "bad", key };
}

/** An index entry to delete, provided the record it was checked against is unchanged. */
interface StaleEntry {
  key: Deno.KvKey;
  check?: Deno.AtomicCheck;
}

type HitRead =
  | { kind: "own"; entry: Deno.KvEntryMaybe<unknown> }
  /** `own`: the webhooks of the event's own records; `null` when not read (nothing wanted). */
  | { kind: "fanout"; entry: Deno.KvEntryMaybe<unknown>; own: Set<string> | null }
  | null;

/**
 * Reads what an index entry points at. For a fan-out record, the event's own
 * delivery records are listed too, but only when the record (as stored, at
 * the entry's due time) lists a webhook `wanted` says the claim could take.
 */
async function readHit(
  store: DeliveryHandle,
  hit: DueHit,
  wanted: (eventId: string, webhookId: string) => boolean,
): Promise<HitRead> {
  switch (hit.kind) {
    case "own":
      return { kind: "own", entry: await store.get(deliveryKey(hit.eventId, hit.webhookId)) };
    case "fanout": {
      const entry = await store.get(outboxFanoutKey(hit.eventId));
      const value = entry.value as { next_attempt_at?: unknown; webhook_ids?: unknown } | null;
      const listed = value?.next_attempt_at === hit.at && Array.isArray(value.webhook_ids)
        ? value.webhook_ids
        : [];
      const open = listed.some((id) => typeof id === "string" && wanted(hit.eventId, id));
      return {
        kind: "fanout",
        entry,
        own: open ? await ownDeliveryWebhooks(store, hit.eventId) : null,
      };
    }
    case "bad":
      return null;
  }
}

/** Claimed deliveries in the order of the answer (see {@linkcode compareDueOrder}). */
function byDueTime(a: StoredDelivery, b: StoredDelivery): number {
  return compareDueOrder(a.record, b.record);
}

/**
 * Claims due deliveries for `options.owner`: walks the due index from the
 * earliest entry to `dueBefore`, skipping live claims and excluded webhooks,
 * checks each entry against its record (deleting stale entries), and
 * expands a fan-out entry into every unclaimed webhook it lists. Reads at
 * most `limit` + the claims held + {@linkcode CLAIM_SCAN_SLACK} index
 * entries, so a backlog it cannot take never makes a claim O(backlog).
 *
 * @returns The claimed deliveries, earliest due first (ties by event id, webhook id).
 * @throws {GatewayError} `INTERNAL` on bad options; `STORE_CORRUPT` on an unreadable record.
 */
export async function claimDueDeliveries(
  store: DeliveryHandle,
  options: ClaimDueOptions,
): Promise<StoredDelivery[]> {
  checkClaimOptions(options);
  const { owner, until, now, dueBefore, limit, excludeWebhooks = [] } = options;
  const claims = store.claims;
  claims.prune(now);
  const excluded = new Set(excludeWebhooks);
  const budget = limit + claims.size + CLAIM_SCAN_SLACK;
  const out: StoredDelivery[] = [];
  const taken = new Set<string>();
  const stale: StaleEntry[] = [];
  const free = (eventId: string, webhookId: string, scan: number) =>
    !claims.live(eventId, webhookId, now) && !taken.has(claimKey(eventId, webhookId)) &&
    !claims.deletedDuring(scan, eventId, webhookId);
  const take = (stored: StoredDelivery, at?: number) => {
    const { event_id, webhook_id } = stored.record;
    claims.set(event_id, webhook_id, { owner, until, fanout: stored.fanout, at });
    taken.add(claimKey(event_id, webhook_id));
    out.push(stored);
  };

  const wanted = (eventId: string, webhookId: string) =>
    !excluded.has(webhookId) && !claims.live(eventId, webhookId, now);

  /** Whether reading the hit's record could give anything (cheap, in memory). */
  const worthReading = (hit: DueHit): boolean => {
    if (hit.kind === "own") return wanted(hit.eventId, hit.webhookId);
    if (hit.kind === "fanout") {
      const known = claims.fanoutList(hit.eventId);
      return !known || known.some((id) => wanted(hit.eventId, id));
    }
    return true;
  };

  const evaluate = (hit: DueHit, read: HitRead, scan: number): void => {
    if (hit.kind === "bad" || read === null) {
      stale.push({ key: hit.key });
      return;
    }
    if (hit.kind === "own" && read.kind === "own") {
      const { entry } = read;
      const check = {
        key: deliveryKey(hit.eventId, hit.webhookId),
        versionstamp: entry.versionstamp,
      };
      if (entry.value === null || entry.versionstamp === null) {
        stale.push({ key: hit.key, check });
        return;
      }
      const record = parseRecord(
        DeliveryRecordSchema,
        entry.value,
        `delivery ${hit.eventId}/${hit.webhookId}`,
      );
      if (record.next_attempt_at !== hit.at) {
        stale.push({ key: hit.key, check });
        return;
      }
      if (excluded.has(hit.webhookId) || !free(hit.eventId, hit.webhookId, scan)) return;
      take({ record, versionstamp: entry.versionstamp, fanout: false }, hit.at);
      return;
    }
    if (hit.kind === "fanout" && read.kind === "fanout") {
      const { entry, own } = read;
      const check = { key: outboxFanoutKey(hit.eventId), versionstamp: entry.versionstamp };
      if (entry.value === null || entry.versionstamp === null) {
        stale.push({ key: hit.key, check });
        return;
      }
      const fanout = parseRecord(FanoutRecordSchema, entry.value, `fan-out of ${hit.eventId}`);
      if (fanout.next_attempt_at !== hit.at) {
        stale.push({ key: hit.key, check });
        return;
      }
      // A delivery record wins over a fan-out entry of the same webhook.
      const open = fanoutDeliveries(hit.eventId, fanout).filter((record) =>
        !own?.has(record.webhook_id) && free(hit.eventId, record.webhook_id, scan)
      );
      // Claimed whole: the claimer rewrites the list, so it gets every entry left.
      if (!open.some((record) => !excluded.has(record.webhook_id))) return;
      // Freed while it was read (its own records unread): left for the next claim.
      if (own === null) return;
      for (const record of open) take({ record, versionstamp: entry.versionstamp, fanout: true });
      claims.noteFanout(hit.eventId, fanout.webhook_ids);
    }
  };

  const scan = claims.beginScan();
  try {
    let cursor: string | undefined;
    let scanned = 0;
    while (out.length < limit && scanned < budget) {
      const size = Math.min(CLAIM_SCAN_PAGE, budget - scanned);
      const page = await store.retry(async () => {
        const keys: Deno.KvKey[] = [];
        const entries = store.reader.list(
          { prefix: outboxDuePrefix(), end: outboxDueBound(dueBefore) },
          { limit: size, batchSize: size, cursor },
        );
        for await (const entry of entries) keys.push(entry.key);
        return { keys, cursor: entries.cursor };
      });
      scanned += page.keys.length;
      const hits = page.keys.map(parseDueKey).filter(worthReading);
      for (let i = 0; i < hits.length && out.length < limit; i += CLAIM_READ_CHUNK) {
        const chunk = hits.slice(i, i + CLAIM_READ_CHUNK);
        const reads = await Promise.all(chunk.map((hit) => readHit(store, hit, wanted)));
        for (let j = 0; j < chunk.length && out.length < limit; j++) {
          evaluate(chunk[j], reads[j], scan);
        }
      }
      if (page.keys.length < size) break;
      cursor = page.cursor;
    }
  } finally {
    claims.endScan(scan);
  }
  await deleteStaleEntries(store, stale.slice(0, MAX_STALE_DELETES));
  return out.sort(byDueTime);
}

/** Deletes stale due index entries whose records are still as they were read. */
async function deleteStaleEntries(
  store: DeliveryHandle,
  stale: readonly StaleEntry[],
): Promise<void> {
  const commit = (part: readonly StaleEntry[]) =>
    store.retry(() => {
      const atomic = store.kv.atomic();
      const checked = new Set<string>();
      for (const { key, check } of part) {
        if (check) {
          const id = JSON.stringify([check.key, check.versionstamp]);
          if (!checked.has(id)) atomic.check(check);
          checked.add(id);
        }
        atomic.delete(key);
      }
      return atomic.commit();
    });
  for (let i = 0; i < stale.length; i += 50) {
    const part = stale.slice(i, i + 50);
    if ((await commit(part)).ok) continue;
    // A record changed meanwhile: the others still go.
    for (const one of part) await commit([one]);
  }
}
