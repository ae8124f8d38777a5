/**
 * What an upstream defines — its tools, and its prompts, resources and
 * resource templates — as last listed, listed again when it says they changed.
 *
 * @module
 */
import type { Client } from "@modelcontextprotocol/client";
import { errorText } from "./_error_text.ts";
import type { Link } from "./_link.ts";
import type { UpstreamSettings } from "./upstream_spec.ts";

/** A tool as an upstream lists it (the fields the gateway uses). */
export interface UpstreamTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: { idempotentHint?: boolean };
}

/** An upstream's prompts, resources and resource templates, as it lists them. */
export interface UpstreamCatalog {
  prompts: Record<string, unknown>[];
  resources: Record<string, unknown>[];
  templates: Record<string, unknown>[];
  /** It answers `completion/complete`. */
  completions: boolean;
  /** It offers resource subscriptions (`resources.subscribe`). */
  subscribe: boolean;
}

/** Options of {@linkcode Definitions}. */
export interface DefinitionsOptions {
  /** The connection they are listed over. */
  link: Link;
  /** Its listing timeout (`connectTimeoutMs`). */
  settings: UpstreamSettings;
  /** Log sink. */
  log: (message: string) => void;
  /** Told about a changed tool list (after `list_changed`). */
  onToolsChanged: (tools: UpstreamTool[]) => void;
  /** Told about changed prompts or resources. */
  onCatalogChanged: (catalog: UpstreamCatalog) => void;
}

/** An upstream's tools and catalog as last listed. */
export class Definitions {
  #link: Link;
  #settings: UpstreamSettings;
  #log: (message: string) => void;
  #onToolsChanged: (tools: UpstreamTool[]) => void;
  #onCatalogChanged: (catalog: UpstreamCatalog) => void;
  #catalog: UpstreamCatalog = {
    prompts: [],
    resources: [],
    templates: [],
    completions: false,
    subscribe: false,
  };
  #catalogFingerprint = JSON.stringify(this.#catalog);
  #tools: UpstreamTool[] = [];
  /** Its tools with `x-mcp-header` arguments (the SDK's callTool sends those as headers). */
  #headerTools = new Set<string>();
  #fingerprint = "";

  /** @param options The connection, timing, log and change listeners. */
  constructor(options: DefinitionsOptions) {
    const { link, settings, log, onToolsChanged, onCatalogChanged } = options;
    this.#link = link;
    this.#settings = settings;
    this.#log = log;
    this.#onToolsChanged = onToolsChanged;
    this.#onCatalogChanged = onCatalogChanged;
  }

  /** The upstream's tools as last listed. */
  get tools(): UpstreamTool[] {
    return this.#tools;
  }

  /** The tools whose input schema declares `x-mcp-header` arguments. */
  get headerTools(): Set<string> {
    return this.#headerTools;
  }

  /** The prompts, resources and templates as last listed. */
  get catalog(): UpstreamCatalog {
    return this.#catalog;
  }

  /** Whether `tools` differ from the tools as last listed. */
  changed(tools: UpstreamTool[]): boolean {
    return toolsFingerprint(tools) !== this.#fingerprint;
  }

  /** Takes the tools a new connection listed. */
  adopt(tools: UpstreamTool[]): void {
    this.#tools = tools;
    this.#headerTools = headerTools(tools);
    this.#fingerprint = toolsFingerprint(tools);
  }

  /** Re-lists the tools after `notifications/tools/list_changed` (coalesced). */
  readonly refreshTools = coalesced(async () => {
    const live = this.#link.live;
    if (!live || this.#link.closed) return;
    try {
      const tools = await listAllTools(live.client, { timeout: this.#settings.connectTimeoutMs });
      const fingerprint = toolsFingerprint(tools);
      if (this.#link.live !== live || fingerprint === this.#fingerprint) return;
      this.#tools = tools;
      this.#headerTools = headerTools(tools);
      this.#fingerprint = fingerprint;
      this.#log(`tool list changed: ${tools.length} tools`);
      this.#onToolsChanged(tools);
    } catch (error) {
      this.#log(`listing tools after list_changed failed: ${errorText(error)}`);
    }
  });

  /**
   * Lists the upstream's prompts, resources and resource templates (those its
   * capabilities offer; every page) and tells the listener when they changed.
   * Coalesced; a failure is logged and keeps what was listed before.
   */
  readonly refreshCatalog = coalesced(async () => {
    const live = this.#link.live;
    if (!live || this.#link.closed) return;
    try {
      const catalog = await listCatalog(live.client, this.#settings.connectTimeoutMs);
      const fingerprint = JSON.stringify(catalog);
      if (this.#link.live !== live || fingerprint === this.#catalogFingerprint) return;
      this.#catalog = catalog;
      this.#catalogFingerprint = fingerprint;
      this.#onCatalogChanged(catalog);
    } catch (error) {
      this.#log(`listing prompts and resources failed: ${errorText(error)}`);
    }
  });
}

/** The names of the tools whose input schema declares `x-mcp-header` arguments. */
function headerTools(tools: UpstreamTool[]): Set<string> {
  return new Set(
    tools.filter((tool) => JSON.stringify(tool.inputSchema).includes('"x-mcp-header"'))
      .map((tool) => tool.name),
  );
}

/** A coalesced task: awaits it, with {@linkcode CoalescedTask.running} while it runs. */
export interface CoalescedTask {
  (): Promise<void>;
  /** The run in progress, if any. */
  readonly running: Promise<void> | undefined;
}

/**
 * Wraps `task` so that calls made while it runs share that run and make it
 * run once more after it (what changed meanwhile is seen), never twice at once.
 */
function coalesced(task: () => Promise<void>): CoalescedTask {
  let running: Promise<void> | undefined;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return await running;
    }
    running = (async () => {
      do {
        again = false;
        await task();
      } while (again);
    })();
    try {
      await running;
    } finally {
      running = undefined;
    }
  };
  return Object.defineProperty(run, "running", { get: () => running }) as CoalescedTask;
}

/** Lists an upstream's prompts, resources and templates, as far as its capabilities offer them. */
async function listCatalog(client: Client, timeout: number): Promise<UpstreamCatalog> {
  const capabilities = client.getServerCapabilities() ?? {};
  const options = { timeout, cacheMode: "refresh" as const };
  const [prompts, resources, templates] = await Promise.all([
    capabilities.prompts ? client.listPrompts(undefined, options) : { prompts: [] },
    capabilities.resources ? client.listResources(undefined, options) : { resources: [] },
    capabilities.resources
      ? client.listResourceTemplates(undefined, options).catch(() => ({ resourceTemplates: [] }))
      : { resourceTemplates: [] },
  ]);
  return {
    prompts: prompts.prompts as Record<string, unknown>[],
    resources: resources.resources as Record<string, unknown>[],
    templates: templates.resourceTemplates as Record<string, unknown>[],
    completions: capabilities.completions !== undefined,
    subscribe: capabilities.resources?.subscribe === true,
  };
}

/**
 * Lists every page of an upstream's tools (the client walks the pages, at
 * most `listMaxPages`), always from the upstream: never a cached list.
 */
export async function listAllTools(
  client: Client,
  options: { signal?: AbortSignal; timeout: number },
): Promise<UpstreamTool[]> {
  const result = await client.listTools(undefined, { ...options, cacheMode: "refresh" });
  return result.tools as UpstreamTool[];
}

function toolsFingerprint(tools: UpstreamTool[]): string {
  return JSON.stringify(tools.map((tool) => [tool.name, tool.description, tool.inputSchema]));
}
