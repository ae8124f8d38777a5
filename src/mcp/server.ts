/**
 * The gateway as an MCP server (official SDK v2, `@modelcontextprotocol/server`):
 * tools/list and tools/call go to the gateway's registry and pipeline;
 * prompts, resources and completions to its catalog (what MCP upstreams
 * offer, proxied). One
 * server instance serves one protocol era: a 2025 session (after
 * `initialize`) or 2026-07-28 requests (stateless, `server/discover`); the
 * stdio and Streamable HTTP entries decide the era and build instances here.
 *
 * @module
 */
import {
  type CallToolResult,
  CLIENT_CAPABILITIES_META_KEY,
  type ClientCapabilities,
  inputRequired,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  Server,
  type ServerContext,
} from "@modelcontextprotocol/server";
import { GatewayError } from "../errors/mod.ts";
import {
  type Caller,
  type CallerInput,
  type CallResult,
  type CatalogChange,
  type CompleteParams,
  type Gateway,
  type InputCapabilities,
  type InputMethod,
  LOCAL_CALLER,
  type LogMessage,
  type ProgressUpdate,
  receiptOf,
  toErrorResult,
  toToolResult,
} from "../gateway/mod.ts";
import { newId } from "../ids.ts";
import { VERSION } from "../version.ts";
import { traceCarrierOf } from "../tracing/mod.ts";
import { InputRelay, type RelayState, type Step } from "./input_relay.ts";

/** Key of a call's signed audit receipt in a tool result's `_meta` (docs/audit.md). */
export const RECEIPT_META = "io.toolgate/receipt";

/** The `authInfo.extra` key under which HTTP hands a request's caller to the handlers. */
export const CALLER_AUTH_KEY = "toolgate_caller";

/** Options of {@linkcode createMcpServer}. */
export interface McpServerOptions {
  /** Session id reported in events and audit; for HTTP the MCP session id. */
  sessionId?: () => string | undefined;
  /** Entry point name recorded in the audit log. @default "mcp" */
  source?: string;
  /**
   * Who is calling when a request does not say (stdio: the local caller).
   * Over HTTP each request carries its own, from authentication (its
   * `authInfo`, see `http.ts`). @default none (every tool, none recorded)
   */
  caller?: Caller;
  /**
   * The virtual server this instance serves (`/mcp/<name>`, `mcp start
   * --server <name>`): every request's caller is bound to it, so tools,
   * prompts and resources are that server's, and its clients hear when its
   * definition changes. @default none: every tool the caller may call
   */
  server?: string;
  /**
   * Tell the client when the tool list changes (`notifications/tools/list_changed`
   * on its connection). Off for the one-request instances of stateless
   * 2026 HTTP, whose clients hear of changes on `subscriptions/listen`.
   * @default true
   */
  listChanged?: boolean;
  /**
   * Where calls that wait for their caller's input are parked between its
   * requests: one for every server instance that may serve a later round
   * (all 2026 HTTP requests). @default one of this instance's own
   */
  relay?: InputRelay;
}

/** Where a call's progress and log messages go: the request it is serving now. */
interface Route {
  progress?: (update: ProgressUpdate) => void;
  log?: (message: LogMessage) => void;
}

/** What the server says about itself in `initialize` and `server/discover`. */
export const SERVER_INSTRUCTIONS =
  "toolgate hosts plugins whose tools are listed here; every call is audited and circuit-protected.";

/**
 * Creates an MCP server bound to the gateway. The caller connects it to a
 * transport (or hands it to an SDK entry) and closes it.
 *
 * @param gateway The gateway, or a promise of it: the server then answers
 * `initialize` at once, and `tools/list` and `tools/call` once the gateway is
 * there (with an error when the promise rejects).
 * @returns The server and a function that detaches it from the gateway.
 */
export function createMcpServer(
  gateway: Gateway | Promise<Gateway>,
  options: McpServerOptions = {},
): {
  server: Server;
  detach: () => void;
  /** Watches a resource for this client: its updates go out as `notifications/resources/updated`. */
  watch: (uri: string) => Promise<void>;
} {
  const { source = "mcp", listChanged = true } = options;
  const relay = options.relay ?? new InputRelay();
  let ready = gateway instanceof Promise ? undefined : gateway;
  const starting = ready ? undefined : Promise.resolve(gateway).then((started) => {
    ready = started;
    return started;
  });
  // Reported to the client by the handler that awaits it.
  starting?.catch(() => {});
  const fallbackSession = newId("ses");
  const server = new Server(
    { name: "toolgate", version: VERSION },
    {
      // logging: 2025 clients may set a level (logging/setLevel); 2026 clients set it per request.
      capabilities: {
        tools: { listChanged: true },
        prompts: { listChanged: true },
        resources: { listChanged: true, subscribe: true },
        completions: {},
        logging: {},
      },
      instructions: SERVER_INSTRUCTIONS,
      // A call waiting for its caller's input is named by a state only toolgate can sign.
      requestState: { verify: (state, context) => relay.codec.verify(state, context) },
    },
  );
  /**
   * Runs a request that may ask its caller for input (tools/call,
   * prompts/get, resources/read): started, or resumed with the client's
   * answers when it carries toolgate's state (verified by the SDK already).
   */
  const relayed = async <T>(
    context: ServerContext,
    subject: string,
    route: Route,
    run: (input: CallerInput, signal: AbortSignal, current: () => Route) => Promise<T>,
  ): Promise<Step<T>> => {
    const state = context.mcpReq.requestState<RelayState>();
    if (state !== undefined) {
      return await relay.resume<T, Route>(
        state,
        subject,
        context.mcpReq.inputResponses ?? {},
        route,
        context.mcpReq.signal,
      );
    }
    const capabilities = callerCapabilities(server, context.mcpReq.envelope);
    const input: CallerInput = {
      capabilities: inputCapabilities(capabilities),
    };
    return await relay.start<T, Route>(
      subject,
      (method) => canAnswer(capabilities, method),
      route,
      (ask, signal, current) => run(canAsk(capabilities) ? { ...input, ask } : {}, signal, current),
      context.mcpReq.signal,
    );
  };
  /** How long an MCP call waits for someone's approval: until the approval's own timeout. */
  const MCP_APPROVAL_WAIT_MS = 24 * 60 * 60 * 1000;

  /** The `input_required` result of a request whose upstream asks its caller. */
  const asInputRequired = async (step: Extract<Step<unknown>, { kind: "input" }>) =>
    inputRequired({
      inputRequests: step.requests as never,
      requestState: await relay.codec.mint(step.state),
    }) as never;
  /** The caller of a request: its HTTP authentication's, else the connection's. */
  const callerOf = (context: ServerContext): Caller | undefined => {
    const caller = (context.http?.authInfo?.extra?.[CALLER_AUTH_KEY] as Caller | undefined) ??
      options.caller;
    if (options.server === undefined || caller?.server === options.server) return caller;
    return { ...(caller ?? LOCAL_CALLER), server: options.server };
  };
  server.setRequestHandler("tools/list", async (_request, context) => ({
    // An upstream's tool as the upstream listed it (annotations, outputSchema, icons, _meta, …).
    // Only those the caller may call.
    tools: (ready ?? await starting!).listTools(callerOf(context)).map((tool) => ({
      ...tool.mcpListing,
      name: tool.name,
      description: tool.description,
      inputSchema: { type: "object" as const, ...tool.inputSchema },
    })),
  }));
  server.setRequestHandler("tools/call", async (request, context) => {
    const { name, arguments: args } = request.params;
    const gateway = ready ?? await starting!;
    // A client that asked for progress (its token in _meta) gets the tool's, under that token.
    const progressToken = request.params._meta?.progressToken;
    const route: Route = {
      ...(progressToken === undefined ? {} : {
        progress: (update: ProgressUpdate) =>
          void context.mcpReq.notify({
            method: "notifications/progress",
            params: { progressToken, ...update },
          }).catch(() => {
            // The client went away: the call is being cancelled.
          }),
      }),
      // The SDK sends it only when the client's log level (2025 setLevel, 2026 per request)
      // allows; a 2026 request without a level wants none.
      ...(wantsLogs(context.mcpReq.envelope)
        ? {
          log: (message: LogMessage) =>
            void context.mcpReq.log(message.level, message.data, message.logger).catch(() => {
              // The client went away.
            }),
        }
        : {}),
    };
    const resuming = context.mcpReq.requestState() !== undefined;
    const caller = callerOf(context);
    const trace = traceCarrierOf(request.params._meta);
    // Outside the caller's patterns (FORBIDDEN) or its virtual server (TOOL_NOT_FOUND) the
    // pipeline refuses it, audited, known or not.
    if (!resuming && !gateway.hasTool(name) && gateway.offers(caller, name)) {
      // A tool of a plugin that is not ready: its error, as a tool result.
      const unavailable = gateway.unavailable(name);
      if (unavailable) return toErrorResult(unavailable) as CallToolResult;
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    try {
      const step = await relayed<CallResult>(
        context,
        `tool ${name}`,
        route,
        (input, signal, current) =>
          gateway.call(name, args ?? {}, {
            sessionId: options.sessionId?.() ?? context.sessionId ?? fallbackSession,
            signal,
            source,
            ...(caller ? { caller } : {}),
            ...(route.progress ? { onProgress: (update) => current().progress?.(update) } : {}),
            ...(route.log ? { onLogMessage: (message) => current().log?.(message) } : {}),
            ...(input.ask ? { input } : {}),
            // SEP-414: a client's trace context in _meta (both eras) parents the call's span.
            ...(trace ? { trace } : {}),
            // Held for someone's approval: the call waits (reporting progress) until decided.
            approvalWaitMs: MCP_APPROVAL_WAIT_MS,
          }),
      );
      if (step.kind === "input") return await asInputRequired(step);
      const result = toToolResult(step.value) as CallToolResult;
      if (step.value.receipt) {
        result._meta = { ...result._meta, [RECEIPT_META]: step.value.receipt };
      }
      return result;
    } catch (error) {
      throwIfCapabilityMissing(error);
      if (error instanceof GatewayError) {
        const result = toErrorResult(error) as CallToolResult;
        const receipt = receiptOf(error);
        if (receipt) result._meta = { ...result._meta, [RECEIPT_META]: receipt };
        return result;
      }
      throw error;
    }
  });
  /** Whether the caller of a request sees a plugin's prompts and resources. */
  const visibleTo = (gateway: Gateway, context: ServerContext) => {
    const caller = callerOf(context);
    return (plugin: string) => gateway.showsPlugin(caller, plugin);
  };
  const requestOptions = (
    gateway: Gateway,
    context: ServerContext,
    signal: AbortSignal,
    input: CallerInput,
  ) => ({
    sessionId: options.sessionId?.() ?? context.sessionId ?? fallbackSession,
    signal,
    source,
    ...(callerOf(context) ? { caller: callerOf(context) } : {}),
    ...(input.ask ? { input } : {}),
    visible: visibleTo(gateway, context),
  });
  server.setRequestHandler("prompts/list", async (_request, context) => {
    const gateway = ready ?? await starting!;
    return {
      prompts: gateway.catalog.listPrompts(visibleTo(gateway, context)) as { name: string }[],
    };
  });
  server.setRequestHandler("prompts/get", async (request, context) => {
    const { name, arguments: args = {} } = request.params;
    const gateway = ready ?? await starting!;
    const resuming = context.mcpReq.requestState() !== undefined;
    try {
      const step = await relayed(
        context,
        `prompt ${name}`,
        {},
        (input, signal) =>
          gateway.catalog.getPrompt(name, args, {
            ...requestOptions(gateway, context, signal, input),
            trace: traceCarrierOf(request.params._meta),
          }),
      );
      if (step.kind === "input") return await asInputRequired(step);
      return step.value as never;
    } catch (error) {
      throwIfCapabilityMissing(error);
      if (!resuming && error instanceof GatewayError && error.code === "NOT_FOUND") {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${name}`);
      }
      throw asProtocolError(error);
    }
  });
  server.setRequestHandler("resources/list", async (_request, context) => {
    const gateway = ready ?? await starting!;
    return { resources: gateway.catalog.listResources(visibleTo(gateway, context)) as never[] };
  });
  server.setRequestHandler("resources/templates/list", async (_request, context) => {
    const gateway = ready ?? await starting!;
    return {
      resourceTemplates: gateway.catalog.listResourceTemplates(
        visibleTo(gateway, context),
      ) as never[],
    };
  });
  server.setRequestHandler("resources/read", async (request, context) => {
    const { uri } = request.params;
    const gateway = ready ?? await starting!;
    const resuming = context.mcpReq.requestState() !== undefined;
    try {
      const step = await relayed(
        context,
        `resource ${uri}`,
        {},
        (input, signal) =>
          gateway.catalog.readResource(uri, {
            ...requestOptions(gateway, context, signal, input),
            trace: traceCarrierOf(request.params._meta),
          }),
      );
      if (step.kind === "input") return await asInputRequired(step);
      return step.value as never;
    } catch (error) {
      throwIfCapabilityMissing(error);
      if (!resuming && error instanceof GatewayError && error.code === "NOT_FOUND") {
        throw new ResourceNotFoundError(uri);
      }
      throw asProtocolError(error);
    }
  });
  // Resources this client watches (2025 resources/subscribe; a 2026 stdio client's listen stream).
  const watches = new Map<string, Promise<() => void>>();
  const watch = async (uri: string) => {
    if (!watches.has(uri)) {
      const { catalog } = ready ?? await starting!;
      const started = catalog.subscribe(
        uri,
        () =>
          void server.sendResourceUpdated({ uri }).catch(() => {
            // The client went away: its watches end with its session.
          }),
      );
      watches.set(uri, started);
      started.catch(() => watches.delete(uri));
    }
    await watches.get(uri);
  };
  const unwatch = (uri: string) => {
    const stopping = watches.get(uri);
    watches.delete(uri);
    void stopping?.then((stop) => stop(), () => {});
  };
  server.setRequestHandler("resources/subscribe", async (request, context) => {
    const gateway = ready ?? await starting!;
    const plugin = gateway.catalog.resourcePlugin(request.params.uri);
    // A resource outside the caller's rights or virtual server is not there for it.
    if (plugin !== undefined && !visibleTo(gateway, context)(plugin)) {
      throw new ResourceNotFoundError(request.params.uri);
    }
    try {
      await watch(request.params.uri);
      return {};
    } catch (error) {
      if (error instanceof GatewayError && error.code === "NOT_FOUND") {
        throw new ResourceNotFoundError(request.params.uri);
      }
      throw asProtocolError(error);
    }
  });
  server.setRequestHandler("resources/unsubscribe", (request) => {
    unwatch(request.params.uri);
    return {};
  });
  server.setRequestHandler("completion/complete", async (request, context) => {
    const gateway = ready ?? await starting!;
    try {
      const result = await gateway.catalog.complete(
        request.params as unknown as CompleteParams,
        context.mcpReq.signal,
        visibleTo(gateway, context),
      );
      return (result ?? { completion: { values: [] } }) as never;
    } catch (error) {
      throw asProtocolError(error);
    }
  });
  const unwatchAll = () => {
    for (const uri of [...watches.keys()]) unwatch(uri);
  };
  if (!listChanged) return { server, detach: unwatchAll, watch };
  const notify = () => {
    server.sendToolListChanged().catch(() => {
      // Not connected yet or already closed: the client lists tools on connect.
    });
  };
  const notifyCatalog = (change: CatalogChange) => {
    const sent = change === "prompts"
      ? server.sendPromptListChanged()
      : server.sendResourceListChanged();
    sent.catch(() => {
      // Not connected yet or already closed: the client lists them on connect.
    });
  };
  let detached = false;
  let detachGateway = () => {};
  const attach = (attached: Gateway) => {
    if (detached) return;
    const offTools = attached.onToolsChanged(notify);
    const offCatalog = attached.catalog.onChanged(notifyCatalog);
    // The virtual server's definition changed: its tools, prompts and resources may have.
    const offServer = options.server === undefined
      ? () => {}
      : attached.servers.onChanged((names) => {
        if (!names.includes(options.server!)) return;
        notify();
        notifyCatalog("prompts");
        notifyCatalog("resources");
      });
    detachGateway = () => {
      offTools();
      offCatalog();
      offServer();
    };
  };
  if (ready) attach(ready);
  else starting!.then(attach, () => {});
  const detach = () => {
    detached = true;
    detachGateway();
    unwatchAll();
  };
  return { server, detach, watch };
}

/** An upstream's -32021 (it needs a capability the client did not declare), as MCP's own error. */
function throwIfCapabilityMissing(error: unknown): void {
  const required = error instanceof GatewayError
    ? (error.details as { required_capabilities?: ClientCapabilities } | undefined)
      ?.required_capabilities
    : undefined;
  if (required) throw new MissingRequiredClientCapabilityError({ requiredCapabilities: required });
}

/** A gateway error as the JSON-RPC error of a prompts, resources or completion request. */
function asProtocolError(error: unknown): unknown {
  if (!(error instanceof GatewayError)) return error;
  return new ProtocolError(ProtocolErrorCode.InternalError, `${error.code}: ${error.message}`, {
    code: error.code,
  });
}

/** The capabilities the caller's client declared: per request (2026) or at initialize (2025). */
function callerCapabilities(
  server: Server,
  envelope: Record<string, unknown> | undefined,
): ClientCapabilities {
  const declared = envelope?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined;
  return declared ?? server.getClientCapabilities() ?? {};
}

/** Whether a client with these capabilities can answer a request for input. */
function canAnswer(capabilities: ClientCapabilities, method: InputMethod): boolean {
  switch (method) {
    case "elicitation/create":
      return capabilities.elicitation !== undefined;
    case "sampling/createMessage":
      return capabilities.sampling !== undefined;
    case "roots/list":
      return capabilities.roots !== undefined;
  }
}

/** The capabilities of a client that say which requests for input it answers. */
function inputCapabilities(capabilities: ClientCapabilities): InputCapabilities {
  const { elicitation, sampling, roots } = capabilities as InputCapabilities;
  return {
    ...(elicitation ? { elicitation } : {}),
    ...(sampling ? { sampling } : {}),
    ...(roots ? { roots } : {}),
  };
}

/** Whether a client can answer any request for input. */
function canAsk(capabilities: ClientCapabilities): boolean {
  return ["elicitation/create", "sampling/createMessage", "roots/list"].some((method) =>
    canAnswer(capabilities, method as InputMethod)
  );
}

/** Whether a caller may get log messages: a 2025 one (its session's level decides) or a 2026 request naming a level. */
function wantsLogs(envelope: Record<string, unknown> | undefined): boolean {
  return envelope === undefined || envelope["io.modelcontextprotocol/logLevel"] !== undefined;
}
