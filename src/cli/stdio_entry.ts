/**
 * The short way into `toolgate mcp start` on stdio: MCP hosts spawn it for
 * every session, so it skips the command tree (commander and every command
 * module) and reaches the `initialize` reply sooner. Any other argv goes
 * through the full CLI.
 *
 * @module
 */
import { CliContext, type CliIo, processIo, reportFailure } from "./context.ts";
import { configureCliLogging, logSettings } from "./logging.ts";
import { startStdio } from "./mcp.ts";

const STDIO_STARTS: readonly string[][] = [
  ["mcp", "start"],
  ["mcp", "start", "--transport", "stdio"],
  ["mcp", "start", "--transport=stdio"],
];

/** Whether `args` ask for exactly `mcp start` on stdio, with no other flag. */
export function isStdioStart(args: readonly string[]): boolean {
  return STDIO_STARTS.some((form) =>
    form.length === args.length && form.every((part, i) => part === args[i])
  );
}

/**
 * Runs `toolgate mcp start` (stdio) as the full CLI would, errors and exit
 * codes included.
 *
 * @param io Process I/O. @default the real process
 * @returns The exit code.
 */
export async function runStdioStart(io: CliIo = processIo()): Promise<number> {
  const context = new CliContext(io);
  try {
    configureCliLogging(context, logSettings({}, io.env));
    await startStdio(context);
    return 0;
  } catch (error) {
    return reportFailure(context, error);
  } finally {
    await context.close();
  }
}
