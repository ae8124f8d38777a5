/**
 * The vocabulary the dispatcher's parts share: the config they read and what
 * they report to its observers. Private to `src/webhooks`.
 *
 * @module
 */
import type { Config } from "../config/mod.ts";

/** The parts of {@linkcode Config} the dispatcher reads. */
export interface DispatcherConfig extends Pick<Config, "dataDir" | "events"> {
  /** `auto_disable_after` and `retry_after_max_ms` take their config defaults when left out. */
  webhooks:
    & Omit<Config["webhooks"], "auto_disable_after" | "retry_after_max_ms">
    & Partial<Pick<Config["webhooks"], "auto_disable_after" | "retry_after_max_ms">>;
}

/** Why deliveries could not be sent at all (see `DispatcherOptions.onUndeliverable`). */
export type UndeliverableReason = "body_missing" | "webhook_removed" | "secret_unreadable";

/** A delivery attempt as `DispatcherOptions.onAttempt` is told of it. */
export interface AttemptObservation {
  webhookId: string;
  /** A 2xx response arrived in time. */
  ok: boolean;
  /** HTTP status, when a response arrived. */
  status?: number;
  /** Until the response headers (or the failure), in ms. */
  durationMs: number;
}
