/**
 * OpenTelemetry traces of the real server process, exported by Deno's
 * built-in support to a local OTLP/HTTP endpoint: the parent links from a
 * caller's `traceparent` (HTTP header, MCP `_meta`) through the tool call,
 * its audit append and its webhook delivery to the receiver, from an incoming
 * payload to its handler call, and from a call to an HTTP upstream.
 *
 * @module
 */
import { assertEquals, assertMatch } from "../_asserts.ts";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { runCli, tempHome, toolgateStdio } from "../_helpers.ts";
import { conformanceFixtureCommand, startHttpFixture } from "../plugins/_upstreams.ts";
import { OtlpReceiver, type ReceivedSpan, SPAN_KIND } from "../tracing/_otlp_receiver.ts";
import { Receiver } from "../webhooks/_receiver.ts";
import { startHttpServer } from "./_http_server.ts";

/** A caller's span: trace and span ids the test made up. */
function callerContext(): { traceId: string; spanId: string; traceparent: string } {
  const hex = (bytes: number) =>
    Array.from(
      crypto.getRandomValues(new Uint8Array(bytes)),
      (b) => b.toString(16).padStart(2, "0"),
    )
      .join("");
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/**
 * A 2026-07-28 request posted to `/mcp` as is (headers the revision requires,
 * the `_meta` envelope) with the caller's `traceparent` in `_meta`; its result.
 */
async function mcp2026(
  url: string,
  method: string,
  name: string,
  params: Record<string, unknown>,
  traceparent: string,
): Promise<unknown> {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": method,
      "mcp-name": name,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1.0.0" },
          "io.modelcontextprotocol/clientCapabilities": {},
          traceparent,
        },
      },
    }),
  });
  assertEquals(response.status, 200);
  const body = await response.json() as { result?: unknown; error?: unknown };
  assertEquals(body.error, undefined);
  return body.result;
}

function childOf(parent: ReceivedSpan) {
  return (span: ReceivedSpan) =>
    span.traceId === parent.traceId && span.parentSpanId === parent.spanId;
}

Deno.test("a REST call continues the caller's trace: call, audit append and delivery spans, traceparent to the receiver", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  await using receiver = new Receiver();
  await runCli(["webhooks", "add", "--url", receiver.url, "--events", "tool.called", "--json"], {
    home: tmp.home,
  });
  await using server = await startHttpServer({ home: tmp.home, env: otlp.env });
  const caller = callerContext();
  const response = await fetch(`${server.url}/tools/memory_set`, {
    method: "POST",
    headers: { "content-type": "application/json", traceparent: caller.traceparent },
    body: JSON.stringify({ key: "k", value: 1 }),
  });
  assertEquals(response.status, 200);
  await response.body?.cancel();

  // Deno's span of the HTTP request is the caller's child; the tool call is its child.
  const request = await otlp.span(
    "the HTTP server span",
    (span) => span.traceId === caller.traceId && span.parentSpanId === caller.spanId,
  );
  assertEquals(request.kind, SPAN_KIND.server);
  const call = await otlp.span("the tool call span", childOf(request));
  assertEquals(call.name, "execute_tool memory_set");
  assertEquals(call.scope, "toolgate");
  assertEquals(call.attributes["toolgate.tool"], "memory_set");
  assertEquals(call.attributes["toolgate.plugin"], "memory");
  assertEquals(call.attributes["toolgate.transport"], "rest");
  assertEquals(call.attributes["toolgate.outcome"], "ok");
  assertEquals(call.attributes["gen_ai.tool.name"], "memory_set");

  const append = await otlp.span("the audit append span", childOf(call));
  assertEquals(append.name, "audit.append");
  assertEquals(append.attributes["toolgate.audit.kind"], "tool.call");
  assertEquals(typeof append.attributes["toolgate.audit.seq"], "number");

  // The delivery of the call's tool.called event: the call's child, sent with its own context.
  const delivery = await otlp.span(
    "the delivery attempt span",
    (span) => childOf(call)(span) && span.name.startsWith("webhook.deliver"),
  );
  assertEquals(delivery.name, "webhook.deliver tool.called");
  assertEquals(delivery.kind, SPAN_KIND.client);
  assertEquals(delivery.attributes["toolgate.event.type"], "tool.called");
  assertEquals(delivery.attributes["toolgate.delivery.attempt"], 1);
  assertEquals(delivery.attributes["http.response.status_code"], 200);
  assertEquals(delivery.attributes["server.address"], "127.0.0.1");
  await receiver.waitFor(1);
  assertEquals(
    receiver.requests[0].headers.get("traceparent"),
    `00-${caller.traceId}-${delivery.spanId}-01`,
  );
  assertEquals(
    delivery.attributes["toolgate.event.id"],
    receiver.requests[0].headers.get("webhook-id")!,
  );
});

Deno.test("a failed call's span carries its error code; a call without traceparent starts its own trace", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  await using server = await startHttpServer({ home: tmp.home, env: otlp.env });
  const response = await fetch(`${server.url}/tools/memory_set`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ value: 1 }),
  });
  assertEquals(response.status, 400);
  await response.body?.cancel();
  const call = await otlp.span(
    "the failed call's span",
    (span) => span.name === "execute_tool memory_set",
  );
  assertEquals(call.attributes["toolgate.outcome"], "TOOL_INPUT_INVALID");
  assertEquals(call.attributes["error.type"], "TOOL_INPUT_INVALID");
  assertEquals(call.status.code, 2);
  // Its parent is the server's span of the request, the root of a new trace.
  const request = await otlp.span(
    "its request's span",
    (span) => span.spanId === call.parentSpanId,
  );
  assertEquals(request.parentSpanId, "");
});

Deno.test("an MCP 2026-07-28 request's _meta traceparent parents the call; an HTTP upstream gets the trace in its header and _meta", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  await using upstream = await startHttpFixture();
  await using server = await startHttpServer({
    home: tmp.home,
    env: otlp.env,
    config: { plugins: { upstreams: { remote: { kind: "mcp", url: upstream.url } } } },
  });
  const caller = callerContext();
  const call = async (args: Record<string, unknown>) => {
    const result = await mcp2026(server.url, "tools/call", "remote__header", {
      name: "remote__header",
      arguments: args,
    }, caller.traceparent) as { content: { text: string }[] };
    return result.content[0].text;
  };
  const header = await call({ name: "traceparent" });
  const meta = await call({ name: "traceparent", meta: true });

  const spanOf = (traceparent: string) => {
    assertMatch(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const [, traceId, spanId] = traceparent.split("-");
    assertEquals(traceId, caller.traceId);
    return otlp.span(`the span ${spanId}`, (span) => span.spanId === spanId);
  };
  // _meta (SEP-414) names toolgate's MCP client span of the upstream call...
  const client = await spanOf(meta);
  assertEquals(client.name, "tools/call header");
  assertEquals(client.kind, SPAN_KIND.client);
  assertEquals(client.attributes["toolgate.upstream"], "remote");
  const callSpan = await otlp.span("the call span", (span) => span.spanId === client.parentSpanId);
  assertEquals(callSpan.name, "execute_tool remote__header");
  assertEquals(callSpan.parentSpanId, caller.spanId);
  assertEquals(callSpan.attributes["toolgate.transport"], "mcp-http");
  assertEquals(callSpan.attributes["toolgate.plugin"], "remote");
  // ...and the traceparent header Deno's span of the HTTP request, a child of the same kind
  // of client span (of the first call).
  const request = await spanOf(header);
  assertEquals([request.scope, request.kind], ["deno", SPAN_KIND.client]);
  const first = await otlp.span(
    "the first call's client span",
    (span) => span.spanId === request.parentSpanId,
  );
  assertEquals(first.name, "tools/call header");
  const firstCall = await otlp.span(
    "the first call span",
    (span) => span.spanId === first.parentSpanId,
  );
  assertEquals(firstCall.parentSpanId, caller.spanId);
});

Deno.test("an incoming payload's span continues the sender's trace and parents its handler call", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  const created = await runCli(
    [
      "webhooks",
      "create",
      "--name",
      "deploys",
      "--url",
      "/hooks/deploys",
      "--handler",
      "memory_set",
    ],
    { home: tmp.home },
  );
  assertEquals(created.code, 0, created.stderr);
  await using server = await startHttpServer({ home: tmp.home, env: otlp.env });
  const sender = callerContext();
  const response = await fetch(`${server.url}/hooks/deploys`, {
    method: "POST",
    headers: { "content-type": "application/json", traceparent: sender.traceparent },
    body: JSON.stringify({ key: "deploy", value: "v1" }),
  });
  assertEquals(response.status, 202);
  const { id } = await response.json() as { id: string };

  const request = await otlp.span(
    "the HTTP server span",
    (span) => span.traceId === sender.traceId && span.parentSpanId === sender.spanId,
  );
  const payload = await otlp.span("the incoming payload span", childOf(request));
  assertEquals(payload.name, "incoming_webhook deploys");
  assertEquals(payload.attributes["toolgate.incoming.job_id"], id);
  assertEquals(payload.attributes["http.response.status_code"], 202);
  const handler = await otlp.span(
    "the handler call span",
    (span) => childOf(payload)(span) && span.name.startsWith("execute_tool"),
  );
  assertEquals(handler.name, "execute_tool memory_set");
  assertEquals(handler.attributes["toolgate.transport"], "webhook");
  assertEquals(handler.attributes["toolgate.outcome"], "ok");
});

Deno.test("each delivery attempt is a span of its own under the call, the failed one marked with its status", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  await using receiver = new Receiver((_request, index) => index === 0 ? 503 : 200);
  await runCli(["webhooks", "add", "--url", receiver.url, "--events", "tool.called", "--json"], {
    home: tmp.home,
  });
  await using server = await startHttpServer({
    home: tmp.home,
    env: { ...otlp.env, TOOLGATE_RETRY_BASE_MS: "20" },
  });
  const response = await fetch(`${server.url}/tools/memory_set`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key: "k", value: 1 }),
  });
  assertEquals(response.status, 200);
  await response.body?.cancel();
  await receiver.waitFor(2);
  const call = await otlp.span("the call span", (span) => span.name === "execute_tool memory_set");
  const attempts = () =>
    otlp.spans.filter((span) => childOf(call)(span) && span.name.startsWith("webhook.deliver"))
      .sort((a, b) =>
        Number(a.attributes["toolgate.delivery.attempt"]) -
        Number(b.attributes["toolgate.delivery.attempt"])
      );
  await otlp.span("both attempt spans", () => attempts().length === 2);
  const [first, second] = attempts();
  assertEquals(first.attributes["toolgate.delivery.attempt"], 1);
  assertEquals(first.attributes["http.response.status_code"], 503);
  assertEquals([first.status.code, first.attributes["error.type"]], [2, "503"]);
  assertEquals(second.attributes["toolgate.delivery.attempt"], 2);
  assertEquals(second.status.code, 0);
  // Each request carried its own attempt's context.
  assertEquals(
    receiver.requests.map((request) => request.headers.get("traceparent")),
    [first, second].map((span) => `00-${call.traceId}-${span.spanId}-01`),
  );
});

Deno.test("over stdio, a 2025 client's _meta traceparent parents the call and stdout stays JSON-RPC", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  const run = toolgateStdio(tmp.home);
  const transport = new StdioClientTransport({ ...run, env: { ...run.env, ...otlp.env } });
  const client = new Client({ name: "tracing-test", version: "1.0.0" });
  await client.connect(transport);
  const caller = callerContext();
  try {
    const result = await client.callTool({
      name: "memory_set",
      arguments: { key: "k", value: 1 },
      _meta: { traceparent: caller.traceparent, tracestate: "vendor=1" },
    });
    assertEquals(result.isError, undefined);
  } finally {
    await client.close();
  }
  const call = await otlp.span("the call span", (span) => span.parentSpanId === caller.spanId);
  assertEquals(call.traceId, caller.traceId);
  assertEquals(call.name, "execute_tool memory_set");
  assertEquals(call.attributes["toolgate.transport"], "mcp-stdio");
});

Deno.test("a proxied resources/read and prompts/get continue the trace in their request's _meta", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  await using server = await startHttpServer({
    home: tmp.home,
    env: otlp.env,
    config: {
      plugins: {
        upstream_settings: { connect_timeout_ms: 60_000 },
        upstreams: { conformance: { kind: "mcp", ...conformanceFixtureCommand(), prefix: false } },
      },
    },
  });
  const caller = callerContext();
  const request = (method: string, name: string, params: Record<string, unknown>) =>
    mcp2026(server.url, method, name, params, caller.traceparent);
  await request("resources/read", "test://static-text", { uri: "test://static-text" });
  await request("prompts/get", "test_simple_prompt", { name: "test_simple_prompt" });
  const read = await otlp.span(
    "the resources/read span",
    (span) => span.name === "resources/read" && span.parentSpanId === caller.spanId,
  );
  assertEquals(read.traceId, caller.traceId);
  assertEquals(read.attributes["mcp.resource.uri"], "test://static-text");
  assertEquals(read.attributes["toolgate.plugin"], "conformance");
  assertEquals(read.attributes["toolgate.outcome"], "ok");
  const get = await otlp.span(
    "the prompts/get span",
    (span) => span.name === "prompts/get test_simple_prompt" && span.parentSpanId === caller.spanId,
  );
  assertEquals(get.attributes["toolgate.transport"], "mcp-http");
  // Each is audited, the entry's append under the read's span.
  await otlp.span(
    "the read's audit append",
    (span) => span.name === "audit.append" && childOf(read)(span),
  );
});

Deno.test("a webhook test through the management API is a delivery span under the request, its context sent to the receiver", async () => {
  await using tmp = await tempHome();
  await using otlp = new OtlpReceiver();
  await using receiver = new Receiver();
  const added = await runCli(
    ["webhooks", "add", "--url", receiver.url, "--events", "tool.called", "--json"],
    { home: tmp.home },
  );
  const webhookId = JSON.parse(added.stdout).id as string;
  const token = "tracing-test-token-0123456789";
  await using server = await startHttpServer({
    home: tmp.home,
    env: { ...otlp.env, TOOLGATE_API_TOKEN: token },
  });
  const caller = callerContext();
  const response = await fetch(`${server.url}/webhooks/${webhookId}/test`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, traceparent: caller.traceparent },
  });
  assertEquals(response.status, 200);
  assertEquals((await response.json()).ok, true);

  const request = await otlp.span(
    "the HTTP server span",
    (span) => span.traceId === caller.traceId && span.parentSpanId === caller.spanId,
  );
  const delivery = await otlp.span("the test delivery span", childOf(request));
  assertEquals(delivery.name, "webhook.deliver webhook.test");
  assertEquals(delivery.kind, SPAN_KIND.client);
  assertEquals(delivery.attributes["toolgate.webhook.id"], webhookId);
  assertEquals(delivery.attributes["toolgate.delivery.attempt"], 1);
  assertEquals(delivery.attributes["http.response.status_code"], 200);
  await receiver.waitFor(1);
  assertEquals(
    receiver.requests[0].headers.get("traceparent"),
    `00-${caller.traceId}-${delivery.spanId}-01`,
  );
});
