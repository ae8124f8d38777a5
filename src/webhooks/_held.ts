/**
 * The window: the deliveries a sending process holds in memory (each claimed
 * in the store) and the events they use. Private to `src/webhooks`.
 *
 * @module
 */
import type { DeliveryRecord, FanoutRecord, OutboxEvent } from "../store/mod.ts";

/** What this process knows of an event's fan-out record (it alone rewrites it). */
export interface Fanout {
  record: Omit<FanoutRecord, "webhook_ids">;
  /** The webhook ids the stored record lists. */
  ids: Set<string>;
}

/** An event whose deliveries are held. */
export interface CachedEvent {
  event: OutboxEvent;
  /** Versionstamp of the stored event record, guarding its collection. */
  versionstamp: string;
  /** Deliveries in memory that use it. */
  refs: number;
  /** Its fan-out record, while one is stored. */
  fanout: Fanout | null;
}

/** A delivery held in memory. */
export interface Pending {
  key: string;
  record: DeliveryRecord;
  /** Versionstamp of the record's last write (of the fan-out record while `fanout`). */
  versionstamp: string;
  /** Stored as an entry of its event's fan-out record, not as a record of its own. */
  fanout: boolean;
  event: CachedEvent;
}

/** Where adopted deliveries wait for their attempts (the scheduler). */
export interface AttemptQueue {
  /** Starts these deliveries' attempts as slots allow. */
  enqueue(items: Pending[]): void;
  /** Starts the delivery's attempt at epoch milliseconds `at`. */
  add(at: number, pending: Pending): void;
}

/** The key a delivery is held by: its event and webhook. */
export function pendingKey(record: { event_id: string; webhook_id: string }): string {
  return `${record.event_id}/${record.webhook_id}`;
}

/** The deliveries held (by {@linkcode pendingKey}) and their events (by id). */
export class HeldDeliveries {
  #known = new Map<string, Pending>();
  #events = new Map<string, CachedEvent>();
  #windowSize: number;
  #scheduler: AttemptQueue;
  #now: () => number;

  /**
   * @param windowSize Most deliveries held at once.
   * @param scheduler Where an adopted delivery waits for its attempt.
   * @param now Clock in epoch milliseconds.
   */
  constructor(windowSize: number, scheduler: AttemptQueue, now: () => number) {
    this.#windowSize = windowSize;
    this.#scheduler = scheduler;
    this.#now = now;
  }

  /** Deliveries held (scheduled, running or being recorded). */
  get size(): number {
    return this.#known.size;
  }

  /** Most deliveries held at once. */
  get windowSize(): number {
    return this.#windowSize;
  }

  /** Room left in the window of deliveries held in memory. */
  get room(): number {
    return this.#windowSize - this.#known.size;
  }

  /** Whether the delivery of `key` is held. */
  has(key: string): boolean {
    return this.#known.has(key);
  }

  /** Lets go of the delivery of `key`. */
  delete(key: string): void {
    this.#known.delete(key);
  }

  /** The held event of `id`. */
  event(id: string): CachedEvent | undefined {
    return this.#events.get(id);
  }

  /** Whether an event of `id` is held. */
  hasEvent(id: string): boolean {
    return this.#events.has(id);
  }

  /** Holds `event` as the event of `id`. */
  setEvent(id: string, event: CachedEvent): void {
    this.#events.set(id, event);
  }

  /** Lets go of `event` once no held delivery uses it (unless another copy replaced it). */
  releaseEvent(id: string, event: CachedEvent): void {
    if (event.refs === 0 && this.#events.get(id) === event) this.#events.delete(id);
  }

  /** Lets go of everything (the dispatcher stopped). */
  clear(): void {
    this.#known.clear();
    this.#events.clear();
  }

  /** Holds a claimed delivery (unless it is already) and schedules its attempt. */
  adopt(record: DeliveryRecord, versionstamp: string, fanout: boolean, event: CachedEvent): void {
    const key = pendingKey(record);
    if (this.#known.has(key)) return;
    const pending: Pending = { key, record, versionstamp, fanout, event };
    event.refs++;
    this.#known.set(key, pending);
    if (record.next_attempt_at <= this.#now()) this.#scheduler.enqueue([pending]);
    else this.#scheduler.add(record.next_attempt_at, pending);
  }
}
