/**
 * `toolgate mcp start`: runs the server on the stdio or HTTP transport.
 *
 * @module
 */
import { getLog, lineSink } from "../log/mod.ts";
import type { Command } from "commander";
import type { HttpServer } from "../http/mod.ts";
// Not mod.ts: that would load the Streamable HTTP transport too.
import { serveStdio } from "../mcp/stdio.ts";
import { VERSION } from "../version.ts";
import { createRedactor } from "../redact.ts";
import { benchLayerOff } from "../config/mod.ts";
import { type CliContext, usage } from "./context.ts";
import { parseServerName, requireServer } from "./servers.ts";
import type { Runtime } from "./runtime.ts";

interface StartOptions {
  transport: string;
  host?: string;
  port?: string;
  databaseUrl?: string;
  server?: string;
}

function parsePort(raw: string): number {
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port > 65535) {
    throw usage(`Invalid --port "${raw}": expected a number from 0 to 65535 (0 picks a free port)`);
  }
  return port;
}

/** Registers the `mcp` command group. */
export function registerMcp(program: Command, context: CliContext): void {
  const mcp = program.command("mcp").description("run the tool server");
  mcp.command("start")
    .description("start the server (stdio for MCP hosts; http for REST, MCP HTTP and webhooks)")
    .option("--transport <transport>", "stdio or http", "stdio")
    .option("--host <host>", "HTTP bind address (default 127.0.0.1)")
    .option("--port <port>", "HTTP port (default 7821; 0 picks a free port)")
    .option(
      "--database-url <url>",
      "keep state in this PostgreSQL database (postgres://…) instead of the data dir's KV file",
    )
    .option(
      "--server <name>",
      "stdio: serve only this virtual server's tools (toolgate servers list); " +
        "over HTTP each one is at /mcp/<name>",
    )
    .action(async (options: StartOptions) => {
      if (options.transport !== "stdio" && options.transport !== "http") {
        throw usage(`Invalid --transport "${options.transport}": expected stdio or http`);
      }
      if (options.transport === "stdio" && (options.host || options.port)) {
        throw usage("Invalid --host/--port: they apply only with --transport http");
      }
      if (options.transport === "http" && options.server !== undefined) {
        throw usage(
          `Invalid --server: it applies only with --transport stdio; over HTTP every virtual ` +
            `server is served at /mcp/<name> (here /mcp/${options.server})`,
        );
      }
      if (options.server !== undefined) parseServerName(options.server, "--server");
      if (options.host) context.io.env.TOOLGATE_HOST = options.host;
      if (options.port) context.io.env.TOOLGATE_PORT = String(parsePort(options.port));
      if (options.databaseUrl) {
        if (!/^postgres(ql)?:\/\/\S+$/.test(options.databaseUrl)) {
          throw usage(
            "Invalid --database-url: expected a postgres://user:password@host:port/database URL",
          );
        }
        context.io.env.TOOLGATE_DATABASE_URL = options.databaseUrl;
      }
      if (options.transport === "stdio") await startStdio(context, options.server);
      else await startHttp(context);
    });
}

/**
 * Serves MCP on stdin/stdout until stdin closes or a signal arrives. Loads
 * nothing of the HTTP transport (Hono, OpenAPI), so an MCP host gets its
 * `initialize` reply sooner.
 */
export async function startStdio(context: CliContext, server?: string): Promise<void> {
  // A bad configuration fails before any MCP traffic. The rest of start-up
  // (the store, plugins, the dispatcher) runs while the host's `initialize`
  // is answered: MCP hosts spawn a server per session and wait for that reply.
  const config = await context.config();
  // So does an unknown virtual server (exit 2); the store is opened for it.
  if (server !== undefined) await requireServer(await context.store(), config, server, "--server");
  if (context.io.stdinIsTty) {
    context.io.stderr(
      "toolgate: speaking MCP (JSON-RPC) on stdin/stdout for an MCP host such as Claude Desktop or Cursor; " +
        "to serve REST, MCP over HTTP and webhooks instead run: toolgate mcp start --transport http\n",
    );
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  Deno.addSignalListener("SIGTERM", onSignal);
  Deno.addSignalListener("SIGINT", onSignal);
  // The runtime (store, audit, webhooks, plugins) loads while `initialize` is answered.
  const starting = import("./runtime.ts").then(({ createRuntime }) =>
    createRuntime(context, { role: "server", transport: "stdio" })
  );
  let runtime: Runtime | undefined;
  try {
    const serving = serveStdio(starting.then((started) => started.gateway), {
      signal: stop.signal,
      ...(server === undefined ? {} : { server }),
    });
    try {
      runtime = await starting;
    } catch (error) {
      stop.abort(); // End the session, then report why it could not start.
      await serving;
      throw error;
    }
    const incoming = await runtime.store.webhooks.listIncoming();
    if (incoming.length) {
      context.warn(
        `${incoming.length} incoming webhook endpoint(s) are registered; they are served only with --transport http`,
      );
    }
    await runtime.gateway.announceStarted("stdio");
    await serving;
  } finally {
    Deno.removeSignalListener("SIGTERM", onSignal);
    Deno.removeSignalListener("SIGINT", onSignal);
    await runtime?.close();
  }
}

async function startHttp(context: CliContext): Promise<void> {
  // Loaded here, not at the top: the stdio transport never needs it.
  const {
    approvalRoutes,
    auditRoutes,
    consoleRoutes,
    dlqRoutes,
    eventsRoutes,
    incomingFailedRoutes,
    incomingRoutes,
    metricsRoutes,
    pinRoutes,
    policyRoutes,
    Readiness,
    resolveCaller,
    serveHttp,
    webhookRoutes,
  } = await import("../http/mod.ts");
  const { ToolgateMetrics } = await import("../metrics/mod.ts");
  const { OAuthValidator } = await import("../auth/oauth.ts");
  const { createRuntime } = await import("./runtime.ts");
  const { IncomingRouter } = await import("../webhooks/mod.ts");
  const { AuditProofs } = await import("../audit/mod.ts");
  const { ApiKeyPresence } = await import("../auth/api_keys.ts");
  // `metrics.enabled: false`: no observers, no /metrics (to measure their cost, or to save it).
  const settings = await context.config();
  const metrics = settings.metrics.enabled && !benchLayerOff(settings, "metrics")
    ? new ToolgateMetrics()
    : undefined;
  const observers: Partial<typeof ToolgateMetrics.prototype.observers> = metrics?.observers ?? {};
  // Whether any API key exists: read again when registrations move, not on every request.
  const keys: { presence?: InstanceType<typeof ApiKeyPresence> } = {};
  const runtime = await createRuntime(context, {
    role: "server",
    transport: "http",
    observers,
    onRegistrationsMoved: () => keys.presence?.refresh(),
  });
  const presence = keys.presence = new ApiKeyPresence(runtime.store.apiKeys);
  const log = lineSink(getLog("http"));
  // One OAuth validator (and key cache) for the API and ?wait=true on incoming endpoints.
  const oauth = runtime.config.auth.oauth &&
    new OAuthValidator(runtime.config.auth.oauth, { log });
  const incoming = new IncomingRouter({
    store: runtime.store,
    gateway: runtime.gateway,
    audit: runtime.audit,
    config: runtime.config,
    log: lineSink(getLog("incoming")),
    resolveCaller: (authorization) =>
      resolveCaller(authorization, {
        adminToken: runtime.config.apiToken,
        keys: runtime.store.apiKeys,
        oauth,
        log,
      }),
    concurrency: runtime.config.incoming.concurrency,
    loopMarker: runtime.egress.marker,
    onPayload: observers.onPayload,
  });
  const problemReasons = () =>
    runtime.dispatcher.problems().map((problem) => ({ component: "store" as const, ...problem }));
  const readiness = new Readiness({
    store: runtime.store,
    // A secret it cannot decrypt: this instance cannot deliver that webhook's events.
    blockers: () => problemReasons().filter((p) => p.code === "WEBHOOK_SECRET_UNREADABLE"),
  });
  metrics?.watch({
    gateway: runtime.gateway,
    dispatcher: runtime.dispatcher,
    readiness,
    incoming,
    deadLetters: () => runtime.store.deliveries.countDlq(),
  });
  let signals = 0;
  let server: HttpServer | undefined;
  const onSignal = () => {
    signals++;
    if (signals > 1) {
      getLog("server").warn("Second signal: exiting without draining");
      Deno.exit(130);
    }
    getLog("server").info("Shutting down (send the signal again to force)");
    void server?.shutdown();
  };
  Deno.addSignalListener("SIGTERM", onSignal);
  Deno.addSignalListener("SIGINT", onSignal);
  try {
    await incoming.start();
    server = serveHttp({
      gateway: runtime.gateway,
      config: runtime.config,
      routes: [
        auditRoutes(runtime.audit, {
          proofs: new AuditProofs(runtime.store),
          checkpointer: runtime.checkpointer,
        }),
        eventsRoutes(),
        ...(runtime.pins ? [pinRoutes(runtime.pins)] : []),
        policyRoutes(runtime.config, runtime.store, runtime.policies, runtime.reloadPolicies),
        approvalRoutes(
          runtime.approvals,
          createRedactor({ patterns: runtime.config.redact.patterns }),
        ),
        webhookRoutes(runtime.store, { egress: runtime.egress }),
        dlqRoutes(runtime.store),
        incomingFailedRoutes(runtime.store, () => incoming.wake()),
        ...(metrics ? [metricsRoutes(metrics)] : []),
        // Before the incoming routes, which answer every other path.
        consoleRoutes({
          store: runtime.store,
          audit: runtime.audit,
          egress: runtime.egress,
          wakeIncoming: () => incoming.wake(),
          pins: runtime.pins,
          approvals: runtime.approvals,
        }),
        incomingRoutes(incoming), // A catch-all: last.
      ],
      isPublicPath: (path) => incoming.match(path) !== undefined,
      log,
      disabledWebhooks: () => runtime.dispatcher.disabledWebhooks(),
      healthReasons: problemReasons,
      readiness,
      keys: runtime.store.apiKeys,
      keysExist: () => presence.exists(),
      oauth,
      onListen: ({ hostname, port, url }) => {
        // Never a destination of our own requests, whatever egress.allow says.
        runtime.egress.listen({ hostname, port });
        // Published first: once the line is out, CLI commands on this store find the server.
        void runtime.announceUrl(url).finally(() => {
          context.print(`toolgate ${VERSION} listening on ${url} (REST, MCP at ${url}/mcp)`);
          getLog("http").info(`Listening on ${url}`, { url, version: VERSION });
        });
      },
    });
    await runtime.gateway.announceStarted("http");
    await server.finished;
  } finally {
    Deno.removeSignalListener("SIGTERM", onSignal);
    Deno.removeSignalListener("SIGINT", onSignal);
    await incoming.stop();
    await runtime.close();
  }
}
