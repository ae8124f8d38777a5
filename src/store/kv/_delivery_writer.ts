/**
 * The Deno KV delivery writer: group-commits the units of many writes into
 * few atomic operations, splitting a unit too large for one, with the
 * collections and DLQ index each commit carries.
 *
 * @module
 */
import { CommitQueue } from "../_commit_queue.ts";
import type { DeliveryOp, WriteResult } from "../records.ts";
import { takeBatch, writeResult } from "../_delivery_units.ts";
import type { DeliveryHandle } from "./_delivery_claims.ts";
import {
  addCost,
  apply,
  buildUnit,
  DLQ_COMMIT_COST,
  dlqPlanCost,
  fits,
  type Guarded,
  guardedChecks,
  KV_COMMIT_BOUNDS,
  MAX_CHECKS,
  MAX_MUTATIONS,
  type Mutation,
  mutationCost,
  type PlannedUnit,
  ZERO,
} from "./_delivery_plan.ts";
import {
  type CollectionMode,
  type Collections,
  resolveCollections,
} from "./_delivery_collections.ts";
import { dlqRaceLost, planDlq } from "./_dlq_index.ts";

/** A planned unit waiting in the queue, with the caller's promise. */
interface Unit extends PlannedUnit {
  resolve: (result: WriteResult) => void;
  reject: (error: unknown) => void;
}

/**
 * Group-commits delivery writes: each {@linkcode DeliveryWriter.write} call is
 * one unit, applied atomically together with the other units waiting at the
 * time (a unit larger than one commit is split, in order).
 */
export class DeliveryWriter {
  #store: DeliveryHandle;
  #queue: CommitQueue<Unit>;

  /**
   * @param store The store to write to.
   * @param options `lingerMs`: how long a commit waits for more units to
   * join it (fewer, larger commits for writes nobody waits on). @default 0
   */
  constructor(store: DeliveryHandle, options: { lingerMs?: number } = {}) {
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
      const batch = takeBatch(queue, KV_COMMIT_BOUNDS);
      try {
        if (batch.length === 1 && !fits(batch[0].cost)) await this.#commitSplit(batch[0]);
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
    unit.resolve(writeResult(versionstamps, uncollected));
  }
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
  return writeResult(versionstamps, uncollected);
}
