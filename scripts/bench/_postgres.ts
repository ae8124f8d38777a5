/**
 * A throwaway PostgreSQL server for the storage benchmarks, started the way
 * the tests start theirs (`startPostgres()` from `tests/_postgres.ts`: a
 * fresh cluster in the temp dir, listening on 127.0.0.1 only, removed when
 * done), with one fresh database per phase. Private to `scripts/bench`.
 *
 * @module
 */
import postgres from "postgres";
import { startPostgres } from "../../tests/_postgres.ts";

/** A running throwaway server that hands out fresh databases. */
export interface BenchPostgres extends AsyncDisposable {
  /** Creates an empty database and returns its URL (the store migrates it on open). */
  database(name: string): Promise<string>;
  /**
   * Transactions committed and rolled back in database `name` so far
   * (`pg_stat_database`). A backend reports its counts when it exits or
   * goes idle, at most once a second: read them after closing the clients.
   */
  transactions(name: string): Promise<TransactionCounts>;
  /** The server's PostgreSQL version, e.g. `15.14`. */
  readonly version: string;
}

/** Transaction counts of one database. */
export interface TransactionCounts {
  commits: number;
  rollbacks: number;
}

/** Starts a throwaway PostgreSQL cluster (about 2 s). */
export async function startBenchPostgres(): Promise<BenchPostgres> {
  const pg = await startPostgres({ database: "toolgate_bench" });
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const [{ server_version }] = await admin<{ server_version: string }[]>`show server_version`;
    const base = pg.url.slice(0, pg.url.lastIndexOf("/") + 1);
    return {
      version: server_version.split(" ")[0],
      async database(name: string): Promise<string> {
        if (!/^[a-z_][a-z0-9_]*$/.test(name)) {
          throw new Error(`Cannot create database ${name}: not a plain identifier`);
        }
        await admin.unsafe(`create database ${name}`);
        return base + name;
      },
      async transactions(name: string): Promise<TransactionCounts> {
        // Backends that just exited may still be reporting.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const [row] = await admin<{ commits: number; rollbacks: number }[]>`
          select xact_commit::float8 as commits, xact_rollback::float8 as rollbacks
          from pg_stat_database where datname = ${name}`;
        if (!row) throw new Error(`No statistics for database ${name}`);
        return { commits: row.commits, rollbacks: row.rollbacks };
      },
      async [Symbol.asyncDispose]() {
        await admin.end({ timeout: 5 });
        await pg.stop();
      },
    };
  } catch (error) {
    await admin.end({ timeout: 5 }).catch(() => {});
    await pg.stop();
    throw error;
  }
}
