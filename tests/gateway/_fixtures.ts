/**
 * Test pieces for the gateway: an in-memory store, a recording bus and
 * plugins whose tools succeed, fail or hang on demand.
 *
 * @module
 */
import { z } from "zod";
import { type Config, loadConfig } from "../../src/config/mod.ts";
import { EventBus, type EventEnvelope } from "../../src/events/mod.ts";
import { Gateway, type GatewayOptions, type PluginDefinition } from "../../src/gateway/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { openStore, type Store } from "../../src/store/mod.ts";

/** A plugin that is never configured (`isConfigured` false), with one tool `t1`. */
export function unconfiguredPlugin(): PluginDefinition {
  return {
    name: "needs_token",
    version: "0.1.0",
    zeroConfig: false,
    isConfigured: () => false,
    tools: [{
      name: "t1",
      description: "x",
      input: z.object({}),
      execute: () => Promise.resolve({}),
    }],
  };
}

/** A plugin whose `initialize()` throws, with one tool `t2`. */
export function brokenPlugin(): PluginDefinition {
  return {
    name: "broken",
    version: "0.1.0",
    zeroConfig: true,
    initialize: () => {
      throw new Error("cannot start");
    },
    tools: [{
      name: "t2",
      description: "x",
      input: z.object({}),
      execute: () => Promise.resolve({}),
    }],
  };
}

/** Config for tests, with overrides merged into the file section. */
export async function testConfig(file: Record<string, unknown> = {}): Promise<Config> {
  const home = await Deno.makeTempDir({ prefix: "toolgate-gw-" });
  await Deno.writeTextFile(`${home}/config.json`, JSON.stringify(file));
  const config = await loadConfig({ env: { TOOLGATE_HOME: home } });
  await Deno.remove(home, { recursive: true });
  return config;
}

/** A switchable test plugin: `echo`, `flaky` (fails while `failing`), `slow`, `secretive`. */
export function testPlugin(state = { failing: false, calls: 0 }): PluginDefinition {
  return {
    name: "test",
    version: "1.2.3",
    zeroConfig: true,
    tools: [
      {
        name: "echo",
        description: "Echoes its message",
        input: z.object({ message: z.string(), count: z.number().int().optional() }),
        execute: (args) => Promise.resolve({ echoed: args.message }),
      },
      {
        name: "flaky",
        description: "Fails while the switch is on",
        input: z.object({}),
        idempotent: true,
        execute: () => {
          state.calls++;
          if (state.failing) {
            return Promise.reject(
              new GatewayError("PLUGIN_REQUEST_FAILED", "Upstream unreachable: connection refused"),
            );
          }
          return Promise.resolve({ ok: true });
        },
      },
      {
        name: "slow",
        description: "Never finishes before its timeout",
        input: z.object({}),
        timeoutMs: 30,
        execute: (_args, context) =>
          new Promise((_, reject) => {
            context.signal.addEventListener("abort", () => reject(context.signal.reason));
          }),
      },
      {
        name: "thrower",
        description: "Throws a plain error",
        input: z.object({}),
        execute: () => Promise.reject(new Error("boom")),
      },
      {
        name: "secretive",
        description: "Takes a token",
        input: z.object({ token: z.string(), user: z.string() }),
        execute: (args) => Promise.resolve({ user: args.user, api_key: "k-123" }),
      },
    ],
  };
}

/** A gateway on an in-memory store with a bus that records every event. */
export async function testGateway(
  options: Partial<GatewayOptions> & { file?: Record<string, unknown> } = {},
): Promise<
  { gateway: Gateway; events: EventEnvelope[]; store: Store; bus: EventBus } & AsyncDisposable
> {
  const config = options.config ?? await testConfig(options.file);
  const store = await openStore({ dataDir: config.dataDir, memory: true });
  const bus = options.bus ?? new EventBus();
  const events: EventEnvelope[] = [];
  bus.subscribe((event) => void events.push(event));
  const gateway = new Gateway({
    config,
    store,
    bus,
    plugins: options.plugins ?? [testPlugin()],
    audit: options.audit,
    secrets: options.secrets,
    ...(options.clock ? { clock: options.clock } : {}),
    servers: options.servers,
    log: () => {},
  });
  await gateway.start();
  return {
    gateway,
    events,
    store,
    bus,
    [Symbol.asyncDispose]: async () => {
      await gateway.stop();
      store.close();
    },
  };
}
