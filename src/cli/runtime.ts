/**
 * The composition root: wires configuration, store, event bus, audit log,
 * webhook dispatcher, plugins and gateway for one process.
 *
 * @module
 */
import { getLog, lineSink, type LogLevel } from "../log/mod.ts";
import { redactLogsWith } from "./logging.ts";
import { switchOffTracing } from "../tracing/mod.ts";
import { join } from "node:path";
import {
  type AuditLog,
  type Checkpointer,
  createAuditLog,
  createRedactor,
  scheduleRetention,
  startCheckpointer,
} from "../audit/mod.ts";
import { benchLayerOff, type Config } from "../config/mod.ts";
import { egressFetch, type EgressPolicy, egressPolicyFromConfig } from "../egress/mod.ts";
import { EventBus, relayEvents } from "../events/mod.ts";
import { followVirtualServers, Gateway, VirtualServers } from "../gateway/mod.ts";
import { ToolPins } from "../pins/mod.ts";
import {
  approvalPath,
  Approvals,
  approvalsPlugin,
  runApprovedCalls,
  slackNotifier,
} from "../approvals/mod.ts";
import { loadPolicies, type Policies } from "../policies/mod.ts";
import { createKeychain, secretReaderFor } from "../keychain/mod.ts";
import { builtinPlugins, ServerStatusPublisher } from "../plugins/mod.ts";
// Not the folder's mod.ts: the upstream plugin (MCP SDK client, ajv) loads
// only when an upstream is hosted, keeping it off the stdio start-up path.
import type { McpUpstreamPluginOptions } from "../plugins/mcp/upstream_plugin.ts";
import {
  upstreamSettings,
  type UpstreamSpec,
  upstreamSpecs,
} from "../plugins/mcp/upstream_spec.ts";
import { UpstreamSync } from "../plugins/mcp/upstream_sync.ts";
import { type ApprovalRecord, ensureKey, type Store } from "../store/mod.ts";
import { type AttemptObservation, createDispatcher, type Dispatcher } from "../webhooks/mod.ts";
import type { CallObservation } from "../gateway/mod.ts";
import type { CliContext } from "./context.ts";

/** Everything a running gateway process holds. */
export interface Runtime {
  config: Config;
  store: Store;
  bus: EventBus;
  gateway: Gateway;
  audit: AuditLog;
  /** A server's checkpointer: the log's keys and signed checkpoints (none for one-shot commands). */
  checkpointer?: Checkpointer;
  /** The pins of upstream definitions; `undefined` with `pinning: "off"`. */
  pins?: ToolPins;
  /** The policy rules the gateway decides calls by. */
  policies: Policies;
  /** Reads the stored policy rules again (after a change made here). */
  reloadPolicies(): Promise<void>;
  /** Calls held for approval. */
  approvals: Approvals;
  dispatcher: Dispatcher;
  /**
   * The egress policy of `http_request`, webhook deliveries and HTTP
   * upstreams; its marker is the store's deployment id. A server adds the
   * address it listens on ({@linkcode EgressPolicy.listen}).
   */
  egress: EgressPolicy;
  /** Publishes the HTTP server's URL with the plugin states (CLI commands then call it). */
  announceUrl(url: string): Promise<void>;
  /** Stops background work and releases resources (not the store: the context owns it). */
  close(): Promise<void>;
}

/** Options of {@linkcode createRuntime}. */
export interface RuntimeOptions {
  /** Where every part logs (tests collect lines so). @default each part's logger (`getLog`) */
  log?: (message: string) => void;
  /**
   * `server`: this process delivers webhooks (resuming pending ones) and its
   * plugin events are delivered. `oneshot` (CLI commands): the events of its
   * tool calls are persisted for the server to deliver; nothing is sent from
   * this process. @default "oneshot"
   */
  role?: "server" | "oneshot";
  /**
   * The server's transport (`stdio`, `http`), shown with the plugin states it
   * publishes for `toolgate plugins list`. @default "unknown"
   */
  transport?: string;
  /**
   * Which MCP upstreams to start (one-shot commands start only those they
   * need). @default all
   */
  upstreams?: (spec: UpstreamSpec) => boolean;
  /** Observers of calls, deliveries and audit appends (a server's metrics). @default none */
  observers?: RuntimeObservers;
  /**
   * Called when a server sees the registrations counter move (another
   * process or instance changed webhooks, upstreams, servers, pins,
   * policies or API keys). @default none
   */
  onRegistrationsMoved?: () => void;
}

/** What {@linkcode RuntimeOptions.observers} may watch. */
export interface RuntimeObservers {
  /** Every answered tool call. */
  onCall?: (call: CallObservation) => void;
  /** Every delivery attempt that got an outcome. */
  onAttempt?: (attempt: AttemptObservation) => void;
  /** Every delivery moved to the dead-letter queue. */
  onDeadLetter?: (webhookId: string) => void;
  /** Deliveries that could not be sent at all, by reason. */
  onUndeliverable?: (reason: string, count: number) => void;
  /** Every audit append, committed or failed. */
  onAppend?: (append: { ok: boolean; durationMs: number }) => void;
}

type UpstreamPluginModule = typeof import("../plugins/mcp/upstream_plugin.ts");

/** How long after start-up a server loads the MCP upstream plugin when none is hosted yet. */
const UPSTREAM_LOAD_DELAY_MS = 100;

function loadUpstreamPlugin(): Promise<UpstreamPluginModule> {
  return import("../plugins/mcp/upstream_plugin.ts");
}

/** Builds and starts the gateway for this process. */
export async function createRuntime(
  context: CliContext,
  options: RuntimeOptions = {},
): Promise<Runtime> {
  const {
    log: given,
    role = "oneshot",
    transport = "unknown",
    upstreams: wantUpstream = () => true,
    observers = {},
  } = options;
  // Each part logs under its own name, unless the caller collects every line.
  const logOf = (name: string, level: LogLevel = "warn") => given ?? lineSink(getLog(name), level);
  const config = await context.config();
  redactLogsWith(context, config.redact.patterns);
  const store = await context.store();
  // A server refuses to start with a key that is not the store's, and
  // records its own when the store has none (so a CLI with another key cannot seal).
  if (role === "server") await ensureKey(store);
  const bus = new EventBus({
    disabled: config.events.disabled,
    onListenerError: (error) =>
      logOf("events")(`event subscriber failed: ${(error as Error).message}`),
  });
  const egress = egressPolicyFromConfig(config, { marker: await store.deploymentId() });
  const dispatcher = createDispatcher({
    store,
    bus,
    config,
    egress,
    mode: role === "server" ? "deliver" : "record",
    onError: (error) => logOf("webhooks")(`webhooks: ${(error as Error).message}`),
    onAttempt: observers.onAttempt,
    onDeadLetter: observers.onDeadLetter,
    onUndeliverable: observers.onUndeliverable,
  });
  // The deliveries of `tool.called` and `audit.written` ride in the entry's commit.
  // One redactor (built-in rules and config redact.patterns) for entries and events.
  // (A benchmark measuring what a layer costs may switch it off: never a user's server.)
  const redact = benchLayerOff(config, "redaction")
    ? <T>(value: T) => value
    : createRedactor({ patterns: config.redact.patterns });
  if (benchLayerOff(config, "tracing")) switchOffTracing();
  // A server checkpoints the tree as it grows and signs receipts; its key is made at first start.
  const checkpointer = role === "server"
    ? await startCheckpointer({
      store,
      origin: config.audit.origin ?? `toolgate/${await store.deploymentId()}`,
      intervalMs: config.audit.checkpoint_interval,
      historyFile: config.audit.checkpoints.file ?? join(config.dataDir, "checkpoints.log"),
      sinks: config.audit.checkpoints.sinks,
      fetch: config.audit.checkpoints.sinks.length
        ? egressFetch({ policy: egress, profile: "operator" })
        : undefined,
      log: getLog("audit"),
    })
    : undefined;
  const audit = createAuditLog({
    store,
    bus,
    outbox: dispatcher,
    redact,
    onAppend: observers.onAppend,
    onCommit: checkpointer && (() => checkpointer.notify()),
  });
  // Entries appended while no server ran (one-shot commands) get their checkpoint now.
  checkpointer?.notify();
  const retention = config.audit.retention;
  const stopRetention = role === "server" && retention
    ? scheduleRetention({
      log: audit,
      store,
      maxAgeMs: retention.max_age,
      everyMs: retention.every,
      exportDir: retention.export_dir,
      onRun: ({ pruned, error }) => {
        if (error) getLog("audit").warn("Audit retention failed", { error: String(error) });
        else if (pruned?.pruned) {
          getLog("audit").info("Audit retention pruned old entries", {
            pruned: pruned.pruned,
            through: pruned.through,
          });
        }
      },
    })
    : undefined;
  const keychain = createKeychain({ store, dataDir: config.dataDir, env: config.env });
  // MCP upstreams: config.json, then `toolgate plugins add` registrations.
  const builtins = builtinPlugins({ egress });
  const reserved = [...builtins.map((plugin) => plugin.name), "approvals"];
  const upstreamsVersion = await store.registrationsVersion();
  const upstreams = upstreamSpecs({
    config,
    records: await store.upstreams.list(),
    reserved,
    log: logOf("plugins"),
  }).filter((spec) => wantUpstream(spec));
  let upstreamModule: UpstreamPluginModule | undefined = upstreams.length
    ? await loadUpstreamPlugin()
    : undefined;
  const upstreamPlugin = (spec: UpstreamSpec) => {
    if (!upstreamModule) throw new Error("The MCP upstream plugin is still loading");
    const options: McpUpstreamPluginOptions = {
      settings: upstreamSettings(config),
      resolveSecret: (name) => keychain.get(name),
      egress,
    };
    return upstreamModule.mcpUpstreamPlugin(spec, options);
  };
  // Pins of what upstreams offer (`toolgate tools pins|approve|reject` decide them).
  const pinning = config.plugins.upstream_settings.pinning;
  const pins = pinning === "off" ? undefined : new ToolPins({
    store,
    mode: pinning,
    audit: (input) => audit.append(input),
    // The opt-in tool.quarantined event, for webhooks that name it.
    onQuarantined: (pin) => {
      bus.emit("tool.quarantined", {
        tool_name: pin.tool,
        plugin: pin.plugin,
        kind: pin.kind,
        status: pin.status as "changed" | "new" | "rejected",
        changed: pin.changed,
        pinned_sha256: pin.pinned_sha256,
        offered_sha256: pin.pending_sha256,
      }).catch((error) => logOf("plugins")(`event not sent: ${(error as Error).message}`));
    },
  });
  // Policies: config `policies`, then `toolgate policies add` rules (read again when they change).
  const policies = await loadPolicies(config.policies, await store.policies.list());
  const reloadPolicies = async () => {
    try {
      policies.replace(await loadPolicies(config.policies, await store.policies.list()));
    } catch (error) {
      logOf("policies")(
        `policies not reloaded, the previous rules stay: ${(error as Error).message}`,
      );
    }
  };
  // Calls `require_approval` rules hold, in the store for any instance to decide and run.
  let notifySlack: ((record: ApprovalRecord) => void) | undefined;
  let listening: string | undefined;
  const approvals = new Approvals({
    store,
    baseUrl: () => listening,
    audit: (input) => audit.append(input),
    // The opt-in approval.* events, for webhooks that name them; the Slack message of a request.
    onChange: (kind, record) => {
      if (kind === "requested") notifySlack?.(record);
      const emitted = kind === "requested"
        ? bus.emit("approval.requested", {
          approval_id: record.id,
          tool_name: record.tool,
          plugin: record.plugin,
          caller: record.caller as { kind: string; id?: string; name?: string },
          policy: record.policy,
          reason: record.reason,
          approvers: record.approvers,
          args_sha256: record.args_sha256,
          expires_at: record.expires_at,
          url: approvalPath(record.id),
        })
        : bus.emit("approval.decided", {
          approval_id: record.id,
          tool_name: record.tool,
          status: record.status as "approved" | "denied",
          decided_by: record.decided_by ?? "",
          reason: record.decision_reason,
          decided_at: record.decided_at ?? "",
        });
      emitted.catch((error) => logOf("approvals")(`event not sent: ${(error as Error).message}`));
    },
  });
  // Virtual servers: config `servers`, then `toolgate servers create` definitions.
  const servers = new VirtualServers(config.servers);
  servers.setStored(await store.servers.list());
  const gateway = new Gateway({
    servers,
    config,
    store,
    bus,
    plugins: [
      ...builtins,
      // Slack approvals (approvals.slack_channel): the handler of Slack's button clicks.
      ...(config.approvals.slack_channel ? [approvalsPlugin(approvals)] : []),
      ...upstreams.map(upstreamPlugin),
    ],
    audit,
    receipts: checkpointer && config.audit.receipts && !benchLayerOff(config, "receipts")
      ? (entry) => checkpointer.keys.receipt(entry)
      : undefined,
    pins,
    policies: benchLayerOff(config, "policies") ? undefined : policies,
    approvals,
    log: given ?? getLog("gateway"),
    secrets: (plugin) => secretReaderFor(keychain, plugin),
    redact,
    onCall: observers.onCall,
  });
  if (config.approvals.slack_channel) {
    notifySlack = slackNotifier(gateway, config.approvals.slack_channel, logOf("approvals"));
  }
  // Other instances on the same database stream this one's events on /events.
  const relay = relayEvents(bus, store.changes, {
    onError: (error) => logOf("events")(`events: ${(error as Error).message}`),
  });
  // A server delivers its own plugin events; a one-shot command records only
  // the events of the calls it makes.
  if (role === "server") await dispatcher.start();
  await gateway.start();
  if (role === "oneshot") await dispatcher.start();
  // A server follows `toolgate plugins add|remove|enable|disable` live and
  // publishes its plugin states for `toolgate plugins list`.
  let sync: UpstreamSync | undefined;
  let syncStarting: Promise<void> | undefined;
  let closed = false;
  let publisher: ServerStatusPublisher | undefined;
  let publisherStarting: Promise<void> | undefined;
  let stopFollowing: (() => Promise<void>) | undefined;
  let stopApprovals: (() => Promise<void>) | undefined;
  if (role === "server") {
    // Approved calls whose caller stopped waiting run here (on the instance that claims them).
    stopApprovals = runApprovedCalls({
      approvals,
      gateway,
      store,
      pollMs: config.plugins.upstream_settings.poll_ms,
      log: logOf("approvals"),
    });
    // `toolgate servers create|update|remove` reach running servers (clients hear list_changed).
    stopFollowing = followVirtualServers({
      servers,
      store,
      pollMs: config.plugins.upstream_settings.poll_ms,
      version: upstreamsVersion,
      log: logOf("servers"),
      // Pins decided and policies added elsewhere (the CLI, another instance) move the same version.
      onMoved: () => {
        void pins?.changed();
        void reloadPolicies();
        options.onRegistrationsMoved?.();
      },
    });
    sync = new UpstreamSync({
      gateway,
      store,
      config,
      reserved,
      hosted: upstreams,
      plugin: upstreamPlugin,
      log: given ?? getLog("plugins"),
    });
    // Upstreams added later need the plugin module: load it off the path to
    // the first reply, then start following registrations.
    const following = sync;
    syncStarting = (async () => {
      if (!upstreamModule) {
        await new Promise((resolve) => setTimeout(resolve, UPSTREAM_LOAD_DELAY_MS));
        if (closed) return;
        upstreamModule = await loadUpstreamPlugin();
      }
      if (!closed) following.start(upstreamsVersion);
    })();
    publisher = new ServerStatusPublisher({
      gateway,
      store,
      transport,
      log: logOf("plugins"),
    });
    // Published in the background: nothing on the path to serving waits for this commit.
    publisherStarting = publisher.start();
  }
  return {
    config,
    store,
    bus,
    gateway,
    audit,
    checkpointer,
    pins,
    policies,
    reloadPolicies,
    approvals,
    dispatcher,
    egress,
    announceUrl: async (url) => {
      listening = url;
      await publisherStarting;
      await publisher?.announceUrl(url);
    },
    close: async () => {
      closed = true;
      await stopFollowing?.();
      await stopApprovals?.();
      await syncStarting;
      await sync?.stop();
      await publisherStarting;
      await publisher?.stop();
      await gateway.stop();
      await stopRetention?.();
      await audit.close();
      await checkpointer?.close();
      await dispatcher.stop();
      await relay.stop();
    },
  };
}
