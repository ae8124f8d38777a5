/**
 * Configuration: one zod schema, read once from `<data_dir>/config.json`
 * (optional) and environment overrides, into a frozen {@linkcode Config}.
 *
 * This is the only module that reads `Deno.env`.
 *
 * @module
 */
import { type BenchLayer, parseBenchLayers } from "./bench_layers.ts";
import { describeIssues } from "./_issues.ts";
import { MAX_NAMED } from "../errors/bounded.ts";
import { z } from "zod";
import { GatewayError } from "../errors/mod.ts";
import { parseDuration } from "../duration.ts";
// Not the folder's mod.ts: parsing the config needs only the entry check.
import { allowEntryProblem } from "../egress/allow_list.ts";
import { EventTypeSchema } from "../events/schemas.ts";
import { rateProblem } from "../rate_syntax.ts";
// The rules' shape only (zod): their CEL is compiled where they are used.
import { PolicyRulesSchema } from "../policies/rule.ts";

/** A rate limit: `"10/s"` (a bucket of one unit's worth), or `{rate, burst}`. */
const RateSchema = z.string().superRefine((rate, context) => {
  const problem = rateProblem(rate);
  if (problem) context.addIssue({ code: "custom", message: `${JSON.stringify(rate)}: ${problem}` });
});
const RateSettingSchema = z.union([
  RateSchema,
  z.strictObject({ rate: RateSchema, burst: z.number().int().min(1).optional() }),
]);

const ToolSettingsSchema = z.strictObject({
  timeout_ms: z.number().int().positive().optional(),
  retries: z.number().int().min(0).max(10).optional(),
  circuit_threshold: z.number().int().positive().optional(),
  circuit_reset_ms: z.number().int().positive().optional(),
  /** The tool's rate limit, all callers together (docs/access.md). */
  rate: RateSettingSchema.optional(),
});

export { BENCH_LAYERS, type BenchLayer, benchLayerOff } from "./bench_layers.ts";
export {
  MCP_UPSTREAM_FIELDS,
  UPSTREAM_NAME_PATTERN,
  VIRTUAL_SERVER_NAME_PATTERN,
} from "./upstream_fields.ts";
import {
  MCP_UPSTREAM_FIELDS,
  UPSTREAM_NAME_PATTERN,
  VIRTUAL_SERVER_NAME_PATTERN,
} from "./upstream_fields.ts";

/** An MCP server hosted as a plugin: a stdio `command` or a Streamable HTTP `url`. */
export const McpUpstreamSchema = z.strictObject({
  ...MCP_UPSTREAM_FIELDS,
  enabled: z.boolean().default(true),
}).superRefine((upstream, context) => {
  if ((upstream.command === undefined) === (upstream.url === undefined)) {
    context.addIssue({
      code: "custom",
      message: "expected exactly one of command (stdio) or url (Streamable HTTP)",
    });
  } else if (upstream.command !== undefined && Object.keys(upstream.headers).length) {
    context.addIssue({
      code: "custom",
      path: ["headers"],
      message: "headers are for a url (Streamable HTTP) upstream; a command takes env",
    });
  } else if (
    upstream.url !== undefined && (upstream.args.length || Object.keys(upstream.env).length)
  ) {
    context.addIssue({
      code: "custom",
      path: [upstream.args.length ? "args" : "env"],
      message: "args and env are for a command (stdio) upstream; a url takes headers",
    });
  }
});

/** A scope name as OAuth defines it (RFC 6749 §3.3: printable ASCII but space, `"` and `\\`). */
const SCOPE_PATTERN = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/;

/** A tool pattern of a scope rule, as `--tools` takes them (`memory_*`). */
const TOOL_PATTERN = /^[A-Za-z0-9_.*?-]{1,128}$/;

/** An absolute `http(s)` URL without a fragment, given as `field`. */
function oauthUrl(what: string) {
  return z.string().superRefine((value, context) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      context.addIssue({
        code: "custom",
        message: `expected an absolute https:// URL (${what}), got ${JSON.stringify(value)}`,
      });
      return;
    }
    if (!/^https?:$/.test(url.protocol) || url.hash || value.includes("#")) {
      context.addIssue({
        code: "custom",
        message: `expected an https:// (or http://) URL without a #fragment (${what}), got ${
          JSON.stringify(value)
        }`,
      });
    }
  });
}

/**
 * `auth.oauth`: toolgate as an OAuth 2.1 resource server (the MCP
 * authorization specification). JWT access tokens from `issuer`, for
 * `audience`, are validated against the issuer's JWKS and their scopes mapped
 * to tool patterns.
 */
export const OAuthConfigSchema = z.strictObject({
  /** The authorization server's issuer identifier; a token's `iss` must equal it. */
  issuer: oauthUrl("the authorization server's issuer identifier"),
  /** toolgate's own resource URL (`https://toolgate.example.com/mcp`); a token's `aud` must contain it. */
  audience: oauthUrl("toolgate's own resource URL, e.g. https://toolgate.example.com/mcp"),
  /** The issuer's JWKS; default: `jwks_uri` of its authorization server or OpenID metadata. */
  jwks_url: oauthUrl("the issuer's JSON Web Key Set").optional(),
  /** Scope → tool patterns a token with that scope may call (`{"tools:all": ["*"]}`). */
  scopes: z.record(
    z.string(),
    z.array(
      z.string().regex(TOOL_PATTERN, {
        message: "expected a tool name or pattern of A-Z a-z 0-9 _ . - with * and ?, e.g. memory_*",
      }),
    ),
  ).superRefine((scopes, context) => {
    for (const scope of Object.keys(scopes)) {
      if (!SCOPE_PATTERN.test(scope)) {
        context.addIssue({
          code: "custom",
          path: [scope],
          message: 'expected a scope name of printable ASCII without spaces, " or \\',
        });
      }
    }
  }).refine((scopes) => Object.keys(scopes).length > 0, {
    message: 'expected at least one scope rule, e.g. {"tools:read": ["memory_get"], ' +
      '"tools:all": ["*"]}: a token may call the tools of its scopes, and without rules none',
  }),
  /** Scopes every token must carry (403 insufficient_scope otherwise). */
  required_scopes: z.array(
    z.string().regex(SCOPE_PATTERN, {
      message: 'expected a scope name of printable ASCII without spaces, " or \\',
    }),
  ).default([]),
  /** Seconds of clock difference allowed on `exp`, `nbf` and `iat`. */
  clock_tolerance_s: z.number().int().min(0).max(3600).default(60),
});

/** The `auth.oauth` configuration. */
export type OAuthConfig = z.infer<typeof OAuthConfigSchema>;

/** Default of `webhooks.auto_disable_after`: events in a row dead-lettered before an endpoint is disabled. */
export const DEFAULT_AUTO_DISABLE_AFTER = 5;

/** Default of `webhooks.retry_after_max_ms`: the longest `Retry-After` honoured, 1 hour. */
export const DEFAULT_RETRY_AFTER_MAX_MS = 60 * 60 * 1000;

/**
 * `server.cors_origins`: each entry an origin (`scheme://host[:port]`, no
 * path), or `"*"` alone.
 */
function checkCorsOrigins(origins: string[], ctx: z.RefinementCtx): void {
  origins.forEach((origin, i) => {
    if (origin === "*") {
      if (origins.length > 1) {
        ctx.addIssue({
          code: "custom",
          path: [i],
          message: '"*" allows every origin: give it alone (["*"]), not with other origins',
        });
      }
      return;
    }
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin) {
      ctx.addIssue({
        code: "custom",
        path: [i],
        message: `${JSON.stringify(origin)} is not an origin: expected scheme://host[:port] ` +
          `with no path or trailing slash, e.g. "https://app.example.com", or "*" alone`,
      });
    }
  });
}

/** A duration as people type it (`1s`, `500ms`, `90d`), or a number of ms; parsed to ms. */
function durationMs(example: string) {
  return z.union([z.string(), z.number().int().min(0)]).transform((raw, context) => {
    if (typeof raw === "number") return raw;
    try {
      return parseDuration(raw);
    } catch {
      context.addIssue({
        code: "custom",
        message:
          `"${raw}" is not a duration: use a number and a unit (ms, s, m, h, d), e.g. "${example}"`,
      });
      return z.NEVER;
    }
  });
}

/** The audit log's verifiability: checkpoints, where they go, receipts, retention (docs/audit.md). */
const AuditConfigSchema = z.strictObject({
  /**
   * The log's name: the origin line of its checkpoints and its key's name.
   * @default toolgate/<deployment id>
   */
  origin: z.string().min(1).regex(/^[^\s+]+$/, {
    message: "use a name without spaces or +, e.g. toolgate.example.com/audit",
  }).refine((origin) => !/^\d+$/.test(origin), {
    message: "use a name, not a bare number, e.g. toolgate.example.com/audit",
  }).optional(),
  /** Shortest time between two checkpoints while entries arrive. */
  checkpoint_interval: durationMs("1s").default(1000),
  checkpoints: z.strictObject({
    /** The history file every new checkpoint is appended to. @default <data_dir>/checkpoints.log */
    file: z.string().min(1).optional(),
    /** Where each new checkpoint is POSTed (text/plain), through the egress policy. */
    sinks: z.array(z.strictObject({
      url: z.url({
        protocol: /^https?$/,
        error: "use an http:// or https:// URL, e.g. https://witness.example/add",
      }),
      headers: z.record(z.string(), z.string()).default({}),
    })).default([]),
  }).prefault({}),
  /** Return a signed receipt with each audited call (REST header, MCP `_meta`). */
  receipts: z.boolean().default(true),
  /** Prune old entries' bodies on a schedule (see `toolgate audit prune`). */
  retention: z.strictObject({
    /** Entries older than this lose their bodies. */
    max_age: durationMs("90d"),
    /** How often to prune. */
    every: durationMs("1h").default(3_600_000),
    /** Export pruned entries as JSON lines to a file in this directory first. */
    export_dir: z.string().min(1).optional(),
  }).optional(),
}).prefault({});

/** Schema of `config.json`. Unknown keys are rejected. */
export const ConfigFileSchema = z.strictObject({
  audit: AuditConfigSchema,
  /** Policy rules, first match decides (docs/policies.md); `toolgate policies add` adds more. */
  policies: PolicyRulesSchema.default([]),
  approvals: z.strictObject({
    /** Slack channel (id or #name) where calls held for someone's approval are posted, with buttons. */
    slack_channel: z.string().min(1).optional(),
  }).prefault({}),
  server: z.strictObject({
    host: z.string().min(1).default("127.0.0.1"),
    port: z.number().int().min(0).max(65535).default(7821),
    body_limit_bytes: z.number().int().positive().default(1024 * 1024),
    cors_origins: z.array(z.string()).superRefine(checkCorsOrigins).default([]),
    session_idle_ms: z.number().int().positive().default(30 * 60 * 1000),
    mcp_responses: z.enum(["json", "sse"]).default("json"),
  }).prefault({}),
  events: z.strictObject({
    disabled: z.array(EventTypeSchema).default([]),
  }).prefault({}),
  store: z.strictObject({
    /**
     * `postgres://…` to keep everything in PostgreSQL (several instances
     * share it); unset keeps the embedded Deno KV file of the data dir.
     */
    url: z.string().regex(/^postgres(ql)?:\/\/\S+$/, {
      message: "expected a postgres://user:password@host:port/database URL",
    }).optional(),
    /** Most connections each instance opens to PostgreSQL. */
    pool_max: z.number().int().min(1).max(1000).default(10),
    /** PostgreSQL cancels a statement that runs longer (ms). */
    statement_timeout_ms: z.number().int().positive().default(15_000),
    /** Longest wait for a new PostgreSQL connection (ms). */
    connect_timeout_ms: z.number().int().positive().default(5_000),
  }).prefault({}),
  webhooks: z.strictObject({
    retry_base_ms: z.number().int().positive().default(1000),
    timeout_ms: z.number().int().positive().default(10_000),
    poll_ms: z.number().int().positive().default(250),
    /** Disable an endpoint whose last N events all went to the DLQ (0: never). */
    auto_disable_after: z.number().int().min(0).default(DEFAULT_AUTO_DISABLE_AFTER),
    /** Upper bound on a receiver's `Retry-After` (429/503), in milliseconds. */
    retry_after_max_ms: z.number().int().positive().default(DEFAULT_RETRY_AFTER_MAX_MS),
  }).prefault({}),
  /** Where `http_request` and webhook deliveries may connect besides public addresses. */
  egress: z.strictObject({
    /** Hosts (`api.internal`, `*.corp.example`) and CIDRs (`10.1.0.0/16`, `127.0.0.1/32`). */
    allow: z.array(
      z.string().superRefine((entry, context) => {
        const problem = allowEntryProblem(entry);
        if (problem) context.addIssue({ code: "custom", message: `${problem}; fix or remove it` });
      }),
    ).default([]),
  }).prefault({}),
  /** Value patterns (regular expressions) redacted from audit entries and events, beside the built-in ones. */
  redact: z.strictObject({
    /** JavaScript regular expression sources, matched globally; the whole match is replaced. */
    patterns: z.array(
      z.string().min(1).superRefine((source, context) => {
        try {
          new RegExp(source, "g");
        } catch (error) {
          context.addIssue({
            code: "custom",
            message: `${JSON.stringify(source)} is not a valid regular expression (${
              (error as Error).message
            }): fix it or escape the special characters (\\. \\( \\[ …)`,
          });
        }
      }),
    ).default([]),
  }).prefault({}),
  incoming: z.strictObject({
    body_limit_bytes: z.number().int().positive().default(1024 * 1024),
    /** Handler calls of accepted payloads running at once. */
    concurrency: z.number().int().min(1).max(1024).default(16),
    /** Accepted payloads waiting for their handler, per endpoint; past it: 503 QUEUE_FULL. */
    max_pending_per_endpoint: z.number().int().min(1).default(10_000),
    /** Accepted payloads waiting for their handler, all endpoints together. */
    max_pending: z.number().int().min(1).default(100_000),
    /** Unit of the retry schedule of failed handler calls (1, 2, 4, 8, 16 × this, plus jitter). */
    retry_base_ms: z.number().int().positive().default(1000),
  }).prefault({}),
  /** Who may call, beside TOOLGATE_API_TOKEN and API keys (docs/access.md). */
  auth: z.strictObject({
    oauth: OAuthConfigSchema.optional(),
  }).prefault({}),
  /** Rate limits of callers (docs/access.md); tools' are `tools.overrides.<tool>.rate`. */
  limits: z.strictObject({
    /** The rate of each API key without its own `--rate`, and of each OAuth client. */
    per_caller: RateSettingSchema.optional(),
  }).prefault({}),
  /**
   * Virtual servers: named tool subsets, each served at `/mcp/<name>` and by
   * `mcp start --server <name>` (docs/access.md). A name also defined with
   * `toolgate servers create` is this one: config wins.
   */
  servers: z.record(
    z.string(),
    z.strictObject({
      tools: z.array(
        z.string().regex(TOOL_PATTERN, {
          message:
            "expected a tool name or pattern of A-Z a-z 0-9 _ . - with * and ?, e.g. memory_*",
        }),
      ).min(1, { message: 'expected one or more tool names or patterns, e.g. ["memory_*"]' }),
      description: z.string().max(1024).optional(),
    }),
  ).superRefine((servers, context) => {
    for (const name of Object.keys(servers)) {
      if (!VIRTUAL_SERVER_NAME_PATTERN.test(name)) {
        context.addIssue({
          code: "custom",
          path: [name],
          message: "expected a name matching ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ (it is a URL path)",
        });
      }
    }
  }).default({}),
  metrics: z.strictObject({
    /** Keep metrics and serve `GET /metrics`; `false`: neither (nothing observed). */
    enabled: z.boolean().default(true),
    /** Serve `GET /metrics` without the API token (for a scraper on a private network). */
    public: z.boolean().default(false),
  }).prefault({}),
  tools: z.strictObject({
    timeout_ms: z.number().int().positive().default(30_000),
    circuit_threshold: z.number().int().positive().default(5),
    circuit_reset_ms: z.number().int().positive().default(30_000),
    overrides: z.record(z.string(), ToolSettingsSchema).default({}),
  }).prefault({}),
  plugins: z.strictObject({
    disabled: z.array(z.string()).default([]),
    http: z.strictObject({
      allowed_hosts: z.array(z.string()).default([]),
      max_body_bytes: z.number().int().positive().default(256 * 1024),
    }).prefault({}),
    slack: z.strictObject({
      api_base_url: z.url().default("https://slack.com/api"),
    }).prefault({}),
    upstreams: z.record(z.string(), McpUpstreamSchema).superRefine((upstreams, context) => {
      // Checked here rather than as the record's key schema, whose failure names no rule.
      for (const name of Object.keys(upstreams)) {
        const problem = !UPSTREAM_NAME_PATTERN.test(name)
          ? "expected a name matching ^[a-z0-9][a-z0-9_-]{0,31}$"
          : name.includes("__")
          ? 'expected a name without "__" (it separates plugin and tool names)'
          : undefined;
        if (problem) context.addIssue({ code: "custom", path: [name], message: problem });
      }
    }).default({}),
    upstream_settings: z.strictObject({
      connect_timeout_ms: z.number().int().positive().default(15_000),
      restart_initial_ms: z.number().int().positive().default(500),
      restart_max_ms: z.number().int().positive().default(30_000),
      poll_ms: z.number().int().positive().default(500),
      /**
       * Pinning of upstream tools, prompts and resource templates: `tofu` pins
       * each at first sight and quarantines one that changes; `approve` also
       * holds a new one until approved; `off` pins nothing.
       */
      pinning: z.enum(["tofu", "approve", "off"]).default("tofu"),
    }).prefault({}),
  }).prefault({}),
});

/** The parsed configuration file. */
export type ConfigFile = z.infer<typeof ConfigFileSchema>;

/** The resolved configuration: file values, then environment overrides. */
export interface Config extends ConfigFile {
  /** Data directory (`TOOLGATE_HOME`, else `~/.toolgate`). */
  readonly dataDir: string;
  /** Bearer token guarding the HTTP API (`TOOLGATE_API_TOKEN`). */
  readonly apiToken?: string;
  /**
   * The key sealing secrets at rest, base64 of 32 bytes (`TOOLGATE_SECRET_KEY`),
   * in place of `<dataDir>/keychain.key`: instances sharing a database set the same.
   */
  readonly secretKey?: string;
  /** Environment variables, for secret overrides (`TOOLGATE_SECRET_*`). */
  readonly env: Readonly<Record<string, string>>;
  /** Per-call layers switched off for a benchmark (`TOOLGATE_BENCH_LAYERS_OFF`); empty to serve users. */
  readonly benchLayersOff?: readonly BenchLayer[];
}

/** Options of {@linkcode loadConfig}. */
export interface LoadConfigOptions {
  /** Environment to read. @default Deno.env.toObject() */
  env?: Record<string, string>;
  /** Skip reading `config.json` (tests). @default false */
  ignoreFile?: boolean;
}

/** Resolves the data directory from the environment. */
export function resolveDataDir(env: Record<string, string> = Deno.env.toObject()): string {
  if (env.TOOLGATE_HOME) return env.TOOLGATE_HOME;
  const home = env.HOME ?? env.USERPROFILE;
  if (!home) {
    throw new GatewayError(
      "CONFIG_INVALID",
      "Cannot find the data directory: set TOOLGATE_HOME or HOME",
    );
  }
  return `${home}/.toolgate`;
}

/** Reads the whole environment (the one place that touches `Deno.env`). */
export function readEnv(): Record<string, string> {
  return Deno.env.toObject();
}

function formatIssues(error: z.ZodError): string {
  return `${describeIssues(ConfigFileSchema, error.issues)} (see docs/configuration.md)`;
}

/** An integer variable, at least `min` (0: a non-negative one, 1: a positive one). */
function intEnv(env: Record<string, string>, name: string, min: 0 | 1): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) {
    throw new GatewayError(
      "CONFIG_INVALID",
      `Invalid ${name}: "${raw}" is not a ${min ? "positive" : "non-negative"} integer`,
    );
  }
  return value;
}

/**
 * Parses a configuration object (the content of `config.json`).
 *
 * @throws {GatewayError} `CONFIG_INVALID` naming every bad key path.
 */
export function parseConfigFile(raw: unknown, source = "config.json"): ConfigFile {
  const parsed = ConfigFileSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    throw new GatewayError(
      "CONFIG_INVALID",
      `Invalid ${source}: ${formatIssues(parsed.error)}`,
      {
        details: parsed.error.issues.slice(0, MAX_NAMED).map((i) => ({
          path: i.path.join("."),
          message: i.message.slice(0, 200),
        })),
      },
    );
  }
  return parsed.data;
}

/**
 * Loads the configuration once: `config.json` in the data dir (optional),
 * then environment overrides (`TOOLGATE_HOST`, `TOOLGATE_PORT`,
 * `TOOLGATE_API_TOKEN`, `TOOLGATE_RETRY_BASE_MS`, `TOOLGATE_INCOMING_RETRY_BASE_MS`,
 * `TOOLGATE_WEBHOOK_TIMEOUT_MS`,
 * `TOOLGATE_POLL_MS`, `TOOLGATE_SLACK_API_URL`, `TOOLGATE_DATABASE_URL`, `TOOLGATE_SECRET_KEY`,
 * `TOOLGATE_EGRESS_ALLOW`, appended to `egress.allow`).
 *
 * @throws {GatewayError} `CONFIG_INVALID` when the file or a variable is bad.
 */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<Config> {
  const env = options.env ?? readEnv();
  const dataDir = resolveDataDir(env);
  let raw: unknown = {};
  if (!options.ignoreFile) {
    // A file named by TOOLGATE_CONFIG must exist; the data dir's is optional.
    const named = env.TOOLGATE_CONFIG || undefined;
    const path = named ?? `${dataDir}/config.json`;
    try {
      const text = await Deno.readTextFile(path);
      try {
        raw = JSON.parse(text);
      } catch (error) {
        throw new GatewayError(
          "CONFIG_INVALID",
          `Invalid ${path}: not JSON (${(error as Error).message})`,
        );
      }
    } catch (error) {
      if (error instanceof Deno.errors.NotFound && named) {
        throw new GatewayError(
          "CONFIG_INVALID",
          `Cannot read TOOLGATE_CONFIG=${named}: no such file; unset it to use ${dataDir}/config.json`,
        );
      }
      if (!(error instanceof Deno.errors.NotFound)) {
        if (error instanceof GatewayError) throw error;
        throw new GatewayError(
          "CONFIG_INVALID",
          `Cannot read ${path}: ${(error as Error).message}`,
          { cause: error },
        );
      }
    }
  }
  const file = parseConfigFile(raw, env.TOOLGATE_CONFIG || "config.json");
  const port = intEnv(env, "TOOLGATE_PORT", 0);
  if (port !== undefined) {
    if (port > 65535) {
      throw new GatewayError("CONFIG_INVALID", `Invalid TOOLGATE_PORT: ${port} is over 65535`);
    }
    file.server.port = port;
  }
  if (env.TOOLGATE_HOST) file.server.host = env.TOOLGATE_HOST;
  const retryBase = intEnv(env, "TOOLGATE_RETRY_BASE_MS", 1);
  if (retryBase !== undefined) file.webhooks.retry_base_ms = retryBase;
  const incomingRetryBase = intEnv(env, "TOOLGATE_INCOMING_RETRY_BASE_MS", 1);
  if (incomingRetryBase !== undefined) file.incoming.retry_base_ms = incomingRetryBase;
  const timeout = intEnv(env, "TOOLGATE_WEBHOOK_TIMEOUT_MS", 1);
  if (timeout !== undefined) file.webhooks.timeout_ms = timeout;
  const poll = intEnv(env, "TOOLGATE_POLL_MS", 1);
  if (poll !== undefined) file.webhooks.poll_ms = poll;
  if (env.TOOLGATE_EGRESS_ALLOW) {
    const entries = env.TOOLGATE_EGRESS_ALLOW.split(",").map((entry) => entry.trim())
      .filter(Boolean);
    for (const entry of entries) {
      const problem = allowEntryProblem(entry);
      if (problem) {
        throw new GatewayError(
          "CONFIG_INVALID",
          `Invalid TOOLGATE_EGRESS_ALLOW: ${problem}; fix or remove it (a comma-separated list)`,
        );
      }
    }
    file.egress.allow = [...file.egress.allow, ...entries];
  }
  if (env.TOOLGATE_SLACK_API_URL) file.plugins.slack.api_base_url = env.TOOLGATE_SLACK_API_URL;
  if (env.TOOLGATE_DATABASE_URL) {
    if (!/^postgres(ql)?:\/\/\S+$/.test(env.TOOLGATE_DATABASE_URL)) {
      throw new GatewayError(
        "CONFIG_INVALID",
        "Invalid TOOLGATE_DATABASE_URL: expected a postgres://user:password@host:port/database URL",
      );
    }
    file.store.url = env.TOOLGATE_DATABASE_URL;
  }
  const secretKey = env.TOOLGATE_SECRET_KEY?.trim() || undefined;
  if (secretKey !== undefined && !isSecretKey(secretKey)) {
    throw new GatewayError(
      "CONFIG_INVALID",
      "Invalid TOOLGATE_SECRET_KEY: expected the base64 of 32 bytes (44 characters), e.g. from " +
        "`openssl rand -base64 32`, or `base64 -w0 <data_dir>/keychain.key` to keep the key " +
        "existing secrets were sealed with",
    );
  }
  const config: Config = {
    ...file,
    dataDir,
    apiToken: env.TOOLGATE_API_TOKEN || undefined,
    ...(secretKey ? { secretKey } : {}),
    env: Object.freeze({ ...env }),
    benchLayersOff: parseBenchLayers(env.TOOLGATE_BENCH_LAYERS_OFF),
  };
  return deepFreeze(config);
}

/** Whether `text` is the base64 of exactly 32 bytes. */
function isSecretKey(text: string): boolean {
  return /^[A-Za-z0-9+/]{43}=$/.test(text) && atob(text).length === 32;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) {
      deepFreeze((value as Record<string, unknown>)[key]);
    }
  }
  return value;
}
