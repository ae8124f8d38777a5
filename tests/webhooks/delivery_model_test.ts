/**
 * A model-based test of the outgoing delivery lifecycle, on both adapters:
 * generated runs of 1–4 events in flight to 1–10 webhooks, each pair with a
 * scripted sequence of answers (2xx at any attempt, other statuses, 410,
 * 429/503 with Retry-After, refused connections, timeouts), per-webhook
 * schedules some of whose retries are given back to the store (past the
 * claim horizon), and webhooks disabled, re-enabled, removed and rotated
 * mid-way. Checked against what the receivers saw and what the store holds:
 *
 * - every (event, webhook) pair of a webhook not removed ends in exactly one
 *   of delivered (a 2xx reached the receiver) or one dead-letter record,
 *   whose attempts are exactly those the receiver saw;
 * - no attempt follows a 2xx, and attempts never exceed 1 + retries;
 * - a removed webhook's pairs end delivered, dead-lettered or given up
 *   (counted), never more attempts than allowed;
 * - nothing of the run's events is stored after the end.
 *
 * `TOOLGATE_MODEL_SEED` replays one run (its seed is printed on failure);
 * `TOOLGATE_MODEL_RUNS` sets how many runs on Deno KV (default 700; a fifth
 * as many on PostgreSQL, whose fresh databases cost more). A failed run
 * prints the store calls of its events (see {@linkcode traced}).
 *
 * Its first runs found a defect fixed in issue 33: on PostgreSQL, claim
 * renewals and releases locked rows in scan order and deadlocked with
 * outcome commits. Its end condition rests on `listPending()` listing every
 * delivery pending throughout the call: on Deno KV a delivery whose first
 * attempt failed meanwhile was in neither of its two reads, and a loaded
 * run ended early, its retry still stored (checked below, deterministically).
 *
 * @module
 */
import { prng } from "../_prng.ts";
import { assert, assertEquals } from "../_asserts.ts";
import { EventBus, type EventType } from "../../src/events/mod.ts";
import type { DeliveryRecord, FanoutRecord, Store } from "../../src/store/mod.ts";
import type { KvStore } from "../../src/store/kv/kv_store.ts";
import { listPendingDeliveries } from "../../src/store/kv/deliveries.ts";
import {
  createDispatcher,
  disableWebhook,
  enableWebhook,
  rotateWebhookSecret,
} from "../../src/webhooks/mod.ts";
import { circuitOpened, LOOPBACK_EGRESS, toolCalled } from "./_setup.ts";
import { kvStores, postgresStores, type StoreMaker } from "../store/_stores.ts";

const RUNS = Number(Deno.env.get("TOOLGATE_MODEL_RUNS") ?? 700);
const ONE_SEED = Deno.env.get("TOOLGATE_MODEL_SEED");
/** Runs at once per adapter (each on a store of its own): they mostly wait on timers. */
const WORKERS = 12;
/** Retries past this many ms are given back to the store, as past the default 1 s horizon. */
const HORIZON_MS = 20;
const TIMEOUT_MS = 25;

type Answer =
  | { kind: "status"; status: number; retryAfter?: string }
  | { kind: "refused" }
  | { kind: "hang" };

const FAILURES: Answer[] = [
  { kind: "status", status: 500 },
  { kind: "status", status: 302 },
  { kind: "status", status: 401 },
  { kind: "status", status: 503, retryAfter: "1" },
  { kind: "status", status: 429, retryAfter: "1" },
  { kind: "refused" },
  { kind: "hang" },
];
const SUCCESSES = [200, 204, 299];

interface HookPlan {
  index: number;
  schedule?: number[];
  events: "*" | EventType[];
}

interface Mutation {
  at: number;
  hook: number;
  kind: "disable" | "enable" | "remove" | "rotate";
}

interface RunPlan {
  seed: number;
  hooks: HookPlan[];
  events: { at: number; type: EventType }[];
  mutations: Mutation[];
  /** The answer to attempt `attempt` (0-based) of event `event` at hook `hook`. */
  answer(hook: number, event: number, attempt: number): Answer;
}

const TYPES: EventType[] = ["tool.called", "circuit.opened"];

function planRun(seed: number): RunPlan {
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const hookCount = 1 + Math.floor(random() * 10);
  const hooks: HookPlan[] = [];
  for (let index = 0; index < hookCount; index++) {
    const schedule = random() < 0.5
      ? Array.from({ length: 1 + Math.floor(random() * 5) }, () => pick([1, 3, 8, 30, 45]))
      : undefined;
    const events = random() < 0.7 ? "*" : [pick(TYPES)];
    hooks.push({ index, schedule, events });
  }
  const events = Array.from(
    { length: 1 + Math.floor(random() * 4) },
    () => ({ at: Math.floor(random() * 30), type: pick(TYPES) }),
  );
  const mutations: Mutation[] = [];
  const mutationCount = random() < 0.4 ? 1 + Math.floor(random() * 3) : 0;
  for (let i = 0; i < mutationCount; i++) {
    mutations.push({
      at: Math.floor(random() * 60),
      hook: Math.floor(random() * hookCount),
      kind: pick(["disable", "enable", "remove", "rotate"] as const),
    });
  }
  // Per pair: the attempt that succeeds (none past the last), failures before it.
  const scripts = new Map<string, Answer[]>();
  const answer = (hook: number, event: number, attempt: number): Answer => {
    const key = `${hook}/${event}`;
    let script = scripts.get(key);
    if (!script) {
      const pair = prng(seed ^ Math.imul(hook + 1, 0x9e3779b1) ^ Math.imul(event + 1, 0x85ebca6b));
      const total = 1 + (hooks[hook].schedule?.length ?? 5);
      const succeedAt = Math.floor(pair() * (total + 2)); // ≥ total: never
      script = [];
      for (let i = 0; i < total; i++) {
        if (i === succeedAt) {
          script.push({ kind: "status", status: SUCCESSES[Math.floor(pair() * 3)] });
          break;
        }
        script.push(
          pair() < 0.03
            ? { kind: "status", status: 410 }
            : FAILURES[Math.floor(pair() * FAILURES.length)],
        );
      }
      scripts.set(key, script);
    }
    return script[attempt] ?? { kind: "status", status: 500 };
  };
  return { seed, hooks, events, mutations, answer };
}

interface Seen {
  /** Answers given, in order, per pair `hookId/eventId`. */
  answers: Map<string, Answer[]>;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A line per store call of the dispatcher's, for the report of a failed run. */
type Trace = string[];

function opSummary(op: { op: string } & Record<string, unknown>): string {
  const d = op.delivery as { webhook_id?: string; attempt_count?: number } | undefined;
  const f = op.fanout as { webhook_ids?: string[] } | undefined;
  if (op.op === "put_delivery") return `put_delivery ${d?.webhook_id} n=${d?.attempt_count}`;
  if (op.op === "put_fanout") return `put_fanout [${f?.webhook_ids?.join(",")}]`;
  if (op.op === "delete_delivery") return `delete_delivery ${op.webhook_id}`;
  if (op.op === "put_dlq") {
    return `put_dlq ${(op.record as { webhook_id: string }).webhook_id}`;
  }
  if (op.op === "collect_event") return `collect_event ${op.event_id}`;
  return op.op;
}

/** `store` with its delivery calls written to `trace` (what a failed run prints). */
function traced(store: Store, trace: Trace): Store {
  const started = performance.now();
  const log = (line: string) => trace.push(`${(performance.now() - started).toFixed(1)} ${line}`);
  const deliveries = store.deliveries;
  const overrides: Record<string, unknown> = {
    claimDue: async (options: Parameters<typeof deliveries.claimDue>[0]) => {
      const out = await deliveries.claimDue(options);
      const list = out.map((d) =>
        `${d.record.event_id}/${d.record.webhook_id}${
          d.fanout ? "(f)" : ""
        }@${d.record.attempt_count}`
      );
      if (list.length) log(`claimDue -> ${list.join(" ")}`);
      return out;
    },
    releaseClaims: (owner: string, keys?: { event_id: string; webhook_id: string }[]) => {
      log(`releaseClaims ${keys?.map((k) => `${k.event_id}/${k.webhook_id}`).join(" ")}`);
      return deliveries.releaseClaims(owner, keys);
    },
    readEvent: async (eventId: string) => {
      const out = await deliveries.readEvent(eventId);
      log(`readEvent ${eventId} -> ${out ? "found" : "missing"}`);
      return out;
    },
    collectEventIfUnreferenced: async (eventId: string) => {
      const out = await deliveries.collectEventIfUnreferenced(eventId);
      log(`collectEventIfUnreferenced ${eventId} -> ${out}`);
      return out;
    },
    writer: (options?: { lingerMs?: number }) => {
      const writer = deliveries.writer(options);
      return {
        get queued() {
          return writer.queued;
        },
        flush: () => writer.flush(),
        write: async (ops: Parameters<typeof writer.write>[0]) => {
          const id = trace.length;
          const events = [
            ...new Set(
              ops.map((op) => {
                const o = op as unknown as Record<string, unknown>;
                return (o.event_id ?? (o.delivery as { event_id?: string })?.event_id ??
                  (o.event as { id?: string })?.id ??
                  (o.record as { event_id?: string })?.event_id) as
                    | string
                    | undefined;
              }).filter(Boolean),
            ),
          ];
          log(
            `write#${id} ${events.join(",")}: ${
              ops.map((op) => opSummary(op as never)).join("; ")
            }`,
          );
          const result = await writer.write(ops);
          log(`write#${id} done collected=${result.collected}`);
          return result;
        },
      };
    },
  };
  const bound = <T extends object>(target: T, extra: Record<string, unknown>): T =>
    new Proxy(target, {
      get(object, name) {
        if (typeof name === "string" && name in extra) return extra[name];
        const value = Reflect.get(object, name, object);
        return typeof value === "function" ? value.bind(object) : value;
      },
    });
  return bound(store, { deliveries: bound(deliveries, overrides) });
}

/** Runs one generated case on `store` and checks the invariant; throws naming the seed. */
/** Runs one generated case; returns how many (event, subscribed webhook) pairs it checked. */
async function runCase(plain: Store, dataDir: string, plan: RunPlan): Promise<number> {
  const trace: Trace = [];
  const store = traced(plain, trace);
  const hookIds: string[] = [];
  for (const hook of plan.hooks) {
    const added = await store.webhooks.addOutgoing({
      url: `http://127.0.0.1:9/${hook.index}`,
      events: hook.events,
      secret: "s3cret",
      ...(hook.schedule ? { retry_schedule_ms: hook.schedule } : {}),
    });
    hookIds.push(added.id);
  }
  const eventIndex = new Map<string, number>();
  const seen: Seen = { answers: new Map() };
  const fetchLike = (input: string, init: RequestInit): Promise<Response> => {
    const hook = Number(new URL(input).pathname.slice(1));
    const eventId = new Headers(init.headers).get("x-service-delivery")!;
    const key = `${hookIds[hook]}/${eventId}`;
    const given = seen.answers.get(key) ?? [];
    seen.answers.set(key, given);
    const event = eventIndex.get(eventId);
    // A webhook.test ping or an unknown event: never expected here.
    const answer: Answer = event === undefined
      ? { kind: "status", status: 599 }
      : plan.answer(hook, event, given.length);
    given.push(answer);
    if (answer.kind === "refused") return Promise.reject(new TypeError("Connection refused"));
    if (answer.kind === "hang") {
      return new Promise((_resolve, reject) => {
        init.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true });
      });
    }
    const headers: Record<string, string> = answer.retryAfter
      ? { "Retry-After": answer.retryAfter }
      : {};
    if (answer.status >= 300 && answer.status < 400) headers.Location = "http://127.0.0.1:9/x";
    return Promise.resolve(new Response(null, { status: answer.status, headers }));
  };
  const errors: unknown[] = [];
  let givenUp = 0;
  const bus = new EventBus({ onListenerError: (error) => errors.push(error) });
  const dispatcher = createDispatcher({
    store,
    bus,
    config: {
      dataDir,
      webhooks: {
        retry_base_ms: 1,
        timeout_ms: TIMEOUT_MS,
        poll_ms: 5,
        retry_after_max_ms: 12,
      },
      events: { disabled: [] },
    },
    fetch: fetchLike,
    egress: LOOPBACK_EGRESS,
    random: prng(plan.seed ^ 0x5bd1e995),
    claimHorizonMs: HORIZON_MS,
    onError: (error) => errors.push(error),
    onUndeliverable: (reason, count) => {
      if (reason === "webhook_removed") givenUp += count;
    },
  });
  await dispatcher.start();
  const removed = new Set<string>();
  const emitted: string[] = [];
  const begun = performance.now();
  try {
    const steps: { at: number; run: () => Promise<void> }[] = [
      ...plan.events.map((event, i) => ({
        at: event.at,
        run: async () => {
          const data = event.type === "tool.called" ? toolCalled(`t${i}`) : circuitOpened(`t${i}`);
          const envelope = await bus.emit(event.type, data as never);
          assert(envelope);
          eventIndex.set(envelope.id, i);
          emitted[i] = envelope.id;
        },
      })),
      ...plan.mutations.map((m) => ({
        at: m.at,
        run: async () => {
          const id = hookIds[m.hook];
          if (removed.has(id)) return;
          if (m.kind === "remove") {
            removed.add(id);
            await store.webhooks.remove(id);
          } else if (m.kind === "disable") await disableWebhook(store, id, "model");
          else if (m.kind === "enable") await enableWebhook(store, id);
          else await rotateWebhookSecret(store, id);
        },
      })),
    ].sort((a, b) => a.at - b.at);
    // The bus records the envelope before its first attempt can be answered.
    for (const step of steps) {
      const wait = step.at - (performance.now() - begun);
      if (wait > 0) await sleep(wait);
      await step.run();
    }
    // The end: nothing of the run pending in the store, nothing held.
    const deadline = performance.now() + 20_000;
    for (;;) {
      const pending = await store.deliveries.listPending();
      if (!pending.length && dispatcher.pending === 0) break;
      if (performance.now() > deadline) {
        throw new Error(`Deliveries never ended: ${JSON.stringify(pending.map((p) => p.record))}`);
      }
      await sleep(10);
    }
    await dispatcher.whenIdle();
  } finally {
    await dispatcher.stop();
  }

  const dlq = (await store.deliveries.listDlq()).filter((r) => hookIds.includes(r.webhook_id));
  const problems: string[] = [];
  for (const [i, eventId] of emitted.entries()) {
    const type = plan.events[i].type;
    if (await store.deliveries.readEvent(eventId)) problems.push(`${eventId}: still stored`);
    for (const hook of plan.hooks) {
      const id = hookIds[hook.index];
      const given = seen.answers.get(`${id}/${eventId}`) ?? [];
      const okAt = given.findIndex((a) => a.kind === "status" && a.status >= 200 && a.status < 300);
      const dead = dlq.filter((r) => r.event_id === eventId && r.webhook_id === id);
      const what = `event ${i} ${eventId} (${type}) at hook ${hook.index} ${id}`;
      const limit = 1 + (hook.schedule?.length ?? 5);
      if (given.length > limit) problems.push(`${what}: ${given.length} attempts, limit ${limit}`);
      if (okAt !== -1 && okAt !== given.length - 1) problems.push(`${what}: attempts after a 2xx`);
      if (dead.length > 1) problems.push(`${what}: ${dead.length} dead letters`);
      if (okAt !== -1 && dead.length) problems.push(`${what}: delivered and dead-lettered`);
      const subscribed = hook.events === "*" || hook.events.includes(type);
      if (!subscribed) {
        if (given.length || dead.length) problems.push(`${what}: not subscribed, yet sent`);
        continue;
      }
      if (dead.length === 1 && dead[0].attempts.length !== given.length) {
        problems.push(
          `${what}: dead letter has ${
            dead[0].attempts.length
          } attempts, receiver saw ${given.length}`,
        );
      }
      if (removed.has(id)) continue;
      if (okAt === -1 && dead.length === 0) {
        problems.push(
          `${what}: neither delivered nor dead-lettered (answers ${JSON.stringify(given)}, ` +
            `schedule ${JSON.stringify(hook.schedule)}, mutations ${
              JSON.stringify(plan.mutations)
            }, ` +
            `given up ${givenUp})`,
        );
      }
    }
  }
  const removedPairs = [...removed].length;
  if (givenUp > removedPairs * plan.events.length) problems.push(`given up ${givenUp} > pairs`);
  const unexpected = errors.filter((error) =>
    !["DELIVERY_FAILED", "UNAVAILABLE"].includes((error as { code?: string }).code ?? "")
  );
  if (unexpected.length) {
    problems.push(
      `errors: ${unexpected.map((e) => (e as Error).stack ?? String(e)).join("; ")}`,
    );
  }
  let pairs = 0;
  for (const event of plan.events) {
    pairs += plan.hooks.filter((h) => h.events === "*" || h.events.includes(event.type)).length;
  }
  if (problems.length) {
    const about = emitted.filter((id) => problems.some((p) => p.includes(id)));
    const lines = trace.filter((line) => about.some((id) => line.includes(id)));
    // Still pending after the end (the run ended early) or gone (lost)?
    const left = (await plain.deliveries.listPending())
      .filter((d) => about.includes(d.record.event_id))
      .map((d) =>
        `${d.record.event_id}/${d.record.webhook_id}${
          d.fanout ? "(f)" : ""
        }@${d.record.attempt_count}`
      );
    throw new Error(
      `Model run failed; replay with TOOLGATE_MODEL_SEED=${plan.seed}:\n${problems.join("\n")}` +
        `\nhooks ${JSON.stringify(hookIds)}\npending after the end: [${left.join(" ")}]\n` +
        lines.join("\n"),
    );
  }
  return pairs;
}

async function runModel(fresh: StoreMaker, runs: number, baseSeed: number): Promise<void> {
  const seeds = ONE_SEED !== undefined
    ? [Number(ONE_SEED)]
    : Array.from({ length: runs }, (_, i) => (baseSeed + Math.imul(i, 0x9e3779b1)) >>> 0);
  let next = 0;
  let pairs = 0;
  const began = performance.now();
  const failures: string[] = [];
  // A store of its own per run, as a process opens its own handle.
  const worker = async () => {
    while (next < seeds.length && failures.length === 0) {
      const seed = seeds[next++];
      await using env = await fresh();
      try {
        const checked = await runCase(env.store, env.dataDir, planRun(seed));
        pairs += checked;
      } catch (error) {
        failures.push(String(error));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(WORKERS, seeds.length) }, worker));
  console.error(
    `delivery model: ${seeds.length} runs, ${pairs} (event, webhook) pairs, ` +
      `${Math.round(performance.now() - began)} ms`,
  );
  assertEquals(failures, []);
}

/** A seed per test run, printed so a failure can be replayed. */
function baseSeed(): number {
  const seed = Math.floor(Math.random() * 2 ** 32);
  console.error(`delivery model: base seed ${seed}`);
  return seed;
}

Deno.test("kv: generated delivery runs all end delivered or dead-lettered, nothing left stored", async () => {
  await runModel(kvStores(), RUNS, baseSeed());
});

Deno.test("kv: listPending lists a delivery that leaves its fan-out entry for a record of its own meanwhile", async () => {
  await using env = await kvStores()();
  const store = env.store as KvStore;
  const writer = store.deliveries.writer();
  const now = Date.now();
  const created_at = new Date(now).toISOString();
  const fanout: FanoutRecord = {
    event_type: "tool.called",
    created_at,
    next_attempt_at: now,
    webhook_ids: ["wh_a"],
  };
  const event = {
    id: "evt_moving",
    type: "tool.called",
    timestamp: created_at,
    body: new Uint8Array(8),
    webhook_ids: ["wh_a"],
  };
  await writer.write([
    { op: "put_event", event },
    { op: "put_fanout", event_id: event.id, fanout },
  ]);
  const retry: DeliveryRecord = {
    event_id: event.id,
    event_type: "tool.called",
    webhook_id: "wh_a",
    attempt_count: 1,
    next_attempt_at: now + 60_000,
    created_at,
    attempts: [{ attempt: 1, at: created_at, status: 500, duration_ms: 1 }],
  };
  // The commit of the first failed attempt lands right after the listing's first read.
  let move: (() => Promise<unknown>) | undefined = () =>
    writer.write([
      { op: "put_delivery", delivery: retry },
      { op: "put_fanout", event_id: event.id, fanout: { ...fanout, webhook_ids: [] } },
    ]);
  const kv = new Proxy(store.kv, {
    get(target, name) {
      if (name === "list") {
        return async function* (...args: Parameters<Deno.Kv["list"]>) {
          yield* target.list(...args);
          const run = move;
          move = undefined;
          await run?.();
        };
      }
      const value = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const view = new Proxy(store, {
    get(target, name) {
      if (name === "kv") return kv;
      const value = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const listed = await listPendingDeliveries(view);
  assertEquals(move, undefined);
  assertEquals(listed.map((d) => ({ record: d.record, fanout: d.fanout })), [
    { record: retry, fanout: false },
  ]);
});

Deno.test("postgres: generated delivery runs all end delivered or dead-lettered, nothing left stored", async () => {
  await using stores = await postgresStores();
  await runModel(stores.fresh, Math.ceil(RUNS / 5), baseSeed());
});
