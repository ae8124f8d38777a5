/**
 * The record of a delivery's final outcome (delivered, dead-lettered, or
 * dropped for a removed webhook): one outcome write that takes it out of the
 * store's pending deliveries, then out of memory. Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import {
  type AttemptRecord,
  type DeliveryOp,
  type DlqRecord,
  newDlqId,
  type Store,
} from "../store/mod.ts";
import type { Claims } from "./_claim.ts";
import type { DeliveryLogOps } from "./_delivery_log_ops.ts";
import type { DlqMirrorWriter } from "./_dlq_mirror_writer.ts";
import type { HeldDeliveries, Pending } from "./_held.ts";
import type { Lifecycle } from "./_lifecycle.ts";
import type { OutcomeBatch } from "./_outcomes.ts";
import type { Hook } from "./_registrations.ts";
import { dlqEntry } from "./dlq.ts";

/** Options of {@linkcode Recorder}. */
export interface RecorderOptions {
  store: Store;
  life: Lifecycle;
  held: HeldDeliveries;
  claims: Claims;
  /** Where outcomes are written (merged into few commits). */
  outcomes: OutcomeBatch;
  log: DeliveryLogOps;
  mirror: DlqMirrorWriter;
  now: () => number;
  onError: (error: unknown) => void;
  onDeadLetter: ((webhookId: string) => void) | undefined;
}

function describeFailure(attempt: AttemptRecord): string {
  return attempt.status !== undefined ? `HTTP ${attempt.status}` : attempt.error ?? "failed";
}

/**
 * The op that takes a fan-out delivery out of its event's fan-out record
 * (rewritten with the webhooks left, or deleted). Outcome commits are
 * ordered, so the last one written holds the current list.
 *
 * @returns The op and a function putting the delivery back should its commit fail.
 */
export function leaveFanout(pending: Pending): { op: DeliveryOp; undo: () => void } {
  const { event, record } = pending;
  const fanout = event.fanout;
  if (!fanout) {
    throw new GatewayError("INTERNAL", `Fan-out of event ${record.event_id} is not loaded`);
  }
  fanout.ids.delete(record.webhook_id);
  return {
    op: {
      op: "put_fanout",
      event_id: record.event_id,
      fanout: { ...fanout.record, webhook_ids: [...fanout.ids] },
    },
    undo: () => fanout.ids.add(record.webhook_id),
  };
}

/** Records final outcomes, collecting an event once none of its deliveries is left. */
export class Recorder {
  #store: Store;
  #life: Lifecycle;
  #held: HeldDeliveries;
  #claims: Claims;
  #outcomes: OutcomeBatch;
  #log: DeliveryLogOps;
  #mirror: DlqMirrorWriter;
  #now: () => number;
  #onError: (error: unknown) => void;
  #onDeadLetter: ((webhookId: string) => void) | undefined;

  constructor(options: RecorderOptions) {
    this.#store = options.store;
    this.#life = options.life;
    this.#held = options.held;
    this.#claims = options.claims;
    this.#outcomes = options.outcomes;
    this.#log = options.log;
    this.#mirror = options.mirror;
    this.#now = options.now;
    this.#onError = options.onError;
    this.#onDeadLetter = options.onDeadLetter;
  }

  async finish(
    pending: Pending,
    outcome: "delivered" | "dead" | "dropped",
    attempt?: AttemptRecord,
    hook?: Hook,
    reason?: string,
  ): Promise<void> {
    const { record, event } = pending;
    const ops: DeliveryOp[] = [];
    if (attempt) ops.push(...await this.#log.ops(record, attempt, outcome === "delivered"));
    // Nothing awaits from here to the write: the fan-out op must be queued in
    // the order its list was computed.
    const left = pending.fanout ? leaveFanout(pending) : undefined;
    ops.push(
      left?.op ??
        { op: "delete_delivery", event_id: record.event_id, webhook_id: record.webhook_id },
    );
    const size = event.event.body.byteLength;
    let dlqId: string | undefined;
    let dead: Omit<DlqRecord, "size" | "body"> | undefined;
    if (outcome === "delivered" && record.dlq_id) {
      ops.push({ op: "delete_dlq", dlq_id: record.dlq_id, size });
    } else if (outcome === "dead" && hook) {
      dlqId = record.dlq_id ?? newDlqId();
      dead = {
        dlq_id: dlqId,
        webhook_id: record.webhook_id,
        url: hook.record.url,
        event_id: record.event_id,
        event_type: record.event_type,
        attempts: attempt ? [...record.attempts, attempt] : record.attempts,
        ...(reason !== undefined ? { reason } : {}),
        failed_at: new Date(this.#now()).toISOString(),
      };
      ops.push({ op: "put_dlq", record: dead, body: event.event.body });
    }
    event.refs--;
    // An entry of the fan-out record that this process did not adopt keeps
    // the event, as does a retry it gave back to the store (the store would
    // refuse the collection; asking costs the commit a round).
    const collect = event.refs === 0 && !event.fanout?.ids.size &&
      !this.#claims.isEvicted(record.event_id);
    if (collect) {
      const webhookIds = event.event.webhook_ids;
      ops.push({
        op: "collect_event",
        event_id: record.event_id,
        versionstamp: event.versionstamp,
        size,
        ...(webhookIds ? { webhook_ids: webhookIds } : {}),
      });
    }
    this.#held.releaseEvent(record.event_id, event);
    let collected: boolean;
    try {
      ({ collected } = await this.#outcomes.write(ops));
    } catch (error) {
      event.refs++;
      left?.undo();
      if (!this.#held.hasEvent(record.event_id)) this.#held.setEvent(record.event_id, event);
      throw error;
    }
    this.#held.delete(pending.key);
    // Claim the next page once half the window is free, unless the store ran dry (the poll looks again).
    this.#claims.fillIfRoom();
    if (collect && !collected) {
      this.#life.background(this.#store.deliveries.collectEventIfUnreferenced(record.event_id));
    }
    if (outcome === "dead" && attempt) {
      this.#onError(
        new GatewayError(
          "DELIVERY_FAILED",
          `Delivery of ${record.event_id} to ${record.webhook_id} failed after ${attempt.attempt} attempts (last: ${
            describeFailure(attempt)
          }): moved to the dead-letter queue as ${dlqId}`,
          { details: { dlq_id: dlqId, webhook_id: record.webhook_id, event_id: record.event_id } },
        ),
      );
    }
    if (dead) {
      this.#onDeadLetter?.(record.webhook_id);
      // Appended in place: O(entry), not a rewrite of the whole file per dead letter.
      this.#mirror.append(dlqEntry(dead, event.event.body));
    } else if (record.dlq_id) {
      this.#mirror.rewrite(); // A replayed record was delivered: it leaves the file.
    }
    this.#life.checkIdle();
  }
}
