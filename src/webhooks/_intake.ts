/**
 * Intake: an event fanned out to the webhooks that want it, as outbox
 * records (its body and a fan-out record) written before the emitter
 * continues, or staged in another writer's commit, then adopted into the
 * window when this process sends. Private to `src/webhooks`.
 *
 * @module
 */
import { envelopeTraceparent, type EventEnvelope, type EventType } from "../events/mod.ts";
import {
  type DeliveryOp,
  type DeliveryWriter,
  fanoutDeliveries,
  type FanoutRecord,
  type OutboxEvent,
  type Store,
} from "../store/mod.ts";
import type { Claims } from "./_claim.ts";
import type { CachedEvent, HeldDeliveries } from "./_held.ts";
import type { Lifecycle } from "./_lifecycle.ts";
import type { Hook, Registrations } from "./_registrations.ts";

/** Outbox records of events, to be written in someone else's commit. */
export interface StagedDeliveries {
  /** Plain delivery ops: each event and its pending deliveries. */
  ops: DeliveryOp[];
  /** Whether the commit must bump the deliveries version (record mode). */
  bumpVersion: boolean;
  /** Tells the dispatcher the commit succeeded, with its versionstamp. */
  committed(versionstamp: string): void;
}

/** Options of {@linkcode EventIntake}. */
export interface EventIntakeOptions {
  store: Store;
  /** Writes the outbox records (group commits). */
  writer: DeliveryWriter;
  life: Lifecycle;
  registrations: Registrations;
  claims: Claims;
  held: HeldDeliveries;
  /** Event types never delivered (`events.disabled`). */
  disabled: Set<string>;
  now: () => number;
}

interface BuiltEvent {
  outbox: OutboxEvent;
  fanout: FanoutRecord;
  ops: DeliveryOp[];
}

const encoder = new TextEncoder();

/** Turns events into outbox records and adopts the deliveries this process sends. */
export class EventIntake {
  #store: Store;
  #writer: DeliveryWriter;
  #life: Lifecycle;
  #registrations: Registrations;
  #claims: Claims;
  #held: HeldDeliveries;
  #disabled: Set<string>;
  #now: () => number;
  /** Ids of events whose records stage() had written, until the bus brings them. */
  #staged = new Set<string>();

  constructor(options: EventIntakeOptions) {
    this.#store = options.store;
    this.#writer = options.writer;
    this.#life = options.life;
    this.#registrations = options.registrations;
    this.#claims = options.claims;
    this.#held = options.held;
    this.#disabled = options.disabled;
    this.#now = options.now;
  }

  #targets(type: string): Hook[] {
    if (!this.#life.running || this.#disabled.has(type)) return [];
    return this.#registrations.matching(type);
  }

  /** The bus's subscriber: persists an event's deliveries (the bus reports a failure). */
  onEvent(event: EventEnvelope<EventType>): Promise<void> | undefined {
    // Already written in another commit by stage().
    if (this.#staged.delete(event.id)) return undefined;
    const targets = this.#targets(event.type);
    if (!targets.length) return undefined;
    const persisted = this.#persistEvent(event, targets);
    // The bus reports a failure of the returned promise; this copy only lets stop() wait.
    this.#life.background(persisted.catch(() => undefined));
    return persisted;
  }

  /** See `Dispatcher.stage`. */
  stage(events: readonly EventEnvelope<EventType>[]): StagedDeliveries | undefined {
    const built: BuiltEvent[] = [];
    // Claimed as written when this process sends them; else they wait in the store.
    const claim = this.#claims.sending && this.#held.room > 0 ? this.#claims.claim() : undefined;
    for (const event of events) {
      const targets = this.#targets(event.type);
      if (targets.length) built.push(this.#build(event, targets, claim));
    }
    if (!built.length) return undefined;
    return {
      ops: built.flatMap((b) => b.ops),
      bumpVersion: !this.#claims.sending,
      committed: (versionstamp) => {
        for (const b of built) this.#staged.add(b.outbox.id);
        // Unclaimed (the window was full): claimed from the store once there is room.
        if (!claim && this.#claims.sending) this.#claims.undrain();
        // Scheduled on the next turn, so the reply to the call that committed
        // them goes out before their first attempts start.
        if (!claim) return;
        this.#life.background(
          new Promise<void>((resolve) =>
            setTimeout(() => {
              for (const b of built) this.#adoptEvent(b, () => versionstamp);
              resolve();
            }, 0)
          ),
        );
      },
    };
  }

  /** The outbox records of one event: its body and a pending delivery per target. */
  #build(
    event: EventEnvelope<EventType>,
    targets: Hook[],
    claim?: { owner: string; until: number },
  ): BuiltEvent {
    const outbox: OutboxEvent = {
      id: event.id,
      type: event.type,
      timestamp: event.timestamp,
      body: encoder.encode(JSON.stringify(event)),
    };
    const traceparent = envelopeTraceparent(event);
    if (traceparent !== undefined) outbox.traceparent = traceparent;
    const now = this.#now();
    const fanout: FanoutRecord = {
      event_type: event.type,
      created_at: new Date(now).toISOString(),
      next_attempt_at: now,
      webhook_ids: targets.map((hook) => hook.record.id),
    };
    outbox.webhook_ids = fanout.webhook_ids;
    const ops: DeliveryOp[] = [
      { op: "put_event", event: outbox },
      { op: "put_fanout", event_id: event.id, fanout, ...(claim ? { claim } : {}) },
    ];
    return { outbox, fanout, ops };
  }

  /** Schedules the deliveries of a stored event (`versionstamp(i)`: of op `i`). */
  #adoptEvent(built: BuiltEvent, versionstamp: (op: number) => string): void {
    if (!this.#claims.sending || !this.#life.running) return; // Stored: the sender adopts them.
    const { webhook_ids, ...record } = built.fanout;
    const cached: CachedEvent = {
      event: built.outbox,
      versionstamp: versionstamp(0),
      refs: 0,
      fanout: { record, ids: new Set(webhook_ids) },
    };
    this.#held.setEvent(built.outbox.id, cached);
    // Built here, off the call's path: stage() runs before the call's commit.
    for (const delivery of fanoutDeliveries(built.outbox.id, built.fanout)) {
      this.#held.adopt(delivery, versionstamp(1), true, cached);
    }
  }

  async #persistEvent(event: EventEnvelope<EventType>, targets: Hook[]): Promise<void> {
    const claim = this.#claims.sending && this.#held.room > 0 ? this.#claims.claim() : undefined;
    const built = this.#build(event, targets, claim);
    const result = await this.#writer.write(built.ops);
    if (!this.#claims.sending) {
      await this.#store.deliveries.bumpVersion();
      return;
    }
    if (claim) this.#adoptEvent(built, (i) => result.versionstamps[i]);
    // Unclaimed (the window was full): claimed from the store once there is room.
    else this.#claims.undrain();
  }
}
