/**
 * `toolgate db …`: the store. `status` reports where its schema stands,
 * `migrate` brings it up to this release (a server also migrates as it
 * starts; these commands do it by hand, e.g. before a rolling upgrade), and
 * `copy` moves an install: the data dir's Deno KV store into an empty
 * PostgreSQL database.
 *
 * @module
 */
import type { Command } from "commander";
import { verifyAuditChain } from "../audit/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import { SERVER_STATUS_MAX_AGE_MS } from "../plugins/mod.ts";
import {
  COPY_KINDS,
  type CopyCounts,
  type CopyKind,
  copyStore,
  type KeyStatus,
  migrateStore,
  type StoreSchemaStatus,
  storeSchemaStatus,
} from "../store/mod.ts";
import { type CliContext, storeOptions, table, usage } from "./context.ts";

/** How each kind of record is named in `db copy`'s output. */
const COPY_LABELS: Readonly<Record<CopyKind, string>> = {
  outgoing_webhooks: "outgoing webhooks",
  incoming_webhooks: "incoming endpoints",
  incoming_stats: "incoming endpoint counters",
  upstreams: "upstreams",
  keychain: "keychain entries",
  api_keys: "API keys",
  virtual_servers: "virtual servers",
  tool_pins: "tool pins",
  policies: "policies",
  approvals: "approvals",
  memory: "memory notes",
  events: "outbox events",
  deliveries: "pending deliveries",
  dlq: "dead letters",
  delivery_log: "delivery log entries",
  audit_entries: "audit entries",
  audit_tiles: "audit tree tiles",
  incoming_jobs: "incoming jobs",
};

function describeCopy(counts: CopyCounts): string {
  return table(
    ["RECORDS", "COPIED"],
    COPY_KINDS.map((kind) => [COPY_LABELS[kind], String(counts[kind])]),
  );
}

async function copyCommand(context: CliContext, to: string | undefined, json: boolean) {
  if (!to) throw usage("Missing --to: give the postgres://… URL of an empty database");
  if (!/^postgres(ql)?:\/\/\S+$/.test(to)) {
    throw usage("Invalid --to: expected a postgres://user:password@host:port/database URL");
  }
  const options = storeOptions(await context.config());
  if (options.url) {
    throw usage(
      "Cannot copy: the configured store is already PostgreSQL (TOOLGATE_DATABASE_URL or " +
        "store.url); db copy copies the data dir's embedded Deno KV store: unset it to copy",
    );
  }
  const tty = context.io.stderrIsTty && !context.io.env.NO_COLOR;
  const progress = (text: string) => context.io.stderr(`\r\x1b[2K${text}`);
  const result = await copyStore({
    from: options,
    to,
    serverStatusMaxAgeMs: SERVER_STATUS_MAX_AGE_MS,
    onProgress: tty
      ? (kind, copied) => progress(`copying ${COPY_LABELS[kind]}: ${copied}`)
      : undefined,
    verify: (target) =>
      verifyAuditChain(target, {
        onProgress: tty
          ? ({ checked, total }) => progress(`verifying ${checked}/${total}`)
          : undefined,
      }),
  });
  if (tty) progress("");
  const { verified } = result;
  if (json) context.printJson(result);
  else {
    context.print(`Copied ${result.from} into ${result.to}:`);
    context.print(describeCopy(result.counts));
    if (verified.ok) {
      const entries = verified.count === 1 ? "1 entry" : `${verified.count} entries`;
      context.print(`Audit chain intact (${entries}).`);
    }
  }
  if (!verified.ok) {
    throw new GatewayError(
      "STORE_CORRUPT",
      `Copied, but the audit chain in the database is broken at seq ${verified.seq} ` +
        `(${verified.reason}): ${verified.message}`,
      { details: verified },
    );
  }
}

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
  if (status.key) context.print(describeKey(status.key));
}

/** One line on the secret key: its fingerprint beside the store's, and what to do. */
export function describeKey(key: KeyStatus): string {
  const mine = key.key_fingerprint ?? "none";
  switch (key.state) {
    case "match":
      return `Secret key: ${mine} (${key.key_source}), the store's`;
    case "unrecorded":
      return `Secret key: ${mine} (${key.key_source}), opens the stored secrets; recorded at the next start`;
    case "unset":
      return `Secret key: ${mine} (${key.key_source}); nothing sealed yet`;
    case "no_key":
      return `Secret key: none (${key.key_source} is missing); the store's is ${
        key.store_fingerprint ?? "unknown"
      }`;
    case "mismatch":
      return `Secret key: ${mine} (${key.key_source}) is NOT the store's (${
        key.store_fingerprint ?? "unknown: sealed before check values were recorded"
      }); set TOOLGATE_SECRET_KEY to the store's key`;
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

  db.command("copy")
    .description(
      "copy the data dir's Deno KV store into an empty PostgreSQL database, then verify its audit chain",
    )
    .option("--to <url>", "the empty database: postgres://user:password@host:port/database")
    .option("--json", "print the counts and the verification as JSON")
    .action((options: { to?: string; json?: boolean }) =>
      copyCommand(context, options.to, !!options.json)
    );
}
