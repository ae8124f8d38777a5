/**
 * `toolgate` entry point: parses argv and dispatches to the CLI (or, for a
 * plain `mcp start`, straight to the stdio server).
 *
 * @module
 */
import { isStdioStart, runStdioStart } from "./src/cli/stdio_entry.ts";

if (import.meta.main) {
  const run = isStdioStart(Deno.args)
    ? runStdioStart()
    : import("./src/cli/main.ts").then((cli) => cli.runCli(Deno.args));
  run.then((code) => Deno.exit(code));
}
