/**
 * The planning of delivery ops into Deno KV atomic units: each op's mutations
 * (records, bodies in chunks, due index entries), their cost as estimated
 * against the limits of one KV commit, and the unit a write becomes.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import {
  deliveriesVersionKey,
  deliveryKey,
  deliveryLogKey,
  dlqBodyKey,
  dlqKey,
  dlqWebhookOrderKey,
  outboxBodyKey,
  outboxDueKey,
  outboxEventKey,
  outboxFanoutDueKey,
  outboxFanoutKey,
} from "./keys.ts";
import type { DeliveryOp, DlqRecord, OutboxEvent } from "../records.ts";
import type { CommitBounds } from "../_delivery_units.ts";

/** Bodies larger than this are stored in chunks of this size (a KV value holds 64 KiB). */
export const BODY_CHUNK_BYTES = 60_000;

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

export function chunkCount(size: number): number {
  return size > BODY_CHUNK_BYTES ? Math.ceil(size / BODY_CHUNK_BYTES) : 0;
}

/**
 * One write of a commit. `withNext`: it goes in the same commit as the
 * mutation after it (a due index entry and its record), even when a write
 * too large for one commit is split.
 */
export type Mutation =
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
export type IndexedAt = (eventId: string, webhookId: string) => number | undefined;

/** The checks a collection adds to a commit at most: the event record's, its fan-out record's and, checked in place, one per delivery record it could have (see {@linkcode resolveCollections}). */
export function guardedChecks(g: Guarded): number {
  return 2 + (g.webhookIds?.length ?? 0);
}

/** A `collect_event`: applied only while nothing stored refers to its event (see {@linkcode resolveCollections}). */
export interface Guarded {
  eventId: string;
  check: Deno.AtomicCheck;
  /** The event's webhooks as read with `check` (see {@linkcode MAX_CHECKED_WEBHOOKS}), when known. */
  webhookIds?: readonly string[];
  mutations: Mutation[];
}

export interface Cost {
  mutations: number;
  checks: number;
  keyBytes: number;
  bytes: number;
}

/** A write as planned for the writer: its mutations, collections and DLQ ops, and its cost. */
export interface PlannedUnit {
  plain: Mutation[];
  guarded: Guarded[];
  /** Its DLQ ops, in order: their index entries and count are planned at commit time. */
  dlq: DlqOp[];
  ops: number;
  cost: Cost;
}

// Kept below the KV limits (1000 mutations, 100 checks, 80 KiB of keys and
// 800 KiB in all per atomic operation), as sizes are estimated.
export const MAX_MUTATIONS = 1000;
export const MAX_CHECKS = 100;
const MAX_KEY_BYTES = 70_000;
const MAX_BYTES = 700_000;

/** The bounds of one KV commit, for the writer's batches. */
export const KV_COMMIT_BOUNDS: CommitBounds = {
  mutations: MAX_MUTATIONS,
  checks: MAX_CHECKS,
  keyBytes: MAX_KEY_BYTES,
  bytes: MAX_BYTES,
};

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

export function mutationCost(mutation: Mutation): Cost {
  return addMutationCost({ mutations: 0, checks: 0, keyBytes: 0, bytes: 0 }, mutation);
}

export function addCost(a: Cost, b: Cost): Cost {
  return {
    mutations: a.mutations + b.mutations,
    checks: a.checks + b.checks,
    keyBytes: a.keyBytes + b.keyBytes,
    bytes: a.bytes + b.bytes,
  };
}

export const ZERO: Cost = { mutations: 0, checks: 0, keyBytes: 0, bytes: 0 };

export function fits(cost: Cost): boolean {
  return cost.mutations <= MAX_MUTATIONS && cost.checks <= MAX_CHECKS &&
    cost.keyBytes <= MAX_KEY_BYTES && cost.bytes <= MAX_BYTES;
}

export function bodyMutations(
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

export function eventMutations(event: OutboxEvent, op: number): Mutation[] {
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

export function opMutations(op: DeliveryOp, index: number, indexedAt?: IndexedAt): Mutation[] {
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
export function dlqPlanCost(op: DlqOp): Cost {
  const id = op.op === "put_dlq" ? op.record.dlq_id : op.dlq_id;
  // Two index entries set and two deleted (a record failing again), a check on the record.
  const keyBytes = 4 * (keySize(dlqWebhookOrderKey("wh_" + "x".repeat(40), "x".repeat(24), id)));
  return { mutations: 4, checks: 1, keyBytes, bytes: keyBytes + 4 * 64 };
}

/** The count sum, the version bump and the marker check a commit with DLQ ops adds. */
export const DLQ_COMMIT_COST: Cost = { mutations: 2, checks: 1, keyBytes: 64, bytes: 128 };

export function buildUnit(
  ops: readonly DeliveryOp[],
  indexedAt?: IndexedAt,
): PlannedUnit {
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
function refuseOutside(unit: PlannedUnit): void {
  if (unit.guarded.length || unit.dlq.length) {
    throw new GatewayError(
      "INTERNAL",
      "Cannot write a collect_event or DLQ op inside another commit",
    );
  }
}

export function apply(atomic: Deno.AtomicOperation, mutations: readonly Mutation[]): void {
  for (const m of mutations) {
    if (m.type === "set") atomic.set(m.key, m.value);
    else atomic.delete(m.key);
  }
}

/** A DLQ op of the writer. */
export type DlqOp = Extract<DeliveryOp, { op: "put_dlq" | "delete_dlq" }>;
