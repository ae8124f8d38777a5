// Node 20 smoke test of the built TypeScript SDK (run by typescript_sdk_test.ts):
// `node _node_smoke.mjs <path to dist/mod.js>`, with TOOLGATE_URL, TOOLGATE_API_TOKEN,
// DENO_PATH, TOOLGATE_MAIN, TOOLGATE_HOME and CLOSED_PORT in the environment.
// Prints one JSON line summarising what it saw; exits non-zero on any failure.
import { createHmac } from "node:crypto";
import { pathToFileURL } from "node:url";

const sdk = await import(pathToFileURL(process.argv[2]).href);
const { ToolgateClient, ToolgateError, verifySignature } = sdk;
const env = process.env;
const summary = { node: process.versions.node.startsWith("20.") };

async function codeOf(call) {
  try {
    await call();
  } catch (error) {
    if (!(error instanceof ToolgateError)) throw error;
    return error.code;
  }
  throw new Error("expected the call to fail");
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const http = new ToolgateClient({ baseUrl: env.TOOLGATE_URL, token: env.TOOLGATE_API_TOKEN });
await http.connect();
summary.http_protocol = http.protocolVersion;
summary.http_tools = (await http.listTools()).some((tool) => tool.name === "memory_set");
await http.callTool("memory_set", { key: "node", value: "hello" });
const got = await http.callTool("memory_get", { key: "node" });
summary.call = JSON.parse(got.content[0].text).value;
summary.input_invalid = await codeOf(() => http.callTool("memory_get", {}));
summary.request_failed = await codeOf(() =>
  http.callTool("http_request", { url: `http://127.0.0.1:${env.CLOSED_PORT}/` })
);
summary.not_found = await codeOf(() => http.callTool("no_such_tool", {}));

const completed = new Promise((resolve) => {
  http.on("tool.complete", (event) => {
    if (event.data.tool === "memory_get" && event.data.session_id === "node-rest") resolve(event);
  });
});
await http.eventsReady();
const rest = await fetch(`${env.TOOLGATE_URL}/tools/memory_get`, {
  method: "POST",
  headers: {
    "content-type": "application/json",
    authorization: `Bearer ${env.TOOLGATE_API_TOKEN}`,
    "x-session-id": "node-rest",
  },
  body: JSON.stringify({ key: "node" }),
});
await rest.text();
const event = await withTimeout(completed, 10_000, "tool.complete");
summary.tool_complete = { tool: event.data.tool, ok: event.data.ok };
await http.disconnect();

const body = '{"id":"evt_1","type":"tool.called"}';
const header = "sha256=" + createHmac("sha256", "s3cret").update(body).digest("hex");
summary.signature = [
  await verifySignature("s3cret", Buffer.from(body), header),
  await verifySignature("s3cret", body + " ", header),
];

const stdio = new ToolgateClient({
  command: env.DENO_PATH,
  args: ["run", "-A", "--cached-only", "--unstable-kv", env.TOOLGATE_MAIN, "mcp", "start"],
  env: { TOOLGATE_HOME: env.TOOLGATE_HOME, NO_COLOR: "1" },
  stderr: "ignore",
});
await stdio.connect();
summary.stdio_protocol = stdio.protocolVersion;
summary.stdio_tools = (await stdio.listTools()).some((tool) => tool.name === "http_request");
try {
  stdio.on("tool.complete", () => {});
  summary.stdio_on = "no error";
} catch (error) {
  summary.stdio_on = error.code;
}
await stdio.disconnect();

console.log(JSON.stringify(summary));
