/**
 * A live dashboard of tool calls: prints every `tool.called` and
 * `tool.failed` with its latency or error, circuit changes, and a running
 * per-tool summary, from the server's `GET /events` stream.
 *
 * `TOOLGATE_URL=http://127.0.0.1:7821 deno run -A examples/dashboard.ts`
 * (set `TOOLGATE_API_TOKEN` when the server has one; Ctrl-C stops it).
 *
 * @module
 */
import { ToolgateClient } from "../sdk/typescript/mod.ts";

/** Calls, failures and total latency of one tool. */
interface ToolStats {
  calls: number;
  failures: number;
  totalMs: number;
}

const stats = new Map<string, ToolStats>();

function statsOf(tool: string): ToolStats {
  let entry = stats.get(tool);
  if (!entry) stats.set(tool, entry = { calls: 0, failures: 0, totalMs: 0 });
  return entry;
}

function time(timestamp: string): string {
  return timestamp.slice(11, 23);
}

function summary(tool: string): string {
  const { calls, failures, totalMs } = statsOf(tool);
  const average = calls > 0 ? `${(totalMs / calls).toFixed(1)} ms avg` : "no successes";
  return `[${tool}: ${calls} ok, ${failures} failed, ${average}]`;
}

if (import.meta.main) {
  const baseUrl = Deno.env.get("TOOLGATE_URL") ?? "http://127.0.0.1:7821";
  const client = new ToolgateClient({ baseUrl, token: Deno.env.get("TOOLGATE_API_TOKEN") });
  await client.connect();

  client.on("tool.called", ({ timestamp, data }) => {
    const entry = statsOf(data.tool_name);
    entry.calls++;
    entry.totalMs += data.latency_ms;
    console.log(
      `${time(timestamp)}  ok      ${data.tool_name.padEnd(20)} ${
        String(data.latency_ms).padStart(6)
      } ms  ${summary(data.tool_name)}`,
    );
  });
  client.on("tool.failed", ({ timestamp, data }) => {
    statsOf(data.tool_name).failures++;
    console.log(
      `${time(timestamp)}  FAILED  ${
        data.tool_name.padEnd(20)
      } ${data.error_code} (attempt ${data.attempt}, circuit ${data.circuit_state})  ${
        summary(data.tool_name)
      }`,
    );
  });
  client.on("circuit.opened", ({ timestamp, data }) => {
    console.log(
      `${time(timestamp)}  CIRCUIT OPEN   ${data.tool_name} after ${data.failure_count} ` +
        `failures; retry in ${data.reset_after_ms} ms`,
    );
  });
  client.on("circuit.closed", ({ timestamp, data }) => {
    console.log(
      `${time(timestamp)}  circuit closed ${data.tool_name} after ${data.downtime_ms} ms`,
    );
  });

  await client.eventsReady();
  console.log(`dashboard: watching ${baseUrl}/events (Ctrl-C to stop)`);
  const stop = new Promise<void>((resolve) => {
    Deno.addSignalListener("SIGINT", resolve);
    Deno.addSignalListener("SIGTERM", resolve);
  });
  await stop;
  await client.disconnect();
  console.log("dashboard: stopped");
  Deno.exit(0);
}
