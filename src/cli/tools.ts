/**
 * `toolgate tools …`: list the tools on offer and call one in-process
 * through the same pipeline as REST and MCP (validation, circuit breaker,
 * timeout, audit, events).
 *
 * @module
 */
import type { Command } from "commander";
import { GatewayError } from "../errors/mod.ts";
import { LOCAL_CALLER } from "../gateway/caller.ts";
import { type CliContext, debugEnabled, table, usage } from "./context.ts";
import type { UpstreamSpec } from "../plugins/mcp/mod.ts";
import { createRuntime, type Runtime } from "./runtime.ts";
import { findServer, remoteCall, remoteTools } from "./remote.ts";
import { registerPins } from "./pins.ts";

/**
 * Starts the gateway quietly (plugin state shows in `plugins list`), unless
 * `verbose`; `upstreams` picks the MCP upstreams to start (default all).
 */
export function startQuietRuntime(
  context: CliContext,
  verbose = false,
  upstreams?: (spec: UpstreamSpec) => boolean,
): Promise<Runtime> {
  return createRuntime(context, {
    upstreams,
    log: (message) => {
      if (verbose || debugEnabled(context.io.env)) context.io.stderr(`toolgate: ${message}\n`);
    },
  });
}

/** Parses `--args`: a JSON object. */
export function parseToolArgs(raw: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    throw usage(
      `Invalid --args: not JSON (${
        (error as Error).message
      }); expected an object such as '{"key": "a"}'`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
    throw usage(`Invalid --args: expected a JSON object such as '{"key": "a"}', got ${kind}`);
  }
  return value as Record<string, unknown>;
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Registers the `tools` command group. */
export function registerTools(program: Command, context: CliContext): void {
  const tools = program.command("tools").description(
    "list and call tools; the pins of upstream tools and decisions on changed ones",
  );
  registerPins(tools, context);

  tools.command("list")
    .description(
      "list the tools on offer (from the running server of this data dir or database, if any)",
    )
    .option("--json", "print JSON: [{name, plugin, description, inputSchema}]")
    .option("--url <url>", "ask this toolgate server (http://host:port) instead of looking for one")
    .option("-v, --verbose", "log plugin start-up on stderr")
    .action(async (options: { json?: boolean; verbose?: boolean; url?: string }) => {
      const note = (message: string) => context.io.stderr(`toolgate: note: ${message}\n`);
      const server = await findServer(context, options.url, note);
      if (server) {
        printTools(await remoteTools(server));
        return;
      }
      const runtime = await startQuietRuntime(context, options.verbose);
      try {
        printTools(runtime.gateway.listTools().map(({ mcpListing: _, ...tool }) => tool));
        for (const plugin of runtime.gateway.listPlugins()) {
          if (plugin.state !== "ready" && plugin.state !== "disabled") {
            context.io.stderr(
              `toolgate: note: plugin ${plugin.name} is ${plugin.state}, its tools are not listed: ${
                plugin.error ?? "see toolgate plugins list"
              }\n`,
            );
          }
        }
      } finally {
        await runtime.close();
      }

      function printTools(list: { name: string; plugin: string; description: string }[]): void {
        if (options.json) context.printJson(list);
        else if (list.length === 0) context.print("No tools on offer: see toolgate plugins list");
        else {
          context.print(table(
            ["NAME", "PLUGIN", "DESCRIPTION"],
            list.map((tool) => [tool.name, tool.plugin, shorten(tool.description, 100)]),
          ));
        }
      }
    });

  tools.command("call")
    .description(
      "call a tool (on the running server of this data dir or database, else in-process) and " +
        "print its output as JSON",
    )
    .argument("<name>", "tool name, e.g. memory_set")
    .option("--args <json>", "arguments as a JSON object; - reads them from stdin", "{}")
    .option("--json", "print {tool, plugin, latency_ms, output}; errors as {error} on stdout too")
    .option("--url <url>", "call it on this toolgate server (http://host:port)")
    .option("-v, --verbose", "log plugin start-up and messages on stderr")
    .addHelpText(
      "after",
      `\nExample:\n  toolgate tools call memory_set --args '{"key": "greeting", "value": "hello"}'`,
    )
    .action(async (
      name: string,
      options: { args: string; json?: boolean; verbose?: boolean; url?: string },
    ) => {
      const raw = options.args === "-" ? await context.io.readStdin() : options.args;
      const args = parseToolArgs(raw);
      const note = (message: string) => context.io.stderr(`toolgate: note: ${message}\n`);
      const server = await findServer(context, options.url, note);
      if (server) {
        try {
          printResult(await remoteCall(server, name, args, { plugin: options.json }));
        } catch (error) {
          throw callError(error);
        }
        return;
      }
      const runtime = await startQuietRuntime(
        context,
        options.verbose,
        // Its own upstream only; one that offers names without its prefix may own any name.
        (spec) => name.startsWith(`${spec.name}__`) || spec.shape?.prefix === false,
      );
      try {
        printResult(
          await runtime.gateway.call(name, args, { source: "cli", caller: LOCAL_CALLER }),
        );
      } catch (error) {
        throw callError(error);
      } finally {
        await runtime.close();
      }

      function printResult(
        result: { tool: string; plugin: string; latency_ms: number; output: unknown },
      ): void {
        if (options.json) {
          const { tool, plugin, latency_ms, output } = result;
          context.printJson({ tool, plugin, latency_ms, output });
        } else {
          context.printJson(result.output);
        }
      }

      function callError(error: unknown): unknown {
        if (!(error instanceof GatewayError)) return error;
        if (options.json) context.printJson({ error: error.toJSON() });
        const hint = error.code === "TOOL_NOT_FOUND" ? "; see toolgate tools list" : "";
        return new GatewayError(error.code, `${error.code}: ${error.message}${hint}`, {
          details: error.details,
          cause: error,
        });
      }
    });
}
