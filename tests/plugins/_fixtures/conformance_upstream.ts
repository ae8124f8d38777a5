/**
 * An MCP server (stdio, both eras) offering the tools, prompts and resources
 * the conformance suite's server scenarios call by name, written from the
 * scenarios' own descriptions. Behind toolgate (unprefixed), the suite then
 * tests what crosses the proxy.
 *
 * Run: `deno run -A tests/plugins/_fixtures/conformance_upstream.ts`
 *
 * @module
 */
import {
  createRequestStateCodec,
  inputRequired,
  MissingRequiredClientCapabilityError,
  Server,
} from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

/** A 1×1 red PNG. */
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/** A 44-byte WAV header with no samples. */
const WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

const JSON_SCHEMA_2020_12 = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  $defs: {
    address: {
      $anchor: "addressDef",
      type: "object",
      properties: { street: { type: "string" }, city: { type: "string" } },
    },
  },
  properties: {
    name: { type: "string" },
    address: { $ref: "#/$defs/address" },
    contactMethod: { type: "string", enum: ["phone", "email"] },
    phone: { type: "string" },
    email: { type: "string" },
  },
  allOf: [{ anyOf: [{ required: ["phone"] }, { required: ["email"] }] }],
  if: { properties: { contactMethod: { const: "phone" } }, required: ["contactMethod"] },
  then: { required: ["phone"] },
  else: { required: ["email"] },
  additionalProperties: false,
};

const NO_ARGUMENTS = { type: "object" as const, properties: {} };

const TOOLS = [
  "test_simple_text",
  "test_image_content",
  "test_audio_content",
  "test_embedded_resource",
  "test_multiple_content_types",
  "test_error_handling",
  "test_tool_with_progress",
  "test_tool_with_logging",
].map((name) => ({ name, description: `Conformance tool ${name}`, inputSchema: NO_ARGUMENTS }));

/**
 * Tools that ask their caller for input: MCP 2026-07-28's way (an
 * `input_required` result, answered on a retry); the SDK turns it into
 * server-to-client requests for a 2025 client.
 */
const ASKING_TOOLS = [
  "test_input_required_result_elicitation",
  "test_input_required_result_sampling",
  "test_input_required_result_list_roots",
  "test_input_required_result_request_state",
  "test_input_required_result_multiple_inputs",
  "test_input_required_result_multi_round",
  "test_input_required_result_tampered_state",
  "test_input_required_result_capabilities",
  "test_missing_capability",
  "test_streaming_elicitation",
  "test_logging_tool",
  "test_elicitation_sep1034_defaults",
  "test_elicitation_sep1330_enums",
].map((name) => ({ name, description: `Conformance tool ${name}`, inputSchema: NO_ARGUMENTS }));

/** Tools of this fixture's own, for toolgate's tests. */
const OWN_TOOLS = [
  {
    name: "update_resource",
    description: "Says that a resource changed (notifications/resources/updated)",
    inputSchema: {
      type: "object" as const,
      properties: { uri: { type: "string" } },
      required: ["uri"],
    },
  },
];

/** This server's own requestState, signed (a tampered one is refused by the SDK). */
const stateCodec = createRequestStateCodec<{ round: number; name?: string }>({
  key: "conformance-upstream-request-state-key",
});

const elicit = (message: string, property: string, type = "string") => ({
  method: "elicitation/create" as const,
  params: {
    message,
    requestedSchema: {
      type: "object",
      properties: { [property]: { type } },
      required: [property],
    },
  },
});

const sample = (prompt: string, maxTokens: number) => ({
  method: "sampling/createMessage" as const,
  params: {
    messages: [{ role: "user", content: { type: "text", text: prompt } }],
    maxTokens,
  },
});

const LIST_ROOTS = { method: "roots/list" as const, params: {} };

const text = (value: string) => ({ type: "text" as const, text: value });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function createServer(): Server {
  const server = new Server(
    { name: "conformance-upstream", version: "1.0.0" },
    {
      capabilities: {
        tools: {},
        prompts: {},
        resources: { subscribe: true },
        logging: {},
        completions: {},
      },
      requestState: { verify: (state, context) => stateCodec.verify(state, context) },
    },
  );
  server.setRequestHandler("tools/list", () => ({
    tools: [
      ...TOOLS,
      ...ASKING_TOOLS,
      ...OWN_TOOLS,
      {
        name: "test_sampling",
        description: "Asks the client's LLM",
        inputSchema: {
          type: "object" as const,
          properties: { prompt: { type: "string" } },
          required: ["prompt"],
        },
      },
      {
        name: "test_elicitation",
        description: "Asks the user",
        inputSchema: {
          type: "object" as const,
          properties: { message: { type: "string" } },
          required: ["message"],
        },
      },
      {
        name: "json_schema_2020_12_tool",
        description: "Tool with JSON Schema 2020-12 features",
        inputSchema: JSON_SCHEMA_2020_12 as typeof NO_ARGUMENTS,
      },
    ] as typeof TOOLS,
  }));
  server.setRequestHandler("tools/call", async (request, context): Promise<never> => {
    const envelope = context.mcpReq.envelope as Record<string, unknown> | undefined;
    switch (request.params.name) {
      case "test_missing_capability": {
        // Needs sampling, and says so when the client did not declare it.
        const declared = envelope?.["io.modelcontextprotocol/clientCapabilities"] as
          | { sampling?: unknown }
          | undefined;
        if (!declared?.sampling) {
          throw new MissingRequiredClientCapabilityError({
            requiredCapabilities: { sampling: {} },
          });
        }
        return { content: [text("The client can sample")] } as never;
      }
      case "test_streaming_elicitation": {
        // Progress first, then the request for input in its result (never a request on the stream).
        const progressToken = request.params._meta?.progressToken;
        if (progressToken !== undefined) {
          await context.mcpReq.notify({
            method: "notifications/progress",
            params: { progressToken, progress: 1, total: 2 },
          });
        }
        if (context.mcpReq.inputResponses?.confirm) {
          return { content: [text("confirmed")] } as never;
        }
        return inputRequired({
          inputRequests: { confirm: elicit("Please confirm", "ok", "boolean") } as never,
        }) as never;
      }
      case "update_resource":
        // To a 2025 client that subscribed, or on a 2026 client's subscriptions/listen stream.
        await server.sendResourceUpdated({ uri: String(request.params.arguments?.uri) });
        return { content: [text("updated")] } as never;
      case "test_logging_tool":
        // Sent only when the request named a log level (the SDK drops it otherwise).
        await context.mcpReq.log("info", "test_logging_tool ran").catch(() => {});
        return { content: [text("logged")] } as never;
    }
    const asked = await askingResult(
      request.params.name,
      request.params.arguments ?? {},
      (context.mcpReq.inputResponses ?? {}) as Answers,
      context.mcpReq.requestState<{ round: number; name?: string }>(),
      (context.mcpReq.envelope as Record<string, object> | undefined)?.[
        "io.modelcontextprotocol/clientCapabilities"
      ] ??
        server.getClientCapabilities() ?? {},
    );
    if (asked) return asked as never;
    return await toolResult() as never;
    async function toolResult() {
      switch (request.params.name) {
        case "test_simple_text":
          return { content: [text("This is a simple text response for testing.")] };
        case "test_image_content":
          return { content: [{ type: "image", data: PNG, mimeType: "image/png" }] };
        case "test_audio_content":
          return { content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] };
        case "test_embedded_resource":
          return {
            content: [{
              type: "resource",
              resource: {
                uri: "test://embedded-resource",
                mimeType: "text/plain",
                text: "This is an embedded resource content.",
              },
            }],
          };
        case "test_multiple_content_types":
          return {
            content: [
              text("Multiple content types test:"),
              { type: "image", data: PNG, mimeType: "image/png" },
              {
                type: "resource",
                resource: {
                  uri: "test://mixed-content-resource",
                  mimeType: "application/json",
                  text: JSON.stringify({ test: "data", value: 123 }),
                },
              },
            ],
          };
        case "test_error_handling":
          return {
            isError: true,
            content: [text("This tool intentionally returns an error for testing")],
          };
        case "test_tool_with_progress": {
          const progressToken = request.params._meta?.progressToken;
          for (const progress of [0, 50, 100]) {
            if (progressToken !== undefined) {
              await context.mcpReq.notify({
                method: "notifications/progress",
                params: { progressToken, progress, total: 100 },
              });
            }
            if (progress < 100) await sleep(50);
          }
          return { content: [text("Progress tool finished")] };
        }
        case "test_tool_with_logging": {
          for (const [index, message] of ["started", "processing data", "completed"].entries()) {
            if (index) await sleep(50);
            await context.mcpReq.log(
              "info",
              `Tool ${message === "processing data" ? "" : "execution "}${message}`,
            )
              .catch(() => {});
          }
          return { content: [text("Logging tool finished")] };
        }
        default:
          return { isError: true, content: [text(`Unknown tool: ${request.params.name}`)] };
      }
    }
  });
  server.setRequestHandler("resources/list", () => ({
    resources: [
      { uri: "test://static-text", name: "static-text", mimeType: "text/plain" },
      { uri: "test://static-binary", name: "static-binary", mimeType: "image/png" },
      { uri: "test://watched-resource", name: "watched-resource", mimeType: "text/plain" },
    ],
  }));
  // 2025 subscriptions (a 2026 client listens instead); every resource can be watched.
  server.setRequestHandler("resources/subscribe", () => ({}));
  server.setRequestHandler("resources/unsubscribe", () => ({}));
  server.setRequestHandler("resources/templates/list", () => ({
    resourceTemplates: [{
      uriTemplate: "test://template/{id}/data",
      name: "template",
      mimeType: "application/json",
    }],
  }));
  server.setRequestHandler("resources/read", (request) => {
    const { uri } = request.params;
    if (uri === "test://static-text") {
      return {
        contents: [{
          uri,
          mimeType: "text/plain",
          text: "This is the content of the static text resource.",
        }],
      };
    }
    if (uri === "test://watched-resource") {
      return { contents: [{ uri, mimeType: "text/plain", text: "A resource to watch." }] };
    }
    if (uri === "test://static-binary") {
      return { contents: [{ uri, mimeType: "image/png", blob: PNG }] };
    }
    const id = /^test:\/\/template\/([^/]+)\/data$/.exec(uri)?.[1];
    if (id === undefined) throw new Error(`Resource ${uri} not found`);
    return {
      contents: [{
        uri,
        mimeType: "application/json",
        text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
      }],
    };
  });
  server.setRequestHandler("prompts/list", () => ({
    prompts: [
      { name: "test_simple_prompt", description: "A simple prompt" },
      {
        name: "test_prompt_with_arguments",
        description: "A prompt with two arguments",
        arguments: [
          { name: "arg1", description: "First test argument", required: true },
          { name: "arg2", description: "Second test argument", required: true },
        ],
      },
      {
        name: "test_prompt_with_embedded_resource",
        description: "A prompt embedding a resource",
        arguments: [{ name: "resourceUri", description: "URI to embed", required: true }],
      },
      { name: "test_prompt_with_image", description: "A prompt with an image" },
      { name: "test_input_required_result_prompt", description: "A prompt that asks the user" },
    ],
  }));
  server.setRequestHandler("completion/complete", (request) => {
    const value = String(request.params.argument.value);
    const values = ["paris", "park", "party"].filter((word) => word.startsWith(value));
    return { completion: { values, total: values.length, hasMore: false } };
  });
  server.setRequestHandler("prompts/get", (request, context) => {
    if (request.params.name !== "test_input_required_result_prompt") {
      return promptResult(request.params) as never;
    }
    // Asks for context first (input_required), then uses the answer.
    const answer = accepted(
      (context.mcpReq.inputResponses as Answers | undefined)?.user_context,
    );
    if (!answer) {
      return inputRequired({
        inputRequests: {
          user_context: elicit("What context should the prompt use?", "context"),
        } as never,
      }) as never;
    }
    return {
      messages: [{ role: "user", content: text(`Prompt with context: ${answer.context}`) }],
    } as never;
  });
  return server;
}

type Answers = Record<string, Record<string, unknown>>;

/** The text a sampling answer carries. */
const sampled = (answer: Record<string, unknown>) =>
  String((answer.content as { text?: string } | undefined)?.text ?? "");

/** An answered elicitation's content, or undefined. */
const accepted = (answer: Record<string, unknown> | undefined) =>
  answer?.action === "accept" ? answer.content as Record<string, unknown> : undefined;

/** The text the elicitation scenarios expect back. */
const elicitationText = (answer: Record<string, unknown>) =>
  `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`;

/** Asks for what is not answered yet (with `state`), or finishes with `done`. */
async function askOrFinish(
  answers: Answers,
  requests: Record<string, { method: string; params: Record<string, unknown> }>,
  done: () => string,
  state?: { round: number; name?: string },
) {
  const missing = Object.fromEntries(
    Object.entries(requests).filter(([key]) => answers[key] === undefined),
  );
  if (!Object.keys(missing).length) return { content: [text(done())] };
  return inputRequired({
    inputRequests: missing as never,
    ...(state ? { requestState: await stateCodec.mint(state) } : {}),
  });
}

/** The tools that ask for input; `undefined` for the others. */
async function askingResult(
  name: string,
  args: Record<string, unknown>,
  answers: Answers,
  state: { round: number; name?: string } | undefined,
  capabilities: { elicitation?: unknown; sampling?: unknown },
) {
  switch (name) {
    case "test_input_required_result_capabilities": {
      // Only what the client declared it can answer.
      const requests = {
        ...(capabilities.elicitation ? { user_name: elicit("What is your name?", "name") } : {}),
        ...(capabilities.sampling ? { greeting: sample("Generate a greeting", 50) } : {}),
      };
      if (!Object.keys(requests).length) {
        return {
          isError: true,
          content: [text("The client can answer neither elicitation nor sampling")],
        };
      }
      return await askOrFinish(
        answers,
        requests,
        () => `Answered: ${Object.keys(requests).join(", ")}`,
      );
    }
    case "test_input_required_result_elicitation":
      return await askOrFinish(
        answers,
        { user_name: elicit("What is your name?", "name") },
        () => `Hello, ${accepted(answers.user_name)?.name}!`,
      );
    case "test_input_required_result_sampling":
      return await askOrFinish(
        answers,
        { capital_question: sample("What is the capital of France?", 100) },
        () => `Sampled: ${sampled(answers.capital_question)}`,
      );
    case "test_input_required_result_list_roots":
      return await askOrFinish(
        answers,
        { client_roots: LIST_ROOTS },
        () =>
          `Roots: ${
            ((answers.client_roots.roots ?? []) as { uri: string }[]).map((root) => root.uri)
              .join(", ")
          }`,
      );
    case "test_input_required_result_request_state":
    case "test_input_required_result_tampered_state":
      if (state?.round === 1 && answers.confirm) return { content: [text("state-ok")] };
      return await askOrFinish(
        {},
        { confirm: elicit("Please confirm", "ok", "boolean") },
        () => "",
        { round: 1 },
      );
    case "test_input_required_result_multiple_inputs":
      return await askOrFinish(
        answers,
        {
          user_name: elicit("What is your name?", "name"),
          greeting: sample("Generate a greeting", 50),
          client_roots: LIST_ROOTS,
        },
        () =>
          `${sampled(answers.greeting)} ${accepted(answers.user_name)?.name} (${
            (answers.client_roots.roots as unknown[]).length
          } roots)`,
        { round: 1 },
      );
    case "test_input_required_result_multi_round": {
      const name = state?.name ?? accepted(answers.step1)?.name;
      if (state?.round === 2 && accepted(answers.step2)) {
        return { content: [text(`${name} likes ${accepted(answers.step2)?.color}`)] };
      }
      if (name === undefined) {
        return await askOrFinish(
          {},
          { step1: elicit("Step 1: What is your name?", "name") },
          () => "",
          { round: 1 },
        );
      }
      return await askOrFinish(
        {},
        { step2: elicit("Step 2: What is your favorite color?", "color") },
        () => "",
        { round: 2, name: String(name) },
      );
    }
    case "test_sampling":
      return await askOrFinish(
        answers,
        { sampling: sample(String(args.prompt), 100) },
        () => `LLM response: ${sampled(answers.sampling)}`,
      );
    case "test_elicitation_sep1034_defaults":
      return await askOrFinish(
        answers,
        {
          defaults: {
            method: "elicitation/create",
            params: {
              message: "Confirm your details",
              requestedSchema: {
                type: "object",
                properties: {
                  name: { type: "string", default: "John Doe" },
                  age: { type: "integer", default: 30 },
                  score: { type: "number", default: 95.5 },
                  status: {
                    type: "string",
                    enum: ["active", "inactive", "pending"],
                    default: "active",
                  },
                  verified: { type: "boolean", default: true },
                },
              },
            },
          },
        },
        () => elicitationText(answers.defaults),
      );
    case "test_elicitation_sep1330_enums": {
      const titled = (prefix: string, title: string) =>
        [1, 2, 3].map((n) => ({ const: `${prefix}${n}`, title: `${title} ${n}` }));
      return await askOrFinish(
        answers,
        {
          enums: {
            method: "elicitation/create",
            params: {
              message: "Pick options",
              requestedSchema: {
                type: "object",
                properties: {
                  untitledSingle: { type: "string", enum: ["option1", "option2", "option3"] },
                  titledSingle: { type: "string", oneOf: titled("value", "Option") },
                  legacyEnum: {
                    type: "string",
                    enum: ["opt1", "opt2", "opt3"],
                    enumNames: ["Option One", "Option Two", "Option Three"],
                  },
                  untitledMulti: {
                    type: "array",
                    items: { type: "string", enum: ["option1", "option2", "option3"] },
                  },
                  titledMulti: { type: "array", items: { anyOf: titled("value", "Choice") } },
                },
              },
            },
          },
        },
        () => elicitationText(answers.enums),
      );
    }
    case "test_elicitation":
      return await askOrFinish(
        answers,
        {
          elicitation: {
            method: "elicitation/create",
            params: {
              message: String(args.message),
              requestedSchema: {
                type: "object",
                properties: {
                  username: { type: "string", description: "User's response" },
                  email: { type: "string", description: "User's email address" },
                },
                required: ["username", "email"],
              },
            },
          },
        },
        () => `User response: ${JSON.stringify(answers.elicitation)}`,
      );
    default:
      return undefined;
  }
}

function promptResult(params: { name: string; arguments?: Record<string, string> }) {
  {
    const request = { params };
    const args = request.params.arguments ?? {};
    const user = (content: Record<string, unknown>) => ({ role: "user" as const, content });
    switch (request.params.name) {
      case "test_simple_prompt":
        return { messages: [user(text("This is a simple prompt for testing."))] };
      case "test_prompt_with_arguments":
        return {
          messages: [
            user(text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`)),
          ],
        };
      case "test_prompt_with_embedded_resource":
        return {
          messages: [
            user({
              type: "resource",
              resource: {
                uri: args.resourceUri,
                mimeType: "text/plain",
                text: "Embedded resource content for testing.",
              },
            }),
            user(text("Please process the embedded resource above.")),
          ],
        };
      case "test_prompt_with_image":
        return {
          messages: [
            user({ type: "image", data: PNG, mimeType: "image/png" }),
            user(text("Please analyze the image above.")),
          ],
        };
      default:
        throw new Error(`Unknown prompt: ${request.params.name}`);
    }
  }
}

serveStdio(() => createServer());
