/**
 * `toolgate plugins …`: the hosted plugins and their state.
 *
 * @module
 */
import type { Command } from "commander";
import { type CliContext, table } from "./context.ts";
import { startQuietRuntime } from "./tools.ts";

/**
 * Registers the `plugins` command group.
 *
 * @returns The group, so more subcommands (`add`, `remove`, …) can join it.
 */
export function registerPlugins(program: Command, context: CliContext): Command {
  const plugins = program.command("plugins").description("list plugins and their state");

  plugins.command("list")
    .description("list plugins: version, state, tool count, zero-config, error")
    .option("--json", "print JSON: [{name, version, state, tool_count, zero_config, error?}]")
    .option("-v, --verbose", "log plugin start-up on stderr")
    .action(async (options: { json?: boolean; verbose?: boolean }) => {
      const runtime = await startQuietRuntime(context, options.verbose);
      try {
        const list = runtime.gateway.listPlugins();
        if (options.json) {
          context.printJson(list);
          return;
        }
        context.print(table(
          ["NAME", "VERSION", "STATE", "TOOLS", "ZERO_CONFIG", "ERROR"],
          list.map((plugin) => [
            plugin.name,
            plugin.version,
            plugin.state,
            String(plugin.tool_count),
            plugin.zero_config ? "yes" : "no",
            plugin.error ? `${plugin.error_code ?? "ERROR"}: ${plugin.error}` : "",
          ]),
        ));
      } finally {
        await runtime.close();
      }
    });
  return plugins;
}
