import {
  assert,
  assertEquals,
  assertMatch,
  assertRejects,
  assertStringIncludes,
} from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { ALL_EVENT_DATA_SCHEMAS, type EventType } from "../../src/events/mod.ts";
import type { PluginDefinition } from "../../src/gateway/mod.ts";
import { z } from "zod";
import { brokenPlugin, testGateway, testPlugin, unconfiguredPlugin } from "./_fixtures.ts";

function types(events: { type: string }[]): string[] {
  return events.map((e) => e.type);
}

function assertValidEvents(events: { type: string; data: unknown }[]): void {
  for (const event of events) {
    ALL_EVENT_DATA_SCHEMAS[event.type as EventType].strict().parse(event.data);
  }
}

Deno.test("call() runs a tool and emits tool.called with input, output and latency", async () => {
  await using t = await testGateway();
  t.events.length = 0;
  const result = await t.gateway.call("echo", { message: "hi" }, { sessionId: "ses_1" });
  assertEquals(result.output, { echoed: "hi" });
  assertEquals(types(t.events), ["tool.called"]);
  const data = t.events[0].data as Record<string, unknown>;
  assertEquals(data.tool_name, "echo");
  assertEquals(data.plugin, "test");
  assertEquals(data.input, { message: "hi" });
  assertEquals(data.output, { echoed: "hi" });
  assertEquals(data.session_id, "ses_1");
  assert(Number.isInteger(data.latency_ms));
  assertValidEvents(t.events);
});

Deno.test("start() emits plugin.ready with the tool count and version", async () => {
  await using t = await testGateway();
  assertEquals(types(t.events), ["plugin.ready"]);
  assertEquals(t.events[0].data, {
    plugin_name: "test",
    tool_count: 5,
    zero_config: true,
    version: "1.2.3",
  });
  await t.gateway.announceStarted("stdio");
  await t.gateway.announceStarted("stdio");
  const started = t.events.filter((e) => e.type === "server.started");
  assertEquals(started.length, 1, "server.started is emitted exactly once");
  assertEquals(started[0].data.transport, "stdio");
  assertEquals(started[0].data.tool_count, 5);
  assertValidEvents(t.events);
});

Deno.test("call() rejects wrong argument types with TOOL_INPUT_INVALID naming the fields", async () => {
  await using t = await testGateway();
  t.events.length = 0;
  const error = await assertRejects(
    () => t.gateway.call("echo", { message: 5, count: "x" }),
    GatewayError,
  ) as GatewayError;
  assertEquals(error.code, "TOOL_INPUT_INVALID");
  assertMatch(error.message, /message: .*expected string/);
  assertMatch(error.message, /count: /);
  const fields = (error.details as { fields: { path: string }[] }).fields.map((f) => f.path);
  assertEquals(fields.sort(), ["count", "message"]);
  assertEquals(types(t.events), ["tool.failed"]);
  assertEquals(t.events[0].data.error_code, "TOOL_INPUT_INVALID");
});

Deno.test("call() rejects missing arguments and unknown tools with their codes", async () => {
  await using t = await testGateway();
  const missing = await assertRejects(() => t.gateway.call("echo", {}), GatewayError);
  assertEquals((missing as GatewayError).code, "TOOL_INPUT_INVALID");
  assertMatch(missing.message, /message/);
  const unknown = await assertRejects(() => t.gateway.call("nope", {}), GatewayError);
  assertEquals((unknown as GatewayError).code, "TOOL_NOT_FOUND");
  assertMatch(unknown.message, /Unknown tool "nope"/);
});

Deno.test("a tool that hangs fails with TOOL_TIMEOUT and its signal is aborted", async () => {
  await using t = await testGateway();
  const error = await assertRejects(() => t.gateway.call("slow", {}), GatewayError);
  assertEquals((error as GatewayError).code, "TOOL_TIMEOUT");
  assertMatch(error.message, /timed out after 30 ms/);
});

Deno.test("a tool that throws a plain error fails with TOOL_EXECUTION_FAILED", async () => {
  await using t = await testGateway();
  const error = await assertRejects(() => t.gateway.call("thrower", {}), GatewayError);
  assertEquals((error as GatewayError).code, "TOOL_EXECUTION_FAILED");
  assertMatch(error.message, /boom/);
});

Deno.test("a call its caller aborts fails with CANCELLED and does not count against the circuit", async () => {
  await using t = await testGateway({
    file: { tools: { circuit_threshold: 2, overrides: { slow: { timeout_ms: 5_000 } } } },
  });
  t.events.length = 0;
  for (let i = 0; i < 3; i++) {
    const caller = new AbortController();
    const calling = t.gateway.call("slow", {}, { signal: caller.signal });
    setTimeout(() => caller.abort(new DOMException("client left", "AbortError")), 5);
    const error = await assertRejects(() => calling, GatewayError);
    assertEquals(
      [error.code, error.message, error.details],
      ["CANCELLED", "Call of slow cancelled: the caller went away", { tool: "slow" }],
    );
  }
  // Three failures would have opened it (threshold 2).
  assertEquals(t.gateway.openCircuits(), []);
  assertEquals(types(t.events), ["tool.failed", "tool.failed", "tool.failed"]);
  for (const event of t.events) {
    assertEquals([event.data.error_code, event.data.circuit_state], ["CANCELLED", "closed"]);
  }
});

Deno.test("the circuit opens after N failures, fails fast, then closes and the tool works again", async () => {
  const state = { failing: true, calls: 0 };
  await using t = await testGateway({
    plugins: [testPlugin(state)],
    file: { tools: { circuit_threshold: 3, circuit_reset_ms: 80 } },
  });
  t.events.length = 0;
  for (let i = 0; i < 3; i++) {
    const error = await assertRejects(() => t.gateway.call("flaky", {}), GatewayError);
    assertEquals((error as GatewayError).code, "PLUGIN_REQUEST_FAILED");
  }
  assertEquals(types(t.events), ["tool.failed", "tool.failed", "circuit.opened", "tool.failed"]);
  assertEquals(t.events.map((e) => e.data.circuit_state).filter(Boolean), [
    "closed",
    "closed",
    "open",
  ]);
  const opened = t.events[2].data;
  assertEquals(opened, {
    tool_name: "flaky",
    plugin: "test",
    failure_count: 3,
    threshold: 3,
    reset_after_ms: 80,
  });
  const callsBefore = state.calls;
  const fast = await assertRejects(() => t.gateway.call("flaky", {}), GatewayError);
  assertEquals((fast as GatewayError).code, "CIRCUIT_OPEN");
  assertEquals(state.calls, callsBefore, "no execution while open");
  assertEquals(t.events.at(-1)!.data.circuit_state, "open");
  assertEquals(t.gateway.openCircuits().map((c) => c.tool_name), ["flaky"]);

  state.failing = false;
  const closed = new Promise<void>((resolve) => {
    const off = t.bus.subscribe((event) => {
      if (event.type === "circuit.closed") {
        off();
        resolve();
      }
    });
  });
  await closed;
  const closedEvent = t.events.find((e) => e.type === "circuit.closed")!;
  assertEquals(closedEvent.data.tool_name, "flaky");
  assert((closedEvent.data.downtime_ms as number) >= 70);
  assertEquals((await t.gateway.call("flaky", {})).output, { ok: true });
  assertEquals(t.gateway.openCircuits(), []);
  assertValidEvents(t.events);
});

Deno.test("idempotent tools are retried as configured, one tool.failed per attempt", async () => {
  const state = { failing: true, calls: 0 };
  await using t = await testGateway({
    plugins: [testPlugin(state)],
    file: { tools: { overrides: { flaky: { retries: 2 } } } },
  });
  t.events.length = 0;
  await assertRejects(() => t.gateway.call("flaky", {}), GatewayError);
  assertEquals(state.calls, 3);
  assertEquals(t.events.map((e) => e.data.attempt), [1, 2, 3]);
});

Deno.test("secret-looking input and output fields are redacted in events", async () => {
  await using t = await testGateway();
  t.events.length = 0;
  await t.gateway.call("secretive", { token: "s3cret", user: "ada" });
  const text = JSON.stringify(t.events);
  assert(!text.includes("s3cret"), text);
  assert(!text.includes("k-123"), text);
  assertEquals(t.events[0].data.input, { token: "[REDACTED]", user: "ada" });
});

Deno.test("values are redacted in events and errors with config redact.patterns, the tool gets them whole", async () => {
  const seen: unknown[] = [];
  const plugin: PluginDefinition = {
    name: "fetcher",
    version: "1.0.0",
    zeroConfig: true,
    tools: [{
      name: "fetch_url",
      description: "Fetches a URL, or fails naming it",
      input: z.object({ url: z.string(), fail: z.boolean().optional() }),
      execute: (args) => {
        seen.push(args);
        if (args.fail) return Promise.reject(new Error(`Cannot reach ${args.url}: refused`));
        return Promise.resolve({ fetched: args.url });
      },
    }],
  };
  await using t = await testGateway({
    plugins: [plugin],
    file: { redact: { patterns: ["emp-\\d{6}"] } },
  });
  t.events.length = 0;
  const url = "https://bob:hunter2@api.example.com/x?api_key=k-9&who=emp-123456";
  await t.gateway.call("fetch_url", { url });
  await assertRejects(() => t.gateway.call("fetch_url", { url, fail: true }), GatewayError);
  assertEquals(seen, [{ url }, { url, fail: true }], "the tool saw the real values");
  const shown = "https://bob:[REDACTED]@api.example.com/x?api_key=[REDACTED]&who=[REDACTED]";
  const called = t.events.find((e) => e.type === "tool.called")!;
  assertEquals(called.data.input, { url: shown });
  assertEquals(called.data.output, { fetched: shown });
  const failed = t.events.find((e) => e.type === "tool.failed")!;
  assertEquals(failed.data.error, `Tool fetch_url failed: Cannot reach ${shown}: refused`);
});

Deno.test("a plugin's start-up error is redacted in plugin.error and its status", async () => {
  const plugin: PluginDefinition = {
    name: "remote",
    version: "1.0.0",
    zeroConfig: true,
    initialize: () => {
      throw new Error("Cannot reach https://svc:pa55@mcp.example.com/sse?token=t-1");
    },
    tools: [],
  };
  await using t = await testGateway({ plugins: [plugin] });
  const shown = "Cannot reach https://svc:[REDACTED]@mcp.example.com/sse?token=[REDACTED]";
  const failed = t.events.find((e) => e.type === "plugin.error")!;
  assertEquals(failed.data.error, `Plugin remote failed to initialize: ${shown}`);
  assert(!JSON.stringify(t.gateway.listPlugins()).includes("pa55"));
});

Deno.test("every call is appended to the audit sink before it is answered", async () => {
  const entries: { kind: string; tool: string; outcome: Record<string, unknown> }[] = [];
  await using t = await testGateway({
    audit: {
      append: async (entry) => {
        await new Promise((r) => setTimeout(r, 5));
        entries.push(entry);
      },
    },
  });
  await t.gateway.call("echo", { message: "a" });
  assertEquals(entries.length, 1);
  await assertRejects(() => t.gateway.call("thrower", {}));
  assertEquals(entries.length, 2);
  assertEquals(entries[1].outcome.ok, false);
  assertEquals(entries[1].outcome.error_code, "TOOL_EXECUTION_FAILED");
});

Deno.test("plugin errors: not configured and throwing initialize leave other plugins serving", async () => {
  await using t = await testGateway({
    plugins: [unconfiguredPlugin(), brokenPlugin(), testPlugin()],
  });
  assertEquals(types(t.events), ["plugin.error", "plugin.error", "plugin.ready"]);
  assertEquals(t.events[0].data, {
    plugin_name: "needs_token",
    error: "Plugin needs_token is not configured: a required credential is missing",
    error_code: "PLUGIN_NOT_CONFIGURED",
    state: "not_configured",
  });
  assertEquals(t.events[1].data.error_code, "PLUGIN_INIT_FAILED");
  assertEquals(t.events[1].data.state, "error");
  assertEquals(t.gateway.listPlugins().map((p) => [p.name, p.state]), [
    ["needs_token", "not_configured"],
    ["broken", "error"],
    ["test", "ready"],
  ]);
  assert(!t.gateway.hasTool("t1") && !t.gateway.hasTool("t2"));
  assertEquals((await t.gateway.call("echo", { message: "still here" })).output, {
    echoed: "still here",
  });
  assertValidEvents(t.events);
});

Deno.test("a call to a tool of a plugin that is not ready fails with the plugin's error", async () => {
  await using t = await testGateway({
    plugins: [unconfiguredPlugin(), brokenPlugin(), testPlugin()],
    file: { plugins: { disabled: ["test"] } },
  });
  const failure = async (name: string) => {
    const error = await assertRejects(() => t.gateway.call(name, {}), GatewayError);
    // What REST, MCP and the CLI answer with is what call() throws.
    assertEquals(t.gateway.unavailable(name)?.message, error.message);
    return error;
  };
  const missing = await failure("t1");
  assertEquals(missing.code, "PLUGIN_NOT_CONFIGURED");
  assertEquals(
    missing.message,
    "Tool t1 is unavailable: Plugin needs_token is not configured: a required credential is " +
      "missing; store its credentials with toolgate keychain set needs_token.<key> " +
      "(a running server needs a restart to pick them up)",
  );
  assertEquals(missing.details, { tool: "t1", plugin: "needs_token", state: "not_configured" });
  const failed = await failure("t2");
  assertEquals(failed.code, "PLUGIN_INIT_FAILED");
  assertStringIncludes(failed.message, "Tool t2 is unavailable: ");
  assertStringIncludes(failed.message, "cannot start");
  const disabled = await failure("echo");
  assertEquals(disabled.code, "TOOL_NOT_FOUND");
  assertEquals(
    disabled.message,
    "Tool echo is unavailable: plugin test is disabled in config (remove it from plugins.disabled)",
  );
  const unknown = await assertRejects(() => t.gateway.call("nope", {}), GatewayError);
  assertEquals([unknown.code, unknown.message], ["TOOL_NOT_FOUND", 'Unknown tool "nope"']);
  assertEquals(t.gateway.unavailable("nope"), undefined);
  // Nothing was called, so nothing was audited or emitted beyond the start-up events.
  assertEquals(types(t.events), ["plugin.error", "plugin.error"]);
});

Deno.test("plugins disabled in config are not initialized and offer no tools", async () => {
  await using t = await testGateway({ file: { plugins: { disabled: ["test"] } } });
  assertEquals(t.gateway.listPlugins()[0].state, "disabled");
  assertEquals(t.gateway.listTools(), []);
  assertEquals(t.events, []);
});

Deno.test("listTools() offers JSON Schemas generated from the zod input", async () => {
  await using t = await testGateway();
  const echo = t.gateway.listTools().find((tool) => tool.name === "echo")!;
  assertEquals(echo.plugin, "test");
  assertEquals(echo.inputSchema.type, "object");
  assertEquals(echo.inputSchema.required, ["message"]);
});

Deno.test("time spent waiting for the caller's answer does not count toward the tool's timeout", async () => {
  const asking: PluginDefinition = {
    name: "asking",
    version: "1.0.0",
    zeroConfig: true,
    tools: [{
      name: "ask",
      description: "Asks its caller, then works or hangs",
      input: z.object({ hang: z.boolean() }),
      timeoutMs: 60,
      execute: async (args, context) => {
        const answers = await context.input!.ask!(
          { q: { method: "elicitation/create", params: { message: "?" } } },
          context.signal,
        );
        if (!args.hang) return { answers, capabilities: context.input?.capabilities ?? null };
        // After the answer the tool gets its full timeout again, and no more.
        return await new Promise((_, reject) =>
          context.signal.addEventListener("abort", () => reject(context.signal.reason))
        );
      },
    }],
  };
  await using t = await testGateway({ plugins: [asking] });
  const slowAnswer = async () => {
    await new Promise((resolve) => setTimeout(resolve, 200));
    return { q: { action: "decline" } };
  };
  const result = await t.gateway.call("ask", { hang: false }, {
    input: { ask: slowAnswer, capabilities: { elicitation: {} } },
  });
  assertEquals(result.output, {
    answers: { q: { action: "decline" } },
    capabilities: { elicitation: {} },
  });
  const error = await assertRejects(
    () => t.gateway.call("ask", { hang: true }, { input: { ask: slowAnswer } }),
    GatewayError,
  );
  assertEquals(error.code, "TOOL_TIMEOUT");
});

Deno.test("a name no plugin claims is the error of the one unready plugin that may offer it (an unprefixed upstream)", async () => {
  const unprefixed = (name: string): PluginDefinition => ({
    ...brokenPlugin(),
    name,
    tools: [],
    mayOffer: () => true,
  });
  await using one = await testGateway({ plugins: [unprefixed("up"), testPlugin()] });
  const error = await assertRejects(() => one.gateway.call("fetch_page", {}), GatewayError);
  assertEquals(error.code, "PLUGIN_INIT_FAILED");
  assertStringIncludes(error.message, "Tool fetch_page is unavailable: ");
  assertEquals((error.details as { plugin: string }).plugin, "up");
  // A ready plugin's own tools are not affected.
  assertEquals((await one.gateway.call("echo", { message: "hi" })).output, { echoed: "hi" });

  // Two such plugins: which one would offer it cannot be told, and the name stays unknown.
  await using two = await testGateway({ plugins: [unprefixed("a"), unprefixed("b")] });
  const unknown = await assertRejects(() => two.gateway.call("fetch_page", {}), GatewayError);
  assertEquals([unknown.code, unknown.message], ["TOOL_NOT_FOUND", 'Unknown tool "fetch_page"']);
});
