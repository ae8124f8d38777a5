/**
 * `toolgate` entry point: parses argv and dispatches to the CLI.
 *
 * @module
 */
import { runCli } from "./src/cli/main.ts";

if (import.meta.main) {
  runCli(Deno.args).then((code) => Deno.exit(code));
}
