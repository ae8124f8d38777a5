/**
 * The ops that append an attempt to its webhook's delivery log (the last 20
 * attempts), from the log's entry ids kept per webhook. Private to
 * `src/webhooks`.
 *
 * @module
 */
import {
  type AttemptRecord,
  DELIVERY_LOG_SIZE,
  type DeliveryLogEntry,
  type DeliveryOp,
  type DeliveryRecord,
  newLogEntryId,
  type Store,
} from "../store/mod.ts";
import type { Lifecycle } from "./_lifecycle.ts";

/** The delivery logs' entry ids, per webhook, loaded on first use. */
export class DeliveryLogOps {
  #store: Store;
  #life: Lifecycle;
  /** Per webhook: ids of its delivery log entries in KV, oldest first. */
  #logs = new Map<string, Promise<string[]>>();

  constructor(store: Store, life: Lifecycle) {
    this.#store = store;
    this.#life = life;
  }

  /** Forgets a removed webhook's log and deletes it from the store (in the background). */
  forget(webhookId: string): void {
    this.#logs.delete(webhookId);
    this.#life.background(this.#store.deliveries.deleteLog(webhookId));
  }

  /** Ops appending an attempt to the webhook's delivery log, dropping entries past 20. */
  async ops(
    record: DeliveryRecord,
    attempt: AttemptRecord,
    ok: boolean,
  ): Promise<DeliveryOp[]> {
    const webhookId = record.webhook_id;
    let loading = this.#logs.get(webhookId);
    if (!loading) {
      loading = this.#store.deliveries.listLogIds(webhookId);
      this.#logs.set(webhookId, loading);
      loading.catch(() => this.#logs.delete(webhookId));
    }
    const ids = await loading;
    const entry: DeliveryLogEntry = {
      at: attempt.at,
      attempt: attempt.attempt,
      ok,
      ...(attempt.status !== undefined ? { status: attempt.status } : {}),
      ...(attempt.error !== undefined ? { error: attempt.error } : {}),
      latency_ms: attempt.duration_ms,
      event_id: record.event_id,
      event_type: record.event_type,
    };
    const entry_id = newLogEntryId(Date.parse(attempt.at));
    ids.push(entry_id);
    const ops: DeliveryOp[] = [{ op: "log", webhook_id: webhookId, entry_id, entry }];
    while (ids.length > DELIVERY_LOG_SIZE) {
      ops.push({ op: "delete_log", webhook_id: webhookId, entry_id: ids.shift()! });
    }
    return ops;
  }
}
