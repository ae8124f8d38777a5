/**
 * A real incoming router setup for tests: a KV store in a temp dir, the
 * event bus, the audit log and a started gateway with the given plugins;
 * routers made here are stopped, and everything closed, on dispose. Plus a
 * tool held at a gate until the test opens it.
 *
 * @module
 */
import { z } from "zod";
import { type AuditLog, createAuditLog } from "../../src/audit/mod.ts";
import type { Config } from "../../src/config/mod.ts";
import { EventBus } from "../../src/events/mod.ts";
import { Gateway, type PluginDefinition } from "../../src/gateway/mod.ts";
import type { IncomingWebhook } from "../../src/store/mod.ts";
import type { KvStore } from "../../src/store/kv/kv_store.ts";
import { IncomingRouter, type IncomingRouterOptions } from "../../src/webhooks/mod.ts";
import { tempStore } from "../audit/_store.ts";
import { testConfig } from "../gateway/_fixtures.ts";

/** Options of {@linkcode incomingEnv}. */
export interface IncomingEnvOptions {
  /** Plugins the gateway serves. */
  plugins: PluginDefinition[];
  /** `incoming.*` settings over the test defaults. */
  incoming?: Partial<Config["incoming"]>;
  /** `TOOLGATE_API_TOKEN`. @default none */
  apiToken?: string;
}

/** What {@linkcode incomingEnv} sets up. */
export interface IncomingEnv extends AsyncDisposable {
  store: KvStore;
  config: Config;
  audit: AuditLog;
  gateway: Gateway;
  /** A new router on this setup (concurrency 1, silent), stopped on dispose. */
  router(options?: Partial<IncomingRouterOptions>): IncomingRouter;
  /** POSTs a JSON body to an endpoint through `router`. */
  post(
    router: IncomingRouter,
    endpoint: IncomingWebhook,
    body: unknown,
    query?: string,
  ): Promise<Response>;
}

/** Builds the setup; `await using` disposes it. */
export async function incomingEnv(options: IncomingEnvOptions): Promise<IncomingEnv> {
  const temp = await tempStore();
  const { store } = temp;
  const base = await testConfig();
  const config: Config = {
    ...base,
    dataDir: temp.dataDir,
    incoming: { ...base.incoming, ...options.incoming },
    ...(options.apiToken ? { apiToken: options.apiToken } : {}),
  };
  const bus = new EventBus();
  const audit = createAuditLog({ store, bus });
  const gateway = new Gateway({
    config,
    store,
    bus,
    audit,
    log: () => {},
    plugins: options.plugins,
  });
  await gateway.start();
  const routers: IncomingRouter[] = [];
  return {
    store,
    config,
    audit,
    gateway,
    router(extra = {}) {
      const router = new IncomingRouter({
        store,
        gateway,
        audit,
        config,
        log: () => {},
        concurrency: 1,
        ...extra,
      });
      routers.push(router);
      return router;
    },
    post(router, endpoint, body, query = "") {
      return router.handle(
        new Request(`http://127.0.0.1${endpoint.path}${query}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
        endpoint,
      );
    },
    async [Symbol.asyncDispose]() {
      for (const router of routers) await router.stop();
      await gateway.stop();
      await audit.close();
      await temp[Symbol.asyncDispose]();
    },
  };
}

/** A plugin `gated` with a tool `name` that records each call's `n` once the gate opens. */
export function gatedTool(name: string): {
  plugin: PluginDefinition;
  /** The `n` of each finished call, in finishing order. */
  handled: number[];
  open(): void;
} {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => open = resolve);
  const handled: number[] = [];
  return {
    handled,
    open,
    plugin: {
      name: "gated",
      version: "1.0.0",
      zeroConfig: true,
      tools: [{
        name,
        description: "Records n once the gate opens",
        input: z.object({ n: z.number().int().optional() }),
        execute: async (args) => {
          await gate;
          handled.push((args.n as number | undefined) ?? -1);
          return {};
        },
      }],
    },
  };
}
