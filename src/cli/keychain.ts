/**
 * `toolgate keychain …`: store, list and delete plugin credentials. Values
 * are read from stdin, never from argv, and never printed.
 *
 * @module
 */
import type { Command } from "commander";
import { GatewayError } from "../errors/mod.ts";
import {
  createKeychain,
  type Keychain,
  secretEnvName,
  validateSecretName,
} from "../keychain/mod.ts";
import { builtinPlugins } from "../plugins/mod.ts";
import { keychainReference } from "../plugins/mcp/mod.ts";
import { type CliContext, table, usage } from "./context.ts";

async function openKeychain(context: CliContext): Promise<Keychain> {
  const config = await context.config();
  return createKeychain({ store: await context.store(), dataDir: config.dataDir, env: config.env });
}

/** Validates a `<plugin>.<key>` argument as a usage error (exit 2). */
function parseName(raw: string): string {
  try {
    return validateSecretName(raw);
  } catch (error) {
    if (error instanceof GatewayError) throw usage(error.message);
    throw error;
  }
}

/** Registers the `keychain` command group. */
export function registerKeychain(program: Command, context: CliContext): void {
  const keychain = program.command("keychain")
    .description("manage plugin credentials (<plugin>.<key>), e.g. slack.bot_token");

  keychain.command("set")
    .description(
      "store a secret: typed at a hidden prompt, or read from stdin (one trailing newline is stripped)",
    )
    .argument("<name>", "<plugin>.<key>, e.g. slack.bot_token")
    .addHelpText(
      "after",
      '\nExample:\n  printf %s "$SLACK_BOT_TOKEN" | toolgate keychain set slack.bot_token',
    )
    .action(async (raw: string) => {
      const name = parseName(raw);
      const value = (await context.io.readSecret(`Value for ${name} (input hidden): `))
        .replace(/\r?\n$/, "");
      if (value.length === 0) {
        throw usage(
          context.io.stdinIsTty
            ? `Invalid value for ${name}: nothing was typed; type the secret, or pipe it in, e.g. printf %s "$TOKEN" | toolgate keychain set ${name}`
            : `Invalid value for ${name}: stdin was empty; pipe the secret in, e.g. printf %s "$TOKEN" | toolgate keychain set ${name}`,
        );
      }
      const config = await context.config();
      const plugin = name.slice(0, name.indexOf("."));
      const upstreams = [
        ...Object.values(config.plugins.upstreams),
        ...await (await context.store()).upstreams.list(),
      ];
      const known = [
        ...builtinPlugins().map((p) => p.name),
        ...Object.keys(config.plugins.upstreams),
        ...upstreams.flatMap((upstream) => "name" in upstream ? [upstream.name] : []),
      ];
      // MCP upstreams may name any entry in their env/headers (keychain:<name>).
      const referenced = upstreams.some((upstream) =>
        [...Object.values(upstream.env), ...Object.values(upstream.headers)]
          .some((value) => keychainReference(value) === name)
      );
      if (!known.includes(plugin) && !referenced) {
        context.warn(`no plugin named ${plugin} is installed (known: ${known.join(", ")})`);
      }
      const envName = secretEnvName(name);
      if (config.env[envName]) {
        context.warn(`${envName} is set in the environment and overrides the stored value`);
      }
      const store = await openKeychain(context);
      await store.set(name, value);
      context.print(`Stored ${name} (backend: ${await store.backend()})`);
      context.io.stderr(
        "toolgate: note: running servers read it on the next call; restart them to enable a plugin that was not configured\n",
      );
    });

  keychain.command("list")
    .description("list stored secret names (never values)")
    .option("--json", "print JSON: [{name, backend, updated_at, overridden_by_env}]")
    .action(async (options: { json?: boolean }) => {
      const entries = await (await openKeychain(context)).entries();
      if (options.json) {
        context.printJson(entries);
        return;
      }
      if (entries.length === 0) {
        context.print(
          'No secrets stored. Add one with: printf %s "$TOKEN" | toolgate keychain set slack.bot_token',
        );
        return;
      }
      context.print(table(
        ["NAME", "BACKEND", "UPDATED"],
        entries.map((entry) => [
          entry.name,
          entry.backend,
          entry.updated_at +
          (entry.overridden_by_env ? `  (overridden by ${secretEnvName(entry.name)})` : ""),
        ]),
      ));
    });

  keychain.command("delete")
    .description("delete a stored secret")
    .argument("<name>", "<plugin>.<key>")
    .action(async (raw: string) => {
      const name = parseName(raw);
      if (!(await (await openKeychain(context)).delete(name))) {
        throw new GatewayError(
          "NOT_FOUND",
          `No secret named ${name}: see toolgate keychain list`,
        );
      }
      context.print(`Deleted ${name}`);
    });
}
