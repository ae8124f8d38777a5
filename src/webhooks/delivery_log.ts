/**
 * The per-webhook delivery log: the last 20 attempts, for `webhooks show` and
 * `webhooks list --json`.
 *
 * @module
 */
import { DELIVERY_LOG_SIZE, type DeliveryLogEntry, type Store } from "../store/mod.ts";

/**
 * The most recent delivery attempts to a webhook, newest first: `at`,
 * `attempt`, `ok`, `status` or `error`, `latency_ms`, `event_id`, `event_type`.
 *
 * @param limit At most this many. @default 20
 */
export async function recentAttempts(
  store: Store,
  webhookId: string,
  limit: number = DELIVERY_LOG_SIZE,
): Promise<DeliveryLogEntry[]> {
  return await store.deliveries.readLog(webhookId, Math.min(limit, DELIVERY_LOG_SIZE));
}
