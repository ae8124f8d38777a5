/**
 * An MCP server hosted as a plugin: its tools are offered as
 * `<plugin>__<tool>` with the upstream's description and JSON Schema, and
 * every call goes through the gateway's pipeline to `tools/call` upstream.
 *
 * @module
 */
import { defaultEgressPolicy, type EgressPolicy } from "../../egress/mod.ts";
import type {
  CatalogSource,
  PinSubject,
  PluginContext,
  PluginDefinition,
  ToolDefinition,
  UpstreamStatus,
} from "../../gateway/mod.ts";
import { argumentsSchema, createAjv } from "./_input_schema.ts";
import { GatewayError } from "../../errors/mod.ts";
import { Shaper } from "./_shape.ts";
import { carriesCredentials } from "./_values.ts";
import {
  type UpstreamCatalog,
  UpstreamConnection,
  type UpstreamTool,
} from "./upstream_connection.ts";
import { TOOL_NAME_SEPARATOR, type UpstreamSettings, type UpstreamSpec } from "./upstream_spec.ts";

/** An upstream's version before it first answers. */
export const UNKNOWN_VERSION = "unknown";

/** Options of {@linkcode mcpUpstreamPlugin}. */
export interface McpUpstreamPluginOptions {
  /** Connect timeout and restart backoff. */
  settings: UpstreamSettings;
  /** Reads a keychain entry by its full name (for `keychain:` references). @default none set */
  resolveSecret?: (name: string) => Promise<string | undefined>;
  /** The egress policy of HTTP upstreams (profile `operator`). @default one built from the config */
  egress?: EgressPolicy;
}

/** Extra time the upstream request gets beyond the gateway's tool timeout, in ms. */
const TIMEOUT_MARGIN_MS = 1000;

/**
 * The gateway's name of an upstream tool: `<plugin>__<tool>`, with
 * characters outside `A-Z a-z 0-9 _ . -` replaced by `_`.
 */
export function upstreamToolName(plugin: string, tool: string): string {
  return `${plugin}${TOOL_NAME_SEPARATOR}${tool.replace(/[^A-Za-z0-9_.-]/g, "_")}`;
}

/**
 * A plugin definition for one MCP upstream. Initializing it connects (within
 * `settings.connectTimeoutMs`) and registers the upstream's tools; disposing
 * it closes the connection and ends a stdio upstream's process.
 *
 * @example
 * ```ts
 * const plugin = mcpUpstreamPlugin(
 *   { name: "everything", source: "config", command: "npx",
 *     args: ["-y", "@modelcontextprotocol/server-everything"], env: {}, headers: {},
 *     enabled: true },
 *   { settings: { connectTimeoutMs: 15_000, restartInitialMs: 500, restartMaxMs: 30_000 } },
 * );
 * ```
 */
export function mcpUpstreamPlugin(
  spec: UpstreamSpec,
  options: McpUpstreamPluginOptions,
): PluginDefinition {
  const { settings, resolveSecret = () => Promise.resolve(undefined), egress } = options;
  let connection: UpstreamConnection | undefined;
  // Its tools pinning holds back, by exposed name, and how a call of one is refused.
  let held = new Map<string, GatewayError>();
  let unfollow: (() => void) | undefined;
  const transport = spec.command !== undefined ? "stdio" : "http";
  const initialStatus: UpstreamStatus = {
    kind: "mcp",
    transport,
    source: spec.source,
    connection: spec.enabled ? "connecting" : "closed",
    restarts: 0,
  };
  return {
    name: spec.name,
    // Until it answers: the gateway shows the upstream's own serverInfo.version once it does.
    version: UNKNOWN_VERSION,
    description: spec.command !== undefined
      ? `MCP server (stdio): ${spec.command}`
      : `MCP server (Streamable HTTP): ${new URL(spec.url!).host}`,
    zeroConfig: !carriesCredentials(spec.env, spec.headers),
    disabled: !spec.enabled,
    tools: [],
    async initialize(context: PluginContext) {
      const ajv = createAjv();
      const shaper = new Shaper(spec.name, spec.shape);
      const { pins } = context;
      // The upstream's latest list, checked against the pins (again when they change) in order.
      let offered: UpstreamTool[] = [];
      let publishing = Promise.resolve();
      const publish = (tools: UpstreamTool[], { pinsMoved = false } = {}) => {
        offered = tools;
        const run = async () => {
          const { definitions, subjects } = toolDefinitions(
            spec.name,
            shaper,
            offered,
            ajv,
            context,
            () => connection!,
          );
          const before = held;
          if (pins) held = await pins.admit(spec.name, subjects);
          // Pins moved but none of its tools came or went: its clients hear nothing.
          if (pinsMoved && sameKeys(before, held)) return;
          context.setTools(definitions.filter((definition) => !held.has(definition.name)));
        };
        publishing = publishing.then(run).catch((error) =>
          context.log(`tools not updated: ${(error as Error).message}`)
        );
        return publishing;
      };
      // Its prompts and resource templates likewise: those held back are not listed.
      let catalog: UpstreamCatalog | undefined;
      let catalogHeld = new Map<string, GatewayError>();
      const publishCatalog = (next: UpstreamCatalog, { pinsMoved = false } = {}) => {
        catalog = next;
        const run = async () => {
          const shown = catalog!;
          const before = catalogHeld;
          if (pins) catalogHeld = await pins.admit(spec.name, catalogSubjects(shaper, shown));
          if (pinsMoved && sameKeys(before, catalogHeld)) return;
          context.setCatalog(catalogSource(
            shaper,
            {
              ...shown,
              templates: shown.templates.filter((t) => !catalogHeld.has(String(t.uriTemplate))),
            },
            () => connection!,
            catalogHeld,
          ));
        };
        publishing = publishing.then(run).catch((error) =>
          context.log(`prompts and resources not updated: ${(error as Error).message}`)
        );
        return publishing;
      };
      unfollow = pins?.onChange(async () => {
        await publish(offered, { pinsMoved: true });
        if (catalog) await publishCatalog(catalog, { pinsMoved: true });
      });
      connection = new UpstreamConnection({
        spec,
        settings,
        resolveSecret,
        egress: egress ?? defaultEgressPolicy(context.config),
        log: context.log,
        onToolsChanged: (tools) => void publish(tools),
        onCatalogChanged: (next) => void publishCatalog(next),
        onResourceUpdated: (uri) => context.resourceUpdated(uri),
      });
      await publish(await connection.start());
    },
    async dispose() {
      unfollow?.();
      await connection?.close();
    },
    withheld: (name) => held.get(name),
    upstreamStatus: () => connection?.status() ?? { ...initialStatus },
    // Its names carry no prefix: until it is ready, any name may be one of its tools.
    ...(spec.shape?.prefix === false ? { mayOffer: () => true } : {}),
  };
}

/** The prompts and resource templates of `catalog` it exposes, as pinning sees them. */
function catalogSubjects(shaper: Shaper, catalog: UpstreamCatalog): PinSubject[] {
  return [
    ...catalog.prompts.filter((prompt) => shaper.exposes(String(prompt.name))).map((prompt) => ({
      kind: "prompt" as const,
      name: String(prompt.name),
      exposed: shaper.exposedName(String(prompt.name)),
      listing: prompt,
    })),
    ...catalog.templates.filter((template) => shaper.exposes(String(template.uriTemplate))).map((
      template,
    ) => ({
      kind: "resource_template" as const,
      name: String(template.uriTemplate),
      exposed: String(template.uriTemplate),
      listing: template,
    })),
  ];
}

function sameKeys(a: ReadonlyMap<string, unknown>, b: ReadonlyMap<string, unknown>): boolean {
  return a.size === b.size && [...a.keys()].every((key) => b.has(key));
}

function toolDefinitions(
  plugin: string,
  shaper: Shaper,
  tools: UpstreamTool[],
  ajv: ReturnType<typeof createAjv>,
  context: PluginContext,
  connection: () => UpstreamConnection,
): { definitions: ToolDefinition[]; subjects: PinSubject[] } {
  const out: ToolDefinition[] = [];
  const subjects: PinSubject[] = [];
  const seen = new Set<string>();
  for (const tool of tools) {
    if (!shaper.exposes(tool.name)) continue;
    const name = shaper.exposedName(tool.name);
    if (seen.has(name)) {
      context.log(`tool ${tool.name} skipped: its name ${name} is taken by another of its tools`);
      continue;
    }
    seen.add(name);
    subjects.push({
      kind: "tool",
      name: tool.name,
      exposed: name,
      listing: tool as unknown as Record<string, unknown>,
    });
    const inputJsonSchema = { ...tool.inputSchema } as Record<string, unknown>;
    const { name: _name, description: _description, inputSchema: _input, ...mcpListing } = tool as
      & UpstreamTool
      & Record<string, unknown>;
    out.push({
      name,
      mcpListing,
      description: tool.description ?? tool.title ?? `Tool ${tool.name} of MCP server ${plugin}`,
      input: argumentsSchema(
        ajv,
        inputJsonSchema,
        (message) => context.log(`tool ${tool.name}: ${message}`),
      ),
      inputJsonSchema,
      idempotent: tool.annotations?.idempotentHint === true,
      rawResult: true,
      execute(args, call) {
        const tools = call.config.tools;
        const timeoutMs = (tools.overrides[name]?.timeout_ms ?? tools.timeout_ms) +
          TIMEOUT_MARGIN_MS;
        return connection().callTool(tool.name, args, call.signal, timeoutMs, {
          progress: call.progress,
          logMessage: call.logMessage,
          ...call.input,
        });
      },
    });
  }
  return { definitions: out, subjects };
}

/**
 * An upstream's prompts (named `<plugin>__<prompt>` like its tools) and
 * resources (their URIs as they are) for the gateway's catalog.
 */
function catalogSource(
  shaper: Shaper,
  catalog: UpstreamCatalog,
  connection: () => UpstreamConnection,
  held: ReadonlyMap<string, GatewayError> = new Map(),
): CatalogSource {
  return {
    prompts: catalog.prompts.filter((prompt) => shaper.exposes(String(prompt.name))).map(
      (prompt) => {
        const own = String(prompt.name);
        const { name: _name, ...info } = prompt;
        const name = shaper.exposedName(own);
        const withheld = held.get(name);
        return {
          name,
          ownName: own,
          info,
          get: (args, signal, input) => connection().getPrompt(own, args, signal, input),
          ...(withheld ? { withheld } : {}),
        };
      },
    ),
    resources: catalog.resources.filter((resource) => shaper.exposes(String(resource.uri))),
    templates: catalog.templates.filter((template) => shaper.exposes(String(template.uriTemplate))),
    read: (uri, signal, input) => {
      if (!shaper.exposes(uri)) {
        return Promise.reject(
          new GatewayError("NOT_FOUND", `Resource ${uri} not found`, { details: { uri } }),
        );
      }
      return connection().readResource(uri, signal, input);
    },
    ...(catalog.subscribe
      ? {
        subscribe: (uri: string) => connection().subscribe(uri),
        unsubscribe: (uri: string) => connection().unsubscribe(uri),
      }
      : {}),
    // One that does not complete gets none asked: the gateway answers with no values.
    ...(catalog.completions
      ? {
        complete: (params, signal) =>
          connection().complete(params as unknown as Record<string, unknown>, signal),
      }
      : {}),
  };
}
