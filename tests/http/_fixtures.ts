/**
 * Test pieces for the HTTP app: an app on a test gateway (no port), an
 * in-process `fetch` for the MCP SDK client, and a tool that waits until
 * released.
 *
 * @module
 */
import { z } from "zod";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type Config, loadConfig } from "../../src/config/mod.ts";
import type { EventEnvelope } from "../../src/events/mod.ts";
import type { Gateway, PluginDefinition } from "../../src/gateway/mod.ts";
import {
  type AppOptions,
  createApp,
  ServerLifecycle,
  type ToolgateApp,
} from "../../src/http/mod.ts";
import { mcpHttpOptions, McpHttpSessions, type McpHttpSessionsOptions } from "../../src/mcp/mod.ts";
import { type AuditLog, createAuditLog } from "../../src/audit/mod.ts";
import type { VirtualServers } from "../../src/gateway/mod.ts";
import { openStore, type Store } from "../../src/store/mod.ts";
import { testGateway, testPlugin } from "../gateway/_fixtures.ts";

/** Resolved config from a `config.json` object and environment variables. */
export async function httpConfig(
  file: Record<string, unknown> = {},
  env: Record<string, string> = {},
): Promise<Config> {
  const home = await Deno.makeTempDir({ prefix: "toolgate-http-" });
  try {
    await Deno.writeTextFile(`${home}/config.json`, JSON.stringify(file));
    return await loadConfig({ env: { TOOLGATE_HOME: home, ...env } });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

/** A tool that waits until the test releases it: `gate` (plugin `control`). */
export function gatePlugin(): PluginDefinition & { release(): void; entered: Promise<void> } {
  let release!: () => void;
  let entered!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  const enteredPromise = new Promise<void>((resolve) => entered = resolve);
  return {
    name: "control",
    version: "0.0.1",
    zeroConfig: true,
    tools: [{
      name: "gate",
      description: "Waits until released",
      input: z.object({}),
      execute: async () => {
        entered();
        await released;
        return { released: true };
      },
    }],
    release,
    entered: enteredPromise,
  };
}

/** Options of {@linkcode testApp}. */
export interface TestAppOptions
  extends Pick<AppOptions, "routes" | "isPublicPath" | "readiness" | "healthReasons"> {
  /** `config.json` content. */
  file?: Record<string, unknown>;
  /** Environment (e.g. `TOOLGATE_API_TOKEN`). */
  env?: Record<string, string>;
  /** Plugins. @default [testPlugin()] */
  plugins?: PluginDefinition[];
}

/** An app on a test gateway. */
export interface TestApp extends AsyncDisposable {
  app: ToolgateApp;
  gateway: Gateway;
  config: Config;
  events: EventEnvelope[];
  mcp: McpHttpSessions;
  lifecycle: ServerLifecycle;
  /** Unknown errors logged by the app. */
  logs: string[];
}

/** Builds the app on a gateway with test plugins; dispose closes everything. */
export async function testApp(options: TestAppOptions = {}): Promise<TestApp> {
  const config = await httpConfig(options.file, options.env);
  const t = await testGateway({ config, plugins: options.plugins ?? [testPlugin()] });
  const mcp = new McpHttpSessions(t.gateway, mcpHttpOptions(config.server));
  const lifecycle = new ServerLifecycle();
  const logs: string[] = [];
  const app = createApp({
    gateway: t.gateway,
    config,
    mcp,
    lifecycle,
    routes: options.routes,
    isPublicPath: options.isPublicPath,
    readiness: options.readiness,
    healthReasons: options.healthReasons,
    log: (message) => logs.push(message),
  });
  return {
    app,
    gateway: t.gateway,
    config,
    events: t.events,
    mcp,
    lifecycle,
    logs,
    [Symbol.asyncDispose]: async () => {
      await mcp.closeAll();
      await t[Symbol.asyncDispose]();
    },
  };
}

/** Options of {@linkcode storedApp}. */
export interface StoredAppOptions {
  /** The store of the app's API keys and audit log (closed on dispose). @default a new one in memory */
  store?: Store;
  /** The app's routes beside the core's, made with the store and audit log. @default none */
  routes?: (store: Store, audit: AuditLog) => NonNullable<AppOptions["routes"]>;
  /** The app's clock (API key expiry, OAuth). @default Date.now */
  now?: () => number;
  /** The gateway's clock (rate limits). @default performance.now */
  gatewayClock?: () => number;
  /** The virtual servers. @default those of the config */
  servers?: VirtualServers;
  /** Options of the MCP sessions beside the config's. */
  mcp?: Partial<McpHttpSessionsOptions>;
}

/** An app whose API keys and audit log live in a store (see {@linkcode storedApp}). */
export interface StoredApp extends AsyncDisposable {
  app: ToolgateApp;
  store: Store;
  audit: AuditLog;
  gateway: Gateway;
}

/**
 * Builds the app on a test gateway with its API keys and audit log in a
 * store of their own (the gateway's plugins have another): what the access,
 * rate limit, OAuth and virtual server tests share. Dispose closes everything.
 */
export async function storedApp(
  config: Config,
  options: StoredAppOptions = {},
): Promise<StoredApp> {
  const store = options.store ?? await openStore({ dataDir: config.dataDir, memory: true });
  const audit = createAuditLog({ store });
  const t = await testGateway({
    config,
    audit,
    ...(options.gatewayClock ? { clock: options.gatewayClock } : {}),
    ...(options.servers ? { servers: options.servers } : {}),
  });
  const mcp = new McpHttpSessions(t.gateway, { ...mcpHttpOptions(config.server), ...options.mcp });
  const app = createApp({
    gateway: t.gateway,
    config,
    mcp,
    keys: store.apiKeys,
    ...(options.now ? { now: options.now } : {}),
    routes: options.routes?.(store, audit) ?? [],
    log: () => {},
  });
  return {
    app,
    store,
    audit,
    gateway: t.gateway,
    async [Symbol.asyncDispose]() {
      await mcp.closeAll();
      await audit.close();
      await t[Symbol.asyncDispose]();
      await store.close();
    },
  };
}

/** `POST` JSON to the app. */
export function postJson(
  app: ToolgateApp,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return Promise.resolve(app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  }));
}

/**
 * A `fetch` that calls the app in process, honouring `init.signal` on the
 * response body the way a real fetch does (so the MCP client can close).
 */
export function inProcessFetch(
  app: ToolgateApp,
  headers: Record<string, string> = {},
): (url: string | URL, init?: RequestInit) => Promise<Response> {
  return async (url, init = {}) => {
    const merged = new Headers(init.headers);
    for (const [name, value] of Object.entries(headers)) merged.set(name, value);
    const response = await app.request(String(url), { ...init, headers: merged });
    const signal = init.signal;
    if (!signal || !response.body) return response;
    const reader = response.body.getReader();
    let outer!: ReadableStreamDefaultController<Uint8Array>;
    const onAbort = () => {
      reader.cancel(signal.reason).catch(() => {});
      try {
        outer.error(signal.reason);
      } catch {
        // Already closed.
      }
    };
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        outer = controller;
      },
      async pull(controller) {
        try {
          const chunk = await reader.read();
          if (signal.aborted) return;
          if (chunk.done) {
            signal.removeEventListener("abort", onAbort);
            controller.close();
          } else {
            controller.enqueue(chunk.value);
          }
        } catch (error) {
          signal.removeEventListener("abort", onAbort);
          if (!signal.aborted) controller.error(error);
        }
      },
      cancel(reason) {
        signal.removeEventListener("abort", onAbort);
        return reader.cancel(reason);
      },
    });
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** An MCP SDK client connected to the app's `/mcp` in process. */
export async function mcpClient(
  app: ToolgateApp,
  headers: Record<string, string> = {},
  path = "/mcp",
): Promise<{ client: Client; transport: StreamableHTTPClientTransport } & AsyncDisposable> {
  const transport = new StreamableHTTPClientTransport(new URL(`http://localhost${path}`), {
    fetch: inProcessFetch(app, headers),
  });
  const client = new Client({ name: "toolgate-test", version: "1.0.0" });
  await client.connect(transport);
  return {
    client,
    transport,
    [Symbol.asyncDispose]: () => client.close(),
  };
}

/** An `Authorization: Bearer` header. */
export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** The tool names `GET /tools` lists for a bearer token (which must answer 200). */
export async function restToolNames(app: ToolgateApp, token: string): Promise<string[]> {
  const response = await app.request("/tools", { headers: bearer(token) });
  if (response.status !== 200) {
    throw new Error(`GET /tools answered ${response.status}: ${await response.text()}`);
  }
  return ((await response.json()).tools as { name: string }[]).map((tool) => tool.name);
}
