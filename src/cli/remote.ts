/**
 * CLI commands that need the plugins and upstreams (`tools list`, `tools
 * call`) use a running server instead of starting them in-process: the one
 * `--url` names, else an HTTP server serving the same data directory or
 * database (it publishes its URL with its plugin states). They start the
 * plugins themselves only when none answers.
 *
 * @module
 */
import { ERROR_CODES, GatewayError } from "../errors/mod.ts";
import { SERVER_STATUS_MAX_AGE_MS } from "../plugins/mod.ts";
import type { CliContext } from "./context.ts";

/** A server the CLI calls. */
export interface RemoteServer {
  /** Its base URL. */
  url: string;
  /** `Authorization` (from `TOOLGATE_API_TOKEN`) when this process has the token. */
  headers: Record<string, string>;
}

/** A tool as `GET /tools` lists it. */
export interface RemoteTool {
  name: string;
  plugin: string;
  description: string;
  inputSchema: Record<string, unknown>;
  [field: string]: unknown;
}

/** A call's result as the in-process call gives it. */
export interface RemoteCallResult {
  tool: string;
  plugin: string;
  latency_ms: number;
  output: Record<string, unknown>;
}

/** How long a discovered server may take to answer before the CLI starts the plugins itself. */
const PROBE_TIMEOUT_MS = 1500;

function headersOf(context: CliContext): Record<string, string> {
  const token = context.io.env.TOOLGATE_API_TOKEN?.trim();
  return token ? { authorization: `Bearer ${token}` } : {};
}

/**
 * The server to call: `url` when given (it must answer), else a running
 * HTTP server on this store that answers, else `undefined`.
 *
 * @throws {GatewayError} `UNAVAILABLE` when `url` was given and does not answer.
 */
export async function findServer(
  context: CliContext,
  url: string | undefined,
  note: (message: string) => void,
): Promise<RemoteServer | undefined> {
  const headers = headersOf(context);
  if (url !== undefined) {
    const base = url.replace(/\/+$/, "");
    if (!/^https?:\/\/\S+$/.test(base)) {
      throw new GatewayError(
        "USAGE",
        `Invalid --url "${url}": expected the http(s):// base URL of a toolgate server, e.g. http://127.0.0.1:7821`,
      );
    }
    const problem = await probe(base, headers);
    if (problem) {
      throw new GatewayError("UNAVAILABLE", `Cannot use the server at ${base}: ${problem}`);
    }
    return { url: base, headers };
  }
  const store = await context.store();
  const statuses = await store.upstreams.listServerStatuses(SERVER_STATUS_MAX_AGE_MS);
  const here = Deno.hostname();
  const candidates = statuses
    .filter((status) => status.url && (!status.hostname || status.hostname === here))
    .sort((a, b) => (b.updated_at > a.updated_at ? 1 : -1));
  for (const status of candidates) {
    const problem = await probe(status.url!, headers);
    if (!problem) return { url: status.url!, headers };
    note(`the server at ${status.url} cannot be used (${problem}): starting the plugins here`);
  }
  return undefined;
}

/** `undefined` when the server lists its tools to this caller (`HEAD /tools`), else why not. */
async function probe(url: string, headers: Record<string, string>): Promise<string | undefined> {
  try {
    const response = await fetch(`${url}/tools`, {
      method: "HEAD",
      headers,
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (response.status === 401 || response.status === 403) {
      return `it needs its API token (set TOOLGATE_API_TOKEN), answered ${response.status}`;
    }
    return response.ok ? undefined : `GET /tools answered ${response.status}`;
  } catch (error) {
    return (error as Error).name === "TimeoutError"
      ? `no answer in ${PROBE_TIMEOUT_MS} ms`
      : (error as Error).message;
  }
}

async function errorOf(response: Response): Promise<GatewayError> {
  const body = await response.json().catch(() => undefined) as
    | { error?: { code?: string; message?: string; details?: unknown } }
    | undefined;
  const code = body?.error?.code ?? "UNAVAILABLE";
  const message = body?.error?.message ?? `The server answered HTTP ${response.status}`;
  return new GatewayError(
    (Object.hasOwn(ERROR_CODES, code) ? code : "UNAVAILABLE") as keyof typeof ERROR_CODES,
    message,
    body?.error?.details === undefined ? {} : { details: body.error.details },
  );
}

/** The tools the server offers (`GET /tools`). */
export async function remoteTools(server: RemoteServer): Promise<RemoteTool[]> {
  const response = await fetch(`${server.url}/tools`, { headers: server.headers });
  if (!response.ok) throw await errorOf(response);
  return ((await response.json()) as { tools: RemoteTool[] }).tools;
}

/**
 * Calls a tool on the server (`POST /tools/{name}`), with the result shaped
 * as an in-process call gives it (`plugin` filled in only with `options.plugin`).
 *
 * @throws {GatewayError} the server's error, code and message as it answered them.
 */
export async function remoteCall(
  server: RemoteServer,
  name: string,
  args: Record<string, unknown>,
  options: { plugin?: boolean } = {},
): Promise<RemoteCallResult> {
  const started = performance.now();
  const response = await fetch(`${server.url}/tools/${encodeURIComponent(name)}`, {
    method: "POST",
    headers: { ...server.headers, "content-type": "application/json" },
    body: JSON.stringify(args),
  });
  if (!response.ok) throw await errorOf(response);
  const body = await response.json() as {
    content?: { type: string; text?: string }[];
    structuredContent?: Record<string, unknown>;
  };
  const latency_ms = Math.round(performance.now() - started);
  // A plugin's output is sent as structuredContent with its JSON as the text;
  // an upstream's result is sent as it came.
  const first = body.content?.[0];
  const plain = body.structuredContent !== undefined && body.content?.length === 1 &&
    first?.type === "text" && first.text === JSON.stringify(body.structuredContent);
  // The REST answer does not name the plugin: looked up only when it is shown (`--json`).
  const plugin = options.plugin
    ? (await remoteTools(server)).find((tool) => tool.name === name)?.plugin ?? ""
    : "";
  return {
    tool: name,
    plugin,
    latency_ms,
    output: plain ? body.structuredContent! : body as Record<string, unknown>,
  };
}
