/**
 * PostgreSQL adapter: web console sessions, one row per session keyed by
 * the SHA-256 of its id (never the id) with its expiry. `get` ignores rows
 * past their expiry; each handle deletes expired rows at most once per
 * sweep interval, when a session is created (sessions only accumulate by
 * sign-ins), like the incoming de-duplication sweep.
 *
 * @module
 */
import { CONSOLE_SESSION_SLACK_MS, consoleSessionHash } from "../_console_sessions.ts";
import type { ConsoleSessionStore } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of this part, in migration 1. */
export const CONSOLE_SESSIONS_SCHEMA = `
  create table toolgate_console_sessions (
    id_hash text collate "C" primary key,
    expires_at bigint not null
  );
  create index toolgate_console_sessions_expiry on toolgate_console_sessions (expires_at);
`;

/** How often a handle deletes expired sessions, at most (ms). */
export const CONSOLE_SESSION_SWEEP_MS = 60_000;

/** Options of {@linkcode createConsoleSessionStore}. */
export interface PgConsoleSessionOptions {
  /** How often creates delete expired rows, at most, in ms. @default {@linkcode CONSOLE_SESSION_SWEEP_MS} */
  sweepMs?: number;
  /** Clock of the sweep, in ms since the epoch. @default Date.now */
  now?: () => number;
}

/**
 * The console sessions, on PostgreSQL.
 *
 * @param ctx The adapter's handle.
 */
export function createConsoleSessionStore(
  ctx: PgContext,
  options: PgConsoleSessionOptions = {},
): ConsoleSessionStore {
  const { sweepMs = CONSOLE_SESSION_SWEEP_MS, now: clock = Date.now } = options;
  let sweptAt = -Infinity;
  return {
    async create(id, expiresAt) {
      if (!Number.isSafeInteger(expiresAt)) {
        throw new RangeError(`Invalid expiresAt: ${expiresAt} is not an integer of ms`);
      }
      const now = clock();
      if (now - sweptAt >= sweepMs) {
        sweptAt = now;
        const before = now - CONSOLE_SESSION_SLACK_MS;
        await ctx.run((sql) =>
          sql`delete from toolgate_console_sessions where expires_at <= ${before}`
        );
      }
      const hash = consoleSessionHash(id);
      await ctx.run((sql) =>
        sql`
          insert into toolgate_console_sessions (id_hash, expires_at) values (${hash}, ${expiresAt})
          on conflict (id_hash) do update set expires_at = excluded.expires_at`
      );
    },
    async get(id, now = Date.now()) {
      const hash = consoleSessionHash(id);
      const [row] = await ctx.run((sql) =>
        sql<{ expires_at: string }[]>`
          select expires_at::text as expires_at from toolgate_console_sessions
          where id_hash = ${hash} and expires_at > ${now}`
      );
      return row ? Number(row.expires_at) : null;
    },
    async delete(id) {
      const hash = consoleSessionHash(id);
      await ctx.run((sql) => sql`delete from toolgate_console_sessions where id_hash = ${hash}`);
    },
  };
}
