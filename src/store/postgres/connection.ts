/**
 * The connection to PostgreSQL: a bounded `postgres` pool with timeouts that
 * keep a dead database from hanging a call, the translation of the driver's
 * connection failures into `STORE_UNAVAILABLE`, and bounded reconnection.
 *
 * The pool connects lazily, one connection per query that needs one, and a
 * connection that breaks is dropped and reopened by the next query: a database
 * that goes away and comes back serves the same pool again, with no restart.
 * Until it is back, every query fails within the connect timeout.
 *
 * @module
 */
import { getLog, lineSink } from "../../log/mod.ts";
import postgres from "postgres";
import { GatewayError } from "../../errors/mod.ts";

/** A `postgres` connection pool (also the tag that runs queries on it). */
export type Sql = postgres.Sql;

/** Options of {@linkcode openPostgres}. */
export interface OpenPostgresOptions {
  /** Most connections the pool opens. @default 10 */
  max?: number;
  /** Longest wait for a new connection (TCP, TLS and authentication), in ms. @default 5000 */
  connectTimeoutMs?: number;
  /** A connection idle this long is closed, in ms; 0 keeps idle connections open. @default 30000 */
  idleTimeoutMs?: number;
  /**
   * The server cancels a statement that runs longer, in ms (the session's
   * `statement_timeout`); 0 lets statements run as long as they take.
   * @default 15000
   */
  statementTimeoutMs?: number;
  /**
   * Longest pause before the pool tries again to connect after a failed
   * connection, in ms. The pause grows from 50 ms with each failure in a row,
   * with jitter, up to this bound.
   * @default 2000
   */
  reconnectMaxMs?: number;
  /** Named prepared statements for queries (turn off behind a transaction-mode pooler). @default true */
  prepare?: boolean;
  /** The session's `application_name`, shown in `pg_stat_activity`. @default "toolgate" */
  applicationName?: string;
  /**
   * Where server notices (`NOTICE`, `WARNING`…) go, one line each. Never
   * stdout: in stdio mode stdout carries JSON-RPC only.
   * @default writes `toolgate: postgres <severity>: <message>` to stderr
   */
  log?: (message: string) => void;
}

/** First pause of the pool's own reconnection, in ms. */
const RECONNECT_BASE_MS = 50;

/**
 * Opens a bounded pool on the PostgreSQL database at `url`. Nothing connects
 * until the first query; a database that cannot be reached then fails that
 * query within `connectTimeoutMs` (run it through {@linkcode withStore} for a
 * `STORE_UNAVAILABLE` error). Close the pool with `await sql.end()`.
 *
 * @param url `postgres://user:password@host:port/database`
 * @param options pool size, timeouts and where notices go
 * @returns the pool
 * @throws {RangeError} when an option is out of range
 * @example
 * ```ts
 * const sql = openPostgres("postgres://toolgate:secret@127.0.0.1:5432/toolgate", { max: 5 });
 * try {
 *   const [row] = await withStore(sql, () => sql`select 1 as one`);
 * } finally {
 *   await sql.end();
 * }
 * ```
 */
export function openPostgres(url: string, options: OpenPostgresOptions = {}): Sql {
  const {
    max = 10,
    connectTimeoutMs = 5_000,
    idleTimeoutMs = 30_000,
    statementTimeoutMs = 15_000,
    reconnectMaxMs = 2_000,
    prepare = true,
    applicationName = "toolgate",
    log = lineSink(getLog("store")),
  } = options;
  if (!Number.isInteger(max) || max < 1) {
    throw new RangeError(`Invalid max: ${max} is not a positive integer`);
  }
  if (!(connectTimeoutMs > 0) || !Number.isFinite(connectTimeoutMs)) {
    throw new RangeError(`Invalid connectTimeoutMs: ${connectTimeoutMs} is not positive`);
  }
  if (!(idleTimeoutMs >= 0) || !Number.isFinite(idleTimeoutMs)) {
    throw new RangeError(`Invalid idleTimeoutMs: ${idleTimeoutMs} is not 0 or more`);
  }
  if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs < 0) {
    throw new RangeError(
      `Invalid statementTimeoutMs: ${statementTimeoutMs} is not a whole number of ms, 0 or more`,
    );
  }
  if (!(reconnectMaxMs >= 0) || !Number.isFinite(reconnectMaxMs)) {
    throw new RangeError(`Invalid reconnectMaxMs: ${reconnectMaxMs} is not 0 or more`);
  }
  return postgres(url, {
    max,
    // The driver counts these in seconds.
    connect_timeout: connectTimeoutMs / 1000,
    idle_timeout: idleTimeoutMs / 1000,
    backoff: (failures: number) =>
      backoffMs(failures, { baseMs: RECONNECT_BASE_MS, maxMs: reconnectMaxMs }) / 1000,
    prepare,
    connection: {
      application_name: applicationName,
      statement_timeout: statementTimeoutMs,
    },
    onnotice: (notice) => log(`postgres ${notice.severity ?? "NOTICE"}: ${notice.message}`),
  });
}

/**
 * The database a pool is on, as `postgres://user@host:port/database`, from the
 * pool's parsed options: never its password.
 *
 * @param sql the pool
 * @returns a label for messages and logs
 */
export function describeDatabase(sql: Sql): string {
  const { user, host, port, database, path } = sql.options as postgres.ParsedOptions & {
    path?: string | false;
  };
  const hosts = path ? path : host.map((name, i) => `${hostPart(name)}:${port[i]}`).join(",");
  return `postgres://${user ? `${encodeURIComponent(user)}@` : ""}${hosts}/${database}`;
}

/** A host for a URL: an IPv6 address in brackets. */
function hostPart(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/**
 * The database URL without its secrets: the password of the user info is
 * dropped, and so are the query (which may carry `password=`) and fragment.
 * Anything after the last `@` before the path counts as user info, so a
 * malformed URL is cut too much rather than too little. Idempotent.
 *
 * @param url a database URL
 * @returns `scheme://user@host:port/database`
 * @example
 * ```ts
 * redactDatabaseUrl("postgres://toolgate:s3cret@db:5432/toolgate?sslmode=require");
 * // "postgres://toolgate@db:5432/toolgate"
 * ```
 */
export function redactDatabaseUrl(url: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url);
  if (!scheme) return "(a database URL that is not scheme://host/database)";
  const rest = url.slice(scheme[0].length);
  const at = rest.lastIndexOf("@");
  const userInfo = at === -1 ? "" : rest.slice(0, at);
  const afterUser = at === -1 ? rest : rest.slice(at + 1);
  const user = userInfo.split(":")[0].split(/[/?#]/)[0];
  const location = afterUser.split(/[?#]/)[0];
  return `${scheme[1]}://${user ? `${user}@` : ""}${location}`;
}

/** Why a driver or socket error code means the database cannot be reached. */
const DRIVER_REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ECONNABORTED: "connection aborted",
  EPIPE: "connection broken",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  CONNECT_TIMEOUT: "no connection within the connect timeout",
  CONNECTION_CLOSED: "the connection was closed",
  CONNECTION_ENDED: "the connection pool was closed",
  CONNECTION_DESTROYED: "the connection was closed before the query finished",
};

/**
 * SQLSTATEs outside class 08 that mean the server cannot serve now: admin or
 * crash shutdown, still starting, too many connections, statement cancelled
 * (by `statement_timeout`, or a cancel request).
 */
const UNAVAILABLE_SQLSTATES: ReadonlySet<string> = new Set([
  "57P01",
  "57P02",
  "57P03",
  "53300",
  "57014",
]);

/** The error's string `code`, if it has one. */
function codeOf(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

/** Whether the error is the driver's or the server's (not a `GatewayError`) and unavailability. */
function isDriverConnectionError(error: unknown): boolean {
  const code = codeOf(error);
  if (code === undefined) {
    // Several addresses tried at once (IPv4 and IPv6) fail together.
    return error instanceof AggregateError && error.errors.length > 0 &&
      error.errors.every(isDriverConnectionError);
  }
  if (Object.hasOwn(DRIVER_REASONS, code)) return true;
  if (!isPostgresError(error)) return false;
  return code.startsWith("08") || UNAVAILABLE_SQLSTATES.has(code);
}

/** Whether the error came from the server (it carries a SQLSTATE and a severity). */
function isPostgresError(error: unknown): boolean {
  return error instanceof Error && /^[0-9A-Z]{5}$/.test(codeOf(error) ?? "") &&
    typeof (error as { severity?: unknown }).severity === "string";
}

/**
 * Whether `error` means the database cannot be reached or cannot serve now,
 * so a later attempt may succeed: a refused, reset, closed or timed-out
 * connection; SQLSTATE class 08 (connection exception); 57P01, 57P02, 57P03
 * (shutdown, crash, starting up); 53300 (too many connections); 57014 (the
 * statement was cancelled, as `statement_timeout` does); or a `GatewayError`
 * with the code `STORE_UNAVAILABLE`.
 *
 * @param error anything thrown by a query
 * @returns whether it is a connection error
 */
export function isConnectionError(error: unknown): boolean {
  if (error instanceof GatewayError) return error.code === "STORE_UNAVAILABLE";
  return isDriverConnectionError(error);
}

/**
 * The `STORE_UNAVAILABLE` error for a connection error (see
 * {@linkcode isConnectionError}): `Cannot reach the database at <url>: <reason>`,
 * with the URL redacted and the driver's error as `cause`.
 *
 * @param error the driver's error
 * @param url the database URL, or a {@linkcode describeDatabase} label; its password is never shown
 * @returns the error to throw
 */
export function storeUnavailable(error: unknown, url: string): GatewayError {
  return new GatewayError(
    "STORE_UNAVAILABLE",
    `Cannot reach the database at ${redactDatabaseUrl(url)}: ${reasonOf(error)}`,
    { cause: error },
  );
}

/** A short reason for a connection error, without the driver's host and port noise. */
function reasonOf(error: unknown): string {
  const code = codeOf(error);
  if (code !== undefined && Object.hasOwn(DRIVER_REASONS, code)) return DRIVER_REASONS[code];
  if (code !== undefined && isPostgresError(error)) {
    return `${(error as Error).message} (SQLSTATE ${code})`;
  }
  if (error instanceof AggregateError && error.errors.length > 0) return reasonOf(error.errors[0]);
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs `operation` on the pool and turns the driver's connection errors into
 * `STORE_UNAVAILABLE` (see {@linkcode isConnectionError}); every other error,
 * a `GatewayError` included, is thrown as it is.
 *
 * @param sql the pool the operation queries
 * @param operation the queries to run
 * @returns what `operation` returns
 * @throws {GatewayError} `STORE_UNAVAILABLE` when the database cannot be reached or cannot serve now
 * @example
 * ```ts
 * const rows = await withStore(sql, () => sql`select key, value from toolgate_meta`);
 * ```
 */
export async function withStore<T>(sql: Sql, operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (error instanceof GatewayError || !isDriverConnectionError(error)) throw error;
    throw storeUnavailable(error, describeDatabase(sql));
  }
}

/** Options of {@linkcode retryConnect}. */
export interface RetryConnectOptions {
  /** Attempts in all, the first included. @default 5 */
  attempts?: number;
  /** Pause after the first failed attempt, in ms; it doubles after each further one. @default 200 */
  baseMs?: number;
  /** Longest pause between two attempts, in ms. @default 5000 */
  maxMs?: number;
  /** Called before each pause, with the error, the attempt that failed (1-based) and the pause. */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  /** Stops retrying: the pause ends and the last error is thrown. */
  signal?: AbortSignal;
  /** Waits `ms`, or less when `signal` aborts. @default a timer */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** A number in [0, 1) for the jitter. @default Math.random */
  random?: () => number;
}

/**
 * Runs `open` until it succeeds, while it fails with a connection error (see
 * {@linkcode isConnectionError}): at most `attempts` times, pausing between
 * attempts with exponential backoff and jitter (between half and all of
 * `min(maxMs, baseMs * 2^(n-1))` after the n-th failure). Any other error is
 * thrown at once; after the last attempt, its error is thrown.
 *
 * @param open one attempt (e.g. a first query through {@linkcode withStore}); gets its 1-based number
 * @param options how often and how long to wait
 * @returns what the succeeding attempt returns
 * @throws what the last attempt threw, or the first error that is not a connection error
 * @example
 * ```ts
 * const sql = openPostgres(url);
 * await retryConnect(() => withStore(sql, () => sql`select 1`), {
 *   attempts: 10,
 *   onRetry: (error, attempt, ms) => console.error(`toolgate: ${(error as Error).message}; retrying in ${ms} ms`),
 * });
 * ```
 */
export async function retryConnect<T>(
  open: (attempt: number) => Promise<T>,
  options: RetryConnectOptions = {},
): Promise<T> {
  const {
    attempts = 5,
    baseMs = 200,
    maxMs = 5_000,
    onRetry,
    signal,
    sleep = abortableSleep,
    random = Math.random,
  } = options;
  if (!Number.isInteger(attempts) || attempts < 1) {
    throw new RangeError(`Invalid attempts: ${attempts} is not a positive integer`);
  }
  if (!(baseMs >= 0) || !Number.isFinite(baseMs)) {
    throw new RangeError(`Invalid baseMs: ${baseMs} is not 0 or more`);
  }
  if (!(maxMs >= baseMs) || !Number.isFinite(maxMs)) {
    throw new RangeError(`Invalid maxMs: ${maxMs} is less than baseMs (${baseMs})`);
  }
  for (let attempt = 1;; attempt++) {
    try {
      return await open(attempt);
    } catch (error) {
      if (!isConnectionError(error) || attempt >= attempts || signal?.aborted) throw error;
      const delayMs = backoffMs(attempt, { baseMs, maxMs, random });
      onRetry?.(error, attempt, delayMs);
      await sleep(delayMs, signal);
      if (signal?.aborted) throw error;
    }
  }
}

/**
 * The pause after the n-th failure in a row: between half and all of
 * `min(maxMs, baseMs * 2^(n-1))`.
 */
function backoffMs(
  failures: number,
  { baseMs, maxMs, random = Math.random }: { baseMs: number; maxMs: number; random?: () => number },
): number {
  if (failures < 1) return 0;
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30));
  return Math.round(ceiling * (0.5 + random() / 2));
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer: ReturnType<typeof setTimeout> = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
