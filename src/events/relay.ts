/**
 * Relays this process's events to the other instances sharing its store
 * (where the store pushes changes: PostgreSQL), so `/events` on any instance
 * streams the events of all of them. Envelopes are sent in small batches off
 * the emitting path: a tool call never waits for the relay.
 *
 * @module
 */
import type { ChangeFeed } from "../store/mod.ts";
import type { EventBus } from "./bus.ts";

/** Options of {@linkcode relayEvents}. */
export interface RelayEventsOptions {
  /** How long a batch waits for more envelopes, in ms. @default 5 */
  lingerMs?: number;
  /** Most envelopes in one batch. @default 200 */
  maxBatch?: number;
  /** Most envelopes waiting; past it the oldest are dropped (reported). @default 10000 */
  maxQueued?: number;
  /** Where failures are reported. @default console.error */
  onError?: (error: unknown) => void;
}

/** A running relay. */
export interface EventRelay {
  /** Stops relaying and sends what is queued. */
  stop(): Promise<void>;
}

/**
 * Publishes every envelope of `bus` on `feed` (no-op where the feed pushes
 * nothing, as on Deno KV).
 *
 * @example
 * ```ts
 * const relay = relayEvents(bus, store.changes);
 * await relay.stop();
 * ```
 */
export function relayEvents(
  bus: EventBus,
  feed: ChangeFeed,
  options: RelayEventsOptions = {},
): EventRelay {
  const {
    lingerMs = 5,
    maxBatch = 200,
    maxQueued = 10_000,
    onError = (error) => console.error("event relay:", error),
  } = options;
  if (!feed.pushed) return { stop: () => Promise.resolve() };
  let queue: string[] = [];
  let dropped = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let sending: Promise<void> = Promise.resolve();

  const flush = () => {
    timer = undefined;
    const batch = queue;
    queue = [];
    if (dropped) {
      onError(
        new Error(`${dropped} event(s) not relayed to other instances: the relay fell behind`),
      );
      dropped = 0;
    }
    sending = sending.then(async () => {
      for (let i = 0; i < batch.length; i += maxBatch) {
        await feed.publishEvents(batch.slice(i, i + maxBatch)).catch(onError);
      }
    });
  };
  const unsubscribe = bus.subscribe((envelope) => {
    queue.push(JSON.stringify(envelope));
    if (queue.length > maxQueued) {
      queue.shift();
      dropped++;
    }
    timer ??= setTimeout(flush, lingerMs);
  });
  return {
    async stop() {
      unsubscribe();
      clearTimeout(timer);
      flush();
      await sending;
    },
  };
}
