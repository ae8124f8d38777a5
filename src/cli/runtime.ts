/**
 * The composition root: wires configuration, store, event bus, plugins,
 * gateway and the background services for one process.
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
import type { CliContext } from "./context.ts";

/** Everything a running gateway process holds. */
export interface Runtime {
  config: Config;
  store: Store;
  bus: EventBus;
  gateway: Gateway;
  audit: AuditLog;
  /** Stops background work and releases resources (not the store: the context owns it). */
  close(): Promise<void>;
}

/** Options of {@linkcode createRuntime}. */
export interface RuntimeOptions {
  /** Log sink. @default stderr */
  log?: (message: string) => void;
}

/** Builds and starts the gateway for this process. */
export async function createRuntime(
  context: CliContext,
  options: RuntimeOptions = {},
): Promise<Runtime> {
  const { log = (message: string) => context.io.stderr(`toolgate: ${message}\n`) } = options;
  const config = await context.config();
  const store = await context.store();
  const bus = new EventBus({
    disabled: config.events.disabled,
    onListenerError: (error) => log(`event subscriber failed: ${(error as Error).message}`),
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
  await gateway.start();
  return {
    config,
    store,
    bus,
    gateway,
    audit,
    close: async () => {
      await gateway.stop();
      await audit.close();
    },
  };
}
