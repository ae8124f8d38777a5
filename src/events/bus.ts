/**
 * The in-process event bus: emitters publish envelopes, subscribers (webhook
 * dispatcher, `/events` stream, SDK tests) attach to it.
 *
 * @module
 */
import { newId } from "../ids.ts";
import { activeTraceparent } from "../tracing/mod.ts";
import type { EventData, EventEnvelope, EventType } from "./schemas.ts";

/** A subscriber; may return a promise that `emit` waits for (durable outbox). */
export type EventListener = (event: EventEnvelope<EventType>) => void | Promise<void>;

/** Options of {@linkcode EventBus}. */
export interface EventBusOptions {
  /** Event types switched off globally (`events.disabled`). @default [] */
  disabled?: readonly string[];
  /** Clock. @default Date.now */
  now?: () => number;
  /** Where listener errors are reported. @default console.error */
  onListenerError?: (error: unknown) => void;
}

/** Builds an envelope: `evt_` id, ISO-8601 UTC timestamp with milliseconds. */
export function createEnvelope<T extends EventType>(
  type: T,
  data: EventData<T>,
  now: number = Date.now(),
  traceparent: string | undefined = activeTraceparent(),
): EventEnvelope<T> {
  const envelope = {
    id: newId("evt"),
    type,
    timestamp: new Date(now).toISOString(),
    data,
  } as EventEnvelope<T>;
  if (traceparent !== undefined) traces.set(envelope, traceparent);
  return envelope;
}

/** The trace each envelope was created in, beside it (never in its serialized form). */
const traces = new WeakMap<object, string>();

/**
 * The trace an event was created in (the span of the call that caused it),
 * as a `traceparent` value: its deliveries' spans are that span's children.
 * `undefined` when tracing is off or the event came from elsewhere.
 */
export function envelopeTraceparent(envelope: EventEnvelope<EventType>): string | undefined {
  return traces.get(envelope);
}

/** An in-process publish/subscribe bus of event envelopes. */
export class EventBus {
  #listeners = new Set<EventListener>();
  #disabled: Set<string>;
  #now: () => number;
  #onListenerError: (error: unknown) => void;

  /** @param options Disabled types, clock and error reporting. */
  constructor(options: EventBusOptions = {}) {
    const {
      disabled = [],
      now = Date.now,
      onListenerError = (error) => console.error("event listener failed:", error),
    } = options;
    this.#disabled = new Set(disabled);
    this.#now = now;
    this.#onListenerError = onListenerError;
  }

  /** Whether events of `type` are emitted at all. */
  isEnabled(type: string): boolean {
    return !this.#disabled.has(type);
  }

  /**
   * Subscribes to every event.
   *
   * @returns A function that unsubscribes.
   */
  subscribe(listener: EventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Emits an event to all subscribers. Resolves once every subscriber's
   * returned promise settled (so durable subscribers have persisted it).
   * Never rejects: listener errors are reported, not thrown.
   *
   * @returns The envelope, or `undefined` when the type is disabled.
   */
  async emit<T extends EventType>(
    type: T,
    data: EventData<T>,
  ): Promise<EventEnvelope<T> | undefined> {
    if (this.#disabled.has(type)) return undefined;
    const envelope = createEnvelope(type, data, this.#now());
    await this.publish(envelope);
    return envelope;
  }

  /**
   * Emits an envelope built beforehand (with {@linkcode createEnvelope} and
   * this bus's {@linkcode EventBus.now}), e.g. one whose deliveries were
   * written in the same commit as an audit entry. Resolves like
   * {@linkcode EventBus.emit}; never rejects. A disabled type is dropped.
   */
  async publish(envelope: EventEnvelope<EventType>): Promise<void> {
    if (this.#disabled.has(envelope.type)) return;
    const pending: Promise<void>[] = [];
    for (const listener of this.#listeners) {
      try {
        const result = listener(envelope as EventEnvelope<EventType>);
        if (result) pending.push(result.catch(this.#onListenerError));
      } catch (error) {
        this.#onListenerError(error);
      }
    }
    if (pending.length) await Promise.all(pending);
  }

  /** The bus's clock, in ms since the epoch (for envelopes built beforehand). */
  now(): number {
    return this.#now();
  }
}
