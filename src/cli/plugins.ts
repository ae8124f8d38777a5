/**
 * `toolgate plugins …`: the hosted plugins and their state, and MCP servers
 * hosted as plugins (`add`, `remove`, `enable`, `disable`).
 *
 * @module
 */
import type { Command } from "commander";
import { egressPolicyFromConfig } from "../egress/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { PluginStatus } from "../gateway/mod.ts";
import { createKeychain, SECRET_NAME_PATTERN } from "../keychain/mod.ts";
import { keychainReference, upstreamNameProblem } from "../plugins/mcp/mod.ts";
import { builtinPlugins, SERVER_STATUS_MAX_AGE_MS } from "../plugins/mod.ts";
import { isSecretKey, redact } from "../redact.ts";
import type { UpstreamRecord } from "../store/mod.ts";
import { type CliContext, table, usage } from "./context.ts";
import { startQuietRuntime } from "./tools.ts";

interface AddOptions {
  command?: string;
  arg: string[];
  env: string[];
  url?: string;
  header: string[];
  include: string[];
  exclude: string[];
  rename: string[];
  prefix: boolean;
  disabled?: boolean;
  json?: boolean;
}

const EXPOSED_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Parses `--rename <from>=<to>` flags. */
function parseRenames(raw: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of raw) {
    const at = pair.indexOf("=");
    const from = at > 0 ? pair.slice(0, at) : "";
    const to = at > 0 ? pair.slice(at + 1) : "";
    if (!from || !EXPOSED_NAME.test(to)) {
      throw usage(
        `Invalid --rename "${pair}": expected <upstream name>=<new name>, the new name 1-128 of A-Z a-z 0-9 _ . -`,
      );
    }
    out[from] = to;
  }
  return out;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function builtinNames(): string[] {
  return builtinPlugins().map((plugin) => plugin.name);
}

function kindOf(plugin: PluginStatus): string {
  return plugin.upstream ? `mcp ${plugin.upstream.transport}` : "builtin";
}

function errorCell(plugin: PluginStatus): string {
  if (plugin.error) return `${plugin.error_code ?? "ERROR"}: ${plugin.error}`;
  if (plugin.last_error) return `last error: ${plugin.last_error}`;
  return "";
}

function printTable(context: CliContext, list: PluginStatus[]): void {
  context.print(table(
    ["NAME", "VERSION", "STATE", "TOOLS", "ZERO_CONFIG", "KIND", "ERROR"],
    list.map((plugin) => [
      plugin.name,
      plugin.version,
      plugin.state,
      String(plugin.tool_count),
      plugin.zero_config ? "yes" : "no",
      kindOf(plugin),
      errorCell(plugin),
    ]),
  ));
}

/** Parses `--env NAME=value` or `--header Name: value` flags into a map. */
function parsePairs(
  raw: string[],
  flag: "--env" | "--header",
): Record<string, string> {
  const out: Record<string, string> = {};
  const separator = flag === "--env" ? "=" : ":";
  const example = flag === "--env"
    ? "NAME=value or NAME=keychain:<plugin>.<key>"
    : "Name: value or Name: keychain:<plugin>.<key>";
  for (const pair of raw) {
    const at = pair.indexOf(separator);
    const name = at < 0 ? "" : flag === "--env" ? pair.slice(0, at) : pair.slice(0, at).trim();
    const value = at < 0 ? "" : flag === "--env" ? pair.slice(at + 1) : pair.slice(at + 1).trim();
    if (at < 0 || !(flag === "--env" ? ENV_NAME : HEADER_NAME).test(name)) {
      throw usage(`Invalid ${flag} "${pair}": expected ${example}`);
    }
    if (Object.hasOwn(out, name)) throw usage(`Invalid ${flag} ${name}: given twice`);
    const reference = keychainReference(value);
    if (reference !== undefined && !SECRET_NAME_PATTERN.test(reference)) {
      throw usage(
        `Invalid ${flag} ${name}: keychain reference "${reference}" is not a secret name such as github.token`,
      );
    }
    out[name] = value;
  }
  return out;
}

function parseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usage(`Invalid --url "${raw}": expected an address such as http://127.0.0.1:3001/mcp`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw usage(`Invalid --url "${raw}": only http:// and https:// are supported`);
  }
  return url.href;
}

/** Checks a name given to remove/enable/disable and explains built-in and config plugins. */
async function checkManaged(context: CliContext, name: string, action: string): Promise<void> {
  if (builtinNames().includes(name)) {
    throw new GatewayError(
      "CONFLICT",
      `Cannot ${action} plugin ${name}: it is built in; ${
        action === "enable"
          ? "remove it from plugins.disabled in config.json to turn it on"
          : "list it in plugins.disabled in config.json to turn it off"
      }`,
    );
  }
  const config = await context.config();
  if (Object.hasOwn(config.plugins.upstreams, name)) {
    throw new GatewayError(
      "CONFLICT",
      `Cannot ${action} plugin ${name}: it is declared in config.json; edit plugins.upstreams.${name} there`,
    );
  }
}

/**
 * A registration as shown: secret-looking literal values redacted, keychain
 * references (`keychain:<name>`, not secrets themselves) kept so they can be checked.
 */
function publicRecord(record: UpstreamRecord): UpstreamRecord {
  const shown = (values: Record<string, string>) => {
    const redacted = redact(values);
    return Object.fromEntries(
      Object.entries(values).map((
        [key, value],
      ) => [key, keychainReference(value) !== undefined ? value : redacted[key]]),
    );
  };
  return { ...redact(record), env: shown(record.env), headers: shown(record.headers) };
}

function notAdded(name: string): GatewayError {
  return new GatewayError(
    "NOT_FOUND",
    `No plugin ${name} was added with toolgate plugins add: see toolgate plugins list`,
  );
}

function describe(record: UpstreamRecord): string {
  return record.command !== undefined
    ? `MCP server over stdio (${record.command})`
    : `MCP server over Streamable HTTP (${new URL(record.url!).host})`;
}

/**
 * Registers the `plugins` command group.
 *
 * @returns The group, so more subcommands can join it.
 */
export function registerPlugins(program: Command, context: CliContext): Command {
  const plugins = program.command("plugins")
    .description("list plugins and their state; host MCP servers as plugins");

  plugins.command("list")
    .description(
      "list plugins: version, state, tool count, zero-config, kind, error; the live state of a running server when one runs",
    )
    .option(
      "--json",
      "print JSON: [{name, version, state, tool_count, zero_config, error?, last_error?, upstream?, server?}]",
    )
    .option("--local", "start the plugins in this process even when a server is running")
    .option("-v, --verbose", "log plugin start-up on stderr")
    .action(async (options: { json?: boolean; local?: boolean; verbose?: boolean }) => {
      if (!options.local) {
        const store = await context.store();
        const servers = await store.upstreams.listServerStatuses(SERVER_STATUS_MAX_AGE_MS);
        if (servers.length > 0) {
          if (options.json) {
            context.printJson(servers.flatMap((server) =>
              server.plugins.map((plugin) => ({
                ...plugin,
                server: { id: server.server_id, pid: server.pid, transport: server.transport },
              }))
            ));
            return;
          }
          for (const [index, server] of servers.entries()) {
            if (index > 0) context.print();
            context.print(
              `Server pid ${server.pid} (${server.transport}, started ${server.started_at}):`,
            );
            printTable(context, server.plugins as unknown as PluginStatus[]);
          }
          return;
        }
      }
      const runtime = await startQuietRuntime(context, options.verbose);
      try {
        const list = runtime.gateway.listPlugins();
        if (options.json) context.printJson(list);
        else printTable(context, list);
      } finally {
        await runtime.close();
      }
    });

  plugins.command("add")
    .description("host an MCP server as a plugin: a stdio --command or a Streamable HTTP --url")
    .argument("<name>", "plugin name (a-z, 0-9, _ or -; at most 32); its tools are <name>__<tool>")
    .option("--command <command>", "command that runs a stdio MCP server")
    .option("--arg <arg>", "an argument of --command (repeat for more)", collect, [])
    .option(
      "--env <NAME=value>",
      "environment of --command; value may be keychain:<plugin>.<key> (repeat for more)",
      collect,
      [],
    )
    .option("--url <url>", "http(s) endpoint of a Streamable HTTP MCP server")
    .option(
      "--header <Name:value>",
      "request header for --url; value may be keychain:<plugin>.<key> (repeat for more)",
      collect,
      [],
    )
    .option(
      "--include <glob>",
      "offer only the tools and prompts (by the server's names) and resources (by URI) matching (repeat for more)",
      collect,
      [],
    )
    .option("--exclude <glob>", "offer none of those matching (repeat for more)", collect, [])
    .option(
      "--rename <from=to>",
      "offer the server's tool or prompt <from> as <to> (repeat for more)",
      collect,
      [],
    )
    .option(
      "--no-prefix",
      "offer the names as they are, without <name>__ (refused at start if one is taken)",
    )
    .option("--disabled", "add it turned off (toolgate plugins enable <name> starts it)")
    .option("--json", "print the registration as JSON")
    .addHelpText(
      "after",
      `
Examples:
  toolgate plugins add everything --command npx --arg -y --arg @modelcontextprotocol/server-everything
  toolgate keychain set github.token
  toolgate plugins add github --command github-mcp-server --arg stdio --env GITHUB_PERSONAL_ACCESS_TOKEN=keychain:github.token
  toolgate plugins add remote --url https://mcp.example.com/mcp --header "Authorization: keychain:remote.auth"
  toolgate plugins add fs --command mcp-server-filesystem --arg /srv/docs --include "read_*" --include list_directory --no-prefix`,
    )
    .action(async (name: string, options: AddOptions) => {
      const problem = upstreamNameProblem(name, builtinNames());
      if (problem) throw usage(`Invalid plugin name "${name}": ${problem}`);
      if ((options.command === undefined) === (options.url === undefined)) {
        throw usage(
          "Invalid --command/--url: give exactly one (--command for a stdio server, --url for Streamable HTTP)",
        );
      }
      if (options.url !== undefined && options.arg.length > 0) {
        throw usage("Invalid --arg: it applies only with --command");
      }
      if (options.url !== undefined && options.env.length > 0) {
        throw usage("Invalid --env: it applies only with --command");
      }
      if (options.command !== undefined && options.header.length > 0) {
        throw usage("Invalid --header: it applies only with --url");
      }
      if (options.command !== undefined && options.command.trim() === "") {
        throw usage("Invalid --command: it is empty");
      }
      const url = options.url === undefined ? undefined : parseUrl(options.url);
      const rename = parseRenames(options.rename);
      const env = parsePairs(options.env, "--env");
      const headers = parsePairs(options.header, "--header");
      const config = await context.config();
      if (Object.hasOwn(config.plugins.upstreams, name)) {
        throw new GatewayError(
          "CONFLICT",
          `Cannot add plugin ${name}: it is declared in config.json (plugins.upstreams.${name})`,
        );
      }
      // A metadata or own address would be refused at every connect: said now, with the fix.
      if (url !== undefined) egressPolicyFromConfig(config).checkLiteral(new URL(url), "operator");
      const store = await context.store();
      const record = await store.upstreams.add({
        name,
        ...(options.command !== undefined ? { command: options.command } : {}),
        args: options.arg,
        env,
        ...(url !== undefined ? { url } : {}),
        headers,
        include: options.include,
        exclude: options.exclude,
        rename,
        prefix: options.prefix,
        enabled: !options.disabled,
      });
      const keychain = createKeychain({ store, dataDir: config.dataDir, env: config.env });
      for (const [flag, values] of [["--env", env], ["--header", headers]] as const) {
        for (const [key, value] of Object.entries(values)) {
          const reference = keychainReference(value);
          if (reference === undefined) {
            if (isSecretKey(key)) {
              context.warn(
                `${flag} ${key} is stored as plain text in the data directory; prefer toolgate keychain set ${name}.${key.toLowerCase()} and ${key}${
                  flag === "--env" ? "=" : ": "
                }keychain:${name}.${key.toLowerCase()}`,
              );
            }
          } else if (await keychain.get(reference) === undefined) {
            context.warn(
              `keychain entry ${reference} (${flag} ${key}) is not set yet: run toolgate keychain set ${reference}`,
            );
          }
        }
      }
      if (options.json) {
        context.printJson(publicRecord(record));
        return;
      }
      context.print(
        `Added plugin ${name}: ${describe(record)}${
          record.enabled ? "" : ", disabled"
        }; its tools are named ${record.prefix ? `${name}__<tool>` : "as the server names them"}`,
      );
      context.print(
        "A running server picks it up within a second; check with: toolgate plugins list",
      );
    });

  plugins.command("remove")
    .description("stop hosting an MCP server added with plugins add")
    .argument("<name>", "plugin name")
    .action(async (name: string) => {
      await checkManaged(context, name, "remove");
      if (!(await (await context.store()).upstreams.remove(name))) throw notAdded(name);
      context.print(`Removed plugin ${name}; a running server stops it within a second`);
    });

  for (const [action, enabled] of [["enable", true], ["disable", false]] as const) {
    plugins.command(action)
      .description(
        enabled
          ? "turn on an MCP server added with plugins add (restarts it when it is on)"
          : "turn off an MCP server added with plugins add (keeps its registration)",
      )
      .argument("<name>", "plugin name")
      .action(async (name: string) => {
        await checkManaged(context, name, action);
        const record = await (await context.store()).upstreams.setEnabled(name, enabled);
        if (!record) throw notAdded(name);
        if (enabled && (await context.config()).plugins.disabled.includes(name)) {
          context.warn(
            `plugins.disabled in config.json lists ${name}: it stays disabled until you remove it there`,
          );
        }
        context.print(
          enabled
            ? `Enabled plugin ${name}; a running server (re)starts it within a second`
            : `Disabled plugin ${name}; a running server stops it within a second`,
        );
      });
  }
  return plugins;
}
