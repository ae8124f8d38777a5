/**
 * Durable outgoing-webhook delivery storage: the outbox (events and their
 * pending deliveries), the per-webhook delivery log and the dead-letter queue.
 *
 * A pending delivery is stored in one of two forms. Until its first attempt
 * has failed, it is a webhook id in its event's fan-out record (one record
 * per event, however many webhooks it goes to, so queuing an event costs two
 * small writes). A delivery that needs a retry, or replays a DLQ record, has
 * a delivery record of its own with its attempts. The commit that records an
 * outcome rewrites the fan-out record without that webhook.
 *
 * Writes from the dispatcher go through a {@linkcode DeliveryWriter}, which
 * group-commits many small writes into one KV atomic operation (within the KV
 * limits of 1000 mutations, 100 checks and about 800 KiB per commit) to go past
 * the commit ceiling of Deno KV.
 *
 * Pending deliveries are found by due time through a due index
 * (`outboxDueKey`, `outboxFanoutDueKey`), kept in the commits that write the
 * records. The entry of a record's earlier due time may be left behind when
 * the writer does not know it; {@linkcode claimDueDeliveries} checks every
 * entry it uses against the record and deletes stale ones as it meets them.
 * Claims live in the memory of the {@linkcode KvStore} ({@linkcode DeliveryClaims}):
 * one process per KV file sends deliveries, the holder of the delivery lease.
 *
 * @module
 */
import { z } from "zod";
import { CommitQueue } from "../_commit_queue.ts";
import { GatewayError } from "../../errors/mod.ts";
import {
  deliveriesPrefix,
  deliveriesVersionKey,
  deliveryKey,
  deliveryLogKey,
  deliveryLogPrefix,
  dlqBodyKey,
  dlqCountKey,
  dlqIndexedKey,
  dlqKey,
  dlqOrderKey,
  dlqOrderPrefix,
  dlqPrefix,
  dlqVersionKey,
  dlqWebhookOrderKey,
  dlqWebhookOrderPrefix,
  eventDeliveriesPrefix,
  outboxBodyKey,
  outboxDueBound,
  outboxDueKey,
  outboxDuePrefix,
  outboxEventKey,
  outboxFanoutDueKey,
  outboxFanoutKey,
  outboxFanoutPrefix,
} from "./keys.ts";
import type { KvHandle } from "./_handle.ts";
import {
  BytesSchema,
  type ClaimDueOptions,
  DELIVERY_LOG_SIZE,
  type DeliveryClaim,
  type DeliveryLogEntry,
  DeliveryLogEntrySchema,
  type DeliveryOp,
  type DeliveryRecord,
  DeliveryRecordSchema,
  dlqAfter,
  type DlqPosition,
  type DlqRecord,
  DlqRecordSchema,
  fanoutDeliveries,
  FanoutRecordSchema,
  type ListDlqPageOptions,
  newLogEntryId,
  type OutboxEvent,
  sortDlq,
  type StoredDelivery,
  type WriteResult,
} from "../records.ts";
import { parseRecord } from "../_records.ts";

/** The handle, with the claims on pending deliveries it keeps in memory. */
type KvStore = KvHandle & { readonly claims: DeliveryClaims };

/** Bodies larger than this are stored in chunks of this size (a KV value holds 64 KiB). */
export const BODY_CHUNK_BYTES = 60_000;

const StoredEventSchema = z.strictObject({
  id: z.string(),
  type: z.string(),
  timestamp: z.string(),
  size: z.number().int().min(0),
  body: BytesSchema.optional(),
  traceparent: z.string().optional(),
  /** See {@linkcode OutboxEvent.webhook_ids}: kept for up to {@linkcode MAX_CHECKED_WEBHOOKS}. */
  webhook_ids: z.array(z.string()).optional(),
});

/**
 * Most webhooks of an event whose delivery records a collection checks in
 * place (one check per webhook in the commit) instead of listing them; an
 * event with more keeps no list and is collected by reading.
 */
export const MAX_CHECKED_WEBHOOKS = 16;

/** The event's webhook list, as kept in its record: none past {@linkcode MAX_CHECKED_WEBHOOKS}. */
function keptWebhookIds(ids: readonly string[] | undefined): readonly string[] | undefined {
  return ids && ids.length <= MAX_CHECKED_WEBHOOKS ? ids : undefined;
}

function chunkCount(size: number): number {
  return size > BODY_CHUNK_BYTES ? Math.ceil(size / BODY_CHUNK_BYTES) : 0;
}

// ---------------------------------------------------------------------------
// Group commit

/**
 * One write of a commit. `withNext`: it goes in the same commit as the
 * mutation after it (a due index entry and its record), even when a write
 * too large for one commit is split.
 */
type Mutation =
  | {
    type: "set";
    key: Deno.KvKey;
    value: unknown;
    op: number;
    primary: boolean;
    withNext?: boolean;
    /** A DLQ record: its index entries and the count go in the same commit. */
    dlq?: true;
  }
  | {
    type: "delete";
    key: Deno.KvKey;
    op: number;
    primary: boolean;
    withNext?: boolean;
    dlq?: true;
  };

/**
 * The due time under which an own delivery record is known to be indexed
 * (remembered by its claim), so that rewriting or deleting it can delete
 * that index entry in the same commit.
 */
type IndexedAt = (eventId: string, webhookId: string) => number | undefined;

/** The checks a collection adds to a commit at most: the event record's, its fan-out record's and, checked in place, one per delivery record it could have (see {@linkcode resolveCollections}). */
function guardedChecks(g: Guarded): number {
  return 2 + (g.webhookIds?.length ?? 0);
}

/** A `collect_event`: applied only while nothing stored refers to its event (see {@linkcode resolveCollections}). */
interface Guarded {
  eventId: string;
  check: Deno.AtomicCheck;
  /** The event's webhooks as read with `check` (see {@linkcode MAX_CHECKED_WEBHOOKS}), when known. */
  webhookIds?: readonly string[];
  mutations: Mutation[];
}

interface Cost {
  mutations: number;
  checks: number;
  keyBytes: number;
  bytes: number;
}

interface Unit {
  plain: Mutation[];
  guarded: Guarded[];
  /** Its DLQ ops, in order: their index entries and count are planned at commit time. */
  dlq: DlqOp[];
  ops: number;
  cost: Cost;
  resolve: (result: WriteResult) => void;
  reject: (error: unknown) => void;
}

// Kept below the KV limits (1000 mutations, 100 checks, 80 KiB of keys and
// 800 KiB in all per atomic operation), as sizes are estimated.
const MAX_MUTATIONS = 1000;
const MAX_CHECKS = 100;
const MAX_KEY_BYTES = 70_000;
const MAX_BYTES = 700_000;

const utf8 = new TextEncoder();

// deno-lint-ignore no-control-regex
const ASCII = /^[\x00-\x7f]*$/;

function stringBytes(text: string): number {
  return ASCII.test(text) ? text.length : utf8.encode(text).byteLength;
}

function keySize(key: Deno.KvKey): number {
  let size = 0;
  for (const part of key) {
    size += typeof part === "string"
      ? stringBytes(part) + 2
      : part instanceof Uint8Array
      ? part.length + 2
      : 9;
  }
  return size;
}

function valueSize(value: unknown): number {
  if (value instanceof Uint8Array) return value.byteLength + 8;
  switch (typeof value) {
    case "string":
      return value.length * 2 + 5;
    case "number":
    case "bigint":
      return 9;
    case "boolean":
    case "undefined":
      return 1;
    case "object": {
      if (value === null) return 1;
      let size = 4;
      if (Array.isArray(value)) {
        for (const item of value) size += valueSize(item);
      } else {
        const record = value as Record<string, unknown>;
        for (const k in record) size += k.length + 3 + valueSize(record[k]);
      }
      return size;
    }
    default:
      return 16;
  }
}

/** Adds the KV cost of one mutation to `cost`, in place. */
function addMutationCost(cost: Cost, mutation: Mutation): Cost {
  const keyBytes = keySize(mutation.key);
  cost.mutations++;
  cost.keyBytes += keyBytes;
  cost.bytes += keyBytes + (mutation.type === "set" ? valueSize(mutation.value) : 0);
  return cost;
}

function mutationCost(mutation: Mutation): Cost {
  return addMutationCost({ mutations: 0, checks: 0, keyBytes: 0, bytes: 0 }, mutation);
}

function addCost(a: Cost, b: Cost): Cost {
  return {
    mutations: a.mutations + b.mutations,
    checks: a.checks + b.checks,
    keyBytes: a.keyBytes + b.keyBytes,
    bytes: a.bytes + b.bytes,
  };
}

const ZERO: Cost = { mutations: 0, checks: 0, keyBytes: 0, bytes: 0 };

function fits(cost: Cost): boolean {
  return cost.mutations <= MAX_MUTATIONS && cost.checks <= MAX_CHECKS &&
    cost.keyBytes <= MAX_KEY_BYTES && cost.bytes <= MAX_BYTES;
}

function bodyMutations(
  body: Uint8Array,
  chunkKey: (chunk: number) => Deno.KvKey,
  op: number,
): Mutation[] {
  const out: Mutation[] = [];
  const chunks = chunkCount(body.byteLength);
  for (let i = 0; i < chunks; i++) {
    out.push({
      type: "set",
      key: chunkKey(i),
      value: body.subarray(i * BODY_CHUNK_BYTES, (i + 1) * BODY_CHUNK_BYTES),
      op,
      primary: false,
    });
  }
  return out;
}

function eventMutations(event: OutboxEvent, op: number): Mutation[] {
  const size = event.body.byteLength;
  const kept = keptWebhookIds(event.webhook_ids);
  const record = {
    id: event.id,
    type: event.type,
    timestamp: event.timestamp,
    size,
    ...(chunkCount(size) === 0 ? { body: event.body } : {}),
    ...(event.traceparent !== undefined ? { traceparent: event.traceparent } : {}),
    ...(kept ? { webhook_ids: [...kept] } : {}),
  };
  return [
    // Chunks first: a split commit never leaves a record without its body.
    ...bodyMutations(event.body, (i) => outboxBodyKey(event.id, i), op),
    { type: "set", key: outboxEventKey(event.id), value: record, op, primary: true },
  ];
}

function deleteBody(size: number, chunkKey: (chunk: number) => Deno.KvKey, op: number) {
  const out: Mutation[] = [];
  for (let i = 0; i < chunkCount(size); i++) {
    out.push({ type: "delete", key: chunkKey(i), op, primary: false });
  }
  return out;
}

function opMutations(op: DeliveryOp, index: number, indexedAt?: IndexedAt): Mutation[] {
  switch (op.op) {
    case "put_event":
      return eventMutations(op.event, index);
    case "put_delivery": {
      const d = op.delivery;
      const out: Mutation[] = [];
      const before = indexedAt?.(d.event_id, d.webhook_id);
      if (before !== undefined && before !== d.next_attempt_at) {
        const key = outboxDueKey(before, d.event_id, d.webhook_id);
        out.push({ type: "delete", key, op: index, primary: false, withNext: true });
      }
      out.push(
        {
          type: "set",
          key: outboxDueKey(d.next_attempt_at, d.event_id, d.webhook_id),
          value: null,
          op: index,
          primary: false,
          withNext: true,
        },
        {
          type: "set",
          key: deliveryKey(d.event_id, d.webhook_id),
          value: d,
          op: index,
          primary: true,
        },
      );
      return out;
    }
    case "delete_delivery": {
      const out: Mutation[] = [];
      const at = op.next_attempt_at ?? indexedAt?.(op.event_id, op.webhook_id);
      if (at !== undefined) {
        const key = outboxDueKey(at, op.event_id, op.webhook_id);
        out.push({ type: "delete", key, op: index, primary: false, withNext: true });
      }
      out.push({
        type: "delete",
        key: deliveryKey(op.event_id, op.webhook_id),
        op: index,
        primary: true,
      });
      return out;
    }
    case "put_fanout": {
      const key = outboxFanoutKey(op.event_id);
      const due = outboxFanoutDueKey(op.fanout.next_attempt_at, op.event_id);
      return op.fanout.webhook_ids.length
        ? [
          { type: "set", key: due, value: null, op: index, primary: false, withNext: true },
          { type: "set", key, value: op.fanout, op: index, primary: true },
        ]
        : [
          { type: "delete", key: due, op: index, primary: false, withNext: true },
          { type: "delete", key, op: index, primary: true },
        ];
    }
    case "log":
      return [{
        type: "set",
        key: deliveryLogKey(op.webhook_id, op.entry_id),
        value: op.entry,
        op: index,
        primary: true,
      }];
    case "delete_log":
      return [{
        type: "delete",
        key: deliveryLogKey(op.webhook_id, op.entry_id),
        op: index,
        primary: true,
      }];
    case "put_dlq": {
      const size = op.body.byteLength;
      const record: DlqRecord = {
        ...op.record,
        size,
        ...(chunkCount(size) === 0 ? { body: op.body } : {}),
      };
      return [
        ...bodyMutations(op.body, (i) => dlqBodyKey(op.record.dlq_id, i), index),
        {
          type: "set",
          key: dlqKey(op.record.dlq_id),
          value: record,
          op: index,
          primary: true,
          dlq: true,
        },
      ];
    }
    case "delete_dlq":
      return [
        { type: "delete", key: dlqKey(op.dlq_id), op: index, primary: true, dlq: true },
        ...deleteBody(op.size, (i) => dlqBodyKey(op.dlq_id, i), index),
      ];
    case "collect_event":
      return [
        { type: "delete", key: outboxEventKey(op.event_id), op: index, primary: true },
        ...deleteBody(op.size, (i) => outboxBodyKey(op.event_id, i), index),
      ];
  }
}

/** What a DLQ op adds to a commit at most, besides its own mutations (see {@linkcode planDlq}). */
function dlqPlanCost(op: DlqOp): Cost {
  const id = op.op === "put_dlq" ? op.record.dlq_id : op.dlq_id;
  // Two index entries set and two deleted (a record failing again), a check on the record.
  const keyBytes = 4 * (keySize(dlqWebhookOrderKey("wh_" + "x".repeat(40), "x".repeat(24), id)));
  return { mutations: 4, checks: 1, keyBytes, bytes: keyBytes + 4 * 64 };
}

/** The count sum, the version bump and the marker check a commit with DLQ ops adds. */
const DLQ_COMMIT_COST: Cost = { mutations: 2, checks: 1, keyBytes: 64, bytes: 128 };

function buildUnit(
  ops: readonly DeliveryOp[],
  indexedAt?: IndexedAt,
): Omit<Unit, "resolve" | "reject"> {
  const plain: Mutation[] = [];
  const guarded: Guarded[] = [];
  const dlq: DlqOp[] = [];
  let cost: Cost = { mutations: 0, checks: 0, keyBytes: 0, bytes: 0 };
  ops.forEach((op, index) => {
    const mutations = opMutations(op, index, indexedAt);
    for (const mutation of mutations) addMutationCost(cost, mutation);
    if (op.op === "put_dlq" || op.op === "delete_dlq") {
      dlq.push(op);
      cost = addCost(cost, dlqPlanCost(op));
    }
    if (op.op === "collect_event") {
      const check = { key: outboxEventKey(op.event_id), versionstamp: op.versionstamp };
      const webhookIds = keptWebhookIds(op.webhook_ids);
      const g: Guarded = {
        eventId: op.event_id,
        check,
        ...(webhookIds ? { webhookIds } : {}),
        mutations,
      };
      const checks = guardedChecks(g);
      cost.checks += checks;
      cost.bytes += checks * keySize(deliveryKey(op.event_id, "wh_" + "x".repeat(26)));
      guarded.push(g);
    } else {
      plain.push(...mutations);
    }
  });
  if (dlq.length) cost = addCost(cost, DLQ_COMMIT_COST);
  return { plain, guarded, dlq, ops: ops.length, cost };
}

/**
 * KV cost of writing `ops` inside another commit (the audit log's): what
 * they add to its mutation count, key bytes and bytes, due index entries
 * included.
 *
 * @throws {GatewayError} `INTERNAL` when `ops` holds a guarded op
 * (`collect_event`) or a DLQ op (`put_dlq`, `delete_dlq`: their index is
 * planned at commit time), which only {@linkcode DeliveryWriter} commits.
 */
export function deliveryOpsCost(
  ops: readonly DeliveryOp[],
): { mutations: number; keyBytes: number; bytes: number } {
  const unit = buildUnit(ops);
  refuseOutside(unit);
  const { mutations, keyBytes, bytes } = unit.cost;
  return { mutations, keyBytes, bytes };
}

/**
 * Adds `ops` (no `collect_event`, no DLQ op) to an atomic operation of this store, and
 * bumps the deliveries version when `bumpVersion` is set: how deliveries
 * ride in the audit log's commit. For modules of `src/store` only; their
 * claims are the caller's (see {@linkcode DeliveryClaims.stage}).
 */
export function applyDeliveryOps(
  atomic: Deno.AtomicOperation,
  ops: readonly DeliveryOp[],
  bumpVersion: boolean,
): void {
  const unit = buildUnit(ops);
  refuseOutside(unit);
  apply(atomic, unit.plain);
  if (bumpVersion) atomic.sum(deliveriesVersionKey(), 1n);
}

/** Ops only a {@linkcode DeliveryWriter} commits: collections and DLQ records (their index). */
function refuseOutside(unit: Omit<Unit, "resolve" | "reject">): void {
  if (unit.guarded.length || unit.dlq.length) {
    throw new GatewayError(
      "INTERNAL",
      "Cannot write a collect_event or DLQ op inside another commit",
    );
  }
}

/** Commits unconditional `mutations` in order, `size` per commit (each part atomic, not the whole). */
async function commitInParts(
  store: KvStore,
  mutations: readonly Mutation[],
  size: number,
): Promise<void> {
  for (let i = 0; i < mutations.length; i += size) {
    const part = mutations.slice(i, i + size);
    await store.retry(() => {
      const atomic = store.kv.atomic();
      apply(atomic, part);
      return atomic.commit();
    });
  }
}

function apply(atomic: Deno.AtomicOperation, mutations: readonly Mutation[]): void {
  for (const m of mutations) {
    if (m.type === "set") atomic.set(m.key, m.value);
    else atomic.delete(m.key);
  }
}

/**
 * Group-commits delivery writes: each {@linkcode DeliveryWriter.write} call is
 * one unit, applied atomically together with the other units waiting at the
 * time (a unit larger than one commit is split, in order).
 */
export class DeliveryWriter {
  #store: KvStore;
  #queue: CommitQueue<Unit>;

  /**
   * @param store The store to write to.
   * @param options `lingerMs`: how long a commit waits for more units to
   * join it (fewer, larger commits for writes nobody waits on). @default 0
   */
  constructor(store: KvStore, options: { lingerMs?: number } = {}) {
    this.#store = store;
    this.#queue = new CommitQueue((queue) => this.#drain(queue), options);
  }

  /** Units waiting to be committed. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Queues `ops` for the next group commit.
   *
   * @returns Once committed: the versionstamps and whether collections applied.
   * @throws The commit error (other than lock contention, which is retried).
   */
  write(ops: readonly DeliveryOp[]): Promise<WriteResult> {
    const claims = this.#store.claims;
    const unit = buildUnit(ops, (eventId, webhookId) => claims.indexedAt(eventId, webhookId));
    const effects = claims.stage(ops);
    return new Promise<WriteResult>((resolve, reject) => {
      this.#queue.push({
        ...unit,
        resolve: (result) => {
          effects.committed();
          resolve(result);
        },
        reject: (error) => {
          effects.failed();
          reject(error);
        },
      });
    });
  }

  /** Resolves once every queued write is committed (or failed). */
  flush(): Promise<void> {
    return this.#queue.flush();
  }

  async #drain(queue: Unit[]): Promise<void> {
    while (queue.length) {
      const batch: Unit[] = [];
      let cost = ZERO;
      while (queue.length) {
        const next = addCost(cost, queue[0].cost);
        if (batch.length && !fits(next)) break;
        batch.push(queue.shift()!);
        cost = next;
      }
      try {
        if (batch.length === 1 && !fits(cost)) await this.#commitSplit(batch[0]);
        else await this.#commitBatch(batch);
      } catch (error) {
        for (const unit of batch) unit.reject(error);
      }
    }
  }

  async #commitBatch(batch: Unit[]): Promise<void> {
    const kv = this.#store.kv;
    const dlqOps = batch.flatMap((unit) => unit.dlq);
    const guarded = batch.flatMap((unit) => unit.guarded);
    const plain = guarded.length ? batch.flatMap((unit) => unit.plain) : [];
    // Collections checked in place first (no reads), then by reading what is
    // stored, then none: a collection reported lost that was not is looked
    // at again by its caller. A failed check in the last round is a DLQ
    // record changed since it was planned.
    const modes: CollectionMode[] = !guarded.length
      ? ["none"]
      : guarded.some((g) => g.webhookIds)
      ? ["checked", "read", "none"]
      : ["read", "none"];
    for (let round = 1;; round++) {
      const plan = dlqOps.length ? await planDlq(this.#store, dlqOps) : undefined;
      for (const mode of modes) {
        const collections = mode === "none"
          ? undefined
          : await resolveCollections(this.#store, plain, batch, mode);
        const result = await this.#store.retry(() => {
          const atomic = kv.atomic();
          for (const unit of batch) apply(atomic, unit.plain);
          collections?.apply(atomic);
          plan?.apply(atomic);
          return atomic.commit();
        });
        if (!result.ok) continue;
        for (const unit of batch) unit.resolve(unitResult(unit, result.versionstamp, collections));
        return;
      }
      if (!plan) throw new Error("Unconditional KV commit reported a failed check");
      dlqRaceLost(round);
    }
  }

  async #commitSplit(unit: Unit): Promise<void> {
    const kv = this.#store.kv;
    const versionstamps: string[] = new Array(unit.ops).fill("");
    let part: Mutation[] = [];
    let cost = ZERO;
    let dlqPlanned = false;
    const commitPart = async () => {
      if (!part.length) return;
      const mutations = part;
      // The DLQ records' index entries and count go with the first part holding a record.
      const withDlq = !dlqPlanned && unit.dlq.length > 0 && mutations.some((m) => m.dlq);
      for (let round = 1;; round++) {
        const plan = withDlq ? await planDlq(this.#store, unit.dlq) : undefined;
        const result = await this.#store.retry(() => {
          const atomic = kv.atomic();
          apply(atomic, mutations);
          plan?.apply(atomic);
          return atomic.commit();
        });
        if (result.ok) {
          for (const m of mutations) if (m.primary) versionstamps[m.op] = result.versionstamp;
          break;
        }
        if (!plan) throw new Error("Unconditional KV commit reported a failed check");
        dlqRaceLost(round);
      }
      if (withDlq) dlqPlanned = true;
      part = [];
      cost = ZERO;
    };
    for (let i = 0; i < unit.plain.length;) {
      // A due index entry goes with its record.
      let end = i + 1;
      while (unit.plain[end - 1].withNext && end < unit.plain.length) end++;
      const group = unit.plain.slice(i, end);
      const added = group.map(mutationCost).reduce(addCost, ZERO);
      const dlqCost = group.some((m) => m.dlq) && !dlqPlanned
        ? unit.dlq.map(dlqPlanCost).reduce(addCost, DLQ_COMMIT_COST)
        : ZERO;
      if (part.length && !fits(addCost(addCost(cost, added), dlqCost))) await commitPart();
      part.push(...group);
      cost = addCost(addCost(cost, added), dlqCost);
      i = end;
    }
    await commitPart();
    // The collections go after the rest, as many per commit as their checks allow.
    const uncollected: string[] = [];
    let group: Guarded[] = [];
    let checks = 0;
    const commitGroup = async () => {
      if (!group.length) return;
      const part = { guarded: group };
      let lost: string[] = group.map((g) => g.eventId);
      for (const mode of ["checked", "read"] as const) {
        const collections = await resolveCollections(this.#store, [], [part], mode);
        const result = await this.#store.retry(() => {
          const atomic = kv.atomic();
          collections.apply(atomic);
          return atomic.commit();
        });
        if (!result.ok) continue;
        lost = collections.uncollected(part);
        for (const g of group) {
          if (lost.includes(g.eventId)) continue;
          for (const m of g.mutations) if (m.primary) versionstamps[m.op] = result.versionstamp;
        }
        break;
      }
      uncollected.push(...lost);
      group = [];
      checks = 0;
    };
    let mutations = 0;
    for (const g of unit.guarded) {
      const cost = guardedChecks(g);
      const full = checks + cost > MAX_CHECKS || mutations + g.mutations.length > MAX_MUTATIONS;
      if (group.length && full) {
        await commitGroup();
        mutations = 0;
      }
      group.push(g);
      checks += cost;
      mutations += g.mutations.length;
    }
    await commitGroup();
    unit.resolve(
      uncollected.length
        ? { versionstamps, collected: false, uncollected }
        : { versionstamps, collected: true },
    );
  }
}

// ---------------------------------------------------------------------------
// Collections
//
// The storage contract's rule: an event's record and body live as long as
// any delivery of it is pending, as a fan-out entry or a delivery record of
// its own. A `collect_event` is the writer's request to delete the event when
// nothing refers to it any more; the writer decides at commit time from what
// is stored, never from what the requester believes (a dispatcher that
// evicted a retry to the store, or restarted, does not hold every reference).
//
// A collection is decided in one of two ways, both checked in the commit:
//
// - In place ("checked"), for an event whose record lists its webhooks (at
//   most MAX_CHECKED_WEBHOOKS): the commit checks the event record as read,
//   that its fan-out record is absent (unless the commit itself deletes it)
//   and that no delivery record exists under any of those webhooks (unless
//   the commit deletes it). No read; a failed check sends the batch to the
//   next way.
// - By reading ("read"): the event's fan-out record and its delivery
//   records are read, the commit's own writes applied to them, and the
//   collection goes into the commit only when none is left, checking the
//   event record and the fan-out record as read.
//
// Both rest on one fact: a delivery record is only ever created in a commit
// that also writes its event's fan-out record (the first failed attempt of a
// fan-out entry leaves it) or its event record (a DLQ replay, which adds its
// webhook to the record's list), and only under a webhook of the event's
// list; so a record created after the decision fails the commit's checks.

/** How a commit's collections are decided (see above). */
type CollectionMode = "checked" | "read" | "none";

/** The collections of a commit, as decided on what is stored (see above). */
interface Collections {
  /** Adds the collections that go ahead, with their checks. */
  apply(atomic: Deno.AtomicOperation): void;
  /** The event ids of `unit`'s collections that do not go ahead (referenced). */
  uncollected(unit: { guarded: readonly Guarded[] }): string[];
}

/** What a unit committed in one commit gets back; `collections`: as applied (none: none). */
function unitResult(
  unit: Pick<Unit, "ops" | "guarded">,
  versionstamp: string,
  collections: Collections | undefined,
): WriteResult {
  const versionstamps = new Array(unit.ops).fill(versionstamp);
  const uncollected = collections
    ? collections.uncollected(unit)
    : unit.guarded.map((g) => g.eventId);
  return uncollected.length
    ? { versionstamps, collected: false, uncollected }
    : { versionstamps, collected: true };
}

function sameKey(a: Deno.KvKey, b: Deno.KvKey): boolean {
  return a.length === b.length && a.every((part, i) => part === b[i]);
}

/** What a commit's own writes leave of an event's fan-out record and delivery records. */
function writtenReferences(plain: readonly Mutation[], eventId: string) {
  const fanoutKey = outboxFanoutKey(eventId);
  /** true: written, false: deleted, absent: untouched. */
  let fanout: boolean | undefined;
  const records = new Map<string, boolean>();
  for (const m of plain) {
    if (m.key[0] !== "outbox" || m.key[2] !== eventId) continue;
    if (m.key[1] === "fanout" && sameKey(m.key, fanoutKey)) fanout = m.type === "set";
    else if (m.key[1] === "delivery" && m.key.length === 4) {
      records.set(String(m.key[3]), m.type === "set");
    }
  }
  return { fanout, records };
}

/**
 * Decides which collections of `units` go into a commit that also applies
 * `plain`, in order: those whose event nothing refers to once the commit is
 * done. `mode` "checked" decides in place the events whose webhooks are
 * known (the others by reading), "read" reads for every one.
 */
async function resolveCollections(
  store: KvStore,
  plain: readonly Mutation[],
  units: readonly { guarded: readonly Guarded[] }[],
  mode: Exclude<CollectionMode, "none">,
): Promise<Collections> {
  const byEvent = new Map<string, Guarded>();
  for (const unit of units) {
    for (const g of unit.guarded) if (!byEvent.has(g.eventId)) byEvent.set(g.eventId, g);
  }
  const referenced = new Set<string>();
  const checks: Deno.AtomicCheck[] = [];
  await Promise.all([...byEvent.values()].map(async ({ eventId, webhookIds }) => {
    const written = writtenReferences(plain, eventId);
    const fanoutKey = outboxFanoutKey(eventId);
    if (mode === "checked" && webhookIds) {
      const listed = new Set(webhookIds);
      const open = written.fanout === true ||
        [...written.records].some(([id, set]) => set || !listed.has(id));
      if (open) {
        referenced.add(eventId);
        return;
      }
      if (written.fanout === undefined) checks.push({ key: fanoutKey, versionstamp: null });
      for (const id of webhookIds) {
        if (!written.records.has(id)) {
          checks.push({ key: deliveryKey(eventId, id), versionstamp: null });
        }
      }
      return;
    }
    const { fanout, records } = await store.retry(async () => {
      const fanout = await store.kv.get(fanoutKey);
      const records = new Set<string>();
      for await (const entry of store.kv.list({ prefix: eventDeliveriesPrefix(eventId) })) {
        records.add(String(entry.key[entry.key.length - 1]));
      }
      return { fanout, records };
    });
    const hasFanout = written.fanout ?? fanout.value !== null;
    for (const [id, set] of written.records) {
      if (set) records.add(id);
      else records.delete(id);
    }
    if (hasFanout || records.size) referenced.add(eventId);
    else checks.push({ key: fanoutKey, versionstamp: fanout.versionstamp });
  }));
  return {
    apply(atomic) {
      for (const check of checks) atomic.check(check);
      for (const g of byEvent.values()) {
        if (referenced.has(g.eventId)) continue;
        atomic.check(g.check);
        apply(atomic, g.mutations);
      }
    },
    uncollected: (unit) =>
      unit.guarded.filter((g) => referenced.has(g.eventId)).map((g) => g.eventId),
  };
}

// ---------------------------------------------------------------------------
// The dead-letter queue's order index and count
//
// Beside each record (`dlqKey`), the KV store keeps two index entries, by
// failure time (`dlqOrderKey`) and by webhook and failure time
// (`dlqWebhookOrderKey`), and a count (`dlqCountKey`), so that a page of the
// queue and its size cost a few reads however long it is. The writer keeps
// them in the commit that writes a record: it reads the records its DLQ ops
// touch (to find a replaced record's old entries and whether the count
// moves) and checks them in the commit, planning again when another handle
// changed one meanwhile. Stores written before the index have no
// `dlqIndexedKey`: their writers only bump `dlqVersionKey`, and the first
// page or count builds the index ({@linkcode ensureDlqIndex}).

/** A DLQ op of the writer. */
type DlqOp = Extract<DeliveryOp, { op: "put_dlq" | "delete_dlq" }>;

/** Rounds a DLQ commit may lose to other handles changing the same records. */
const MAX_DLQ_ROUNDS = 20;

function dlqRaceLost(round: number): void {
  if (round >= MAX_DLQ_ROUNDS) {
    throw new GatewayError(
      "UNAVAILABLE",
      `Cannot write dead-letter records: other writers kept changing them (${round} attempts)`,
    );
  }
}

/** The checks and writes a commit with DLQ ops adds (see above). */
interface DlqPlan {
  apply(atomic: Deno.AtomicOperation): void;
}

/** Reads up to 10 keys per `getMany`, in parallel. */
async function readKeys(store: KvStore, keys: readonly Deno.KvKey[]) {
  const parts: Deno.KvKey[][] = [];
  for (let i = 0; i < keys.length; i += 10) parts.push(keys.slice(i, i + 10));
  const read = await Promise.all(
    parts.map((part) => store.retry(() => store.kv.getMany<unknown[]>(part))),
  );
  return read.flat();
}

/** Plans the index entries and count of `ops`, applied in order, on what is stored now. */
async function planDlq(store: KvStore, ops: readonly DlqOp[]): Promise<DlqPlan> {
  const ids = [...new Set(ops.map((op) => op.op === "put_dlq" ? op.record.dlq_id : op.dlq_id))];
  const [marker, ...entries] = await readKeys(store, [dlqIndexedKey(), ...ids.map(dlqKey)]);
  if (marker.value === null) {
    // Not indexed yet: tell a build running meanwhile that it must look again.
    return {
      apply(atomic) {
        atomic.check({ key: dlqIndexedKey(), versionstamp: null });
        atomic.sum(dlqVersionKey(), 1n);
      },
    };
  }
  const state = new Map<string, Pick<DlqRecord, "webhook_id" | "failed_at"> | null>();
  entries.forEach((entry, i) => {
    state.set(
      ids[i],
      entry.value === null
        ? null
        : parseRecord(DlqRecordSchema, entry.value, `DLQ record ${ids[i]}`),
    );
  });
  const sets = new Map<string, { key: Deno.KvKey; value: unknown }>();
  const deletes = new Map<string, Deno.KvKey>();
  const set = (key: Deno.KvKey, value: unknown) => {
    const name = JSON.stringify(key);
    deletes.delete(name);
    sets.set(name, { key, value });
  };
  const remove = (key: Deno.KvKey) => {
    const name = JSON.stringify(key);
    sets.delete(name);
    deletes.set(name, key);
  };
  let delta = 0;
  for (const op of ops) {
    const id = op.op === "put_dlq" ? op.record.dlq_id : op.dlq_id;
    const before = state.get(id) ?? null;
    const after = op.op === "put_dlq" ? op.record : null;
    if (
      before &&
      (!after || after.failed_at !== before.failed_at || after.webhook_id !== before.webhook_id)
    ) {
      remove(dlqOrderKey(before.failed_at, id));
      remove(dlqWebhookOrderKey(before.webhook_id, before.failed_at, id));
    }
    if (after) {
      set(dlqOrderKey(after.failed_at, id), after.webhook_id);
      set(dlqWebhookOrderKey(after.webhook_id, after.failed_at, id), null);
    }
    delta += (after ? 1 : 0) - (before ? 1 : 0);
    state.set(id, after);
  }
  return {
    apply(atomic) {
      atomic.check({ key: dlqIndexedKey(), versionstamp: marker.versionstamp });
      entries.forEach((entry) =>
        atomic.check({ key: entry.key, versionstamp: entry.versionstamp })
      );
      for (const key of deletes.values()) atomic.delete(key);
      for (const { key, value } of sets.values()) atomic.set(key, value);
      if (delta !== 0) atomic.sum(dlqCountKey(), BigInt.asUintN(64, BigInt(delta)));
    },
  };
}

/** Stores whose DLQ index this process saw built (it is never unbuilt). */
const dlqIndexed = new WeakSet<KvStore>();

/**
 * Builds the DLQ's index entries and count of a store written before them:
 * every record is read once, stray entries of a build cut short are
 * removed, and the marker is set in a commit that checks no DLQ write came
 * meanwhile (else it looks again).
 *
 * @throws {GatewayError} `UNAVAILABLE` when writers keep changing the queue.
 */
export async function ensureDlqIndex(store: KvStore): Promise<void> {
  if (dlqIndexed.has(store)) return;
  for (let round = 1;; round++) {
    const [marker, version] = await readKeys(store, [dlqIndexedKey(), dlqVersionKey()]);
    if (marker.value !== null) break;
    const records = await listAllDlq(store);
    const wanted = new Map<string, { key: Deno.KvKey; value: unknown }>();
    for (const r of records) {
      const order = dlqOrderKey(r.failed_at, r.dlq_id);
      const byHook = dlqWebhookOrderKey(r.webhook_id, r.failed_at, r.dlq_id);
      wanted.set(JSON.stringify(order), { key: order, value: r.webhook_id });
      wanted.set(JSON.stringify(byHook), { key: byHook, value: null });
    }
    const mutations: Mutation[] = [];
    for (const prefix of [dlqOrderPrefix(), dlqWebhookOrderPrefix()]) {
      const stray = await store.retry(async () => {
        const out: Deno.KvKey[] = [];
        for await (const entry of store.kv.list({ prefix })) {
          const name = JSON.stringify(entry.key);
          if (wanted.has(name) && wanted.get(name)!.value === entry.value) wanted.delete(name);
          else out.push(entry.key);
        }
        return out;
      });
      for (const key of stray) mutations.push({ type: "delete", key, op: 0, primary: false });
    }
    for (const { key, value } of wanted.values()) {
      mutations.push({ type: "set", key, value, op: 0, primary: false });
    }
    await commitInParts(store, mutations, 500);
    const done = await store.retry(() =>
      store.kv.atomic()
        .check({ key: dlqIndexedKey(), versionstamp: null })
        .check({ key: dlqVersionKey(), versionstamp: version.versionstamp })
        .set(dlqCountKey(), new Deno.KvU64(BigInt(records.length)))
        .set(dlqIndexedKey(), true)
        .commit()
    );
    if (done.ok) break;
    if (round >= MAX_DLQ_ROUNDS) {
      throw new GatewayError(
        "UNAVAILABLE",
        `Cannot index the dead-letter queue: writers kept changing it (${round} attempts)`,
      );
    }
  }
  dlqIndexed.add(store);
}

// ---------------------------------------------------------------------------
// Reads and maintenance

/** Signals new pending deliveries to the process that delivers them. */
export async function bumpDeliveriesVersion(store: KvStore): Promise<void> {
  await store.retry(() => store.kv.atomic().sum(deliveriesVersionKey(), 1n).commit());
}

/** Reads the counter bumped whenever deliveries are queued by another path (replay, CLI). */
export async function deliveriesVersion(store: KvStore): Promise<bigint> {
  const entry = await store.get<Deno.KvU64>(deliveriesVersionKey());
  return entry.value?.value ?? 0n;
}

/**
 * Every pending delivery in either form, by event id (oldest first); a
 * delivery record wins over a fan-out entry of the same webhook. Not one
 * snapshot, but every delivery pending from the call's start to its end is
 * listed: the fan-out records are read before the delivery records, as a
 * delivery only ever moves from its fan-out entry to a record of its own
 * (read the other way round, one moving between the two reads was in neither).
 */
export async function listPendingDeliveries(store: KvStore): Promise<StoredDelivery[]> {
  return await store.retry(async () => {
    const fanouts: StoredDelivery[] = [];
    for await (const entry of store.kv.list({ prefix: outboxFanoutPrefix() })) {
      const eventId = String(entry.key[entry.key.length - 1]);
      const fanout = parseRecord(FanoutRecordSchema, entry.value, `fan-out of ${eventId}`);
      for (const record of fanoutDeliveries(eventId, fanout)) {
        fanouts.push({ record, versionstamp: entry.versionstamp, fanout: true });
      }
    }
    const out: StoredDelivery[] = [];
    const own = new Set<string>();
    for await (const entry of store.kv.list({ prefix: deliveriesPrefix() })) {
      const record = parseRecord(
        DeliveryRecordSchema,
        entry.value,
        `delivery ${entry.key.join("/")}`,
      );
      own.add(`${record.event_id}/${record.webhook_id}`);
      out.push({ record, versionstamp: entry.versionstamp, fanout: false });
    }
    for (const stored of fanouts) {
      if (!own.has(`${stored.record.event_id}/${stored.record.webhook_id}`)) out.push(stored);
    }
    return out.sort((a, b) =>
      a.record.event_id < b.record.event_id ? -1 : a.record.event_id > b.record.event_id ? 1 : 0
    );
  });
}

async function readChunks(
  store: KvStore,
  chunkKey: (chunk: number) => Deno.KvKey,
  size: number,
  what: string,
): Promise<Uint8Array> {
  const chunks = chunkCount(size);
  const body = new Uint8Array(size);
  for (let i = 0; i < chunks; i += 10) {
    const keys: Deno.KvKey[] = [];
    for (let j = i; j < Math.min(chunks, i + 10); j++) keys.push(chunkKey(j));
    const entries = await store.retry(() => store.kv.getMany<Uint8Array[]>(keys));
    entries.forEach((entry, k) => {
      const chunk = entry.value;
      if (!(chunk instanceof Uint8Array)) {
        throw new GatewayError("STORE_CORRUPT", `Stored ${what} is unreadable: chunk missing`);
      }
      body.set(chunk, (i + k) * BODY_CHUNK_BYTES);
    });
  }
  return body;
}

/**
 * Pending deliveries (records of their own and fan-out entries) whose event
 * record is missing, at most `limit`, by event id: what a store that lost an
 * event's body while a delivery of it waited leaves. Reads every pending
 * delivery once, streaming (the outbox is normally small).
 */
export async function listOrphanDeliveries(
  store: KvStore,
  limit: number,
): Promise<StoredDelivery[]> {
  const out: StoredDelivery[] = [];
  // A record and its event are read together (one snapshot): a delivery that
  // ends while the list runs, its event collected with it, is no orphan.
  const orphaned = async (key: Deno.KvKey, versionstamp: string, eventId: string) => {
    const [record, event] = await store.retry(() =>
      store.kv.getMany([key, outboxEventKey(eventId)])
    );
    return record.versionstamp === versionstamp && event.versionstamp === null;
  };
  await store.retry(async () => {
    out.length = 0;
    for await (const entry of store.reader.list({ prefix: deliveriesPrefix() })) {
      const record = parseRecord(
        DeliveryRecordSchema,
        entry.value,
        `delivery ${entry.key.join("/")}`,
      );
      if (!await orphaned(entry.key, entry.versionstamp, record.event_id)) continue;
      out.push({ record, versionstamp: entry.versionstamp, fanout: false });
      if (out.length >= limit) return;
    }
    for await (const entry of store.reader.list({ prefix: outboxFanoutPrefix() })) {
      const eventId = String(entry.key[entry.key.length - 1]);
      if (!await orphaned(entry.key, entry.versionstamp, eventId)) continue;
      const fanout = parseRecord(FanoutRecordSchema, entry.value, `fan-out of ${eventId}`);
      const own = await ownDeliveryWebhooks(store, eventId);
      for (const record of fanoutDeliveries(eventId, fanout)) {
        if (own.has(record.webhook_id)) continue;
        out.push({ record, versionstamp: entry.versionstamp, fanout: true });
      }
      if (out.length >= limit) return;
    }
  });
  return out;
}

/** The exact body of an event as a dead-letter record of it keeps it, or `null`. */
export async function findDlqBody(store: KvStore, eventId: string): Promise<Uint8Array | null> {
  const found = await store.retry(async () => {
    for await (const entry of store.reader.list({ prefix: dlqPrefix() })) {
      const record = parseRecord(
        DlqRecordSchema,
        entry.value,
        `DLQ record ${String(entry.key[2])}`,
      );
      if (record.event_id === eventId && !record.body_lost) return record;
    }
    return null;
  });
  return found ? await readDlqBody(store, found) : null;
}

/** An outbox event and the versionstamp of its stored record, or `null`. */
export async function readOutboxEvent(
  store: KvStore,
  eventId: string,
): Promise<{ event: OutboxEvent; versionstamp: string } | null> {
  const entry = await store.retry(() => store.kv.get(outboxEventKey(eventId)));
  if (entry.value === null || entry.versionstamp === null) return null;
  const stored = parseRecord(StoredEventSchema, entry.value, `event ${eventId}`);
  const body = stored.body ??
    await readChunks(store, (i) => outboxBodyKey(eventId, i), stored.size, `event ${eventId}`);
  if (body.byteLength !== stored.size) {
    throw new GatewayError("STORE_CORRUPT", `Stored event ${eventId} is unreadable: wrong size`);
  }
  return {
    event: {
      id: stored.id,
      type: stored.type,
      timestamp: stored.timestamp,
      body,
      ...(stored.traceparent !== undefined ? { traceparent: stored.traceparent } : {}),
      ...(stored.webhook_ids ? { webhook_ids: stored.webhook_ids } : {}),
    },
    versionstamp: entry.versionstamp,
  };
}

/**
 * Deletes an outbox event when no pending delivery refers to it any more.
 *
 * @returns Whether the event is gone.
 */
export async function collectEventIfUnreferenced(
  store: KvStore,
  eventId: string,
): Promise<boolean> {
  return await store.retry(async () => {
    const [entry, fanout] = await store.kv.getMany([
      outboxEventKey(eventId),
      outboxFanoutKey(eventId),
    ]);
    if (entry.value === null) return true;
    if (fanout.value !== null) return false;
    for await (const _ of store.kv.list({ prefix: eventDeliveriesPrefix(eventId) }, { limit: 1 })) {
      return false;
    }
    const stored = parseRecord(StoredEventSchema, entry.value, `event ${eventId}`);
    const atomic = store.kv.atomic().check(entry).check(fanout).delete(entry.key);
    for (let i = 0; i < chunkCount(stored.size); i++) atomic.delete(outboxBodyKey(eventId, i));
    return (await atomic.commit()).ok;
  });
}

/** Every dead-letter record, in key order. */
async function listAllDlq(store: KvStore): Promise<DlqRecord[]> {
  return await store.retry(async () => {
    const out: DlqRecord[] = [];
    for await (const entry of store.kv.list({ prefix: dlqPrefix() })) {
      out.push(parseRecord(DlqRecordSchema, entry.value, `DLQ record ${String(entry.key[2])}`));
    }
    return out;
  });
}

/**
 * Dead-letter records, oldest failure first: every one (filtered), or with
 * `limit` a page read through the order index (about `limit` reads).
 */
export async function listDlqRecords(
  store: KvStore,
  options: ListDlqPageOptions = {},
): Promise<DlqRecord[]> {
  const { webhook, after, limit } = options;
  if (limit === undefined) {
    return sortDlq(
      (await listAllDlq(store)).filter((record) =>
        (webhook === undefined || record.webhook_id === webhook) &&
        (after === undefined || dlqAfter(record, after))
      ),
    );
  }
  if (!Number.isInteger(limit) || limit < 0) {
    throw new GatewayError("USAGE", `Invalid limit ${limit}: use a whole number from 0`);
  }
  await ensureDlqIndex(store);
  const prefix = webhook === undefined ? dlqOrderPrefix() : dlqWebhookOrderPrefix(webhook);
  const out: DlqRecord[] = [];
  let cursor: DlqPosition | undefined = after;
  while (out.length < limit) {
    const want = limit - out.length;
    const from: DlqPosition | undefined = cursor;
    const positions = await store.retry(async () => {
      const found: DlqPosition[] = [];
      const selector = from
        ? { prefix, start: [...prefix, from.failed_at, from.dlq_id] }
        : { prefix };
      for await (const entry of store.kv.list(selector, { limit: want + 1, batchSize: want + 1 })) {
        const n = entry.key.length;
        const position = { failed_at: String(entry.key[n - 2]), dlq_id: String(entry.key[n - 1]) };
        if (from && !dlqAfter(position, from)) continue;
        found.push(position);
        if (found.length === want) break;
      }
      return found;
    });
    const entries = await readKeys(store, positions.map((p) => dlqKey(p.dlq_id)));
    entries.forEach((entry, i) => {
      if (entry.value === null) return;
      const record = parseRecord(DlqRecordSchema, entry.value, `DLQ record ${positions[i].dlq_id}`);
      // An entry the record moved away from (never left by the writer) is skipped.
      if (
        record.failed_at === positions[i].failed_at &&
        (webhook === undefined || record.webhook_id === webhook)
      ) {
        out.push(record);
      }
    });
    if (positions.length < want) break;
    cursor = positions.at(-1);
  }
  return out;
}

/** How many dead-letter records there are (the index's count). */
export async function countDlqRecords(store: KvStore): Promise<number> {
  await ensureDlqIndex(store);
  const entry = await store.get<Deno.KvU64>(dlqCountKey());
  return Number(entry.value?.value ?? 0n);
}

/** One dead-letter record, or `null`. */
export async function getDlqRecord(store: KvStore, dlqId: string): Promise<DlqRecord | null> {
  const entry = await store.retry(() => store.kv.get(dlqKey(dlqId)));
  return entry.value === null ? null : parseRecord(DlqRecordSchema, entry.value, dlqId);
}

/** The exact body bytes of a dead-lettered event. */
export async function readDlqBody(store: KvStore, record: DlqRecord): Promise<Uint8Array> {
  if (record.body) return record.body;
  return await readChunks(
    store,
    (i) => dlqBodyKey(record.dlq_id, i),
    record.size,
    `DLQ record ${record.dlq_id}`,
  );
}

/**
 * Queues a fresh delivery for a dead-letter record (same event id and body,
 * fresh retry schedule) and bumps the deliveries version so a running
 * dispatcher picks it up. The record stays until the delivery succeeds.
 *
 * @returns `"already_queued"` when a delivery of that event to that webhook is pending.
 */
export async function requeueDlqRecord(
  store: KvStore,
  record: DlqRecord,
  body: Uint8Array,
  timestamp: string,
  now: number = Date.now(),
): Promise<"queued" | "already_queued"> {
  const event: OutboxEvent = { id: record.event_id, type: record.event_type, timestamp, body };
  const chunkWrites = bodyMutations(body, (i) => outboxBodyKey(event.id, i), 0);
  const delivery: DeliveryRecord = {
    event_id: record.event_id,
    event_type: record.event_type,
    webhook_id: record.webhook_id,
    attempt_count: 0,
    next_attempt_at: now,
    created_at: new Date(now).toISOString(),
    attempts: [],
    dlq_id: record.dlq_id,
  };
  const key = deliveryKey(record.event_id, record.webhook_id);
  const put = opMutations({ op: "put_delivery", delivery }, 0);
  for (let round = 1;; round++) {
    // The event record as read guards the commit: a collection of the event
    // between the chunk writes and the commit would take their chunks away.
    const [existing, stored] = await readKeys(store, [key, outboxEventKey(event.id)]);
    if (existing.versionstamp !== null) return "already_queued";
    // The record's webhook list gains this one (a record without a list keeps none).
    const listed = stored.value === null
      ? []
      : (stored.value as { webhook_ids?: unknown }).webhook_ids;
    const webhookIds = Array.isArray(listed)
      ? [...new Set([...listed.map(String), record.webhook_id])]
      : undefined;
    const meta = eventMutations({ ...event, ...(webhookIds ? { webhook_ids: webhookIds } : {}) }, 0)
      .filter((m) => m.primary);
    // Large bodies: chunks first (idempotent), then the record and delivery atomically.
    await commitInParts(store, chunkWrites, 10);
    const result = await store.retry(() => {
      const atomic = store.kv.atomic()
        .check({ key, versionstamp: null })
        .check({ key: stored.key, versionstamp: stored.versionstamp });
      apply(atomic, meta);
      apply(atomic, put);
      return atomic.sum(deliveriesVersionKey(), 1n).commit();
    });
    if (result.ok) return "queued";
    if (round >= MAX_DLQ_ROUNDS) {
      throw new GatewayError(
        "UNAVAILABLE",
        `Cannot replay ${record.dlq_id}: its event kept changing (${round} attempts)`,
      );
    }
  }
}

/** Deletes dead-letter records and their bodies. */
export async function deleteDlqRecords(
  store: KvStore,
  records: readonly Pick<DlqRecord, "dlq_id" | "size">[],
): Promise<void> {
  const writer = new DeliveryWriter(store);
  await Promise.all(
    records.map((r) => writer.write([{ op: "delete_dlq", dlq_id: r.dlq_id, size: r.size }])),
  );
}

/** The newest entries of a webhook's delivery log, newest first. */
export async function readDeliveryLog(
  store: KvStore,
  webhookId: string,
  limit: number = DELIVERY_LOG_SIZE,
): Promise<DeliveryLogEntry[]> {
  return await store.retry(async () => {
    const out: DeliveryLogEntry[] = [];
    const entries = store.kv.list({ prefix: deliveryLogPrefix(webhookId) }, {
      reverse: true,
      limit,
    });
    for await (const entry of entries) {
      out.push(parseRecord(DeliveryLogEntrySchema, entry.value, `log of ${webhookId}`));
    }
    return out;
  });
}

/** Appends one entry to a webhook's delivery log and trims it. */
export async function appendDeliveryLog(
  store: KvStore,
  webhookId: string,
  entry: DeliveryLogEntry,
): Promise<void> {
  const entry_id = newLogEntryId(Date.parse(entry.at) || Date.now());
  await new DeliveryWriter(store).write([{ op: "log", webhook_id: webhookId, entry_id, entry }]);
  await trimDeliveryLog(store, webhookId);
}

async function deleteKeys(store: KvStore, keys: Deno.KvKey[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 500) {
    const part = keys.slice(i, i + 500);
    await store.retry(() => {
      const atomic = store.kv.atomic();
      for (const key of part) atomic.delete(key);
      return atomic.commit();
    });
  }
}

/**
 * Deletes all but the newest `keep` entries of a webhook's delivery log.
 *
 * @returns How many entries were deleted.
 */
export async function trimDeliveryLog(
  store: KvStore,
  webhookId: string,
  keep: number = DELIVERY_LOG_SIZE,
): Promise<number> {
  const stale: Deno.KvKey[] = await store.retry(async () => {
    const keys: Deno.KvKey[] = [];
    let seen = 0;
    const entries = store.kv.list({ prefix: deliveryLogPrefix(webhookId) }, { reverse: true });
    for await (const entry of entries) {
      if (++seen > keep) keys.push(entry.key);
    }
    return keys;
  });
  await deleteKeys(store, stale);
  return stale.length;
}

/** The entry ids of a webhook's delivery log, oldest first. */
export async function listDeliveryLogIds(store: KvStore, webhookId: string): Promise<string[]> {
  return await store.retry(async () => {
    const ids: string[] = [];
    for await (const entry of store.kv.list({ prefix: deliveryLogPrefix(webhookId) })) {
      ids.push(String(entry.key[entry.key.length - 1]));
    }
    return ids;
  });
}

/** Deletes a webhook's whole delivery log (after the webhook was removed). */
export async function deleteDeliveryLog(store: KvStore, webhookId: string): Promise<void> {
  await trimDeliveryLog(store, webhookId, 0);
}

// ---------------------------------------------------------------------------
// Claims and the due index

/** A claim held on one pending delivery. */
interface Held extends DeliveryClaim {
  /** Held as an entry of its event's fan-out record (no own record yet). */
  fanout: boolean;
  /** Due time of its own record's index entry, when known. */
  at?: number;
}

/** What a write does to the claims, applied as its commit lands. */
export interface ClaimEffects {
  /** The write committed: deleted deliveries lose their claims, rewritten ones keep them. */
  committed(): void;
  /** The write failed: the claims it made are taken back. */
  failed(): void;
}

function claimKey(eventId: string, webhookId: string): string {
  return `${eventId}\n${webhookId}`;
}

/**
 * The claims on pending deliveries of one {@linkcode KvStore}, in its memory:
 * one process sends the deliveries of a KV file (the delivery lease holder),
 * so nothing else needs to see them. For modules of `src/store` only.
 */
export class DeliveryClaims {
  /** Claims by event id, then webhook id. */
  #events = new Map<string, Map<string, Held>>();
  /** The last known webhook list of the fan-out records of events with claims. */
  #fanouts = new Map<string, readonly string[]>();
  /** Deliveries deleted while a claim scan was in flight, with the epoch of their deletion. */
  #dropped = new Map<string, number>();
  #epoch = 0;
  /** Claim scans in flight: id → epoch at their start. */
  #scans = new Map<number, number>();
  #nextScan = 0;

  /** Claims held, live or lapsed. */
  get size(): number {
    let size = 0;
    for (const held of this.#events.values()) size += held.size;
    return size;
  }

  /** The claim on one delivery, if any (live or lapsed). */
  get(eventId: string, webhookId: string): Readonly<Held> | undefined {
    return this.#events.get(eventId)?.get(webhookId);
  }

  /** Whether a claim on the delivery is live at `now`. */
  live(eventId: string, webhookId: string, now: number): boolean {
    const held = this.get(eventId, webhookId);
    return held !== undefined && held.until > now;
  }

  /** Claims one delivery (replacing any claim on it). */
  set(eventId: string, webhookId: string, held: Held): void {
    let event = this.#events.get(eventId);
    if (!event) this.#events.set(eventId, event = new Map());
    event.set(webhookId, held);
  }

  /** The due time of a claimed own record's index entry, when known. */
  indexedAt(eventId: string, webhookId: string): number | undefined {
    const held = this.get(eventId, webhookId);
    return held && !held.fanout ? held.at : undefined;
  }

  /** The webhook list last seen in an event's fan-out record, while it has claims. */
  fanoutList(eventId: string): readonly string[] | undefined {
    return this.#fanouts.get(eventId);
  }

  /** Remembers an event's fan-out list, while the event has claims. */
  noteFanout(eventId: string, webhookIds: readonly string[]): void {
    if (webhookIds.length && this.#events.has(eventId)) this.#fanouts.set(eventId, webhookIds);
    else this.#fanouts.delete(eventId);
  }

  /** Drops claims that lapsed at `now`. */
  prune(now: number): void {
    for (const [eventId, event] of this.#events) {
      for (const [webhookId, held] of event) if (held.until <= now) event.delete(webhookId);
      if (!event.size) this.#forget(eventId);
    }
  }

  /** Extends `owner`'s claims to `until`; returns how many it holds. */
  renew(owner: string, until: number): number {
    let count = 0;
    for (const event of this.#events.values()) {
      for (const held of event.values()) {
        if (held.owner !== owner) continue;
        held.until = until;
        count++;
      }
    }
    return count;
  }

  /** Gives back `owner`'s claims: all, or those of `keys`. */
  release(owner: string, keys?: readonly { event_id: string; webhook_id: string }[]): void {
    if (keys) {
      for (const { event_id, webhook_id } of keys) {
        if (this.get(event_id, webhook_id)?.owner === owner) this.#remove(event_id, webhook_id);
      }
      return;
    }
    for (const [eventId, event] of this.#events) {
      for (const [webhookId, held] of event) if (held.owner === owner) event.delete(webhookId);
      if (!event.size) this.#forget(eventId);
    }
  }

  /**
   * Applies the claims `ops` make before they are committed (a `put_fanout`
   * with `claim`: nobody can claim its deliveries from the store first), and
   * returns what is left to do once the commit landed or failed.
   */
  stage(ops: readonly DeliveryOp[]): ClaimEffects {
    const made: { eventId: string; webhookId: string; held: Held; previous?: Held }[] = [];
    for (const op of ops) {
      if (op.op !== "put_fanout" || !op.claim) continue;
      const { owner, until } = op.claim;
      for (const webhookId of op.fanout.webhook_ids) {
        const previous = this.get(op.event_id, webhookId);
        const held: Held = { owner, until, fanout: true };
        this.set(op.event_id, webhookId, held);
        made.push({ eventId: op.event_id, webhookId, held, previous });
      }
    }
    return {
      committed: () => this.#committed(ops),
      failed: () => {
        for (const { eventId, webhookId, held, previous } of made.reverse()) {
          if (this.get(eventId, webhookId) !== held) continue;
          if (previous) this.set(eventId, webhookId, previous);
          else this.#remove(eventId, webhookId);
        }
      },
    };
  }

  #committed(ops: readonly DeliveryOp[]): void {
    const own = new Set<string>();
    for (const op of ops) {
      if (op.op === "put_delivery") own.add(claimKey(op.delivery.event_id, op.delivery.webhook_id));
    }
    for (const op of ops) {
      switch (op.op) {
        case "put_delivery": {
          // A retry keeps its claim, now on its own record.
          const { event_id, webhook_id, next_attempt_at } = op.delivery;
          const held = this.#events.get(event_id)?.get(webhook_id);
          if (held) {
            held.fanout = false;
            held.at = next_attempt_at;
          }
          break;
        }
        case "delete_delivery":
          this.#deleted(op.event_id, op.webhook_id);
          break;
        case "put_fanout": {
          const listed = new Set(op.fanout.webhook_ids);
          const gone = new Set(this.#fanouts.get(op.event_id));
          for (const [webhookId, held] of this.#events.get(op.event_id) ?? []) {
            if (held.fanout) gone.add(webhookId);
          }
          for (const webhookId of gone) {
            if (listed.has(webhookId) || own.has(claimKey(op.event_id, webhookId))) continue;
            const held = this.get(op.event_id, webhookId);
            if (held && !held.fanout) continue; // Claimed as its own record.
            this.#deleted(op.event_id, webhookId);
          }
          this.noteFanout(op.event_id, op.fanout.webhook_ids);
          break;
        }
      }
    }
  }

  /** A delivery was deleted: its claim goes, and scans in flight must not return it. */
  #deleted(eventId: string, webhookId: string): void {
    this.#remove(eventId, webhookId);
    if (this.#scans.size) this.#dropped.set(claimKey(eventId, webhookId), ++this.#epoch);
  }

  #remove(eventId: string, webhookId: string): void {
    const event = this.#events.get(eventId);
    if (!event) return;
    event.delete(webhookId);
    if (!event.size) this.#forget(eventId);
  }

  #forget(eventId: string): void {
    this.#events.delete(eventId);
    this.#fanouts.delete(eventId);
  }

  /** Starts a claim scan; returns its id for {@linkcode DeliveryClaims.deletedDuring}. */
  beginScan(): number {
    const id = this.#nextScan++;
    this.#scans.set(id, this.#epoch);
    return id;
  }

  /** Whether the delivery was deleted since scan `id` began (its reads may predate that). */
  deletedDuring(id: number, eventId: string, webhookId: string): boolean {
    const at = this.#dropped.get(claimKey(eventId, webhookId));
    return at !== undefined && at > (this.#scans.get(id) ?? Infinity);
  }

  /** Ends scan `id`. */
  endScan(id: number): void {
    this.#scans.delete(id);
    if (!this.#scans.size) this.#dropped.clear();
  }
}

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

/** The webhook ids of an event's own delivery records. */
async function ownDeliveryWebhooks(store: KvStore, eventId: string): Promise<Set<string>> {
  return await store.retry(async () => {
    const out = new Set<string>();
    for await (const entry of store.reader.list({ prefix: eventDeliveriesPrefix(eventId) })) {
      out.add(String(entry.key[entry.key.length - 1]));
    }
    return out;
  });
}

/**
 * Reads what an index entry points at. For a fan-out record, the event's own
 * delivery records are listed too, but only when the record (as stored, at
 * the entry's due time) lists a webhook `wanted` says the claim could take.
 */
async function readHit(
  store: KvStore,
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

function checkClaimOptions(options: ClaimDueOptions): void {
  const { owner, now, until, dueBefore, limit } = options;
  if (typeof owner !== "string" || owner === "") {
    throw new GatewayError("INTERNAL", "Cannot claim deliveries: the owner is empty");
  }
  if (!Number.isInteger(limit) || limit < 1) {
    throw new GatewayError("INTERNAL", `Invalid limit ${limit}: use an integer of 1 or more`);
  }
  for (const [name, value] of [["now", now], ["until", until], ["dueBefore", dueBefore]]) {
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new GatewayError("INTERNAL", `Invalid ${name} ${value}: use epoch milliseconds`);
    }
  }
}

function byDueTime(a: StoredDelivery, b: StoredDelivery): number {
  const x = a.record;
  const y = b.record;
  if (x.next_attempt_at !== y.next_attempt_at) return x.next_attempt_at - y.next_attempt_at;
  if (x.event_id !== y.event_id) return x.event_id < y.event_id ? -1 : 1;
  return x.webhook_id < y.webhook_id ? -1 : x.webhook_id > y.webhook_id ? 1 : 0;
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
  store: KvStore,
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
async function deleteStaleEntries(store: KvStore, stale: readonly StaleEntry[]): Promise<void> {
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

/** Due index entries written per commit while building the index. */
const INDEX_BUILD_PAGE = 500;

/** The due index entry of a stored delivery or fan-out record, as read raw. */
function dueEntryOf(entry: Deno.KvEntry<unknown>): Deno.KvKey | null {
  const { key, value } = entry;
  const raw = typeof value === "object" && value !== null
    ? (value as { next_attempt_at?: unknown }).next_attempt_at
    : undefined;
  // An unreadable record is indexed anyway, so that claiming it reports it.
  const at = typeof raw === "number" && Number.isFinite(raw) ? raw : 0;
  if (key.length === 4 && typeof key[2] === "string" && typeof key[3] === "string") {
    return outboxDueKey(at, key[2], key[3]);
  }
  if (key.length === 3 && typeof key[2] === "string") return outboxFanoutDueKey(at, key[2]);
  return null;
}

/**
 * Builds the due index from every delivery and fan-out record, page by page
 * (a file of schema 1 has none). Writing an entry again is harmless, so a
 * build cut short is simply run again; an entry of a record changed
 * meanwhile is at worst stale.
 *
 * @returns How many index entries were written.
 */
export async function buildDueIndex(store: KvStore): Promise<number> {
  let count = 0;
  for (const prefix of [deliveriesPrefix(), outboxFanoutPrefix()]) {
    let cursor: string | undefined;
    for (;;) {
      const page = await store.retry(async () => {
        const out: Deno.KvEntry<unknown>[] = [];
        const entries = store.kv.list({ prefix }, {
          limit: INDEX_BUILD_PAGE,
          batchSize: INDEX_BUILD_PAGE,
          cursor,
        });
        for await (const entry of entries) out.push(entry);
        return { entries: out, cursor: entries.cursor };
      });
      const keys = page.entries.map(dueEntryOf).filter((key) => key !== null);
      for (let i = 0; i < keys.length; i += 100) {
        const part = keys.slice(i, i + 100);
        await store.retry(() => {
          const atomic = store.kv.atomic();
          for (const key of part) atomic.set(key, null);
          return atomic.commit();
        });
      }
      count += keys.length;
      if (page.entries.length < INDEX_BUILD_PAGE) break;
      cursor = page.cursor;
    }
  }
  return count;
}
