/**
 * The claims on pending deliveries of one Deno KV store, held in the memory
 * of the process that sends them (the delivery lease holder).
 *
 * @module
 */
import type { DeliveryClaim, DeliveryOp } from "../records.ts";
import type { KvHandle } from "./_handle.ts";

/** The handle, with the claims on pending deliveries it keeps in memory. */
export type DeliveryHandle = KvHandle & { readonly claims: DeliveryClaims };

/** A claim held on one pending delivery. */
interface Held extends DeliveryClaim {
  /** Held as an entry of its event's fan-out record (no own record yet). */
  fanout: boolean;
  /** Due time of its own record's index entry, when known. */
  at?: number;
}

/** What a write does to the claims, applied as its commit lands. */
export interface ClaimEffects {
  /** The write committed: deleted deliveries lose their claims, rewritten ones keep them. */
  committed(): void;
  /** The write failed: the claims it made are taken back. */
  failed(): void;
}

export function claimKey(eventId: string, webhookId: string): string {
  return `${eventId}\n${webhookId}`;
}

/**
 * The claims on pending deliveries of one `KvStore`, in its memory:
 * one process sends the deliveries of a KV file (the delivery lease holder),
 * so nothing else needs to see them. For modules of `src/store` only.
 */
export class DeliveryClaims {
  /** Claims by event id, then webhook id. */
  #events = new Map<string, Map<string, Held>>();
  /** The last known webhook list of the fan-out records of events with claims. */
  #fanouts = new Map<string, readonly string[]>();
  /** Deliveries deleted while a claim scan was in flight, with the epoch of their deletion. */
  #dropped = new Map<string, number>();
  #epoch = 0;
  /** Claim scans in flight: id → epoch at their start. */
  #scans = new Map<number, number>();
  #nextScan = 0;

  /** Claims held, live or lapsed. */
  get size(): number {
    let size = 0;
    for (const held of this.#events.values()) size += held.size;
    return size;
  }

  /** The claim on one delivery, if any (live or lapsed). */
  get(eventId: string, webhookId: string): Readonly<Held> | undefined {
    return this.#events.get(eventId)?.get(webhookId);
  }

  /** Whether a claim on the delivery is live at `now`. */
  live(eventId: string, webhookId: string, now: number): boolean {
    const held = this.get(eventId, webhookId);
    return held !== undefined && held.until > now;
  }

  /** Claims one delivery (replacing any claim on it). */
  set(eventId: string, webhookId: string, held: Held): void {
    let event = this.#events.get(eventId);
    if (!event) this.#events.set(eventId, event = new Map());
    event.set(webhookId, held);
  }

  /** The due time of a claimed own record's index entry, when known. */
  indexedAt(eventId: string, webhookId: string): number | undefined {
    const held = this.get(eventId, webhookId);
    return held && !held.fanout ? held.at : undefined;
  }

  /** The webhook list last seen in an event's fan-out record, while it has claims. */
  fanoutList(eventId: string): readonly string[] | undefined {
    return this.#fanouts.get(eventId);
  }

  /** Remembers an event's fan-out list, while the event has claims. */
  noteFanout(eventId: string, webhookIds: readonly string[]): void {
    if (webhookIds.length && this.#events.has(eventId)) this.#fanouts.set(eventId, webhookIds);
    else this.#fanouts.delete(eventId);
  }

  /** Drops claims that lapsed at `now`. */
  prune(now: number): void {
    for (const [eventId, event] of this.#events) {
      for (const [webhookId, held] of event) if (held.until <= now) event.delete(webhookId);
      if (!event.size) this.#forget(eventId);
    }
  }

  /** Extends `owner`'s claims to `until`; returns how many it holds. */
  renew(owner: string, until: number): number {
    let count = 0;
    for (const event of this.#events.values()) {
      for (const held of event.values()) {
        if (held.owner !== owner) continue;
        held.until = until;
        count++;
      }
    }
    return count;
  }

  /** Gives back `owner`'s claims: all, or those of `keys`. */
  release(owner: string, keys?: readonly { event_id: string; webhook_id: string }[]): void {
    if (keys) {
      for (const { event_id, webhook_id } of keys) {
        if (this.get(event_id, webhook_id)?.owner === owner) this.#remove(event_id, webhook_id);
      }
      return;
    }
    for (const [eventId, event] of this.#events) {
      for (const [webhookId, held] of event) if (held.owner === owner) event.delete(webhookId);
      if (!event.size) this.#forget(eventId);
    }
  }

  /**
   * Applies the claims `ops` make before they are committed (a `put_fanout`
   * with `claim`: nobody can claim its deliveries from the store first), and
   * returns what is left to do once the commit landed or failed.
   */
  stage(ops: readonly DeliveryOp[]): ClaimEffects {
    const made: { eventId: string; webhookId: string; held: Held; previous?: Held }[] = [];
    for (const op of ops) {
      if (op.op !== "put_fanout" || !op.claim) continue;
      const { owner, until } = op.claim;
      for (const webhookId of op.fanout.webhook_ids) {
        const previous = this.get(op.event_id, webhookId);
        const held: Held = { owner, until, fanout: true };
        this.set(op.event_id, webhookId, held);
        made.push({ eventId: op.event_id, webhookId, held, previous });
      }
    }
    return {
      committed: () => this.#committed(ops),
      failed: () => {
        for (const { eventId, webhookId, held, previous } of made.reverse()) {
          if (this.get(eventId, webhookId) !== held) continue;
          if (previous) this.set(eventId, webhookId, previous);
          else this.#remove(eventId, webhookId);
        }
      },
    };
  }

  #committed(ops: readonly DeliveryOp[]): void {
    const own = new Set<string>();
    for (const op of ops) {
      if (op.op === "put_delivery") own.add(claimKey(op.delivery.event_id, op.delivery.webhook_id));
    }
    for (const op of ops) {
      switch (op.op) {
        case "put_delivery": {
          // A retry keeps its claim, now on its own record.
          const { event_id, webhook_id, next_attempt_at } = op.delivery;
          const held = this.#events.get(event_id)?.get(webhook_id);
          if (held) {
            held.fanout = false;
            held.at = next_attempt_at;
          }
          break;
        }
        case "delete_delivery":
          this.#deleted(op.event_id, op.webhook_id);
          break;
        case "put_fanout": {
          const listed = new Set(op.fanout.webhook_ids);
          const gone = new Set(this.#fanouts.get(op.event_id));
          for (const [webhookId, held] of this.#events.get(op.event_id) ?? []) {
            if (held.fanout) gone.add(webhookId);
          }
          for (const webhookId of gone) {
            if (listed.has(webhookId) || own.has(claimKey(op.event_id, webhookId))) continue;
            const held = this.get(op.event_id, webhookId);
            if (held && !held.fanout) continue; // Claimed as its own record.
            this.#deleted(op.event_id, webhookId);
          }
          this.noteFanout(op.event_id, op.fanout.webhook_ids);
          break;
        }
      }
    }
  }

  /** A delivery was deleted: its claim goes, and scans in flight must not return it. */
  #deleted(eventId: string, webhookId: string): void {
    this.#remove(eventId, webhookId);
    if (this.#scans.size) this.#dropped.set(claimKey(eventId, webhookId), ++this.#epoch);
  }

  #remove(eventId: string, webhookId: string): void {
    const event = this.#events.get(eventId);
    if (!event) return;
    event.delete(webhookId);
    if (!event.size) this.#forget(eventId);
  }

  #forget(eventId: string): void {
    this.#events.delete(eventId);
    this.#fanouts.delete(eventId);
  }

  /** Starts a claim scan; returns its id for {@linkcode DeliveryClaims.deletedDuring}. */
  beginScan(): number {
    const id = this.#nextScan++;
    this.#scans.set(id, this.#epoch);
    return id;
  }

  /** Whether the delivery was deleted since scan `id` began (its reads may predate that). */
  deletedDuring(id: number, eventId: string, webhookId: string): boolean {
    const at = this.#dropped.get(claimKey(eventId, webhookId));
    return at !== undefined && at > (this.#scans.get(id) ?? Infinity);
  }

  /** Ends scan `id`. */
  endScan(id: number): void {
    this.#scans.delete(id);
    if (!this.#scans.size) this.#dropped.clear();
  }
}
