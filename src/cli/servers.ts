/**
 * `toolgate servers …`: virtual servers, named subsets of the tools, each
 * served at `/mcp/<name>` and by `mcp start --server <name>`. Defined here
 * (in the store, shared by every instance on one database) or in config
 * (`servers`); a name in both is config's.
 *
 * @module
 */
import type { Command } from "commander";
import { type Config, VIRTUAL_SERVER_NAME_PATTERN } from "../config/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { parseToolPatterns } from "../gateway/caller.ts";
import type { Store, VirtualServerRecord } from "../store/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

/** A virtual server as `servers list|show --json` show it. */
interface ServerView {
  name: string;
  source: "config" | "store";
  tools: string[];
  description: string | null;
  created_at?: string;
  updated_at?: string;
  /** A stored definition under a name config also defines: not served. */
  shadowed?: true;
}

function fromRecord(record: VirtualServerRecord, config: Config): ServerView {
  return {
    ...record,
    source: "store",
    ...(Object.hasOwn(config.servers, record.name) ? { shadowed: true as const } : {}),
  };
}

function fromConfig(name: string, config: Config): ServerView {
  const { tools, description } = config.servers[name];
  return { name, source: "config", tools: [...tools], description: description ?? null };
}

/** Every virtual server: config's, then the store's, by name. */
async function allServers(store: Store, config: Config): Promise<ServerView[]> {
  const views = [
    ...Object.keys(config.servers).map((name) => fromConfig(name, config)),
    ...(await store.servers.list()).map((record) => fromRecord(record, config)),
  ];
  return views.sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : a.source === "config" ? -1 : 1
  );
}

/**
 * Checks a virtual server name.
 *
 * @throws {GatewayError} `USAGE` naming the rule.
 */
export function parseServerName(name: string, what = "name"): string {
  if (!VIRTUAL_SERVER_NAME_PATTERN.test(name)) {
    throw usage(
      `Invalid ${what} ${JSON.stringify(name)}: a virtual server name is 1-64 letters, digits, ` +
        `_ and -, starting with a letter or digit (it is the path /mcp/<name>), e.g. team-a`,
    );
  }
  return name;
}

/**
 * Whether a virtual server of that name exists (config or store).
 *
 * @throws {GatewayError} `USAGE` (exit 2) naming `what` when it does not.
 */
export async function requireServer(
  store: Store,
  config: Config,
  name: string,
  what: string,
): Promise<void> {
  if (Object.hasOwn(config.servers, name) || await store.servers.get(name)) return;
  throw usage(
    `Invalid ${what} ${JSON.stringify(name)}: no virtual server of that name; ` +
      `make one with toolgate servers create ${name} --tools '<patterns>' ` +
      `(toolgate servers list shows them)`,
  );
}

function notFound(name: string): GatewayError {
  return new GatewayError(
    "NOT_FOUND",
    `No virtual server named ${name} in the store (toolgate servers list shows them)`,
    { details: { server: name } },
  );
}

function inConfig(name: string, action: string): GatewayError {
  return new GatewayError(
    "CONFLICT",
    `Cannot ${action} virtual server ${name}: it is defined in config (servers.${name}), ` +
      `which wins over the store; edit the configuration file instead`,
    { details: { server: name } },
  );
}

function description(text: string | undefined): string | null | undefined {
  if (text === undefined) return undefined;
  if (text.length > 1024) {
    throw usage(`Invalid --description: ${text.length} characters; at most 1024`);
  }
  return text === "" ? null : text;
}

/** Registers the `servers` command group. */
export function registerServers(program: Command, context: CliContext): void {
  const servers = program.command("servers")
    .description("virtual servers: named tool subsets served at /mcp/<name>");

  servers.command("create")
    .description("define a virtual server (running servers pick it up)")
    .argument("<name>", "its name, the path /mcp/<name> (letters, digits, _ -)")
    .requiredOption("--tools <patterns>", "its tools, comma-separated globs: 'memory_*,github__*'")
    .option("--description <text>", "what it is for")
    .option("--json", "print its record as JSON")
    .action(async (name: string, options: {
      tools: string;
      description?: string;
      json?: boolean;
    }) => {
      parseServerName(name);
      const tools = parseToolPatterns(options.tools);
      const text = description(options.description) ?? null;
      const config = await context.config();
      if (Object.hasOwn(config.servers, name)) throw inConfig(name, "create");
      const store = await context.store();
      const now = new Date().toISOString();
      const record = await store.servers.add({
        name,
        tools,
        description: text,
        created_at: now,
        updated_at: now,
      });
      if (options.json) context.printJson(fromRecord(record, config));
      else {
        context.print(
          `Created virtual server ${name} at /mcp/${name}: ${record.tools.join(", ")}`,
        );
      }
    });

  servers.command("list")
    .description("list virtual servers (config and store)")
    .option("--json", "print them as JSON")
    .action(async (options: { json?: boolean }) => {
      const config = await context.config();
      const store = await context.store();
      const views = await allServers(store, config);
      if (options.json) {
        context.printJson(views);
        return;
      }
      if (!views.length) {
        context.print(
          "No virtual servers. Define one with: toolgate servers create <name> --tools '<patterns>'",
        );
        return;
      }
      context.print(table(
        ["NAME", "SOURCE", "TOOLS", "DESCRIPTION"],
        views.map((view) => [
          view.name,
          view.shadowed ? "store (shadowed by config)" : view.source,
          view.tools.join(","),
          view.description ?? "",
        ]),
      ));
    });

  servers.command("show")
    .description("show one virtual server as JSON")
    .argument("<name>", "its name")
    .action(async (name: string) => {
      const config = await context.config();
      const store = await context.store();
      const views = (await allServers(store, config)).filter((view) => view.name === name);
      if (!views.length) throw notFound(name);
      // The one served first; a shadowed stored definition after it.
      context.printJson(views.length === 1 ? views[0] : { ...views[0], shadows: views[1] });
    });

  servers.command("update")
    .description("change a virtual server's tools or description (clients hear list_changed)")
    .argument("<name>", "its name")
    .option("--tools <patterns>", "its new tools, comma-separated globs")
    .option("--description <text>", "its new description ('' clears it)")
    .option("--json", "print its record as JSON")
    .action(async (name: string, options: {
      tools?: string;
      description?: string;
      json?: boolean;
    }) => {
      if (options.tools === undefined && options.description === undefined) {
        throw usage("Nothing to update: give --tools, --description or both");
      }
      const tools = options.tools === undefined ? undefined : parseToolPatterns(options.tools);
      const text = description(options.description);
      const config = await context.config();
      if (Object.hasOwn(config.servers, name)) throw inConfig(name, "update");
      const store = await context.store();
      const record = await store.servers.update(name, {
        ...(tools === undefined ? {} : { tools }),
        ...(text === undefined ? {} : { description: text }),
      });
      if (!record) throw notFound(name);
      if (options.json) context.printJson(fromRecord(record, config));
      else context.print(`Updated virtual server ${name}: ${record.tools.join(", ")}`);
    });

  servers.command("remove")
    .description("remove a virtual server (its sessions then see no tools; /mcp/<name> is 404)")
    .argument("<name>", "its name")
    .action(async (name: string) => {
      const config = await context.config();
      const store = await context.store();
      // A stored definition shadowed by config may go; config's own stays config's.
      if (!await store.servers.remove(name)) {
        throw Object.hasOwn(config.servers, name) ? inConfig(name, "remove") : notFound(name);
      }
      context.print(
        `Removed virtual server ${name}` +
          (Object.hasOwn(config.servers, name) ? " from the store (config still defines it)" : ""),
      );
    });
}
