/**
 * Attempt outcomes, gathered into few writes. Private to `src/webhooks`.
 *
 * Every finished attempt records its outcome (the delivery's record or its
 * fan-out entry, a delivery log entry, maybe a dead letter). Nobody waits on
 * these writes, but their commits share the store with tool calls' audit
 * commits, and a call whose commit queues behind a large outcome commit
 * waits for it. So outcomes are written together: as soon as every running
 * attempt waits for its outcome to be written (the burst that one tool
 * call's events started is over), or after `lingerMs` when attempts keep
 * running. Within one write, the fan-out
 * record of an event is written once, with the list computed last, instead
 * of once per finished delivery.
 *
 * @module
 */
import type { DeliveryOp, DeliveryWriter, WriteResult } from "../store/mod.ts";

/** Options of {@linkcode OutcomeBatch}. */
export interface OutcomeBatchOptions {
  /** Where the merged writes go (a writer of its own, without linger). */
  writer: DeliveryWriter;
  /**
   * How many attempts are running, those waiting here included: when all
   * of them wait here, what waits is written at once.
   */
  running: () => number;
  /** Longest wait for more outcomes while attempts run, in ms. @default 10 */
  lingerMs?: number;
  /** Most outcomes merged into one write. @default 64 */
  maxUnits?: number;
}

interface Unit {
  ops: readonly DeliveryOp[];
  resolve: (result: WriteResult) => void;
  reject: (error: unknown) => void;
}

/** Merges outcome writes; see the module documentation. */
export class OutcomeBatch {
  #writer: DeliveryWriter;
  #running: () => number;
  /** Outcomes queued or being written. */
  #waiting = 0;
  #lingerMs: number;
  #maxUnits: number;
  #units: Unit[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(options: OutcomeBatchOptions) {
    const { writer, running, lingerMs = 10, maxUnits = 64 } = options;
    if (!(lingerMs >= 0)) throw new RangeError(`Invalid lingerMs: ${lingerMs} is not 0 or more`);
    if (!Number.isInteger(maxUnits) || maxUnits < 1) {
      throw new RangeError(`Invalid maxUnits: ${maxUnits} is not a positive integer`);
    }
    this.#writer = writer;
    this.#running = running;
    this.#lingerMs = lingerMs;
    this.#maxUnits = maxUnits;
  }

  /**
   * Queues the ops of one outcome; they are applied atomically, in the order
   * outcomes were queued.
   *
   * @returns Once committed: as {@linkcode DeliveryWriter.write}, by this unit's op indexes.
   */
  write(ops: readonly DeliveryOp[]): Promise<WriteResult> {
    return new Promise<WriteResult>((resolve, reject) => {
      this.#waiting++;
      this.#units.push({
        ops,
        resolve: (result) => {
          this.#waiting--;
          resolve(result);
        },
        reject: (error) => {
          this.#waiting--;
          reject(error);
        },
      });
      if (this.#waiting >= this.#running() || this.#units.length >= this.#maxUnits) this.send();
      else this.#timer ??= setTimeout(() => this.send(), this.#lingerMs);
    });
  }

  /** Writes what waits now (also when attempts finish and none is left in flight). */
  send(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const units = this.#units;
    this.#units = [];
    let group: Unit[] = [];
    for (const unit of units) {
      // A dead letter carries the event's body: it is written alone, as before.
      if (unit.ops.some((op) => op.op === "put_dlq")) {
        if (group.length) this.#writeMerged(group);
        this.#writeMerged([unit]);
        group = [];
        continue;
      }
      group.push(unit);
      if (group.length === this.#maxUnits) {
        this.#writeMerged(group);
        group = [];
      }
    }
    if (group.length) this.#writeMerged(group);
  }

  /** Writes what waits and resolves once every write is committed (or failed). */
  async flush(): Promise<void> {
    this.send();
    await this.#writer.flush();
  }

  #writeMerged(units: Unit[]): void {
    const ops: (DeliveryOp | null)[] = [];
    /** For a dropped op: the index of the op that replaced it. */
    const replacedBy = new Map<number, number>();
    const lastFanout = new Map<string, number>();
    const positions = units.map((unit) =>
      unit.ops.map((op) => {
        const at = ops.length;
        if (op.op === "put_fanout" && !op.claim) {
          // The fan-out list computed last holds every change before it.
          const previous = lastFanout.get(op.event_id);
          if (previous !== undefined) {
            ops[previous] = null;
            replacedBy.set(previous, at);
          }
          lastFanout.set(op.event_id, at);
        }
        ops.push(op);
        return at;
      })
    );
    const kept: DeliveryOp[] = [];
    const keptAt: number[] = ops.map((op) => op ? kept.push(op) - 1 : -1);
    const resolveAt = (at: number): number => {
      while (keptAt[at] < 0) at = replacedBy.get(at)!;
      return keptAt[at];
    };
    this.#writer.write(kept).then(
      (result) => {
        const uncollected = result.collected ? undefined : result.uncollected;
        units.forEach((unit, k) => {
          // Without the store's list, one collection that did not apply marks them all.
          const lost = unit.ops.filter((op) =>
            op.op === "collect_event" && !result.collected &&
            (!uncollected || uncollected.includes(op.event_id))
          ).map((op) => (op as { event_id: string }).event_id);
          const versionstamps = positions[k].map((at) => result.versionstamps[resolveAt(at)]);
          unit.resolve(
            lost.length
              ? { versionstamps, collected: false, uncollected: lost }
              : { versionstamps, collected: true },
          );
        });
      },
      (error) => {
        for (const unit of units) unit.reject(error);
      },
    );
  }
}
