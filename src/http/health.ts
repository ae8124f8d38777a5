/**
 * `GET /health`: serving state, version, uptime, plugin states and open
 * circuits. 200 while serving, 503 while draining. `GET /health/live`: 200
 * while the process runs. `GET /health/ready`: 200 when this instance can
 * serve calls and deliver, else 503 with the reasons. None needs a token.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Gateway } from "../gateway/mod.ts";
import { VERSION } from "../version.ts";
import { errorResponses } from "./errors.ts";
import type { ServerLifecycle } from "./lifecycle.ts";
import type { ToolgateApp } from "./types.ts";

/** Live state of an MCP upstream plugin's server. */
export const UpstreamStatusSchema = z.object({
  kind: z.literal("mcp"),
  transport: z.enum(["stdio", "http"]),
  source: z.enum(["config", "cli"]).openapi({
    description: "Declared in config.json or added with `toolgate plugins add`",
  }),
  connection: z.enum(["connecting", "connected", "reconnecting", "closed"]),
  pid: z.number().int().optional().openapi({ description: "Process id of a stdio upstream" }),
  restarts: z.number().int().min(0),
  server: z.object({ name: z.string(), version: z.string() }).optional(),
  last_error: z.string().optional(),
  last_error_at: z.string().optional(),
  next_attempt_at: z.string().optional(),
}).openapi("UpstreamStatus");

/** A plugin's state as shown by `/health`. */
export const PluginStatusSchema = z.object({
  name: z.string(),
  version: z.string(),
  state: z.enum(["initializing", "ready", "reconnecting", "not_configured", "error", "disabled"])
    .openapi({
      description: "`reconnecting`: an MCP upstream is down and being restarted with backoff",
    }),
  tool_count: z.number().int().min(0),
  zero_config: z.boolean(),
  error: z.string().optional(),
  error_code: z.string().optional(),
  last_error: z.string().optional().openapi({
    description: "Last connection error of an MCP upstream (kept after recovery)",
  }),
  upstream: UpstreamStatusSchema.optional(),
}).openapi("PluginStatus");

/** A tool whose circuit breaker is open, or one destination of a tool with a breaker per destination. */
export const OpenCircuitSchema = z.object({
  tool_name: z.string(),
  plugin: z.string(),
  destination: z.string().optional().openapi({
    description: "For a tool with one circuit breaker per destination (`http_request`): the " +
      "destination whose circuit is open, `<scheme>://<host>:<port>`; calls to other " +
      "destinations still run. Absent when the tool's own circuit is open",
    example: "https://api.example.com:443",
  }),
  closes_at: z.string().openapi({ description: "ISO 8601 UTC time the circuit closes" }),
}).openapi("OpenCircuit");

/** An outgoing webhook that receives no deliveries (its events go to the DLQ). */
export const DisabledWebhookSchema = z.object({
  id: z.string(),
  reason: z.enum(["manual", "gone", "failing"]).openapi({
    description: "`manual`: `webhooks disable`; `gone`: the receiver answered 410; " +
      "`failing`: its last events all went to the dead-letter queue",
  }),
  at: z.string().openapi({ description: "ISO 8601 UTC time it was disabled" }),
  detail: z.string().optional(),
}).openapi("DisabledWebhook");

/** A disabled outgoing webhook as `/health` shows it (no URL: `/health` needs no token). */
export type DisabledWebhookStatus = z.infer<typeof DisabledWebhookSchema>;

/** Why an instance that serves is degraded. */
export const HealthReasonSchema = z.object({
  component: z.enum(["store", "server", "plugins"]).openapi({ description: "What is degraded" }),
  code: z.string().openapi({
    description: "Stable code: `DELIVERY_BODY_MISSING` (pending deliveries had lost " +
      "their event's stored body and were moved to the dead-letter queue) or " +
      "`WEBHOOK_SECRET_UNREADABLE` (deliveries were dead-lettered because their webhook's " +
      "signing secret cannot be decrypted with this instance's key)",
  }),
  message: z.string(),
  count: z.number().int().min(0).optional(),
  since: z.string().openapi({ description: "ISO 8601 UTC time it was first seen" }),
}).openapi("HealthReason");

/** One reason of a degraded `/health`. */
export type HealthReason = z.infer<typeof HealthReasonSchema>;

/** Body of `GET /health`. */
export const HealthSchema = z.object({
  status: z.enum(["ok", "degraded", "draining"]).openapi({
    description: "`ok` while serving, `degraded` while serving with a problem that `reasons` " +
      "names (status 200), `draining` during shutdown (status 503)",
  }),
  reasons: z.array(HealthReasonSchema).optional().openapi({
    description: "Present when `status` is `degraded`",
  }),
  version: z.string().openapi({ example: VERSION }),
  uptime_ms: z.number().int().min(0),
  tool_count: z.number().int().min(0),
  mcp_sessions: z.number().int().min(0).openapi({ description: "Open MCP HTTP sessions" }),
  plugins: z.array(PluginStatusSchema),
  open_circuits: z.array(OpenCircuitSchema),
  disabled_webhooks: z.array(DisabledWebhookSchema).openapi({
    description: "Outgoing webhooks disabled by hand, by a 410 Gone or after repeated dead " +
      "letters; `toolgate webhooks enable <id>` brings one back",
  }),
}).openapi("Health");

/** What the health route reads. */
export interface HealthRouteOptions {
  gateway: Gateway;
  lifecycle: ServerLifecycle;
  /** Number of open MCP sessions. */
  mcpSessions: () => number;
  /** Disabled outgoing webhooks. @default none */
  disabledWebhooks?: () => readonly DisabledWebhookStatus[];
  /** Problems that make the instance degraded. @default none */
  reasons?: () => readonly HealthReason[];
  /** The store probe and the problems that make it not ready (a `Readiness`). @default ready while serving */
  readiness?: ReadinessCheck;
}

/** What the routes need of a `Readiness` (readiness.ts): its check. */
export interface ReadinessCheck {
  /** The reasons this instance cannot serve or deliver; empty when ready. */
  check(): Promise<HealthReason[]>;
}

/** Body of `GET /health/ready`. */
export const ReadySchema = z.object({
  status: z.enum(["ready", "not_ready"]),
  reasons: z.array(HealthReasonSchema).optional().openapi({
    description: "Why it is not ready: the store unreachable (`STORE_UNAVAILABLE`), webhook " +
      "secrets unreadable (`WEBHOOK_SECRET_UNREADABLE`), shutting down (`DRAINING`)",
  }),
}).openapi("Ready");

const liveRoute = createRoute({
  method: "get",
  path: "/health/live",
  operationId: "healthLive",
  tags: ["server"],
  summary: "Liveness: 200 while the process runs (no token needed)",
  security: [],
  responses: {
    200: {
      description: "The process runs",
      content: {
        "application/json": {
          schema: z.object({ status: z.literal("live"), uptime_ms: z.number().int().min(0) })
            .openapi("Live"),
        },
      },
    },
  },
});

const readyRoute = createRoute({
  method: "get",
  path: "/health/ready",
  operationId: "healthReady",
  tags: ["server"],
  summary: "Readiness: can this instance serve calls and deliver? (no token needed)",
  security: [],
  responses: {
    200: { description: "Ready", content: { "application/json": { schema: ReadySchema } } },
    503: {
      description: "Not ready (take it out of the load balancer); `reasons` says why",
      content: { "application/json": { schema: ReadySchema } },
    },
  },
});

/** A plugin in error, as a reason of a degraded `/health`. */
function pluginReasons(gateway: Gateway, since: string): HealthReason[] {
  return gateway.listPlugins().filter((plugin) => plugin.state === "error").map((plugin) => ({
    component: "plugins" as const,
    code: plugin.error_code ?? "PLUGIN_INIT_FAILED",
    message: `Plugin ${plugin.name} is in error: ${plugin.error ?? plugin.last_error ?? "unknown"}`,
    since,
  }));
}

const healthRoute = createRoute({
  method: "get",
  path: "/health",
  operationId: "health",
  tags: ["server"],
  summary: "Health check (no token needed)",
  security: [],
  responses: {
    200: { description: "Serving", content: { "application/json": { schema: HealthSchema } } },
    503: {
      description: "Shutting down (draining in-flight requests)",
      content: { "application/json": { schema: HealthSchema } },
    },
    ...errorResponses([403]),
  },
});

/** Registers `GET /health`. */
export function registerHealthRoute(app: ToolgateApp, options: HealthRouteOptions): void {
  const {
    gateway,
    lifecycle,
    mcpSessions,
    disabledWebhooks = () => [],
    reasons = () => [],
    readiness,
  } = options;
  const started = new Date(lifecycle.startedAt).toISOString();
  app.openapi(liveRoute, (c) =>
    c.json({
      status: "live" as const,
      uptime_ms: Math.max(0, Date.now() - lifecycle.startedAt),
    }, 200));
  app.openapi(readyRoute, async (c) => {
    const blocking = readiness ? await readiness.check() : [];
    if (lifecycle.draining) {
      blocking.push({
        component: "server",
        code: "DRAINING",
        message: "The server is shutting down",
        since: new Date().toISOString(),
      });
    }
    return blocking.length
      ? c.json({ status: "not_ready" as const, reasons: blocking }, 503)
      : c.json({ status: "ready" as const }, 200);
  });
  app.openapi(healthRoute, async (c) => {
    const draining = lifecycle.draining;
    const blocking = readiness ? await readiness.check() : [];
    // A blocker the readiness check names may also be among `reasons`: once.
    const problems = [...blocking];
    for (const reason of [...reasons(), ...pluginReasons(gateway, started)]) {
      if (!problems.some((p) => p.code === reason.code && p.component === reason.component)) {
        problems.push(reason);
      }
    }
    const body = {
      status: draining
        ? "draining" as const
        : problems.length
        ? "degraded" as const
        : "ok" as const,
      ...(problems.length ? { reasons: [...problems] } : {}),
      version: VERSION,
      uptime_ms: Math.max(0, Date.now() - lifecycle.startedAt),
      tool_count: gateway.listTools().length,
      mcp_sessions: mcpSessions(),
      plugins: gateway.listPlugins(),
      open_circuits: gateway.openCircuits(),
      disabled_webhooks: [...disabledWebhooks()],
    };
    return draining ? c.json(body, 503) : c.json(body, 200);
  });
}
