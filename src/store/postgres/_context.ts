/**
 * What every part of the PostgreSQL adapter shares: the pool, the way
 * queries run (connection failures become `STORE_UNAVAILABLE`), version
 * stamps and change counters. Private to `src/store/postgres`.
 *
 * @module
 */
import type postgres from "postgres";
import { type Sql, withStore } from "./connection.ts";

/** A transaction's query tag (what `sql.begin` hands its callback). */
export type Tx = postgres.TransactionSql;

/** The counters running servers poll (and, later, are notified of). */
export type CounterName = "registrations" | "deliveries";

/** Schema of the shared parts: stamps and counters. Part of migration 1. */
export const CONTEXT_SCHEMA = `
  create sequence toolgate_stamp_seq;
  create table toolgate_counters (
    name text primary key,
    value bigint not null default 0
  );
  insert into toolgate_counters (name) values ('registrations'), ('deliveries');
`;

/** The handle every part of the adapter works through. */
export class PgContext {
  /** The pool. */
  readonly sql: Sql;

  /** @param sql The pool. */
  constructor(sql: Sql) {
    this.sql = sql;
  }

  /** Runs queries on the pool; connection failures become `STORE_UNAVAILABLE`. */
  run<T>(operation: (sql: Sql) => Promise<T>): Promise<T> {
    return withStore(this.sql, () => operation(this.sql));
  }

  /** Runs `operation` in one transaction (committed when it returns, rolled back when it throws). */
  transaction<T>(operation: (tx: Tx) => Promise<T>): Promise<T> {
    return withStore(this.sql, () => this.sql.begin((tx) => operation(tx)) as Promise<T>);
  }
}

/**
 * A new version stamp, unique and increasing across every instance: a
 * 20-digit decimal string, so stamps also sort as text.
 */
export async function nextStamp(tx: Tx | Sql): Promise<string> {
  const [row] = await tx<{ stamp: string }[]>`select nextval('toolgate_stamp_seq')::text as stamp`;
  return row.stamp.padStart(20, "0");
}

/**
 * Adds one to a counter, inside the caller's transaction, and notifies the
 * listening instances (`toolgate_changes`; sent when the transaction commits).
 */
export async function bumpCounter(tx: Tx | Sql, name: CounterName): Promise<void> {
  await tx`update toolgate_counters set value = value + 1 where name = ${name}`;
  await tx`select pg_notify('toolgate_changes', ${name})`;
}

/** Reads a counter. */
export async function readCounter(sql: Tx | Sql, name: CounterName): Promise<bigint> {
  const [row] = await sql<{ value: string }[]>`
    select value::text as value from toolgate_counters where name = ${name}`;
  return BigInt(row?.value ?? "0");
}
