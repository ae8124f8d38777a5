/**
 * `toolgate keys …`: API keys for the HTTP transport. A key is printed once
 * when made; only its SHA-256 is stored.
 *
 * @module
 */
import type { Command } from "commander";
import { createApiKey, findApiKey, revokeApiKey } from "../auth/api_keys.ts";
import type { ApiKeyRecord } from "../store/mod.ts";
import { type CliContext, table } from "./context.ts";
import { requireServer } from "./servers.ts";

/** A key as `keys list --json` shows it: never the key or its hash. */
function view(record: ApiKeyRecord, now: number): Record<string, unknown> {
  const { hash: _hash, ...shown } = record;
  return {
    ...shown,
    expired: record.expires_at !== null && Date.parse(record.expires_at) <= now,
  };
}

/** Registers the `keys` command group. */
export function registerKeys(program: Command, context: CliContext): void {
  const keys = program.command("keys")
    .description(
      "API keys for REST, /mcp and /events (TOOLGATE_API_TOKEN stays the administrator)",
    );

  keys.command("create")
    .description("make an API key and print it once (only its hash is stored)")
    .requiredOption("--name <name>", "unique name (letters, digits, _ - .), e.g. ci")
    .option(
      "--tools <patterns>",
      "tools it may call, comma-separated globs: 'memory_*,http_request'",
    )
    .option(
      "--server <virtual>",
      "virtual server it is bound to: it may use /mcp/<virtual> and that server's tools only",
    )
    .option(
      "--rate <n/unit>",
      "rate limit of its tool calls, e.g. 10/s or 1000/h (a bucket of one unit's worth)",
    )
    .option("--expires <when>", "expiry: a duration from now (30d, 12h, 90m, 2w) or an ISO time")
    .option("--json", "print the key and its record as JSON")
    .action(async (options: {
      name: string;
      tools?: string;
      server?: string;
      rate?: string;
      expires?: string;
      json?: boolean;
    }) => {
      const store = await context.store();
      if (options.server !== undefined) {
        await requireServer(store, await context.config(), options.server, "--server");
      }
      const { record, key } = await createApiKey(store.apiKeys, options);
      if (options.json) {
        context.printJson({ key, ...view(record, Date.now()) });
        return;
      }
      // The key alone on stdout, so KEY=$(toolgate keys create --name ci) works.
      context.print(key);
      context.io.stderr(
        `toolgate: API key ${record.name} (${record.id}) created; it is shown this once, ` +
          `store it now. Tools: ${record.tools?.join(", ") ?? "all"}` +
          (record.expires_at ? `; expires ${record.expires_at}` : "") + "\n",
      );
    });

  keys.command("list")
    .description("list API keys (never the keys themselves)")
    .option("--json", "print the keys as JSON")
    .action(async (options: { json?: boolean }) => {
      const store = await context.store();
      const records = await store.apiKeys.list();
      const now = Date.now();
      if (options.json) {
        context.printJson(records.map((record) => view(record, now)));
        return;
      }
      if (records.length === 0) {
        context.print("No API keys. Make one with: toolgate keys create --name <name>");
        return;
      }
      context.print(table(
        ["NAME", "ID", "PREFIX", "TOOLS", "EXPIRES", "CREATED", "LAST USED"],
        records.map((record) => [
          record.name,
          record.id,
          `${record.prefix}…`,
          record.tools?.join(",") ?? "*",
          record.expires_at === null
            ? "never"
            : `${record.expires_at}${Date.parse(record.expires_at) <= now ? " (expired)" : ""}`,
          record.created_at,
          record.last_used_at ?? "never",
        ]),
      ));
    });

  keys.command("show")
    .description("show one API key's record (never the key)")
    .argument("<name|id>", "the key's name or id")
    .action(async (nameOrId: string) => {
      const store = await context.store();
      context.printJson(view(await findApiKey(store.apiKeys, nameOrId), Date.now()));
    });

  keys.command("revoke")
    .description("revoke an API key: it stops working at once, on every instance")
    .argument("<name|id>", "the key's name or id")
    .option("--json", "print the revoked key's record as JSON")
    .action(async (nameOrId: string, options: { json?: boolean }) => {
      const store = await context.store();
      const record = await revokeApiKey(store.apiKeys, nameOrId);
      if (options.json) context.printJson(view(record, Date.now()));
      else context.print(`Revoked API key ${record.name} (${record.id})`);
    });
}
