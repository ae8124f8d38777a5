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
 * @module
 */
import { z } from "zod";
import { GatewayError } from "../../errors/mod.ts";
import {
  deliveriesPrefix,
  deliveriesVersionKey,
  deliveryKey,
  deliveryLogKey,
  deliveryLogPrefix,
  dlqBodyKey,
  dlqKey,
  dlqPrefix,
  eventDeliveriesPrefix,
  outboxBodyKey,
  outboxEventKey,
  outboxFanoutKey,
  outboxFanoutPrefix,
} from "./keys.ts";
import type { KvStore } from "./kv_store.ts";
import {
  BytesSchema,
  DELIVERY_LOG_SIZE,
  type DeliveryLogEntry,
  DeliveryLogEntrySchema,
  type DeliveryOp,
  type DeliveryRecord,
  DeliveryRecordSchema,
  type DlqRecord,
  DlqRecordSchema,
  fanoutDeliveries,
  FanoutRecordSchema,
  newLogEntryId,
  type OutboxEvent,
  type StoredDelivery,
  type WriteResult,
} from "../records.ts";
import { parseRecord } from "../_records.ts";

/** Bodies larger than this are stored in chunks of this size (a KV value holds 64 KiB). */
export const BODY_CHUNK_BYTES = 60_000;

const StoredEventSchema = z.strictObject({
  id: z.string(),
  type: z.string(),
  timestamp: z.string(),
  size: z.number().int().min(0),
  body: BytesSchema.optional(),
});

function chunkCount(size: number): number {
  return size > BODY_CHUNK_BYTES ? Math.ceil(size / BODY_CHUNK_BYTES) : 0;
}

// ---------------------------------------------------------------------------
// Group commit

type Mutation =
  | { type: "set"; key: Deno.KvKey; value: unknown; op: number; primary: boolean }
  | { type: "delete"; key: Deno.KvKey; op: number; primary: boolean };

interface Guarded {
  check: Deno.AtomicCheck;
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
  const record = {
    id: event.id,
    type: event.type,
    timestamp: event.timestamp,
    size,
    ...(chunkCount(size) === 0 ? { body: event.body } : {}),
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

function opMutations(op: DeliveryOp, index: number): Mutation[] {
  switch (op.op) {
    case "put_event":
      return eventMutations(op.event, index);
    case "put_delivery": {
      const d = op.delivery;
      return [{
        type: "set",
        key: deliveryKey(d.event_id, d.webhook_id),
        value: d,
        op: index,
        primary: true,
      }];
    }
    case "delete_delivery":
      return [{
        type: "delete",
        key: deliveryKey(op.event_id, op.webhook_id),
        op: index,
        primary: true,
      }];
    case "put_fanout": {
      const key = outboxFanoutKey(op.event_id);
      return [
        op.fanout.webhook_ids.length
          ? { type: "set", key, value: op.fanout, op: index, primary: true }
          : { type: "delete", key, op: index, primary: true },
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
        { type: "set", key: dlqKey(op.record.dlq_id), value: record, op: index, primary: true },
      ];
    }
    case "delete_dlq":
      return [
        { type: "delete", key: dlqKey(op.dlq_id), op: index, primary: true },
        ...deleteBody(op.size, (i) => dlqBodyKey(op.dlq_id, i), index),
      ];
    case "collect_event":
      return [
        { type: "delete", key: outboxEventKey(op.event_id), op: index, primary: true },
        ...deleteBody(op.size, (i) => outboxBodyKey(op.event_id, i), index),
      ];
  }
}

function buildUnit(ops: readonly DeliveryOp[]): Omit<Unit, "resolve" | "reject"> {
  const plain: Mutation[] = [];
  const guarded: Guarded[] = [];
  const cost: Cost = { mutations: 0, checks: 0, keyBytes: 0, bytes: 0 };
  ops.forEach((op, index) => {
    const mutations = opMutations(op, index);
    for (const mutation of mutations) addMutationCost(cost, mutation);
    if (op.op === "collect_event") {
      const check = { key: outboxEventKey(op.event_id), versionstamp: op.versionstamp };
      cost.checks++;
      cost.bytes += keySize(check.key);
      guarded.push({ check, mutations });
    } else {
      plain.push(...mutations);
    }
  });
  return { plain, guarded, ops: ops.length, cost };
}

/**
 * KV cost of writing `ops` inside another commit (the audit log's): what
 * they add to its mutation count, key bytes and bytes.
 *
 * @throws {GatewayError} `INTERNAL` when `ops` holds a guarded op
 * (`collect_event`), which only {@linkcode DeliveryWriter} commits.
 */
export function deliveryOpsCost(
  ops: readonly DeliveryOp[],
): { mutations: number; keyBytes: number; bytes: number } {
  const unit = buildUnit(ops);
  if (unit.guarded.length) {
    throw new GatewayError("INTERNAL", "Cannot write a collect_event op inside another commit");
  }
  const { mutations, keyBytes, bytes } = unit.cost;
  return { mutations, keyBytes, bytes };
}

/**
 * Adds `ops` (no `collect_event`) to an atomic operation of this store, and
 * bumps the deliveries version when `bumpVersion` is set: how deliveries
 * ride in the audit log's commit. For modules of `src/store` only.
 */
export function applyDeliveryOps(
  atomic: Deno.AtomicOperation,
  ops: readonly DeliveryOp[],
  bumpVersion: boolean,
): void {
  const unit = buildUnit(ops);
  if (unit.guarded.length) {
    throw new GatewayError("INTERNAL", "Cannot write a collect_event op inside another commit");
  }
  apply(atomic, unit.plain);
  if (bumpVersion) atomic.sum(deliveriesVersionKey(), 1n);
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
  #queue: Unit[] = [];
  #running: Promise<void> | null = null;

  #lingerMs: number;

  /**
   * @param store The store to write to.
   * @param options `lingerMs`: how long a commit waits for more units to
   * join it (fewer, larger commits for writes nobody waits on). @default 0
   */
  constructor(store: KvStore, options: { lingerMs?: number } = {}) {
    const { lingerMs = 0 } = options;
    if (!(lingerMs >= 0)) throw new RangeError(`Invalid lingerMs: ${lingerMs} is not 0 or more`);
    this.#store = store;
    this.#lingerMs = lingerMs;
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
    const unit = buildUnit(ops);
    return new Promise<WriteResult>((resolve, reject) => {
      this.#queue.push({ ...unit, resolve, reject });
      this.#kick();
    });
  }

  /** Resolves once every queued write is committed (or failed). */
  async flush(): Promise<void> {
    while (this.#running) await this.#running;
  }

  #kick(): void {
    if (this.#running) return;
    const linger = this.#lingerMs;
    const drain = linger > 0
      ? new Promise<void>((resolve) => setTimeout(resolve, linger)).then(() => this.#drain())
      : this.#drain();
    this.#running = drain.finally(() => {
      this.#running = null;
      if (this.#queue.length) this.#kick();
    });
  }

  async #drain(): Promise<void> {
    while (this.#queue.length) {
      const batch: Unit[] = [];
      let cost = ZERO;
      while (this.#queue.length) {
        const next = addCost(cost, this.#queue[0].cost);
        if (batch.length && !fits(next)) break;
        batch.push(this.#queue.shift()!);
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
    const first = await this.#store.retry(() => {
      const atomic = kv.atomic();
      for (const unit of batch) {
        apply(atomic, unit.plain);
        for (const g of unit.guarded) {
          atomic.check(g.check);
          apply(atomic, g.mutations);
        }
      }
      return atomic.commit();
    });
    if (first.ok) {
      for (const unit of batch) {
        unit.resolve({
          versionstamps: new Array(unit.ops).fill(first.versionstamp),
          collected: true,
        });
      }
      return;
    }
    // A collection lost its race: commit everything else, skip collections.
    const second = await this.#store.retry(() => {
      const atomic = kv.atomic();
      for (const unit of batch) apply(atomic, unit.plain);
      return atomic.commit();
    });
    if (!second.ok) throw new Error("Unconditional KV commit reported a failed check");
    for (const unit of batch) {
      unit.resolve({
        versionstamps: new Array(unit.ops).fill(second.versionstamp),
        collected: unit.guarded.length === 0,
      });
    }
  }

  async #commitSplit(unit: Unit): Promise<void> {
    const kv = this.#store.kv;
    const versionstamps: string[] = new Array(unit.ops).fill("");
    let part: Mutation[] = [];
    let cost = ZERO;
    const commitPart = async () => {
      if (!part.length) return;
      const mutations = part;
      const result = await this.#store.retry(() => {
        const atomic = kv.atomic();
        apply(atomic, mutations);
        return atomic.commit();
      });
      if (!result.ok) throw new Error("Unconditional KV commit reported a failed check");
      for (const m of mutations) if (m.primary) versionstamps[m.op] = result.versionstamp;
      part = [];
      cost = ZERO;
    };
    for (const mutation of unit.plain) {
      const added = mutationCost(mutation);
      if (part.length && !fits(addCost(cost, added))) await commitPart();
      part.push(mutation);
      cost = addCost(cost, added);
    }
    await commitPart();
    let collected = true;
    for (const g of unit.guarded) {
      const result = await this.#store.retry(() => {
        const atomic = kv.atomic().check(g.check);
        apply(atomic, g.mutations);
        return atomic.commit();
      });
      if (result.ok) {
        for (const m of g.mutations) if (m.primary) versionstamps[m.op] = result.versionstamp;
      } else {
        collected = false;
      }
    }
    unit.resolve({ versionstamps, collected });
  }
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
 * delivery record wins over a fan-out entry of the same webhook.
 */
export async function listPendingDeliveries(store: KvStore): Promise<StoredDelivery[]> {
  return await store.retry(async () => {
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
    for await (const entry of store.kv.list({ prefix: outboxFanoutPrefix() })) {
      const eventId = String(entry.key[entry.key.length - 1]);
      const fanout = parseRecord(FanoutRecordSchema, entry.value, `fan-out of ${eventId}`);
      for (const record of fanoutDeliveries(eventId, fanout)) {
        if (own.has(`${eventId}/${record.webhook_id}`)) continue;
        out.push({ record, versionstamp: entry.versionstamp, fanout: true });
      }
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
    event: { id: stored.id, type: stored.type, timestamp: stored.timestamp, body },
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

/** Every dead-letter record, oldest first. */
export async function listDlqRecords(store: KvStore): Promise<DlqRecord[]> {
  return await store.retry(async () => {
    const out: DlqRecord[] = [];
    for await (const entry of store.kv.list({ prefix: dlqPrefix() })) {
      out.push(parseRecord(DlqRecordSchema, entry.value, `DLQ record ${String(entry.key[2])}`));
    }
    return out;
  });
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
  // Large bodies: chunks first (idempotent), then the record and delivery atomically.
  for (let i = 0; i < chunkWrites.length; i += 10) {
    const part = chunkWrites.slice(i, i + 10);
    await store.retry(() => {
      const atomic = store.kv.atomic();
      apply(atomic, part);
      return atomic.commit();
    });
  }
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
  const meta = eventMutations(event, 0).filter((m) => m.primary);
  const result = await store.retry(() => {
    const atomic = store.kv.atomic().check({ key, versionstamp: null });
    apply(atomic, meta);
    return atomic.set(key, delivery).sum(deliveriesVersionKey(), 1n).commit();
  });
  return result.ok ? "queued" : "already_queued";
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
