/**
 * What a sending process claims: the delivery lease (where the store does not
 * share work), due deliveries from the store into the window, page by page,
 * and the claims it gives back. Private to `src/webhooks`.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import { newId } from "../ids.ts";
import type { DeliveryRecord, Store, StoredDelivery } from "../store/mod.ts";
import type { DlqMirrorWriter } from "./_dlq_mirror_writer.ts";
import { type HeldDeliveries, type Pending, pendingKey } from "./_held.ts";
import type { Lifecycle } from "./_lifecycle.ts";
import type { Orphans } from "./_orphans.ts";
import type { AttemptScheduler } from "./_scheduler.ts";

/** Shortest life of the delivery lease and of claims without renewal (renewed every poll). */
const LEASE_MIN_TTL_MS = 5000;

/** Claims are made in pages of at least this many deliveries (or the window, if smaller). */
const MIN_CLAIM_PAGE = 64;

/** Deliveries given back to the store that a dispatcher remembers (about 100 bytes each). */
const MAX_EVICTED_KNOWN = 100_000;

/** Options of {@linkcode Claims}. */
export interface ClaimsOptions {
  store: Store;
  life: Lifecycle;
  held: HeldDeliveries;
  scheduler: AttemptScheduler;
  orphans: Orphans;
  mirror: DlqMirrorWriter;
  /** `webhooks.poll_ms`: the lease and claims live ten polls (at least 5 s). */
  pollMs: number;
  /** How far ahead deliveries are claimed and kept in memory, in ms. */
  horizonMs: number;
  /** Only records: claims nothing. */
  recordOnly: boolean;
  now: () => number;
  onError: (error: unknown) => void;
}

/** The lease and the claims of one dispatcher, under one owner id. */
export class Claims {
  #store: Store;
  #life: Lifecycle;
  #held: HeldDeliveries;
  #scheduler: AttemptScheduler;
  #orphans: Orphans;
  #mirror: DlqMirrorWriter;
  #now: () => number;
  #onError: (error: unknown) => void;
  #recordOnly: boolean;
  /** Holds the delivery lease: the one process per data directory that sends. */
  #leader = false;
  #owner = newId("dsp");
  #leaseTtlMs: number;
  #shared: boolean;
  /** The claim of more due deliveries in progress, if any. */
  #filling: Promise<void> | null = null;
  /** Whether another fill should follow the one in progress. */
  #fillAgain = false;
  /** When claims were last renewed (epoch ms). */
  #claimsRenewedAt = -Infinity;
  /** How far ahead deliveries are claimed and kept in memory, in ms. */
  #horizonMs: number;
  /** Deliveries given back to the store, by event id then webhook id (see #markEvicted). */
  #evicted = new Map<string, Set<string>>();
  #evictedCount = 0;
  /** Claims of evicted deliveries, given back together. */
  #releasing: { event_id: string; webhook_id: string }[] = [];
  /** Whether the last claim found fewer due deliveries than it asked for (polls claim anyway). */
  #drained = false;

  constructor(options: ClaimsOptions) {
    this.#store = options.store;
    this.#life = options.life;
    this.#held = options.held;
    this.#scheduler = options.scheduler;
    this.#orphans = options.orphans;
    this.#mirror = options.mirror;
    this.#now = options.now;
    this.#onError = options.onError;
    this.#recordOnly = options.recordOnly;
    this.#shared = options.store.deliveries.sharedClaims;
    this.#leaseTtlMs = Math.max(LEASE_MIN_TTL_MS, options.pollMs * 10);
    this.#horizonMs = options.horizonMs;
  }

  /** Whether every instance claims rows (PostgreSQL) rather than the lease holder alone. */
  get shared(): boolean {
    return this.#shared;
  }

  /** Whether this process holds the delivery lease. */
  get leader(): boolean {
    return this.#leader;
  }

  /**
   * Whether this process sends: deliver mode, and either a store that shares
   * work by claims or the delivery lease held.
   */
  get sending(): boolean {
    return !this.#recordOnly && (this.#shared || this.#leader);
  }

  /** Whether the last claim came back short (nothing more was due in the store). */
  get drained(): boolean {
    return this.#drained;
  }

  /** The claim of more due deliveries in progress, if any. */
  get filling(): Promise<void> | null {
    return this.#filling;
  }

  /** How far ahead deliveries are claimed and kept in memory, in ms. */
  get horizonMs(): number {
    return this.#horizonMs;
  }

  /** Deliveries may wait in the store: the next fill claims even if the last came back short. */
  undrain(): void {
    this.#drained = false;
  }

  /** The claim this process makes now, for `claimDue` and new events' fan-outs. */
  claim(): { owner: string; until: number } {
    return { owner: this.#owner, until: this.#now() + this.#leaseTtlMs };
  }

  /** Takes or renews the delivery lease; false while another live server holds it. */
  claimLease(): Promise<boolean> {
    return this.#store.leases.claimDelivery({ owner: this.#owner, ttlMs: this.#leaseTtlMs });
  }

  /** Records whether this process holds the lease (as `claimLease()` answered at start). */
  lead(leader: boolean): void {
    this.#leader = leader;
  }

  async renewLease(): Promise<void> {
    const leader = await this.claimLease();
    if (leader && !this.#leader) {
      // Took over from a server that stopped: its deliveries are claimed from the store.
      this.#leader = true;
      this.#life.background(this.#mirror.sync());
    } else if (!leader && this.#leader) {
      // Another server took the lease (this one stalled past its expiry): new
      // events are only recorded from now on; deliveries in hand finish here.
      this.#leader = false;
      this.#onError(
        new GatewayError("UNAVAILABLE", "Lost the webhook delivery lease to another server"),
      );
    }
  }

  /** Gives the lease up (the dispatcher stops). */
  releaseLease(): Promise<void> {
    return this.#store.leases.releaseDelivery(this.#owner);
  }

  /** Claims last leaseTtlMs: renewed a few times per life, not on every poll. */
  claimsStale(now: number): boolean {
    return now - this.#claimsRenewedAt >= this.#leaseTtlMs / 4;
  }

  /** Renews every claim held; call {@linkcode Claims.renewed} once it succeeded. */
  renewClaims(now: number): Promise<number> {
    return this.#store.deliveries.renewClaims(this.#owner, now + this.#leaseTtlMs);
  }

  /** The claims were renewed at `now`. */
  renewed(now: number): void {
    this.#claimsRenewedAt = now;
  }

  /** Gives every claim back (the dispatcher stops), reporting a failure. */
  releaseAll(): Promise<void> {
    return this.#store.deliveries.releaseClaims(this.#owner).catch((error) => this.#onError(error));
  }

  /**
   * Claims due deliveries from the store while the window has room: one page
   * per call, earliest due first (at start, on each poll, and as finished
   * deliveries make room). Calls made meanwhile share it and run once more.
   */
  fill(): Promise<void> {
    if (this.#filling) {
      this.#fillAgain = true;
      return this.#filling;
    }
    const run: Promise<void> = this.#claimPage().finally(() => {
      this.#filling = null;
      this.#life.checkIdle();
      if (this.#fillAgain && this.#life.running) {
        this.#fillAgain = false;
        this.#life.background(this.fill());
      }
    });
    this.#filling = run;
    return run;
  }

  /** Claims the next page once half the window is free, unless the store ran dry (the poll looks again). */
  fillIfRoom(): void {
    if (!this.#drained && this.#held.room * 2 >= this.#held.windowSize) {
      this.#life.background(this.fill());
    }
  }

  async #claimPage(): Promise<void> {
    if (!this.sending || !this.#life.running) return;
    const held = this.#held;
    const room = held.room;
    if (room < Math.min(MIN_CLAIM_PAGE, held.windowSize)) return;
    const now = this.#now();
    const claimed = await this.#store.deliveries.claimDue({
      ...this.claim(),
      now,
      dueBefore: now + this.#horizonMs,
      limit: room,
      excludeWebhooks: this.#scheduler.saturated(),
    });
    this.#drained = claimed.length < room;
    const byEvent = new Map<string, StoredDelivery[]>();
    for (const stored of claimed) {
      if (!stored.fanout) this.#unmarkEvicted(stored.record);
      if (held.has(pendingKey(stored.record))) continue;
      const group = byEvent.get(stored.record.event_id);
      if (group) group.push(stored);
      else byEvent.set(stored.record.event_id, [stored]);
    }
    for (const [eventId, group] of byEvent) {
      if (!this.#life.running) return;
      let cached = held.event(eventId);
      if (!cached) {
        const loaded = await this.#store.deliveries.readEvent(eventId);
        if (!loaded) {
          await this.#orphans.deadLetter(eventId, group);
          continue;
        }
        cached = held.event(eventId) ??
          { event: loaded.event, versionstamp: loaded.versionstamp, refs: 0, fanout: null };
        held.setEvent(eventId, cached);
      }
      // A fan-out record is claimed whole: these are all its entries still owed.
      for (const stored of group) {
        if (!stored.fanout) continue;
        const { record } = stored;
        cached.fanout ??= {
          record: {
            event_type: record.event_type,
            created_at: record.created_at,
            next_attempt_at: record.next_attempt_at,
          },
          ids: new Set(),
        };
        cached.fanout.ids.add(record.webhook_id);
      }
      // All deliveries of one event are adopted together, so its reference
      // count covers every one listed before any of them can finish.
      for (const stored of group) {
        if (held.has(pendingKey(stored.record))) continue;
        held.adopt(stored.record, stored.versionstamp, stored.fanout, cached);
      }
    }
  }

  /** Whether a delivery of event `eventId` was given back to the store (and not claimed since). */
  isEvicted(eventId: string): boolean {
    return this.#evicted.has(eventId);
  }

  /**
   * Remembers a delivery given back to the store (while this process alone
   * sends the store's deliveries, and up to {@linkcode MAX_EVICTED_KNOWN}):
   * its event is not worth collecting before it is claimed again.
   */
  #markEvicted(record: DeliveryRecord): void {
    if (this.#store.deliveries.sharedClaims || this.#evictedCount >= MAX_EVICTED_KNOWN) return;
    let hooks = this.#evicted.get(record.event_id);
    if (!hooks) this.#evicted.set(record.event_id, hooks = new Set());
    if (hooks.has(record.webhook_id)) return;
    hooks.add(record.webhook_id);
    this.#evictedCount++;
  }

  /** A delivery claimed from the store is no longer one given back. */
  #unmarkEvicted(record: DeliveryRecord): void {
    const hooks = this.#evicted.get(record.event_id);
    if (!hooks?.delete(record.webhook_id)) return;
    this.#evictedCount--;
    if (!hooks.size) this.#evicted.delete(record.event_id);
  }

  /** Drops a delivery (stored, not due soon) from memory and gives its claim back. */
  evict(pending: Pending): void {
    const { record, event } = pending;
    this.#held.delete(pending.key);
    this.#markEvicted(record);
    event.refs--;
    this.#held.releaseEvent(record.event_id, event);
    this.#releasing.push({ event_id: record.event_id, webhook_id: record.webhook_id });
    if (this.#releasing.length === 1) {
      this.#life.background(
        Promise.resolve().then(() => {
          const keys = this.#releasing;
          this.#releasing = [];
          return this.#store.deliveries.releaseClaims(this.#owner, keys);
        }),
      );
    }
    if (this.#held.room * 2 >= this.#held.windowSize) this.#life.background(this.fill());
    this.#life.checkIdle();
  }
}
