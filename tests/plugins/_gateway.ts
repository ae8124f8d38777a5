/**
 * Test pieces for the built-in plugins: a gateway on an in-memory store with
 * a recording bus, and config built from a `config.json`-shaped object.
 *
 * @module
 */
import { type Config, parseConfigFile } from "../../src/config/mod.ts";
import { EventBus, type EventEnvelope } from "../../src/events/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { Gateway, type PluginDefinition, type SecretReader } from "../../src/gateway/mod.ts";
import { openStore, type Store } from "../../src/store/mod.ts";
import { assert, assertEquals } from "../_asserts.ts";

/** A resolved config from `config.json` content (no file, no environment). */
export function pluginConfig(file: Record<string, unknown> = {}): Config {
  return { ...parseConfigFile(file), dataDir: "/nonexistent/toolgate-test", env: {} };
}

/** A secret reader over a fixed map (`bot_token` → value). */
export function fixedSecrets(values: Record<string, string>): SecretReader {
  return { get: (key) => Promise.resolve(values[key]) };
}

/** Options of {@linkcode pluginGateway}. */
export interface PluginGatewayOptions {
  /** `config.json` content. */
  file?: Record<string, unknown>;
  /** Secrets per plugin. */
  secrets?: Record<string, Record<string, string>>;
}

/** A started gateway hosting `plugins` on an in-memory store. */
export async function pluginGateway(
  plugins: PluginDefinition[],
  options: PluginGatewayOptions = {},
): Promise<
  { gateway: Gateway; events: EventEnvelope[]; store: Store; logs: string[] } & AsyncDisposable
> {
  const config = pluginConfig(options.file);
  const store = await openStore({ dataDir: config.dataDir, memory: true });
  const bus = new EventBus();
  const events: EventEnvelope[] = [];
  const logs: string[] = [];
  bus.subscribe((event) => void events.push(event));
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins,
    secrets: (plugin) => fixedSecrets(options.secrets?.[plugin] ?? {}),
    log: (message) => logs.push(message),
  });
  await gateway.start();
  return {
    gateway,
    events,
    store,
    logs,
    [Symbol.asyncDispose]: async () => {
      await gateway.stop();
      store.close();
    },
  };
}

/** Calls `fn`, expects a {@linkcode GatewayError} with `code`, and returns it. */
export async function expectCode(
  fn: () => Promise<unknown>,
  code: string,
): Promise<GatewayError> {
  try {
    await fn();
  } catch (error) {
    assert(error instanceof GatewayError, `expected a GatewayError, got ${error}`);
    assertEquals(error.code, code, error.message);
    return error;
  }
  throw new Error(`expected ${code}, but the call succeeded`);
}

/** A port on 127.0.0.1 with nothing listening. */
export function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}
