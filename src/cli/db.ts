/**
 * `toolgate db …`: the store's schema. `status` reports where it stands and
 * `migrate` brings it up to this release (a server also migrates as it
 * starts; these commands do it by hand, e.g. before a rolling upgrade).
 *
 * @module
 */
import type { Command } from "commander";
import { migrateStore, type StoreSchemaStatus, storeSchemaStatus } from "../store/mod.ts";
import { type CliContext, storeOptions, table } from "./context.ts";

function describe(context: CliContext, status: StoreSchemaStatus): void {
  const what = status.kind === "kv" ? "Deno KV (embedded)" : "PostgreSQL";
  context.print(`Store: ${what} at ${status.location}`);
  context.print(`Schema: ${status.current} (this release: ${status.latest})`);
  if (status.applied.length) {
    context.print(table(
      ["VERSION", "NAME", "APPLIED AT"],
      status.applied.map((m) => [String(m.version), m.name, m.applied_at]),
    ));
  }
  if (status.pending.length) {
    context.print(
      `Pending: ${status.pending.map((m) => `${m.version} ${m.name}`).join(", ")} ` +
        "(run toolgate db migrate, or start a server)",
    );
  } else if (status.current > status.latest) {
    context.print("This database was migrated by a newer toolgate: upgrade toolgate to use it.");
  } else {
    context.print("Up to date.");
  }
}

/** Registers the `db` command group. */
export function registerDb(program: Command, context: CliContext): void {
  const db = program.command("db")
    .description(
      "the store: Deno KV in the data dir, or PostgreSQL with TOOLGATE_DATABASE_URL / store.url",
    );

  db.command("status")
    .description("show which store is used and where its schema stands (changes nothing)")
    .option("--json", "print the status as JSON")
    .action(async (options: { json?: boolean }) => {
      const status = await storeSchemaStatus(storeOptions(await context.config()));
      if (options.json) context.printJson(status);
      else describe(context, status);
    });

  db.command("migrate")
    .description("apply the schema migrations this release has and the store lacks")
    .option("--json", "print the result as JSON")
    .action(async (options: { json?: boolean }) => {
      const { applied, status } = await migrateStore(storeOptions(await context.config()));
      if (options.json) {
        context.printJson({ ...status, migrated: applied });
        return;
      }
      context.print(
        applied.length
          ? `Applied migration${applied.length === 1 ? "" : "s"} ${applied.join(", ")}.`
          : "Nothing to apply.",
      );
      describe(context, status);
    });
}
