/**
 * An upstream's requests for its caller's input (elicitation, sampling,
 * roots) through toolgate: from a 2025 upstream (server-to-client requests)
 * and a 2026-07-28 one (`input_required` results), to the official clients
 * of both eras on stdio and HTTP; and what a client cannot do with
 * toolgate's `requestState`.
 *
 * @module
 */
import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StreamableHTTPClientTransport as ModernHttpTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdioTransport } from "@modelcontextprotocol/client/stdio";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { tempHome, toolgateStdio } from "../_helpers.ts";
import {
  conformanceFixtureCommand,
  EVERYTHING_PACKAGE,
  npmCommand,
} from "../plugins/_upstreams.ts";
import { startHttpServer } from "./_http_server.ts";

const CAPABILITIES = { elicitation: {}, sampling: {}, roots: {} };

/** What the clients answer: a person who declines, a model that knows Paris, one root. */
const ANSWERS = {
  elicit: (params: { message?: string; requestedSchema?: { properties?: object } }) => {
    const properties = Object.keys(params.requestedSchema?.properties ?? {});
    // The fixture's questions get an answer; the everything server's long form a decline.
    if (properties.length === 1 && properties[0] === "name") {
      return { action: "accept" as const, content: { name: "Alice" } };
    }
    if (properties.length === 1 && properties[0] === "context") {
      return { action: "accept" as const, content: { context: "tests" } };
    }
    if (properties.length === 1 && properties[0] === "color") {
      return { action: "accept" as const, content: { color: "green" } };
    }
    return { action: "decline" as const };
  },
  sample: () => ({
    role: "assistant" as const,
    content: { type: "text" as const, text: "Paris" },
    model: "test-model",
    stopReason: "endTurn",
  }),
  roots: () => ({ roots: [{ uri: "file:///work", name: "work" }] }),
};

type Content = { type: string; text?: string }[];

function text(result: { content?: unknown }): string {
  return ((result.content ?? []) as Content).map((item) => item.text ?? "").join("\n");
}

/** The official 2025 client (SDK 1.x), answering requests for input. */
function legacyClient(): Client {
  const client = new Client({ name: "legacy", version: "1.0.0" }, { capabilities: CAPABILITIES });
  client.setRequestHandler(
    ElicitRequestSchema,
    (request: { params: Record<string, unknown> }) => ANSWERS.elicit(request.params),
  );
  client.setRequestHandler(CreateMessageRequestSchema, () => ANSWERS.sample());
  client.setRequestHandler(ListRootsRequestSchema, () => ANSWERS.roots());
  return client;
}

/** The official 2026-07-28 client (SDK 2.x), answering requests for input. */
function modernClient(): ModernClient {
  const client = new ModernClient(
    { name: "modern", version: "1.0.0" },
    { capabilities: CAPABILITIES, versionNegotiation: { mode: "auto" } },
  );
  client.setRequestHandler(
    "elicitation/create",
    (request) => ANSWERS.elicit(request.params as never) as never,
  );
  client.setRequestHandler("sampling/createMessage", () => ANSWERS.sample() as never);
  client.setRequestHandler("roots/list", () => ANSWERS.roots());
  return client;
}

const UPSTREAMS = {
  plugins: {
    upstream_settings: { connect_timeout_ms: 60_000 },
    upstreams: {
      everything: { kind: "mcp", ...npmCommand(EVERYTHING_PACKAGE, "stdio") },
      conf: { kind: "mcp", ...conformanceFixtureCommand() },
    },
  },
};

/** The calls each client makes, and what each answer must contain. */
const CALLS: [string, Record<string, unknown>, string][] = [
  // A 2025 upstream: server-to-client requests during the call.
  ["everything__trigger-elicitation-request", {}, "declined"],
  ["everything__trigger-sampling-request", { prompt: "Capital of France?" }, "Paris"],
  // A 2026-07-28 upstream: input_required results, over one round and several.
  ["conf__test_input_required_result_multiple_inputs", {}, "Paris Alice (1 roots)"],
  ["conf__test_input_required_result_multi_round", {}, "Alice likes green"],
];

/** Makes {@linkcode CALLS}, answering what each upstream asks, and checks each result. */
async function makeCalls(client: Client | ModernClient, era: string): Promise<void> {
  for (const [name, args, expected] of CALLS) {
    const result = await client.callTool({ name, arguments: args });
    assert(!result.isError, `${era} ${name}: ${text(result)}`);
    assertStringIncludes(text(result), expected, `${era} ${name}`);
  }
}

Deno.test("requests for input from upstreams of both eras reach the calling client over stdio, and its answers reach them", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(`${tmp.home}/config.json`, JSON.stringify(UPSTREAMS));
  for (const era of ["2025", "2026"]) {
    const client = era === "2025" ? legacyClient() : modernClient();
    const transport = era === "2025"
      ? new StdioClientTransport(toolgateStdio(tmp.home))
      : new ModernStdioTransport(toolgateStdio(tmp.home));
    await client.connect(transport as never);
    try {
      await makeCalls(client, era);
      // A prompt of a 2026 upstream that asks first.
      const prompt = await client.getPrompt({ name: "conf__test_input_required_result_prompt" });
      assertEquals(
        (prompt.messages[0].content as { text: string }).text,
        "Prompt with context: tests",
        era,
      );
    } finally {
      await client.close();
    }
  }
});

Deno.test("requests for input reach clients of both eras over HTTP (a 2025 session's answer becomes a stream)", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home, config: UPSTREAMS });
  const url = new URL(`${server.url}/mcp`);
  for (const era of ["2025", "2026"]) {
    const client = era === "2025" ? legacyClient() : modernClient();
    const transport = era === "2025"
      ? new StreamableHTTPClientTransport(url)
      : new ModernHttpTransport(url);
    await client.connect(transport as never);
    try {
      await makeCalls(client, era);
    } finally {
      await client.close();
    }
  }
});

/** A 2026-07-28 `tools/call` posted as is, with the headers the revision requires. */
async function call2026(
  url: string,
  name: string,
  extra: Record<string, unknown> = {},
  capabilities: Record<string, unknown> = CAPABILITIES,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
      "mcp-name": name,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name,
        arguments: {},
        ...extra,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1.0.0" },
          "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
      },
    }),
  });
  return { status: response.status, body: await response.json() };
}

Deno.test("toolgate's requestState: a tampered, misdirected or replayed one reaches no upstream; a client without the capability gets -32021", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({
    home: tmp.home,
    config: {
      plugins: {
        upstream_settings: { connect_timeout_ms: 60_000 },
        upstreams: { conf: { kind: "mcp", ...conformanceFixtureCommand() } },
      },
    },
  });
  const url = `${server.url}/mcp`;
  const tool = "conf__test_input_required_result_elicitation";
  const first = await call2026(url, tool);
  const asked = first.body.result as {
    resultType: string;
    inputRequests: Record<string, { method: string }>;
    requestState: string;
  };
  assertEquals(asked.resultType, "input_required");
  // The upstream's own key and request, as it sent them.
  assertEquals(Object.keys(asked.inputRequests), ["user_name"]);
  assertEquals(asked.inputRequests.user_name.method, "elicitation/create");
  const answers = { inputResponses: { user_name: { action: "accept", content: { name: "Eve" } } } };

  // One changed character of the signed state: refused before any handler runs.
  const state = asked.requestState;
  const flipped = state.slice(0, -2) + (state.at(-2) === "A" ? "B" : "A") + state.at(-1);
  const tampered = await call2026(url, tool, { ...answers, requestState: flipped });
  assertEquals((tampered.body.error as { code: number }).code, -32602);

  // A genuine state sent for another tool: no call of that tool waits for it.
  const other = "conf__test_input_required_result_sampling";
  const misdirected = await call2026(url, other, { ...answers, requestState: state });
  const misdirectedResult = misdirected.body.result as { isError?: boolean; content: Content };
  assert(misdirectedResult.isError);
  assertStringIncludes(text(misdirectedResult), "NOT_FOUND: No call of");

  // The genuine answer completes the call that waited, with that answer only.
  const answered = await call2026(url, tool, { ...answers, requestState: state });
  assertEquals(text(answered.body.result as { content: Content }), "Hello, Eve!");

  // Sent again, it finds nothing: the call ended.
  const replayed = await call2026(url, tool, { ...answers, requestState: state });
  assert((replayed.body.result as { isError?: boolean }).isError);

  // One call, audited once, however many rounds it took.
  const audit = await (await fetch(`${server.url}/audit?tool=${tool}&kind=tool.call`)).json() as {
    entries: { outcome: { ok: boolean } }[];
  };
  assertEquals(audit.entries.map((entry) => entry.outcome.ok), [true]);

  // A client that declared no elicitation: the upstream is told so, and its error comes back.
  const undeclared = await call2026(url, tool, {}, { sampling: {} });
  assertEquals(undeclared.status, 400);
  const error = undeclared.body.error as { code: number; data: { requiredCapabilities: object } };
  assertEquals(error.code, -32021);
  assertEquals(Object.keys(error.data.requiredCapabilities), ["elicitation"]);
});
