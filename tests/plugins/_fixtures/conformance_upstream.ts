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
import { Server } from "@modelcontextprotocol/server";
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

const text = (value: string) => ({ type: "text" as const, text: value });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function createServer(): Server {
  const server = new Server(
    { name: "conformance-upstream", version: "1.0.0" },
    { capabilities: { tools: {}, prompts: {}, resources: {}, logging: {}, completions: {} } },
  );
  server.setRequestHandler("tools/list", () => ({
    tools: [
      ...TOOLS,
      {
        name: "json_schema_2020_12_tool",
        description: "Tool with JSON Schema 2020-12 features",
        inputSchema: JSON_SCHEMA_2020_12 as typeof NO_ARGUMENTS,
      },
    ],
  }));
  server.setRequestHandler("tools/call", async (request, context): Promise<never> => {
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
    ],
  }));
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
    ],
  }));
  server.setRequestHandler("completion/complete", (request) => {
    const value = String(request.params.argument.value);
    const values = ["paris", "park", "party"].filter((word) => word.startsWith(value));
    return { completion: { values, total: values.length, hasMore: false } };
  });
  server.setRequestHandler("prompts/get", (request) => promptResult(request.params) as never);
  return server;
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
