/**
 * The outgoing webhooks as the dispatcher last read them from the store,
 * kept fresh enough for every attempt. Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { isDefaultEventType } from "../events/mod.ts";
import type {
  DisabledReason,
  ListedOutgoingWebhook,
  OutgoingWebhook,
  Store,
} from "../store/mod.ts";
import type { Lifecycle } from "./_lifecycle.ts";
import type { WebhookSigner } from "./signer.ts";

/** A disabled outgoing webhook: which, why and since when. */
export interface DisabledWebhook {
  id: string;
  reason: DisabledReason;
  /** ISO-8601 time it was disabled. */
  at: string;
  detail?: string;
}

/** A registered webhook as the dispatcher holds it. */
export interface Hook {
  record: ListedOutgoingWebhook;
  /** Its keys, imported on first use after each registration load that changed its secrets. */
  signer?: WebhookSigner;
  /** Its dead-letter streak as last stored, when known (a delivery resets a non-zero one). */
  streak?: number;
  /** Being disabled by this process (a 410 or the streak): no second update. */
  disabling?: boolean;
}

/** Options of {@linkcode Registrations}. */
export interface RegistrationsOptions {
  store: Store;
  life: Lifecycle;
  /** How old the registrations read may be when an attempt starts, in ms. */
  freshMs: number;
  onError: (error: unknown) => void;
  /** Told of each webhook a read found removed while running. */
  onRemoved: (webhookId: string) => void;
}

/** Whether two registrations sign with the same secrets (a loaded signer can be kept). */
function sameSecrets(a: OutgoingWebhook, b: OutgoingWebhook): boolean {
  const pa = a.previous_secrets ?? [];
  const pb = b.previous_secrets ?? [];
  return a.secret === b.secret && pa.length === pb.length &&
    pa.every((p, i) => p.secret === pb[i].secret && p.expires_at === pb[i].expires_at);
}

/** Whether `hook` gets events of `type`: all of the 8 by default; an opt-in type only when named. */
function matches(hook: OutgoingWebhook, type: string): boolean {
  return hook.events === "*" ? isDefaultEventType(type) : hook.events.includes(type);
}

/** The registration cache: read again when the store's registrations version moves. */
export class Registrations {
  #store: Store;
  #life: Lifecycle;
  #onError: (error: unknown) => void;
  #onRemoved: (webhookId: string) => void;
  #hooks = new Map<string, Hook>();
  #registrationsVersion: bigint | null = null;
  #refreshing: Promise<void> | null = null;
  #refreshingSince = -Infinity;
  #refreshQueued: Promise<void> | null = null;
  /** `performance.now()` when the newest completed registrations read began. */
  #registrationsReadAt = -Infinity;
  /** How old that read may be when an attempt starts. */
  #freshMs: number;

  constructor(options: RegistrationsOptions) {
    this.#store = options.store;
    this.#life = options.life;
    this.#freshMs = options.freshMs;
    this.#onError = options.onError;
    this.#onRemoved = options.onRemoved;
  }

  /** The webhook of `id`, as of the last read. */
  get(id: string): Hook | undefined {
    return this.#hooks.get(id);
  }

  /** The webhooks that get events of `type`. */
  matching(type: string): Hook[] {
    const targets: Hook[] = [];
    for (const hook of this.#hooks.values()) {
      if (matches(hook.record, type)) targets.push(hook);
    }
    return targets;
  }

  /** The registered webhooks that are disabled, as of the last read. */
  disabled(): DisabledWebhook[] {
    const disabled: DisabledWebhook[] = [];
    for (const { record } of this.#hooks.values()) {
      if (record.disabled) disabled.push({ id: record.id, ...record.disabled });
    }
    return disabled;
  }

  /**
   * Makes the registration cache no older than the freshness bound: reuses
   * the last read (or the one in flight) when it began recently enough.
   */
  fresh(): Promise<void> {
    const limit = performance.now() - this.#freshMs;
    if (this.#registrationsReadAt >= limit) return Promise.resolve();
    if (this.#refreshing && this.#refreshingSince >= limit) return this.#refreshing;
    return this.refresh();
  }

  /**
   * Makes the registration cache at least as new as the store was when this
   * call began (reads are shared by callers arriving together).
   */
  refresh(): Promise<void> {
    if (!this.#refreshing) {
      this.#refreshingSince = performance.now();
      const run: Promise<void> = this.#load().finally(() => {
        if (this.#refreshing === run) this.#refreshing = null;
      });
      this.#refreshing = run;
      return run;
    }
    if (!this.#refreshQueued) {
      const next = () => {
        this.#refreshQueued = null;
        return this.refresh();
      };
      this.#refreshQueued = this.#refreshing.then(next, next);
    }
    return this.#refreshQueued;
  }

  async #load(): Promise<void> {
    const began = performance.now();
    const version = await this.#store.registrationsVersion();
    if (version === this.#registrationsVersion) {
      this.#registrationsReadAt = began;
      return;
    }
    const records = await this.#store.webhooks.listOutgoing({ unreadableSecrets: "report" });
    const hooks = new Map<string, Hook>();
    for (const record of records) {
      const old = this.#hooks.get(record.id);
      if (record.secret_error !== undefined && old?.record.secret_error === undefined) {
        this.#onError(
          new GatewayError(
            "STORE_CORRUPT",
            `Webhook ${record.id} (${record.url}) cannot be signed: ${record.secret_error}. ` +
              `Its deliveries go to the dead-letter queue until the key is right; then ` +
              `\`toolgate dlq replay --webhook ${record.id}\` sends them`,
            { details: { webhook_id: record.id } },
          ),
        );
      }
      hooks.set(
        record.id,
        old && sameSecrets(old.record, record) ? { ...old, record } : { record },
      );
    }
    if (this.#registrationsVersion !== null && this.#life.running) {
      for (const id of this.#hooks.keys()) {
        if (!hooks.has(id)) this.#onRemoved(id);
      }
    }
    this.#hooks = hooks;
    this.#registrationsVersion = version;
    this.#registrationsReadAt = began;
  }
}
