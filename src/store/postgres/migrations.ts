/**
 * The PostgreSQL schema, as numbered migrations applied in order.
 *
 * Applied versions are recorded in `toolgate_schema_migrations`. Each pending
 * migration runs in a transaction of its own that holds a transaction-level
 * advisory lock, so instances starting together apply each migration once.
 * A database migrated by a newer release is left untouched and refused.
 *
 * To change the schema, append a migration with the next version; never edit
 * one that has shipped.
 *
 * @module
 */
import { GatewayError } from "../../errors/mod.ts";
import { describeDatabase, isConnectionError, type Sql, withStore } from "./connection.ts";
import { INITIAL_SCHEMA } from "./schema.ts";
import { AUDIT_TREE_SCHEMA } from "./audit_schema.ts";
import { PINS_SCHEMA } from "./pins.ts";
import { POLICIES_SCHEMA } from "./policies.ts";
import { APPROVALS_SCHEMA } from "./approvals.ts";

/** One step of the schema: SQL run once, in its own transaction. */
export interface Migration {
  /** Its number: 1 for the first, one more for each next. */
  readonly version: number;
  /** A short snake_case name, recorded with the version. */
  readonly name: string;
  /** The statements, run as one simple query (several statements separated by `;`). */
  readonly sql: string;
}

/** The table that records applied migrations. */
export const MIGRATIONS_TABLE = "toolgate_schema_migrations";

/**
 * The advisory lock every migration transaction holds: "toolgate" in ASCII,
 * as a bigint (`pg_advisory_xact_lock` takes one 64-bit key).
 */
export const MIGRATION_LOCK_KEY = 0x746f6f6c67617465n;

/** The schema, oldest first. */
export const MIGRATIONS: readonly Migration[] = Object.freeze([
  {
    version: 1,
    name: "initial",
    sql: `
      create table toolgate_meta (
        key text primary key,
        value jsonb not null
      );
      ${INITIAL_SCHEMA}
    `,
  },
  { version: 2, name: "audit_tree", sql: AUDIT_TREE_SCHEMA },
  { version: 3, name: "tool_pins", sql: PINS_SCHEMA },
  { version: 4, name: "policies", sql: POLICIES_SCHEMA },
  { version: 5, name: "approvals", sql: APPROVALS_SCHEMA },
]);

/** An applied migration, as recorded. */
export interface AppliedMigration {
  /** Its version. */
  version: number;
  /** Its name when it was applied. */
  name: string;
  /** When it was applied. */
  applied_at: Date;
}

/** Where a database's schema stands, from {@linkcode migrationStatus}. */
export interface MigrationStatus {
  /** The highest applied version; 0 for a database never migrated. */
  current: number;
  /** The highest version this release knows. */
  latest: number;
  /** The applied migrations, oldest first. */
  applied: AppliedMigration[];
  /** The known migrations above `current`, in the order they would run. */
  pending: { version: number; name: string }[];
}

/** Options of {@linkcode migrate} and {@linkcode migrationStatus}. */
export interface MigrateOptions {
  /** The migrations to apply (tests hand in their own). @default MIGRATIONS */
  migrations?: readonly Migration[];
  /**
   * The `statement_timeout` of each migration transaction, in ms, waiting for
   * the lock included; 0 waits as long as it takes.
   * @default 600000
   */
  statementTimeoutMs?: number;
}

/**
 * Applies every pending migration, in order, each in its own transaction
 * holding the advisory lock {@linkcode MIGRATION_LOCK_KEY}. Another instance
 * migrating at the same time waits, then finds the work done.
 *
 * @param sql the pool
 * @param options the migrations and their timeout
 * @returns the versions this call applied, in order (empty when none was pending)
 * @throws {GatewayError} `STORE_CORRUPT` when the database was migrated by a newer
 *   release, or a migration fails (it is rolled back; the earlier ones stay)
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be reached
 * @example
 * ```ts
 * const sql = openPostgres(url);
 * const applied = await migrate(sql); // [1] the first time, [] afterwards
 * ```
 */
export async function migrate(sql: Sql, options: MigrateOptions = {}): Promise<number[]> {
  const { migrations = MIGRATIONS, statementTimeoutMs = 600_000 } = options;
  checkMigrations(migrations);
  if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs < 0) {
    throw new RangeError(
      `Invalid statementTimeoutMs: ${statementTimeoutMs} is not a whole number of ms, 0 or more`,
    );
  }
  const latest = latestVersion(migrations);
  const database = describeDatabase(sql);
  const applied: number[] = [];
  for (;;) {
    const next = await withStore(sql, () =>
      sql.begin(async (tx) => {
        await tx`select set_config('statement_timeout', ${String(statementTimeoutMs)}, true)`;
        await tx.unsafe(`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
        // Created only when missing: a user that may not create tables can still
        // run on a database already migrated.
        const [{ missing }] = await tx<{ missing: boolean }[]>`
          select to_regclass(${MIGRATIONS_TABLE}) is null as missing`;
        if (missing) await tx.unsafe(CREATE_MIGRATIONS_TABLE);
        const [{ current }] = await tx<{ current: number }[]>`
          select coalesce(max(version), 0)::int as current from ${tx(MIGRATIONS_TABLE)}`;
        refuseNewer(database, current, latest);
        const migration = migrations.find((m) => m.version > current);
        if (!migration) return undefined;
        try {
          await tx.unsafe(migration.sql);
        } catch (error) {
          throw migrationFailed(database, migration, error);
        }
        await tx`
          insert into ${tx(MIGRATIONS_TABLE)} (version, name)
          values (${migration.version}, ${migration.name})`;
        return migration.version;
      }));
    if (next === undefined) return applied;
    applied.push(next);
  }
}

/**
 * Where the database's schema stands: the applied migrations and the pending
 * ones. Changes nothing; a database migrated by a newer release is reported
 * (`current` above `latest`, nothing pending), not refused.
 *
 * @param sql the pool
 * @param options the migrations this release knows
 * @returns the current and latest versions, what was applied and what is pending
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be reached
 */
export async function migrationStatus(
  sql: Sql,
  options: Pick<MigrateOptions, "migrations"> = {},
): Promise<MigrationStatus> {
  const { migrations = MIGRATIONS } = options;
  checkMigrations(migrations);
  const applied = await withStore(sql, async () => {
    const [{ exists }] = await sql<{ exists: boolean }[]>`
      select to_regclass(${MIGRATIONS_TABLE}) is not null as exists`;
    if (!exists) return [];
    return await sql<AppliedMigration[]>`
      select version, name, applied_at from ${sql(MIGRATIONS_TABLE)} order by version`;
  });
  const current = applied.reduce((max, row) => Math.max(max, row.version), 0);
  return {
    current,
    latest: latestVersion(migrations),
    applied: applied.map(({ version, name, applied_at }) => ({ version, name, applied_at })),
    pending: migrations
      .filter((m) => m.version > current)
      .map(({ version, name }) => ({ version, name })),
  };
}

const CREATE_MIGRATIONS_TABLE = `
  create table ${MIGRATIONS_TABLE} (
    version integer primary key,
    name text not null,
    applied_at timestamptz not null default now()
  )`;

/** The highest version of the list. */
function latestVersion(migrations: readonly Migration[]): number {
  return migrations.length === 0 ? 0 : migrations[migrations.length - 1].version;
}

/** Rejects a list that is not numbered 1, 2, 3… or has an empty name or SQL. */
function checkMigrations(migrations: readonly Migration[]): void {
  migrations.forEach((migration, i) => {
    if (migration.version !== i + 1) {
      throw new RangeError(
        `Invalid migrations: version ${migration.version} at position ${i + 1} should be ${i + 1}`,
      );
    }
    if (!/^[a-z][a-z0-9_]*$/.test(migration.name)) {
      throw new RangeError(
        `Invalid migrations: the name of version ${migration.version} is not snake_case`,
      );
    }
    if (migration.sql.trim() === "") {
      throw new RangeError(`Invalid migrations: version ${migration.version} has no SQL`);
    }
  });
}

/** Throws `STORE_CORRUPT` when the database's schema is newer than this release's. */
function refuseNewer(database: string, current: number, latest: number): void {
  if (current <= latest) return;
  throw new GatewayError(
    "STORE_CORRUPT",
    `Cannot use the database at ${database}: it was migrated by a newer toolgate (schema ${current}, this release knows ${latest})`,
    { details: { current, latest } },
  );
}

/** The error of a migration whose SQL failed; connection errors stay as they are. */
function migrationFailed(database: string, migration: Migration, error: unknown): unknown {
  // A lost connection is not the migration's fault: withStore makes it STORE_UNAVAILABLE.
  if (error instanceof GatewayError || isConnectionError(error)) return error;
  return new GatewayError(
    "STORE_CORRUPT",
    `Cannot migrate the database at ${database} to schema ${migration.version} (${migration.name}): ${
      (error as Error)?.message ?? String(error)
    }`,
    { cause: error },
  );
}
