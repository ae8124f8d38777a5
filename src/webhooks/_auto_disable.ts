/**
 * Auto-disable: an event's final outcome at a webhook counted in its
 * dead-letter streak, and the webhook disabled once the streak reaches
 * `webhooks.auto_disable_after` (or at once on a 410 Gone). Private to
 * `src/webhooks`.
 *
 * @module
 */
import { DEFAULT_AUTO_DISABLE_AFTER } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { DeliveryOutcome, DisabledReason, Store } from "../store/mod.ts";
import type { DispatcherConfig } from "./_dispatch_types.ts";
import type { Hook } from "./_registrations.ts";

/** Disables webhooks whose events keep going to the dead-letter queue. */
export class AutoDisable {
  #store: Store;
  #config: DispatcherConfig;
  #now: () => number;
  #onError: (error: unknown) => void;

  constructor(
    store: Store,
    config: DispatcherConfig,
    now: () => number,
    onError: (error: unknown) => void,
  ) {
    this.#store = store;
    this.#config = config;
    this.#now = now;
    this.#onError = onError;
  }

  /**
   * Counts an event's final outcome at a webhook (a delivery resets the
   * streak of events dead-lettered in a row) and disables the webhook once
   * `webhooks.auto_disable_after` events in a row went to the DLQ.
   */
  async recordOutcome(hook: Hook, outcome: DeliveryOutcome): Promise<void> {
    const streak = await this.#store.webhooks.recordOutcome(hook.record.id, outcome);
    hook.streak = streak;
    const limit = this.#config.webhooks.auto_disable_after ?? DEFAULT_AUTO_DISABLE_AFTER;
    if (outcome === "dead_lettered" && limit > 0 && streak >= limit) {
      await this.disable(
        hook,
        "failing",
        `the last ${streak} events all went to the dead-letter queue`,
      );
    }
  }

  /** Disables a webhook (unless it already is) and says so in the log. */
  async disable(hook: Hook, reason: DisabledReason, detail: string): Promise<void> {
    if (hook.record.disabled || hook.disabling) return;
    hook.disabling = true;
    try {
      const current = await this.#store.webhooks.getOutgoing(hook.record.id);
      if (!current || current.disabled) return;
      const updated = await this.#store.webhooks.updateOutgoing(hook.record.id, {
        disabled: { at: new Date(this.#now()).toISOString(), reason, detail },
      });
      if (!updated) return;
      hook.record = updated;
      this.#onError(
        new GatewayError(
          "DELIVERY_FAILED",
          `Webhook ${updated.id} (${updated.url}) disabled: ${detail}. Its events go to the ` +
            `dead-letter queue until \`toolgate webhooks enable ${updated.id}\`; then ` +
            `\`toolgate dlq replay --webhook ${updated.id}\` sends what it missed`,
          { details: { webhook_id: updated.id, reason } },
        ),
      );
    } finally {
      hook.disabling = false;
    }
  }
}
