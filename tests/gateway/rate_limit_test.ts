/**
 * Rate limits: the rate syntax, the bucket math on an injected clock, the
 * limiter's buckets (per key, per OAuth client, per tool; none for the
 * administrator and local callers), and the pipeline: a refused call is
 * RATE_LIMITED with retry_after_ms, audited, and never reaches the tool or
 * its circuit breaker.
 *
 * @module
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import type { Caller } from "../../src/gateway/caller.ts";
import { parseRate, RateLimiter, rateRule } from "../../src/gateway/rate_limit.ts";
import { MemoryRateLimitStore, takeToken } from "../../src/store/mod.ts";
import type { AuditSink } from "../../src/gateway/types.ts";
import { testConfig, testGateway } from "./_fixtures.ts";

const T0 = Date.UTC(2026, 0, 1);

Deno.test("rates: <calls>/<s|m|h|d> parse to a bucket of one unit's worth, or the burst given; bad ones name the field", () => {
  assertEquals(parseRate(" 10 / s "), "10/s");
  assertEquals(rateRule("10/s"), { capacity: 10, refillPerMs: 0.01, rate: "10/s" });
  assertEquals(rateRule("600/m"), { capacity: 600, refillPerMs: 0.01, rate: "600/m" });
  assertEquals(rateRule("2/s", 5), { capacity: 5, refillPerMs: 0.002, rate: "2/s" });
  for (const bad of ["0/s", "10", "10/x", "ten/s", "-1/s", "10/sec", "99999999/s"]) {
    const error = (() => {
      try {
        parseRate(bad, "limits.per_caller");
      } catch (error) {
        return error as GatewayError;
      }
    })();
    assert(error instanceof GatewayError, bad);
    assertEquals(error.code, "USAGE");
    assertStringIncludes(error.message, `Invalid limits.per_caller ${JSON.stringify(bad)}`);
    assertStringIncludes(error.message, "e.g. 10/s");
  }
  assertEquals(
    (() => {
      try {
        rateRule("1/s", 0);
      } catch (error) {
        return (error as GatewayError).code;
      }
    })(),
    "USAGE",
  );
});

Deno.test("bucket math: starts full, takes one per call, refills by elapsed time up to capacity, never backwards", () => {
  const rule = rateRule("2/s");
  let state = undefined;
  const takes = [];
  for (const now of [T0, T0, T0, T0 + 250, T0 + 500, T0 + 499, T0 + 10_000, T0 + 10_000]) {
    const next = takeToken(state, rule, now);
    state = next.state;
    takes.push(next.take);
  }
  assertEquals(takes, [
    { ok: true, remaining: 1, retryAfterMs: 0 },
    { ok: true, remaining: 0, retryAfterMs: 0 },
    { ok: false, remaining: 0, retryAfterMs: 500 },
    { ok: false, remaining: 0, retryAfterMs: 250 },
    { ok: true, remaining: 0, retryAfterMs: 0 },
    // A clock 1 ms behind adds nothing.
    { ok: false, remaining: 0, retryAfterMs: 500 },
    { ok: true, remaining: 1, retryAfterMs: 0 },
    { ok: true, remaining: 0, retryAfterMs: 0 },
  ]);
  // Empty at T0 + 10 s, full again 1 s later (2 tokens at 2/s).
  assertEquals(state, { tokens: 0, updatedMs: T0 + 10_000, fullMs: T0 + 11_000 });
  // Slow rates: one a minute waits the full minute.
  const minute = rateRule("1/m");
  const first = takeToken(undefined, minute, T0);
  assertEquals(takeToken(first.state, minute, T0 + 15_000).take.retryAfterMs, 45_000);
});

Deno.test("memory buckets: past the bound a new bucket drops those refilled to capacity, and only those", async () => {
  const store = new MemoryRateLimitStore(3);
  const second = rateRule("10/s");
  const day = rateRule("5000/d");
  // Three buckets, at the bound: full again 100 ms, 60 s and 17.28 s after their takes.
  await store.take("tool:fast", second, T0);
  await store.take("caller:key:minute", rateRule("1/m"), T0);
  await store.take("caller:key:day", day, T0);
  assertEquals(store.size, 3);
  // A new bucket 1 s later drops the 10/s one (refilled), not the others.
  await store.take("caller:key:new", second, T0 + 1_000);
  assertEquals(store.size, 3);
  // The dropped bucket starts full, as it would have been; it comes back when the new one
  // has refilled (100 ms later), which it drops.
  assertEquals(await store.take("tool:fast", second, T0 + 1_100), {
    ok: true,
    remaining: 9,
    retryAfterMs: 0,
  });
  assertEquals(store.size, 3);
  // Idle for hours, a bucket not yet refilled is kept: the 10/s and 1/m ones go, the
  // emptied 5000/d one stays, and holds what two hours refilled (416.7 tokens), not 5000.
  for (let i = 0; i < 4999; i++) await store.take("caller:key:day", day, T0);
  await store.take("caller:key:other", second, T0 + 2 * 3_600_000);
  assertEquals(store.size, 2);
  assertEquals(await store.take("caller:key:day", day, T0 + 2 * 3_600_000), {
    ok: true,
    remaining: 415,
    retryAfterMs: 0,
  });
});

Deno.test("memory buckets: when none has refilled the bound is soft: all are kept, a 1/d caller still waits its day", async () => {
  const store = new MemoryRateLimitStore(2);
  const day = rateRule("1/d");
  await store.take("caller:key:a", day, T0);
  await store.take("caller:key:b", day, T0);
  // Hours later nothing has refilled: new buckets are added, none dropped.
  for (let i = 0; i < 5; i++) await store.take(`caller:key:new-${i}`, day, T0 + 3_600_000);
  assertEquals(store.size, 7);
  const refused = await store.take("caller:key:a", day, T0 + 3_600_000);
  assertEquals(refused.ok, false);
  assertEquals(Math.round(refused.retryAfterMs / 3_600_000), 23);
  assertEquals(store.size, 7);
  // A day after, the first two have refilled: the next new bucket drops them (and only them).
  await store.take("caller:key:late", day, T0 + 86_400_000);
  assertEquals(store.size, 6);
  assertEquals(await store.sweep(T0 + 86_400_000), 0);
  assertEquals(await store.sweep(T0 + 3_600_000 + 86_400_000), 5);
  assertEquals(store.size, 1);
  assertEquals(await store.take("caller:key:a", day, T0 + 3_600_000 + 86_400_000), {
    ok: true,
    remaining: 0,
    retryAfterMs: 0,
  });
});

Deno.test("limiter: a key's own rate, else limits.per_caller for keys and OAuth clients; admin and local are not limited; tools share one bucket", async () => {
  const clock = { now: T0 };
  const limiter = new RateLimiter(
    new MemoryRateLimitStore(),
    { perCaller: "1/m", tools: { echo: { rate: "3/m", burst: 3 } } },
    () => clock.now,
  );
  const ci: Caller = { kind: "key", id: "key_ci", name: "ci", rate: "2/s" };
  const other: Caller = { kind: "key", id: "key_other", name: "other" };
  const client: Caller = { kind: "oauth", id: "user-1", name: "claude" };
  const sameClient: Caller = { kind: "oauth", id: "user-2", name: "claude" };

  await limiter.check("flaky", ci);
  await limiter.check("flaky", ci);
  const error = await assertRejects(() => limiter.check("flaky", ci), GatewayError);
  assertEquals(error.code, "RATE_LIMITED");
  assertEquals(error.status, 429);
  assertEquals(error.details, {
    tool: "flaky",
    limit: "caller",
    rate: "2/s",
    retry_after_ms: 500,
    token_interval_ms: 500,
  });
  assertStringIncludes(error.message, "API key ci is limited to 2/s; retry flaky in 1 s");

  // Another key has a bucket of its own, at the default rate.
  await limiter.check("flaky", other);
  assertEquals(
    (await assertRejects(() => limiter.check("flaky", other), GatewayError)).details,
    {
      tool: "flaky",
      limit: "caller",
      rate: "1/m",
      retry_after_ms: 60_000,
      token_interval_ms: 60_000,
    },
  );
  // OAuth callers are limited by client: two subjects of one client share it.
  await limiter.check("flaky", client);
  await assertRejects(
    () => limiter.check("flaky", sameClient),
    GatewayError,
    "OAuth client claude",
  );
  // The administrator and local callers have no caller bucket.
  for (let i = 0; i < 10; i++) {
    await limiter.check("flaky", { kind: "admin" });
    await limiter.check("flaky", { kind: "local" });
    await limiter.check("flaky", undefined);
  }
  // The tool's bucket holds for every caller together.
  await limiter.check("echo", { kind: "admin" });
  await limiter.check("echo", undefined);
  await limiter.check("echo", { kind: "local" });
  const tool = await assertRejects(() => limiter.check("echo", { kind: "admin" }), GatewayError);
  assertEquals(tool.details, {
    tool: "echo",
    limit: "tool",
    rate: "3/m",
    retry_after_ms: 20_000,
    token_interval_ms: 20_000,
  });
  assertStringIncludes(tool.message, "tool echo is limited to 3/m");
  // Time refills them.
  clock.now += 20_000;
  await limiter.check("echo", { kind: "admin" });
  clock.now += 40_000;
  await limiter.check("flaky", other);
});

Deno.test("pipeline: a call past the rate is RATE_LIMITED, audited with the caller, never runs, emits no event and does not count for the breaker", async () => {
  const entries: Record<string, unknown>[] = [];
  const audit: AuditSink = {
    append: (entry) => {
      entries.push(entry as Record<string, unknown>);
      return Promise.resolve();
    },
  } as AuditSink;
  const clock = { now: T0 };
  await using t = await testGateway({
    config: await testConfig({
      tools: { overrides: { flaky: { rate: "1/m", circuit_threshold: 1 } } },
    }),
    audit,
    clock: () => clock.now,
  });
  const ci: Caller = { kind: "key", id: "key_ci", name: "ci", rate: "1/s" };
  await t.gateway.call("echo", { message: "a" }, { caller: ci });
  const error = await assertRejects(
    () => t.gateway.call("echo", { message: "b" }, { caller: ci, source: "rest" }),
    GatewayError,
  );
  assertEquals(error.code, "RATE_LIMITED");
  assertEquals((error.details as { retry_after_ms: number }).retry_after_ms, 1000);
  const refused = entries.at(-1)!;
  assertEquals(refused.tool, "echo");
  assertEquals(refused.caller, { kind: "key", name: "ci", id: "key_ci" });
  assertEquals(refused.input, { message: "b" });
  assertEquals((refused.outcome as Record<string, unknown>).error_code, "RATE_LIMITED");
  assertEquals((refused.outcome as Record<string, unknown>).attempts, 0);
  assertEquals((refused.outcome as Record<string, unknown>).source, "rest");

  // A tool limit with a breaker of threshold 1: refusals never open it.
  await t.gateway.call("flaky", {}, {});
  for (let i = 0; i < 5; i++) {
    await assertRejects(() => t.gateway.call("flaky", {}, {}), GatewayError, "tool flaky");
  }
  assertEquals(t.gateway.openCircuits(), []);
  assertEquals(t.events.filter((event) => event.type === "tool.failed"), []);
  clock.now += 60_000;
  assertEquals((await t.gateway.call("flaky", {}, {})).output, { ok: true });
});

Deno.test("config: limits.per_caller and tools.overrides.<tool>.rate are checked, naming the field", async () => {
  const config = await testConfig({
    limits: { per_caller: { rate: "100/m", burst: 20 } },
    tools: { overrides: { http_request: { rate: "5/s" } } },
  });
  assertEquals(config.limits.per_caller, { rate: "100/m", burst: 20 });
  assertEquals(config.tools.overrides.http_request.rate, "5/s");
  for (
    const [file, field] of [
      [{ limits: { per_caller: "5/x" } }, "limits.per_caller"],
      [{ tools: { overrides: { echo: { rate: "0/s" } } } }, "tools.overrides.echo.rate"],
      [{ limits: { per_caller: { rate: "1/s", burst: 0 } } }, "limits.per_caller.burst"],
    ] as const
  ) {
    const error = await assertRejects(() => testConfig(file), GatewayError);
    assertEquals(error.code, "CONFIG_INVALID");
    assertStringIncludes(error.message, field);
  }
});
