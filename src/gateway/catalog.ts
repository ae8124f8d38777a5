/**
 * The prompts and resources plugins offer beside their tools (MCP upstreams
 * proxied by the gateway): listed together, got and read through the plugin
 * that owns them, and every `prompts/get` and `resources/read` recorded in
 * the audit log as an entry of its own kind (`prompt.get`, `resource.read`);
 * resources watched for updates on behalf of the clients that subscribe.
 *
 * @module
 */
import { type TraceCarrier, traced } from "../tracing/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { newId } from "../ids.ts";
import { redact as builtinRedact, type Redactor } from "../redact.ts";
import { auditCaller, type Caller } from "./caller.ts";
import type { AuditSink, CallerInput } from "./types.ts";

// What plugins offer beside their tools is declared with the other plugin types.
export type { CatalogSource, CompleteParams, PromptEntry } from "./types.ts";
import type { CatalogSource, CompleteParams, PromptEntry } from "./types.ts";

/** What {@linkcode Catalog} records calls with. */
export interface CatalogRequestOptions {
  /** The caller's session (audit). @default a new `ses_…` id */
  sessionId?: string;
  /** Aborted when the caller goes away. */
  signal?: AbortSignal;
  /** Entry point name recorded in the audit log. @default "api" */
  source?: string;
  /** How to ask the caller for input the plugin needs; waiting for it does not count toward the timeout. */
  input?: CallerInput;
  /** Who is asking, recorded in the audit entry as `caller`. @default none recorded */
  caller?: Caller;
  /** The trace the request continues (an MCP request's `_meta`). @default the active span */
  trace?: TraceCarrier | string;
  /**
   * Whether the caller sees a plugin's prompts and resources: others are
   * `NOT_FOUND`, not recorded. @default every plugin
   */
  visible?: (plugin: string) => boolean;
}

/** Options of {@linkcode Catalog}. */
export interface CatalogOptions {
  /** Where `prompt.get` and `resource.read` entries go. @default none */
  audit?: AuditSink;
  /** Longest wait for an upstream's answer, in ms. */
  timeoutMs: number;
  /** Clock for latencies. @default performance.now */
  now?: () => number;
  /** Redacts the inputs recorded in the audit log. @default the built-in rules */
  redact?: Redactor;
}

interface Registered extends CatalogSource {
  plugin: string;
  /** The upstream's own name of each prompt, by gateway name. */
  promptsByName: Map<string, PromptEntry>;
  /** Template patterns, compiled. */
  patterns: RegExp[];
}

/** Which lists changed. */
export type CatalogChange = "prompts" | "resources";

/** The clients watching one resource, and the plugin asked for its updates. */
interface Watched {
  plugin: string;
  listeners: Set<() => void>;
  /** The plugin's subscription, once asked for. */
  subscribed: Promise<void>;
}

/** The prompts and resources of every plugin. */
export class Catalog {
  #sources = new Map<string, Registered>();
  #watched = new Map<string, Watched>();
  #listeners = new Set<(change: CatalogChange) => void>();
  #audit: AuditSink | undefined;
  #timeoutMs: number;
  #now: () => number;
  #redact: Redactor;

  /** @param options Audit sink, upstream timeout, clock and redactor. */
  constructor(options: CatalogOptions) {
    const { audit, timeoutMs, now = () => performance.now(), redact = builtinRedact } = options;
    if (!(timeoutMs > 0)) throw new RangeError(`Invalid timeoutMs: ${timeoutMs} is not positive`);
    this.#audit = audit;
    this.#timeoutMs = timeoutMs;
    this.#now = now;
    this.#redact = redact;
  }

  /** Replaces what `plugin` offers (`undefined`: nothing) and tells the listeners what changed. */
  set(plugin: string, source: CatalogSource | undefined): void {
    const before = this.#sources.get(plugin);
    if (source) {
      this.#sources.set(plugin, {
        ...source,
        plugin,
        promptsByName: new Map(source.prompts.map((prompt) => [prompt.name, prompt])),
        patterns: source.templates.map((template) =>
          templatePattern(String(template.uriTemplate ?? ""))
        ),
      });
    } else {
      this.#sources.delete(plugin);
    }
    const had = (of: Registered | undefined, what: CatalogChange) =>
      what === "prompts"
        ? JSON.stringify(of?.prompts.map((p) => [p.name, p.info]) ?? [])
        : JSON.stringify([of?.resources ?? [], of?.templates ?? []]);
    const after = this.#sources.get(plugin);
    for (const change of ["prompts", "resources"] as const) {
      if (had(before, change) !== had(after, change)) {
        for (const listener of this.#listeners) listener(change);
      }
    }
  }

  /** Calls `listener` when the prompts or the resources change; returns the unsubscribe function. */
  onChanged(listener: (change: CatalogChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Calls `onUpdated` whenever the resource at `uri` changes, as the plugin
   * that offers it reports. The plugin is asked once, for the first watcher
   * of a URI, and told to stop after the last one leaves.
   *
   * @returns The function that stops watching.
   * @throws {GatewayError} `NOT_FOUND` when no plugin offers the URI;
   * `PLUGIN_REQUEST_FAILED` when its plugin offers no subscriptions or
   * refuses this one.
   */
  async subscribe(uri: string, onUpdated: () => void): Promise<() => void> {
    let watched = this.#watched.get(uri);
    if (!watched) {
      const owner = this.#ownerOf(uri);
      if (!owner) {
        throw new GatewayError("NOT_FOUND", `Resource ${uri} not found`, { details: { uri } });
      }
      if (!owner.subscribe) {
        throw new GatewayError(
          "PLUGIN_REQUEST_FAILED",
          `Resource ${uri} cannot be watched: its upstream ${owner.plugin} offers no resource subscriptions`,
          { details: { uri, plugin: owner.plugin } },
        );
      }
      watched = { plugin: owner.plugin, listeners: new Set(), subscribed: owner.subscribe(uri) };
      this.#watched.set(uri, watched);
    }
    const current = watched;
    const listener = () => onUpdated();
    current.listeners.add(listener);
    try {
      await current.subscribed;
    } catch (error) {
      current.listeners.delete(listener);
      if (this.#watched.get(uri) === current) this.#watched.delete(uri);
      throw error;
    }
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      current.listeners.delete(listener);
      if (current.listeners.size || this.#watched.get(uri) !== current) return;
      this.#watched.delete(uri);
      void this.#sources.get(current.plugin)?.unsubscribe?.(uri).catch(() => {
        // Gone or failed: it stops sending updates with its connection anyway.
      });
    };
  }

  /** Tells the watchers of `uri` that `plugin` reports it changed. */
  updated(plugin: string, uri: string): void {
    const watched = this.#watched.get(uri);
    if (!watched || watched.plugin !== plugin) return;
    for (const listener of watched.listeners) listener();
  }

  /** The plugin that offers the resource at `uri` (listed, templated, or the only one with resources). */
  resourcePlugin(uri: string): string | undefined {
    return this.#ownerOf(uri)?.plugin;
  }

  /** The names of the prompts `plugin` offers. */
  promptNames(plugin: string): string[] {
    return this.#sources.get(plugin)?.prompts.filter((p) => !p.withheld).map((p) => p.name) ?? [];
  }

  /** Whether any plugin offers prompts. */
  get hasPrompts(): boolean {
    return [...this.#sources.values()].some((source) => source.prompts.some((p) => !p.withheld));
  }

  /** Every prompt, as `prompts/list` shows it (of the plugins `visible` allows, when given). */
  listPrompts(visible?: (plugin: string) => boolean): Record<string, unknown>[] {
    return this.#visible(visible).flatMap((source) =>
      source.prompts.filter((prompt) => !prompt.withheld).map((prompt) => ({
        ...prompt.info,
        name: prompt.name,
      }))
    );
  }

  /** Every resource, as `resources/list` shows it (of the plugins `visible` allows, when given). */
  listResources(visible?: (plugin: string) => boolean): Record<string, unknown>[] {
    return this.#visible(visible).flatMap((source) => source.resources);
  }

  /** Every resource template, as `resources/templates/list` shows it (of the plugins `visible` allows). */
  listResourceTemplates(visible?: (plugin: string) => boolean): Record<string, unknown>[] {
    return this.#visible(visible).flatMap((source) => source.templates);
  }

  #visible(visible: ((plugin: string) => boolean) | undefined): Registered[] {
    const sources = [...this.#sources.values()];
    return visible ? sources.filter((source) => visible(source.plugin)) : sources;
  }

  /**
   * Gets a prompt from the plugin that owns it, and records a `prompt.get`
   * audit entry (arguments redacted), whether it succeeded or not.
   *
   * @throws {GatewayError} `NOT_FOUND` for an unknown prompt; the plugin's
   * error (`PLUGIN_REQUEST_FAILED`, `TOOL_TIMEOUT`, `CANCELLED`, …).
   */
  async getPrompt(
    name: string,
    args: Record<string, string>,
    options: CatalogRequestOptions = {},
  ): Promise<Record<string, unknown>> {
    const owner = [...this.#sources.values()].find((source) => source.promptsByName.has(name));
    const prompt = owner?.promptsByName.get(name);
    if (!owner || !prompt || options.visible?.(owner.plugin) === false) {
      throw new GatewayError("NOT_FOUND", `Unknown prompt: ${name}`, { details: { prompt: name } });
    }
    if (prompt.withheld) throw prompt.withheld;
    return await this.#recorded(
      {
        kind: "prompt.get",
        subject: name,
        plugin: owner.plugin,
        input: { arguments: args },
        options,
      },
      (signal, input) => prompt.get(args, signal, input),
    );
  }

  /**
   * Reads a resource from the plugin that lists it, or whose template
   * matches its URI, and records a `resource.read` audit entry.
   *
   * @throws {GatewayError} `NOT_FOUND` when no plugin offers the URI; the
   * plugin's error.
   */
  async readResource(
    uri: string,
    options: CatalogRequestOptions = {},
  ): Promise<Record<string, unknown>> {
    const owner = this.#ownerOf(uri);
    if (!owner || options.visible?.(owner.plugin) === false) {
      throw new GatewayError("NOT_FOUND", `Resource ${uri} not found`, { details: { uri } });
    }
    return await this.#recorded(
      {
        kind: "resource.read",
        subject: uri,
        plugin: owner.plugin,
        input: { uri, plugin: owner.plugin },
        options,
      },
      (signal, input) => owner.read(uri, signal, input),
    );
  }

  /**
   * Completes an argument of a prompt (by the gateway's name) or a resource
   * template, at the plugin that owns it.
   *
   * @param visible Whether the caller sees a plugin's prompts and templates. @default every plugin
   * @returns `undefined` when no plugin (that `visible` allows) owns the reference or can complete.
   */
  async complete(
    params: CompleteParams,
    signal?: AbortSignal,
    visible?: (plugin: string) => boolean,
  ): Promise<Record<string, unknown> | undefined> {
    for (const source of this.#sources.values()) {
      if (!source.complete || visible?.(source.plugin) === false) continue;
      if (params.ref.type === "ref/prompt") {
        const prompt = source.promptsByName.get(params.ref.name);
        if (!prompt) continue;
        return await this.#bounded(
          "completion/complete",
          signal,
          (bounded) =>
            source.complete!(
              { ...params, ref: { type: "ref/prompt", name: prompt.ownName } },
              bounded,
            ),
        );
      }
      const template = params.ref.uri;
      if (source.templates.some((t) => t.uriTemplate === template)) {
        return await this.#bounded(
          "completion/complete",
          signal,
          (bounded) => source.complete!(params, bounded),
        );
      }
    }
    return undefined;
  }

  /**
   * Runs `run` with a signal that aborts when the caller's does, or with
   * `TOOL_TIMEOUT` once the catalog's timeout passes; the timeout stops
   * while the caller answers a request for input, and starts again in full.
   */
  async #bounded<T>(
    what: string,
    signal: AbortSignal | undefined,
    run: (signal: AbortSignal, input: CallerInput) => Promise<T>,
    caller: CallerInput = {},
  ): Promise<T> {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      timer = setTimeout(() => {
        controller.abort(
          new GatewayError("TOOL_TIMEOUT", `${what} timed out after ${this.#timeoutMs} ms`, {
            details: { timeout_ms: this.#timeoutMs },
          }),
        );
      }, this.#timeoutMs);
    };
    arm();
    const input = pausingWhileAsking(caller, () => clearTimeout(timer), () => {
      if (!controller.signal.aborted) arm();
    });
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      return await run(controller.signal, input);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  #ownerOf(uri: string): Registered | undefined {
    const sources = [...this.#sources.values()];
    return sources.find((source) => source.resources.some((resource) => resource.uri === uri)) ??
      sources.find((source) => source.patterns.some((pattern) => pattern.test(uri))) ??
      // A URI no plugin lists or templates: the only plugin with resources may still have it.
      (sources.filter((s) => s.resources.length || s.templates.length).length === 1
        ? sources.find((s) => s.resources.length || s.templates.length)
        : undefined);
  }

  #recorded(
    what: {
      kind: "prompt.get" | "resource.read";
      subject: string;
      plugin: string;
      input: unknown;
      options: CatalogRequestOptions;
    },
    run: (signal: AbortSignal, input: CallerInput) => Promise<Record<string, unknown>>,
  ): Promise<Record<string, unknown>> {
    // A span per proxied read (OpenTelemetry MCP conventions), beside its audit entry.
    const prompt = what.kind === "prompt.get";
    return traced(prompt ? `prompts/get ${what.subject}` : "resources/read", {
      parent: what.options.trace,
      attributes: {
        "mcp.method.name": prompt ? "prompts/get" : "resources/read",
        ...(prompt ? { "gen_ai.prompt.name": what.subject } : { "mcp.resource.uri": what.subject }),
        "toolgate.plugin": what.plugin,
        "toolgate.transport": what.options.source ?? "api",
      },
    }, async (span) => {
      try {
        const result = await this.#record(what, run);
        span.set({ "toolgate.outcome": "ok" });
        return result;
      } catch (error) {
        span.set({ "toolgate.outcome": error instanceof GatewayError ? error.code : "INTERNAL" });
        throw error;
      }
    });
  }

  async #record(
    what: { kind: string; subject: string; input: unknown; options: CatalogRequestOptions },
    run: (signal: AbortSignal, input: CallerInput) => Promise<Record<string, unknown>>,
  ): Promise<Record<string, unknown>> {
    const { sessionId = newId("ses"), signal, source = "api", input, caller } = what.options;
    const started = this.#now();
    const latency = () => Math.max(0, Math.round(this.#now() - started));
    const entry = (outcome: Record<string, unknown>) => ({
      kind: what.kind,
      tool: what.subject,
      session_id: sessionId,
      ...(caller ? { caller: auditCaller(caller) } : {}),
      input: this.#redact(what.input),
      outcome: { ...outcome, latency_ms: latency(), source },
    });
    let result: Record<string, unknown>;
    try {
      result = await this.#bounded(`${what.kind} of ${what.subject}`, signal, run, input);
    } catch (thrown) {
      const error = thrown instanceof GatewayError
        ? thrown
        : new GatewayError("PLUGIN_REQUEST_FAILED", (thrown as Error)?.message ?? String(thrown));
      await this.#audit?.append(entry({ ok: false, error_code: error.code, error: error.message }));
      throw error;
    }
    await this.#audit?.append(entry({ ok: true }));
    return result;
  }
}

/**
 * `input` whose `ask` calls `pause` before the first of overlapping
 * questions and `resume` after the last answer: a timeout stops while the
 * caller answers.
 */
export function pausingWhileAsking(
  input: CallerInput,
  pause: () => void,
  resume: () => void,
): CallerInput {
  const { ask } = input;
  if (!ask) return input;
  let asking = 0;
  return {
    ...input,
    ask: async (requests, signal) => {
      if (asking++ === 0) pause();
      try {
        return await ask(requests, signal);
      } finally {
        if (--asking === 0) resume();
      }
    },
  };
}

/**
 * A pattern for the URIs of an RFC 6570 template: `{var}` matches one path
 * segment, `{+var}` and `{#var}` anything, the rest literally.
 */
export function templatePattern(template: string): RegExp {
  let pattern = "";
  for (const part of template.split(/(\{[^}]*\})/)) {
    if (!part) continue;
    if (part.startsWith("{")) {
      pattern += /^\{[+#]/.test(part) ? ".*" : "[^/?#]*";
    } else {
      pattern += part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    }
  }
  return new RegExp(`^${pattern}$`);
}
