/**
 * What the PostgreSQL console sessions do beyond the storage contract
 * (tests/store/contract/console_sessions_contract.ts), against a real
 * throwaway server: a row holds the SHA-256 of the session id, never the id,
 * and creates delete the rows expired for more than the slack at most once
 * per sweep interval, keeping live ones.
 */
import { createHash } from "node:crypto";
import postgres from "postgres";
import { assertEquals } from "../_asserts.ts";
import { startPostgres } from "../_postgres.ts";
import { PgContext } from "../../src/store/postgres/_context.ts";
import {
  CONSOLE_SESSION_SWEEP_MS,
  createConsoleSessionStore,
} from "../../src/store/postgres/console_sessions.ts";
import { migrate } from "../../src/store/postgres/migrations.ts";

const T0 = Date.UTC(2026, 0, 1);
const SLACK_MS = 60_000;

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

Deno.test("postgres console sessions: rows hold the id's hash; creates sweep expired rows once per interval", async () => {
  await using pg = await startPostgres({ database: "console_sessions" });
  const sql = postgres(pg.url, { max: 2, onnotice: () => {} });
  try {
    await migrate(sql);
    let now = T0;
    const sessions = createConsoleSessionStore(new PgContext(sql), { now: () => now });
    const rows = async () =>
      (await sql<{ id_hash: string; expires_at: string }[]>`
        select id_hash, expires_at::text as expires_at from toolgate_console_sessions
        order by expires_at`).map((row) => [row.id_hash, Number(row.expires_at)]);

    await sessions.create("old", T0 - SLACK_MS - 1); // expired beyond the slack
    await sessions.create("recent", T0 - 1); // expired, within the slack
    await sessions.create("live", T0 + 3_600_000);
    // The first create swept an empty table; the rest of the interval does not sweep.
    assertEquals(await rows(), [
      [sha256("old"), T0 - SLACK_MS - 1],
      [sha256("recent"), T0 - 1],
      [sha256("live"), T0 + 3_600_000],
    ]);
    assertEquals(await sessions.get("recent", T0), null, "expired: never returned");

    now = T0 + CONSOLE_SESSION_SWEEP_MS - 1;
    await sessions.create("within", T0 + 3_600_000);
    assertEquals((await rows()).length, 4, "no sweep within the interval");

    now = T0 + CONSOLE_SESSION_SWEEP_MS;
    await sessions.create("next", T0 + 7_200_000);
    // Expired by more than the slack at the sweep's time: "old" and "recent" go.
    assertEquals((await rows()).map(([hash]) => hash), [
      sha256("live"),
      sha256("within"),
      sha256("next"),
    ]);
    assertEquals(await sessions.get("live", now), T0 + 3_600_000);
  } finally {
    await sql.end();
  }
});
