/**
 * A model-based test of incoming jobs, on both adapters: generated runs of
 * 1–4 endpoints (plain handlers, routes to a second handler, de-duplication
 * by a delivery header, `--when` filters) taking 1–12 payloads through the
 * real intake path (`IncomingRouter.match()` then `handle()`, as the HTTP
 * layer does: audit entry and staged job in one commit), JSON or
 * form-encoded, a few of them over the staged size, some with arguments
 * the handler refuses. Handlers have a scripted outcome per call (success
 * at any call, a throw, an upstream error, a hang past the timeout), one is
 * idempotent with a retry inside the call, one is rate limited, one appears
 * mid-run (`TOOL_NOT_FOUND` until then), one never exists; circuits open
 * and close; queues are bounded (`QUEUE_FULL`) and small (jobs written
 * unclaimed); endpoints are removed or replaced by one with another handler
 * mid-way; instances are restarted mid-run, and on PostgreSQL two run at
 * once on the same database and claim each other's jobs. Failed jobs are
 * then replayed from another handle (the CLI), one, one endpoint's or all,
 * a round or two. Checked against what the handlers saw and what the store
 * holds:
 *
 * - every accepted payload (202 `accepted`) has one `webhook.incoming` audit
 *   entry and ends in exactly one of: handled (its handler returned success
 *   once, and nothing of it is stored), or kept as a failed job (listed by
 *   `listFailed`, its body readable and equal to what was accepted), never
 *   both, never neither; nothing stays pending;
 * - per life (acceptance, then each replay) a job's handler is called at
 *   most 1 + 5 times (× 1 + the tool's own retries), never after a success,
 *   and always with the handler the job was accepted for; a failed job's
 *   attempts are 6, or end with an input error, and its failed calls are
 *   exactly those the handler saw fail;
 * - a replay queues exactly the failed jobs it targets, and each then
 *   follows the same rules; the endpoint's `failed` counter counts every
 *   time one of its jobs became a failed job;
 * - payloads not accepted (404, 503, duplicates, skipped) are never run or
 *   kept; a duplicate names the job accepted with its delivery id.
 *
 * `TOOLGATE_MODEL_SEED` replays one run (its seed is printed on failure);
 * `TOOLGATE_MODEL_RUNS` sets how many runs on Deno KV (PostgreSQL, whose
 * server shares the two cores, does a third as many). Each run goes through
 * the whole pipeline (audit entries, circuit breakers, store commits), so
 * the defaults fit in well under a minute: ~1400 accepted payloads on
 * Deno KV, ~500 on PostgreSQL.
 *
 * Its first runs found a job that waited seconds for its retry (on
 * PostgreSQL with two instances, on either adapter in principle): the
 * router's own claim took the job back as soon as its failed call was
 * written, before that call was done there, and the router dropped it as
 * "queued already" while keeping (and renewing) the claim, so nothing ran
 * it until the claim lapsed. The regression test is in
 * `incoming_retry_test.ts`.
 *
 * @module
 */
import { prng } from "../_prng.ts";
import postgres from "postgres";
import { z } from "zod";
import { assertEquals } from "../_asserts.ts";
import { type AuditLog, createAuditLog } from "../../src/audit/mod.ts";
import type { Config } from "../../src/config/mod.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { EventBus } from "../../src/events/mod.ts";
import {
  Gateway,
  type PluginContext,
  type PluginDefinition,
  type ToolDefinition,
} from "../../src/gateway/mod.ts";
import type { IncomingJob, IncomingWebhook, Store } from "../../src/store/mod.ts";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";
import { IncomingRouter, MAX_RETRIES, replayFailedJobs } from "../../src/webhooks/mod.ts";
import { testConfig } from "../gateway/_fixtures.ts";
import {
  type FreshStore,
  kvStores,
  type PostgresStores,
  postgresStores,
  type StoreMaker,
} from "../store/_stores.ts";

const RUNS = Number(Deno.env.get("TOOLGATE_MODEL_RUNS") ?? 250);
const ONE_SEED = Deno.env.get("TOOLGATE_MODEL_SEED");
/** Runs at once per adapter (each on a store of its own): they mostly wait on timers. */
const WORKERS = { kv: 16, postgres: 8 };
/** `webhooks.poll_ms`: an idle router's poll costs CPU, and the runs share two cores. */
const POLL_MS = 10;
const RETRY_BASE_MS = 1;
const TIMEOUT_MS = 15;
/** Calls of one job per life: the first and its retries. */
const CALLS_PER_LIFE = 1 + MAX_RETRIES;
/** Longest wait for the queue to drain before a run counts as stuck. */
const DRAIN_MS = 20_000;

/**
 * Handler tools: `plain`; `idem` (idempotent, retried once within a call);
 * `paced` (rate limited); `late` (offered from `lateAt` on); `ghost` (never).
 */
const HANDLERS = ["plain", "idem", "paced", "late", "ghost"] as const;
type Handler = (typeof HANDLERS)[number];
/** Executions one call of each tool may make. */
const EXECUTIONS_PER_CALL: Record<Handler, number> = {
  plain: 1,
  idem: 2,
  paced: 1,
  late: 1,
  ghost: 1,
};

type Outcome = "ok" | "slow_ok" | "throw" | "upstream" | "hang";
const FAILURES: readonly Outcome[] = ["throw", "throw", "upstream", "upstream", "hang"];
/** The error code each failing outcome becomes. */
const FAILURE_CODES: Record<string, string> = {
  throw: "TOOL_EXECUTION_FAILED",
  upstream: "PLUGIN_REQUEST_FAILED",
  hang: "TOOL_TIMEOUT",
};
const INPUT_CODES = new Set(["TOOL_INPUT_INVALID", "INVALID_JSON"]);

interface EndpointPlan {
  handler: Handler;
  /** `--route-by /route` with these routes. */
  routes?: Record<string, Handler>;
  /** `--dedupe-header X-Delivery`. */
  dedupe: boolean;
  /** `--when /skip!=yes`. */
  when: boolean;
}

interface PostPlan {
  at: number;
  endpoint: number;
  /** `n` is not a number: the handler's schema refuses it. */
  invalid: boolean;
  route?: string;
  skip: boolean;
  form: boolean;
  /** Bytes of padding (some past the staged size). */
  pad: number;
  /** Sent with the delivery id of this earlier post (a sender's retry). */
  resendOf?: number;
}

interface Mutation {
  at: number;
  endpoint: number;
  /** Removed, or replaced by an endpoint on the same path with another handler. */
  kind: "remove" | "change";
  handler: Handler;
}

interface RunPlan {
  seed: number;
  endpoints: EndpointPlan[];
  posts: PostPlan[];
  mutations: Mutation[];
  /** Restarts: at `at`, instance `instance` stops and a new one takes its place. */
  restarts: { at: number; instance: number }[];
  /** Instances at once (two only where claims are shared). */
  instances: number;
  /** When `late` is offered (ms from the start). */
  lateAt: number;
  replays: ("all" | "endpoint" | "one")[];
  /** Wake the routers after a replay (as the HTTP replay does), or wait for their poll. */
  wake: boolean;
  concurrency: number;
  maxQueued: number[];
  maxPendingPerEndpoint: number;
  circuitThreshold: number;
  circuitResetMs: number;
  burst: number;
  /** The outcome of execution `k` (0-based) of the payload `p`'s handler in life `life`. */
  outcome(p: number, life: number, k: number): Outcome;
}

function planRun(seed: number, shared: boolean): RunPlan {
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const int = (below: number) => Math.floor(random() * below);
  const handler = (): Handler =>
    random() < 0.5 ? "plain" : pick(["idem", "paced", "late", "ghost", "plain"] as const);
  const endpoints: EndpointPlan[] = Array.from({ length: 1 + int(4) }, () => ({
    handler: handler(),
    ...(random() < 0.2 ? { routes: { a: handler(), b: handler() } } : {}),
    dedupe: random() < 0.3,
    when: random() < 0.2,
  }));
  const posts: PostPlan[] = [];
  for (let p = 0, count = 1 + int(12); p < count; p++) {
    const big = random();
    posts.push({
      at: int(40),
      endpoint: int(endpoints.length),
      invalid: random() < 0.08,
      ...(random() < 0.3 ? { route: pick(["a", "b", "c"]) } : {}),
      skip: random() < 0.15,
      form: random() < 0.1,
      pad: big < 0.01 ? 700_000 : big < 0.03 ? 140_000 : int(200),
      ...(p > 0 && random() < 0.15 ? { resendOf: int(p) } : {}),
    });
  }
  // A resend goes after the post it repeats, to the same endpoint.
  for (const post of posts) {
    if (post.resendOf === undefined) continue;
    const first = posts[post.resendOf];
    post.endpoint = first.endpoint;
    post.at = Math.max(post.at, first.at + int(3));
  }
  const mutations: Mutation[] = random() < 0.3
    ? Array.from({ length: 1 + int(2) }, () => ({
      at: 5 + int(50),
      endpoint: int(endpoints.length),
      kind: pick(["remove", "change"] as const),
      handler: handler(),
    }))
    : [];
  const instances = shared && random() < 0.7 ? 2 : 1;
  const restarts = random() < 0.3
    ? Array.from({ length: 1 + int(2) }, () => ({ at: 5 + int(45), instance: int(instances) }))
    : [];
  const replays: RunPlan["replays"] = random() < 0.6
    ? Array.from({ length: 1 + int(2) }, () => pick(["all", "endpoint", "one"] as const))
    : [];
  const scripts = new Map<string, Outcome[]>();
  const outcome = (p: number, life: number, k: number): Outcome => {
    const key = `${p}/${life}`;
    let script = scripts.get(key);
    if (!script) {
      const r = prng(seed ^ Math.imul(p + 1, 0x9e3779b1) ^ Math.imul(life + 1, 0x85ebca6b));
      // Success at execution 0–8: past the last one a life has (6, 12 for idem), never.
      // A replay mostly succeeds at once.
      const succeedAt = life > 0 && r() < 0.7 ? 0 : Math.floor(r() * 9);
      script = [];
      for (let i = 0; i < succeedAt; i++) script.push(FAILURES[Math.floor(r() * FAILURES.length)]);
      script.push(r() < 0.7 ? "ok" : "slow_ok");
      scripts.set(key, script);
    }
    // Past the success (never expected): success again.
    return script[k] ?? "ok";
  };
  return {
    seed,
    endpoints,
    posts,
    mutations,
    restarts,
    instances,
    lateAt: int(100),
    replays,
    wake: random() < 0.5,
    concurrency: 1 + int(4),
    maxQueued: Array.from({ length: 4 }, () => random() < 0.3 ? 1 + int(3) : 10_000),
    maxPendingPerEndpoint: random() < 0.15 ? 2 + int(3) : 10_000,
    circuitThreshold: random() < 0.5 ? 2 + int(3) : 1000,
    circuitResetMs: 3 + int(12),
    burst: 1 + int(3),
    outcome,
  };
}

/** One execution of a handler, as the handler saw it. */
interface Execution {
  tool: Handler;
  life: number;
  outcome: Outcome;
  /** How it ended: returned success, or failed (thrown, or aborted by the timeout). */
  result: "running" | "ok" | "failed";
  /** The error code the failure becomes. */
  code?: string;
}

/** What the handlers saw and what the test did, shared by every instance of a run. */
interface Model {
  plan: RunPlan;
  /** Executions per job id, in order. */
  seen: Map<string, Execution[]>;
  /** A job's life: 0 from acceptance, +1 per replay. */
  lives: Map<string, number>;
  /** `late` is offered. */
  lateShown: boolean;
  /** Plugin contexts of the `late` plugin, one per live gateway. */
  lateContexts: Set<PluginContext>;
  /** What the routers logged, for a failure's report. */
  logs: string[];
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A handler tool whose outcomes follow the run's script. */
function handlerTool(name: Handler, model: Model): ToolDefinition {
  return {
    name,
    description: "Follows the model's script",
    input: z.object({ p: z.number().int(), n: z.number().int() }),
    ...(name === "idem" ? { idempotent: true } : {}),
    execute: async (args, context) => {
      const jobId = context.sessionId;
      const life = model.lives.get(jobId) ?? 0;
      const calls = model.seen.get(jobId) ?? [];
      model.seen.set(jobId, calls);
      const k = calls.filter((call) => call.life === life).length;
      const outcome = model.plan.outcome(args.p as number, life, k);
      const execution: Execution = { tool: name, life, outcome, result: "running" };
      calls.push(execution);
      const fail = (code: string, error: unknown): never => {
        execution.result = "failed";
        execution.code = code;
        throw error;
      };
      if (outcome === "hang") {
        const { signal } = context;
        await new Promise<void>((resolve) => {
          if (signal.aborted) resolve();
          signal.addEventListener("abort", () => resolve(), { once: true });
        });
        return fail("TOOL_TIMEOUT", signal.reason);
      }
      if (outcome === "throw") return fail("TOOL_EXECUTION_FAILED", new Error("scripted failure"));
      if (outcome === "upstream") {
        return fail(
          "PLUGIN_REQUEST_FAILED",
          new GatewayError("PLUGIN_REQUEST_FAILED", "Scripted upstream failure"),
        );
      }
      if (outcome === "slow_ok") await sleep(1);
      // Timed out meanwhile: the gateway answered TOOL_TIMEOUT, so this is no success.
      if (context.signal.aborted) return fail("TOOL_TIMEOUT", context.signal.reason);
      execution.result = "ok";
      return { p: args.p };
    },
  };
}

/** The run's plugins: the static handlers, and `late`, offered once `lateShown`. */
function plugins(model: Model): PluginDefinition[] {
  const late = handlerTool("late", model);
  let context: PluginContext | undefined;
  return [
    {
      name: "model",
      version: "1.0.0",
      zeroConfig: true,
      tools: (["plain", "idem", "paced"] as const).map((name) => handlerTool(name, model)),
    },
    {
      name: "late_plugin",
      version: "1.0.0",
      zeroConfig: true,
      tools: [],
      initialize(ctx) {
        context = ctx;
        model.lateContexts.add(ctx);
        if (model.lateShown) ctx.setTools([late]);
      },
      dispose() {
        if (context) model.lateContexts.delete(context);
      },
    },
  ];
}

/** One toolgate instance: its own store handle, bus, audit log, gateway and router. */
interface Instance {
  store: Store;
  audit: AuditLog;
  gateway: Gateway;
  router: IncomingRouter;
  /** Takes new requests (false once stopping). */
  accepting: boolean;
  /** Requests it is answering. */
  inflight: Set<Promise<unknown>>;
}

async function startInstance(
  store: Store,
  config: Config,
  model: Model,
  maxQueued: number,
  salt: number,
): Promise<Instance> {
  const bus = new EventBus();
  const audit = createAuditLog({ store, bus });
  const gateway = new Gateway({
    config,
    store,
    bus,
    audit,
    log: () => {},
    plugins: plugins(model),
  });
  await gateway.start();
  const router = new IncomingRouter({
    store,
    gateway,
    audit,
    config,
    log: (message) => model.logs.push(`router ${salt}: ${message}`),
    concurrency: model.plan.concurrency,
    maxQueuedJobs: maxQueued,
    random: prng(model.plan.seed ^ Math.imul(salt + 1, 0x5bd1e995)),
  });
  await router.start();
  return { store, audit, gateway, router, accepting: true, inflight: new Set() };
}

async function stopInstance(instance: Instance): Promise<void> {
  instance.accepting = false;
  // As a server stops: requests answered first, then the router, then the rest.
  while (instance.inflight.size) await Promise.all([...instance.inflight]);
  await instance.router.stop();
  await instance.gateway.stop();
  await instance.audit.close();
}

/** A post as answered. */
interface Answer {
  p: number;
  /** The endpoint record the router matched (none: 404 before the router). */
  endpoint?: IncomingWebhook;
  status: number;
  body?: { id?: string; status?: string; error?: { code?: string } };
  /** The handler the endpoint gives it (routes applied). */
  handler?: Handler;
  deliveryId?: string;
  /** The arguments it was accepted with. */
  payload: Record<string, unknown>;
  /** The raw JSON body sent (JSON posts). */
  raw?: string;
}

function handlerOf(endpoint: IncomingWebhook, payload: Record<string, unknown>): Handler {
  const routed = endpoint.route_by && typeof payload.route === "string"
    ? endpoint.routes?.[payload.route]
    : undefined;
  return (routed ?? endpoint.handler) as Handler;
}

function runConfig(base: Config, dataDir: string, plan: RunPlan): Config {
  return {
    ...base,
    dataDir,
    webhooks: { ...base.webhooks, poll_ms: POLL_MS },
    incoming: {
      ...base.incoming,
      retry_base_ms: RETRY_BASE_MS,
      max_pending_per_endpoint: plan.maxPendingPerEndpoint,
    },
    tools: {
      ...base.tools,
      timeout_ms: TIMEOUT_MS,
      circuit_threshold: plan.circuitThreshold,
      circuit_reset_ms: plan.circuitResetMs,
      overrides: {
        idem: { retries: 1 },
        paced: { rate: { rate: "200/s", burst: plan.burst } },
      },
    },
  };
}

/** Runs one generated case on a fresh store and checks the invariant; throws naming the seed. */
async function runCase(
  env: FreshStore,
  base: Config,
  plan: RunPlan,
  coverage: Coverage,
): Promise<number> {
  const problems: string[] = [];
  const model: Model = {
    plan,
    seen: new Map(),
    lives: new Map(),
    lateShown: false,
    lateContexts: new Set(),
    logs: [],
  };
  const cli = await env.another();
  const config = runConfig(base, env.dataDir, plan);
  // Endpoints by plan index: the current record (replaced by a change), and every id it had.
  const current: (IncomingWebhook | undefined)[] = [];
  const removedIds = new Set<string>();
  for (const [i, endpoint] of plan.endpoints.entries()) {
    current.push(
      await cli.webhooks.addIncoming({
        name: `e${i}`,
        path: `/hooks/e${i}`,
        handler: endpoint.handler,
        ...(endpoint.routes ? { route_by: "/route", routes: endpoint.routes } : {}),
        ...(endpoint.dedupe ? { dedupe_header: "X-Delivery" } : {}),
        ...(endpoint.when ? { when: ["/skip!=yes"] } : {}),
      }),
    );
  }
  let started = 0;
  const instances: Instance[] = [];
  for (let i = 0; i < plan.instances; i++) {
    const store = i === 0 ? env.store : await env.another();
    instances.push(await startInstance(store, config, model, plan.maxQueued[started], started++));
  }
  // Where requests go while an instance restarts: the next one, once it is up.
  let restarting: Promise<void> | null = null;
  const answers: Answer[] = [];
  const posting: Promise<void>[] = [];
  const deliveryIds: string[] = [];

  const post = async (p: number) => {
    const spec = plan.posts[p];
    let live = instances.filter((instance) => instance.accepting);
    while (!live.length) {
      await (restarting ?? sleep(1));
      live = instances.filter((instance) => instance.accepting);
    }
    const instance = live[p % live.length];
    const payload: Record<string, unknown> = {
      p,
      n: spec.invalid ? "x" : p,
      ...(spec.route ? { route: spec.route } : {}),
      ...(spec.skip ? { skip: "yes" } : {}),
      ...(spec.pad ? { pad: "x".repeat(spec.pad) } : {}),
    };
    const deliveryId = spec.resendOf !== undefined ? deliveryIds[spec.resendOf] : `d${p}`;
    deliveryIds[p] = deliveryId;
    const raw = JSON.stringify(payload);
    const answer: Answer = { p, status: 404, payload, deliveryId, ...(spec.form ? {} : { raw }) };
    answers[p] = answer;
    const endpoint = instance.router.match(`/hooks/e${spec.endpoint}`);
    if (!endpoint) return;
    answer.endpoint = endpoint;
    answer.handler = handlerOf(endpoint, payload);
    const request = new Request(`http://127.0.0.1${endpoint.path}`, {
      method: "POST",
      headers: {
        "content-type": spec.form ? "application/x-www-form-urlencoded" : "application/json",
        "x-delivery": deliveryId,
      },
      body: spec.form ? `payload=${encodeURIComponent(raw)}` : raw,
    });
    const handling = instance.router.handle(request, endpoint);
    instance.inflight.add(handling);
    try {
      const response = await handling;
      answer.status = response.status;
      answer.body = await response.json();
    } finally {
      instance.inflight.delete(handling);
    }
  };

  const restart = async (index: number) => {
    const old = instances[index];
    if (!old.accepting) return;
    const replaced = (async () => {
      await stopInstance(old);
      await old.store.close();
      const store = await env.another();
      instances[index] = await startInstance(
        store,
        config,
        model,
        plan.maxQueued[started % plan.maxQueued.length],
        started++,
      );
    })();
    restarting = replaced;
    await replaced;
    if (restarting === replaced) restarting = null;
  };

  const begun = performance.now();
  const drained = async (what: string) => {
    const deadline = performance.now() + DRAIN_MS;
    for (;;) {
      const pending = await cli.incoming.list();
      if (!pending.length) return;
      if (performance.now() > deadline) {
        problems.push(
          `${what}: jobs still pending after ${DRAIN_MS} ms: ${
            JSON.stringify(pending.map((job) => ({ ...job, seen: model.seen.get(job.id) })))
          }`,
        );
        return;
      }
      await sleep(POLL_MS);
    }
  };

  try {
    const steps: { at: number; run: () => Promise<void> }[] = [
      ...plan.posts.map((spec, p) => ({
        at: spec.at,
        run: () => {
          posting.push(post(p));
          return Promise.resolve();
        },
      })),
      ...plan.mutations.map((m) => ({
        at: m.at,
        run: async () => {
          const endpoint = current[m.endpoint];
          if (!endpoint) return;
          removedIds.add(endpoint.id);
          await cli.webhooks.remove(endpoint.id);
          current[m.endpoint] = m.kind === "remove" ? undefined : await cli.webhooks.addIncoming({
            name: `e${m.endpoint}_${m.at}`,
            path: endpoint.path,
            handler: m.handler,
            ...(endpoint.dedupe_header ? { dedupe_header: endpoint.dedupe_header } : {}),
          });
        },
      })),
      ...plan.restarts.map((r) => ({ at: r.at, run: () => restart(r.instance) })),
      {
        at: plan.lateAt,
        run: () => {
          model.lateShown = true;
          const late = handlerTool("late", model);
          for (const context of model.lateContexts) context.setTools([late]);
          return Promise.resolve();
        },
      },
    ].sort((a, b) => a.at - b.at);
    for (const step of steps) {
      const wait = step.at - (performance.now() - begun);
      if (wait > 0) await sleep(wait);
      await step.run();
    }
    await Promise.all(posting);
    await drained("accepted");

    // Replays from the CLI's handle, a round at a time.
    const replayed = new Map<string, number>();
    for (const [round, kind] of plan.replays.entries()) {
      const failed = await cli.incoming.listFailed();
      if (!failed.length) break;
      const chosen = kind === "all"
        ? failed
        : kind === "endpoint"
        ? failed.filter((job) => job.endpoint_id === failed[round % failed.length].endpoint_id)
        : [failed[(plan.seed + round) % failed.length]];
      for (const job of chosen) {
        model.lives.set(job.id, (model.lives.get(job.id) ?? 0) + 1);
        replayed.set(job.id, (replayed.get(job.id) ?? 0) + 1);
      }
      const target = kind === "all"
        ? "all" as const
        : kind === "endpoint"
        ? { endpoint: chosen[0].endpoint_id }
        : chosen[0].id;
      const result = await replayFailedJobs(cli, target);
      const expected = chosen.map((job) => job.id).sort();
      if (JSON.stringify([...result.replayed].sort()) !== JSON.stringify(expected)) {
        problems.push(
          `replay ${round} (${kind}): replayed ${JSON.stringify(result.replayed)}, ` +
            `expected ${JSON.stringify(expected)}`,
        );
      }
      if (plan.wake) { for (const instance of instances) instance.router.wake(); }
      await drained(`replay ${round}`);
    }
  } finally {
    for (const instance of instances) await stopInstance(instance);
  }

  // What the store holds now.
  const pending = await cli.incoming.list();
  if (pending.length) problems.push(`pending at the end: ${pending.map((j) => j.id).join(", ")}`);
  const failedJobs = new Map<string, IncomingJob>();
  for (const job of await cli.incoming.listFailed()) {
    if (failedJobs.has(job.id)) problems.push(`${job.id}: listed twice as failed`);
    failedJobs.set(job.id, job);
  }
  const reader = createAuditLog({ store: cli, bus: new EventBus() });
  const entries = new Map<string, { tool: string; skipped: boolean }[]>();
  try {
    for await (const entry of reader.entries({ kind: "webhook.incoming" })) {
      const list = entries.get(entry.session_id ?? "") ?? [];
      list.push({ tool: entry.tool, skipped: entry.outcome.skipped !== undefined });
      entries.set(entry.session_id ?? "", list);
    }
  } finally {
    await reader.close();
  }

  const accepted = new Map<string, Answer>();
  const failedTimes = new Map<string, number>();
  let recorded = 0;
  for (const answer of answers) {
    const { p, status, body, endpoint } = answer;
    const what = `payload ${p} (${JSON.stringify(plan.posts[p])})`;
    const id = body?.id;
    if (status === 404) {
      if (endpoint) problems.push(`${what}: 404 from the router`);
      continue;
    }
    if (status === 503) {
      const code = body?.error?.code;
      if (code !== "QUEUE_FULL" && code !== "UNAVAILABLE") problems.push(`${what}: 503 ${code}`);
      if (code === "QUEUE_FULL" && plan.maxPendingPerEndpoint >= 10_000) {
        problems.push(`${what}: QUEUE_FULL without a bound`);
      }
      continue;
    }
    if (status === 200 && body?.status === "duplicate") {
      // The payload accepted with its delivery id (sent before or after it, at once).
      const first = answers.find((a) =>
        a.p !== p && a.body?.id === id && a.body?.status === "accepted" &&
        a.deliveryId === answer.deliveryId && a.endpoint?.id === endpoint?.id
      );
      if (!endpoint?.dedupe_header || !first) problems.push(`${what}: duplicate of ${id}`);
      continue;
    }
    if (status === 202 && body?.status === "skipped") {
      recorded++;
      const audited = entries.get(id!) ?? [];
      if (!endpoint?.when || answer.payload.skip !== "yes") problems.push(`${what}: skipped`);
      if (audited.length !== 1 || !audited[0].skipped) {
        problems.push(`${what}: skipped with ${audited.length} audit entries`);
      }
      if (model.seen.has(id!) || failedJobs.has(id!)) problems.push(`${what}: skipped, yet run`);
      continue;
    }
    if (status !== 202 || body?.status !== "accepted" || typeof id !== "string") {
      problems.push(`${what}: answered ${status} ${JSON.stringify(body)}`);
      continue;
    }
    recorded++;
    accepted.set(id, answer);
    if (endpoint?.when && answer.payload.skip === "yes") problems.push(`${what}: not skipped`);
    if (endpoint?.dedupe_header) {
      const twice = answers.find((a) =>
        a.p > p && a.body?.status === "accepted" && a.deliveryId === answer.deliveryId &&
        a.endpoint?.id === endpoint.id
      );
      if (twice) problems.push(`${what}: accepted again, delivery id of payload ${twice.p}`);
    }
    const handler = answer.handler!;
    const audited = entries.get(id) ?? [];
    if (audited.length !== 1 || audited[0].skipped || audited[0].tool !== handler) {
      problems.push(`${what}: ${JSON.stringify(audited)} audit entries, handler ${handler}`);
    }
    const calls = model.seen.get(id) ?? [];
    const life = model.lives.get(id) ?? 0;
    const oks = calls.filter((call) => call.result === "ok");
    const running = calls.filter((call) => call.result === "running");
    const failed = failedJobs.get(id);
    const story = `${what} ${id} → ${handler}: calls ${JSON.stringify(calls)}, ` +
      `failed ${JSON.stringify(failed)}, lives ${life}`;
    if (running.length) problems.push(`${story}: a call never ended`);
    if (calls.some((call) => call.tool !== handler)) problems.push(`${story}: another handler ran`);
    if (oks.length > 1) problems.push(`${story}: handled ${oks.length} times`);
    if (oks.length && failed) problems.push(`${story}: handled and kept as failed`);
    if (!oks.length && !failed) problems.push(`${story}: neither handled nor kept as failed`);
    if (oks.length && oks[0].life !== life) problems.push(`${story}: handled in an earlier life`);
    for (let l = 0; l <= life; l++) {
      const ofLife = calls.filter((call) => call.life === l);
      const most = CALLS_PER_LIFE * EXECUTIONS_PER_CALL[handler];
      if (ofLife.length > most) problems.push(`${story}: ${ofLife.length} calls in life ${l}`);
      const okAt = ofLife.findIndex((call) => call.result === "ok");
      if (okAt !== -1 && okAt !== ofLife.length - 1) {
        problems.push(`${story}: calls after a success`);
      }
      if (l < life && okAt !== -1) problems.push(`${story}: replayed after a success`);
    }
    // Became a failed job once per replay, and once more if it still is one.
    failedTimes.set(id, life + (failed ? 1 : 0));
    if (failed) {
      const attempts = failed.attempts ?? [];
      const last = attempts.at(-1)?.code ?? "";
      if (attempts.length > CALLS_PER_LIFE) problems.push(`${story}: ${attempts.length} attempts`);
      if (attempts.length !== CALLS_PER_LIFE && !INPUT_CODES.has(last)) {
        problems.push(`${story}: failed after ${attempts.length} attempts, last ${last}`);
      }
      if (failed.handler !== handler || failed.endpoint_id !== endpoint!.id) {
        problems.push(`${story}: failed job of another handler or endpoint`);
      }
      // Each call of a single-execution tool that ran and failed is one attempt, in order.
      if (EXECUTIONS_PER_CALL[handler] === 1) {
        const ran = calls.filter((call) => call.life === life).map((call) => call.code);
        const recordedCodes = attempts.map((a) => a.code).filter((code) =>
          Object.values(FAILURE_CODES).includes(code)
        );
        if (JSON.stringify(ran) !== JSON.stringify(recordedCodes)) {
          problems.push(`${story}: attempts ${JSON.stringify(recordedCodes)} ≠ calls seen`);
        }
      }
      const stored = await cli.incoming.readBody(failed);
      if (!stored) {
        problems.push(`${story}: the failed job's body is gone`);
      } else {
        const text = new TextDecoder().decode(stored);
        const same = answer.raw !== undefined
          ? text === answer.raw
          : JSON.stringify(JSON.parse(text)) === JSON.stringify(answer.payload);
        if (!same) problems.push(`${story}: the failed job's body differs`);
      }
    } else if (await cli.incoming.get(id)) {
      problems.push(`${story}: handled, yet still stored`);
    }
  }
  for (const id of model.seen.keys()) {
    if (!accepted.has(id)) problems.push(`${id}: run, but never accepted`);
  }
  for (const id of failedJobs.keys()) {
    if (!accepted.has(id)) problems.push(`${id}: kept as failed, but never accepted`);
  }
  const audited = [...entries.values()].reduce((sum, list) => sum + list.length, 0);
  if (audited !== recorded) {
    problems.push(`${audited} webhook.incoming entries, ${recorded} payloads`);
  }
  // The failed counter of each endpoint never removed.
  for (const endpoint of current) {
    if (!endpoint || removedIds.has(endpoint.id)) continue;
    const expected = [...accepted].filter(([, a]) => a.endpoint?.id === endpoint.id)
      .reduce((sum, [id]) => sum + (failedTimes.get(id) ?? 0), 0);
    const { failed } = await cli.webhooks.incomingStats(endpoint.id);
    if (failed !== expected) {
      problems.push(`endpoint ${endpoint.path}: failed counter ${failed}, expected ${expected}`);
    }
  }
  if (problems.length) {
    throw new Error(
      `Model run failed; replay with TOOLGATE_MODEL_SEED=${plan.seed}:\n${problems.join("\n")}\n` +
        `plan: ${JSON.stringify({ ...plan, outcome: undefined })}\n` +
        `router logs (last 40):\n${model.logs.slice(-40).join("\n")}`,
    );
  }
  for (const answer of answers) {
    count(
      coverage.answers,
      `${answer.status} ${answer.body?.status ?? answer.body?.error?.code ?? ""}`.trim(),
    );
  }
  for (const line of model.logs) {
    const code = / failed: ([A-Z_]+) /.exec(line)?.[1];
    if (code) count(coverage.failures, code);
    if (line.includes("is over its rate limit")) count(coverage.failures, "RATE_LIMITED (put off)");
  }
  return accepted.size;
}

/** What the runs went through: answers to the posts, and the codes of failed handler calls. */
interface Coverage {
  answers: Map<string, number>;
  failures: Map<string, number>;
}

function count(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** Runs the model on fresh stores of one adapter and says how many payloads it took. */
async function runModel(
  fresh: StoreMaker,
  shared: boolean,
  runs: number,
  workers: number,
  baseSeed: number,
): Promise<void> {
  const base = await testConfig();
  const seeds = ONE_SEED !== undefined
    ? [Number(ONE_SEED)]
    : Array.from({ length: runs }, (_, i) => (baseSeed + Math.imul(i, 0x9e3779b1)) >>> 0);
  let next = 0;
  let payloads = 0;
  const coverage: Coverage = { answers: new Map(), failures: new Map() };
  const failures: string[] = [];
  const begun = performance.now();
  // A store of its own per run.
  const worker = async () => {
    while (next < seeds.length && failures.length === 0) {
      const seed = seeds[next++];
      await using env = await fresh();
      try {
        const accepted = await runCase(env, base, planRun(seed, shared), coverage);
        payloads += accepted;
      } catch (error) {
        failures.push(String(error));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(workers, seeds.length) }, worker));
  console.error(
    `incoming model: ${seeds.length} runs, ${payloads} accepted payloads, ${
      Math.round(performance.now() - begun)
    } ms; answers ${JSON.stringify(Object.fromEntries(coverage.answers))}; failed calls ${
      JSON.stringify(Object.fromEntries(coverage.failures))
    }`,
  );
  assertEquals(failures, []);
}

/** A seed per test run, printed so a failure can be replayed. */
function baseSeed(): number {
  const seed = Math.floor(Math.random() * 2 ** 32);
  console.error(
    ONE_SEED === undefined
      ? `incoming model: base seed ${seed}`
      : `incoming model: replaying seed ${ONE_SEED}`,
  );
  return seed;
}

Deno.test("kv: generated incoming runs all end handled once or kept failed for replay, nothing pending", async () => {
  await runModel(kvStores(), false, RUNS, WORKERS.kv, baseSeed());
});

/**
 * Empty stores on a few databases of `stores`' cluster, reused: creating a
 * database per run costs a checkpoint (about 100 ms, one at a time), so
 * each worker's database is emptied (every table but the migrations') when
 * its run is over and handed to the next, as good as new.
 */
function reusedDatabases(stores: PostgresStores): StoreMaker & AsyncDisposable {
  const template = stores.pg.url;
  const creator = postgres(template.replace(/\/toolgate_template$/, "/postgres"), {
    max: 1,
    onnotice: () => {},
  });
  /** Databases not in use, each with a connection that empties it. */
  const free: { url: string; sql: postgres.Sql }[] = [];
  const all: postgres.Sql[] = [];
  let n = 0;
  const take = async () => {
    const reused = free.pop();
    if (reused) return reused;
    const database = `model_${++n}`;
    await creator.unsafe(`create database ${database} template toolgate_template`);
    const url = template.replace(/\/toolgate_template$/, `/${database}`);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    all.push(sql);
    return { url, sql };
  };
  const maker = async (): Promise<FreshStore> => {
    const database = await take();
    const dataDir = await Deno.makeTempDir({ prefix: "toolgate-store-" });
    const opened: Store[] = [];
    const another = async () => {
      // Small pools: the runs at once stay below the server's 100 connections.
      const store = await openPostgresStore({ url: database.url, dataDir, pool: { max: 3 } });
      opened.push(store);
      return store;
    };
    return {
      adapter: "postgres",
      store: await another(),
      dataDir,
      url: database.url,
      another,
      async [Symbol.asyncDispose]() {
        for (const store of opened) await store.close();
        await Deno.remove(dataDir, { recursive: true });
        const tables = await database.sql<{ name: string }[]>`
          select tablename as name from pg_tables
          where schemaname = current_schema() and tablename <> 'toolgate_schema_migrations'`;
        await database.sql.begin((tx) =>
          Promise.all(tables.map(({ name }) => tx.unsafe(`delete from ${name}`)))
        );
        free.push(database);
      },
    };
  };
  return Object.assign(maker, {
    async [Symbol.asyncDispose]() {
      for (const sql of all) await sql.end();
      await creator.end();
    },
  });
}

Deno.test("postgres: generated incoming runs all end handled once or kept failed for replay, nothing pending", async () => {
  await using stores = await postgresStores();
  await using databases = reusedDatabases(stores);
  await runModel(databases, true, Math.ceil(RUNS / 3), WORKERS.postgres, baseSeed());
});
