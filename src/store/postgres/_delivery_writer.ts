/**
 * The PostgreSQL delivery writer: group-commits the units of concurrent
 * writes in one transaction, each unit alone again when one of them fails.
 *
 * @module
 */
import { CommitQueue } from "../_commit_queue.ts";
import type { DeliveryOp, WriteResult } from "../records.ts";
import type { DeliveryWriter, StoreCost } from "../store.ts";
import { type CommitBounds, takeBatch, writeResult } from "../_delivery_units.ts";
import type { PgContext } from "./_context.ts";
import { isConnectionError } from "./connection.ts";
import { checkOps } from "./_delivery_check.ts";
import { opsCost } from "./_delivery_cost.ts";
import { commitOps } from "./_delivery_apply.ts";

// Bounds of one group commit (a unit larger than them commits alone).
const BATCH_MAX_ROWS = 10_000;
const BATCH_MAX_BYTES = 16 * 1024 * 1024;

/** {@linkcode BATCH_MAX_ROWS} and {@linkcode BATCH_MAX_BYTES}, for the writer's batches. */
const BATCH_BOUNDS: CommitBounds = {
  mutations: BATCH_MAX_ROWS,
  checks: Infinity,
  keyBytes: Infinity,
  bytes: BATCH_MAX_BYTES,
};

interface Unit {
  ops: readonly DeliveryOp[];
  cost: StoreCost;
  resolve: (result: WriteResult) => void;
  reject: (error: unknown) => void;
}

/**
 * Group-commits delivery writes: each {@linkcode PostgresDeliveryWriter.write}
 * call is one unit, committed in one transaction with the other units waiting
 * at the time. A `collect_event` that finds its event changed deletes
 * nothing; the rest commits.
 */
export class PostgresDeliveryWriter implements DeliveryWriter {
  #ctx: PgContext;
  #queue: CommitQueue<Unit>;

  /**
   * @param ctx The store's context.
   * @param options `lingerMs`: how long a commit waits for more units to
   * join it. @default 0
   */
  constructor(ctx: PgContext, options: { lingerMs?: number } = {}) {
    this.#ctx = ctx;
    this.#queue = new CommitQueue((queue) => this.#drain(queue), options);
  }

  /** Units waiting to be committed. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Queues `ops` for the next group commit, as one atomic unit.
   *
   * @returns Once committed: the stamp of the commit for every op, and
   * whether every `collect_event` deleted its event.
   * @throws {GatewayError} `INTERNAL` when an op does not parse (before
   * anything is queued); `STORE_UNAVAILABLE` when the database cannot be reached.
   */
  write(ops: readonly DeliveryOp[]): Promise<WriteResult> {
    try {
      checkOps(ops);
    } catch (error) {
      return Promise.reject(error);
    }
    const cost = opsCost(ops);
    return new Promise<WriteResult>((resolve, reject) => {
      this.#queue.push({ ops: [...ops], cost, resolve, reject });
    });
  }

  /** Resolves once every queued write is committed (or failed). */
  flush(): Promise<void> {
    return this.#queue.flush();
  }

  async #drain(queue: Unit[]): Promise<void> {
    while (queue.length) {
      const batch = takeBatch(queue, BATCH_BOUNDS);
      await this.#commit(batch);
    }
  }

  async #commit(batch: Unit[]): Promise<void> {
    try {
      const { stamp, collected } = await commitOps(this.#ctx, batch.flatMap((unit) => unit.ops));
      let offset = 0;
      for (const unit of batch) {
        unit.resolve(unitResult(unit, offset, stamp, collected));
        offset += unit.ops.length;
      }
    } catch (error) {
      if (batch.length === 1 || isConnectionError(error)) {
        for (const unit of batch) unit.reject(error);
        return;
      }
      // One unit's failure must not fail the others: each commits alone.
      for (const unit of batch) {
        try {
          const { stamp, collected } = await commitOps(this.#ctx, unit.ops);
          unit.resolve(unitResult(unit, 0, stamp, collected));
        } catch (unitError) {
          unit.reject(unitError);
        }
      }
    }
  }
}

function unitResult(
  unit: Unit,
  offset: number,
  stamp: string,
  collected: ReadonlySet<number>,
): WriteResult {
  const uncollected: string[] = [];
  unit.ops.forEach((op, i) => {
    if (op.op === "collect_event" && !collected.has(offset + i)) uncollected.push(op.event_id);
  });
  const versionstamps = new Array(unit.ops.length).fill(stamp);
  return writeResult(versionstamps, uncollected);
}
