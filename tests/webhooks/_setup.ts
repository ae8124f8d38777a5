/**
 * A temp data dir with a real KV file, an event bus and dispatchers, all
 * closed by `await using`.
 *
 * @module
 */
import { EgressPolicy } from "../../src/egress/mod.ts";
import { EventBus, type EventData, type EventType } from "../../src/events/mod.ts";
import { type KvStore, openKvStore } from "../../src/store/kv/kv_store.ts";
import {
  createDispatcher,
  type Dispatcher,
  type DispatcherConfig,
  type DispatcherOptions,
} from "../../src/webhooks/mod.ts";

/**
 * The test receivers listen on 127.0.0.1: deliveries to them need loopback
 * allowed explicitly (the default policy refuses it).
 */
export const LOOPBACK_EGRESS = new EgressPolicy({ allow: ["127.0.0.1/32"] });

/** Settings of {@linkcode setup}. */
export interface SetupOptions {
  retryBaseMs?: number;
  timeoutMs?: number;
  pollMs?: number;
  disabled?: EventType[];
}

/** A test environment. */
export interface Env extends AsyncDisposable {
  dir: string;
  store: KvStore;
  bus: EventBus;
  config: DispatcherConfig;
  /** Everything the dispatchers reported through `onError`. */
  errors: unknown[];
  /** A new dispatcher (stopped on dispose). */
  dispatcher(options?: Partial<DispatcherOptions>): Dispatcher;
  /** Opens another handle on the same KV file (like a second process), closed on dispose. */
  reopen(): Promise<KvStore>;
}

/** Builds a test environment. */
export async function setup(options: SetupOptions = {}): Promise<Env> {
  const { retryBaseMs = 20, timeoutMs = 1000, pollMs = 50, disabled = [] } = options;
  const dir = await Deno.makeTempDir({ prefix: "toolgate-webhooks-" });
  const store = await openKvStore({ dataDir: dir });
  const stores: KvStore[] = [store];
  const config: DispatcherConfig = {
    dataDir: dir,
    webhooks: { retry_base_ms: retryBaseMs, timeout_ms: timeoutMs, poll_ms: pollMs },
    events: { disabled },
  };
  const bus = new EventBus({ disabled, onListenerError: (error) => errors.push(error) });
  const errors: unknown[] = [];
  const dispatchers: Dispatcher[] = [];
  return {
    dir,
    store,
    bus,
    config,
    errors,
    dispatcher(extra = {}) {
      const dispatcher = createDispatcher({
        store,
        bus,
        config,
        onError: (error) => errors.push(error),
        egress: LOOPBACK_EGRESS,
        ...extra,
      });
      dispatchers.push(dispatcher);
      return dispatcher;
    },
    async reopen() {
      const other = await openKvStore({ dataDir: dir });
      stores.push(other);
      return other;
    },
    async [Symbol.asyncDispose]() {
      for (const dispatcher of dispatchers) await dispatcher.stop();
      for (const s of stores) s.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** `data` of a `tool.called` event. */
export function toolCalled(tool = "echo", output: Record<string, unknown> = {}): EventData<
  "tool.called"
> {
  return { tool_name: tool, plugin: "core", input: {}, output, latency_ms: 1, session_id: "s_1" };
}

/** `data` of a `circuit.opened` event. */
export function circuitOpened(tool = "echo"): EventData<"circuit.opened"> {
  return { tool_name: tool, plugin: "core", failure_count: 5, threshold: 5, reset_after_ms: 30000 };
}
