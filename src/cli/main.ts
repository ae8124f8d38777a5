/**
 * The `toolgate` command line: parses argv, runs the command, maps errors to
 * one line on stderr and exit codes (0 ok, 1 failure, 2 usage).
 *
 * @module
 */
import { Command, CommanderError } from "commander";
import { VERSION } from "../version.ts";
import { CliContext, type CliIo, processIo, reportFailure } from "./context.ts";
import { registerWebhooks } from "./webhooks.ts";
import { registerMcp } from "./mcp.ts";
import { registerKeychain } from "./keychain.ts";
import { registerTools } from "./tools.ts";
import { registerPlugins } from "./plugins.ts";
import { registerAudit } from "./audit.ts";
import { registerDlq } from "./dlq.ts";
import { registerIncoming } from "./incoming.ts";
import { registerDb } from "./db.ts";
import { registerKeys } from "./keys.ts";
import { registerServers } from "./servers.ts";
import { registerPolicies } from "./policies.ts";
import { registerApprovals } from "./approvals.ts";
import { registerDoctor } from "./doctor.ts";
import { configureCliLogging, type LogFlags, logSettings } from "./logging.ts";

/** Builds the command tree for one invocation. */
export function createProgram(context: CliContext): Command {
  const program = new Command("toolgate")
    .description("Tool gateway: plugins and tools over MCP and REST, signed webhooks, audit log")
    .version(VERSION, "-V, --version", "print the version")
    .helpOption("-h, --help", "show help")
    .helpCommand("help [command]", "show help for a command")
    .option("--log-format <format>", "log lines on stderr as text or json (TOOLGATE_LOG_FORMAT)")
    .option(
      "--log-level <level>",
      "lowest level logged: debug, info, warn, error (TOOLGATE_LOG_LEVEL)",
    )
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => context.io.stdout(text),
      writeErr: (text) => context.io.stderr(text),
      outputError: (text, write) => write(`toolgate: ${text.replace(/^error: /, "")}`),
    });
  program.hook("preAction", () => {
    configureCliLogging(context, logSettings(program.opts<LogFlags>(), context.io.env));
  });
  registerWebhooks(program, context);
  registerMcp(program, context);
  registerTools(program, context);
  registerPlugins(program, context);
  registerKeychain(program, context);
  registerKeys(program, context);
  registerServers(program, context);
  registerPolicies(program, context);
  registerApprovals(program, context);
  registerAudit(program, context);
  registerDlq(program, context);
  registerIncoming(program, context);
  registerDb(program, context);
  registerDoctor(program, context);
  return program;
}

/**
 * Runs the CLI.
 *
 * @param args Arguments after the program name.
 * @param io Process I/O. @default the real process
 * @returns The exit code.
 */
export async function runCli(args: string[], io: CliIo = processIo()): Promise<number> {
  const context = new CliContext(io);
  const program = createProgram(context);
  try {
    await program.parseAsync(args, { from: "user" });
    return 0;
  } catch (error) {
    return reportError(context, error);
  } finally {
    await context.close();
  }
}

function reportError(context: CliContext, error: unknown): number {
  if (error instanceof CommanderError) {
    if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return 0;
    if (error.code === "commander.help" || error.code === "commander.executeSubCommandAsync") {
      return 2;
    }
    return 2;
  }
  return reportFailure(context, error);
}
