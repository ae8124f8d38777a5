/**
 * The composition root: wires configuration, store, event bus, audit log,
 * webhook dispatcher, plugins and gateway for one process.
 *
 * @module
 */
import { type AuditLog, createAuditLog } from "../audit/mod.ts";
import type { Config } from "../config/mod.ts";
import { EventBus } from "../events/mod.ts";
import { Gateway } from "../gateway/mod.ts";
import { createKeychain, secretReaderFor } from "../keychain/mod.ts";
import { builtinPlugins } from "../plugins/mod.ts";
import type { Store } from "../store/mod.ts";
import { createDispatcher, type Dispatcher } from "../webhooks/mod.ts";
import type { CliContext } from "./context.ts";

/** Everything a running gateway process holds. */
export interface Runtime {
  config: Config;
  store: Store;
  bus: EventBus;
  gateway: Gateway;
  audit: AuditLog;
  dispatcher: Dispatcher;
  /** Stops background work and releases resources (not the store: the context owns it). */
  close(): Promise<void>;
}

/** Options of {@linkcode createRuntime}. */
export interface RuntimeOptions {
  /** Log sink. @default stderr */
  log?: (message: string) => void;
  /**
   * `server`: this process delivers webhooks (resuming pending ones) and its
   * plugin events are delivered. `oneshot` (CLI commands): the events of its
   * tool calls are persisted for the server to deliver; nothing is sent from
   * this process. @default "oneshot"
   */
  role?: "server" | "oneshot";
}

/** Builds and starts the gateway for this process. */
export async function createRuntime(
  context: CliContext,
  options: RuntimeOptions = {},
): Promise<Runtime> {
  const {
    log = (message: string) => context.io.stderr(`toolgate: ${message}\n`),
    role = "oneshot",
  } = options;
  const config = await context.config();
  const store = await context.store();
  const bus = new EventBus({
    disabled: config.events.disabled,
    onListenerError: (error) => log(`event subscriber failed: ${(error as Error).message}`),
  });
  const dispatcher = createDispatcher({
    store,
    bus,
    config,
    mode: role === "server" ? "deliver" : "record",
    onError: (error) => log(`webhooks: ${(error as Error).message}`),
  });
  const audit = createAuditLog({ store, bus });
  const keychain = createKeychain({ store, dataDir: config.dataDir, env: config.env });
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: builtinPlugins(),
    audit,
    log,
    secrets: (plugin) => secretReaderFor(keychain, plugin),
  });
  // A server delivers its own plugin events; a one-shot command records only
  // the events of the calls it makes.
  if (role === "server") await dispatcher.start();
  await gateway.start();
  if (role === "oneshot") await dispatcher.start();
  return {
    config,
    store,
    bus,
    gateway,
    audit,
    dispatcher,
    close: async () => {
      await gateway.stop();
      await audit.close();
      await dispatcher.stop();
    },
  };
}
