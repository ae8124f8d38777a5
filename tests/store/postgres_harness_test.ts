/**
 * The pieces the PostgreSQL store builds on, against a real throwaway server
 * (tests/_postgres.ts) through the driver the project pins: a claim with
 * `INSERT ... RETURNING`, `FOR UPDATE SKIP LOCKED` across two connections,
 * and a `LISTEN/NOTIFY` round trip.
 */
import postgres from "postgres";
import { assert, assertEquals, assertRejects } from "../_asserts.ts";
import { startPostgres } from "../_postgres.ts";

/** A client of its own: one connection, short timeouts, no notices on stderr. */
function connect(url: string) {
  return postgres(url, { max: 1, connect_timeout: 10, idle_timeout: 5, onnotice: () => {} });
}

/** Resolves with the first value `register` hands to its callback; fails after `ms`. */
async function firstValue<T>(
  what: string,
  register: (callback: (value: T) => void) => Promise<unknown>,
  ms = 5_000,
): Promise<T> {
  const { promise, resolve, reject } = Promise.withResolvers<T>();
  const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  try {
    await register(resolve);
    return await promise;
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("a throwaway PostgreSQL serves claims, SKIP LOCKED and LISTEN/NOTIFY through the driver", async (t) => {
  await using pg = await startPostgres();
  assert(pg.url.startsWith("postgres://postgres@127.0.0.1:"), pg.url);
  const a = connect(pg.url);
  const b = connect(pg.url);
  try {
    await t.step("the server is the one started, on loopback, with the test database", async () => {
      const [row] = await a`
        select current_database() as db, host(inet_server_addr()) as addr,
               current_setting('listen_addresses') as listen,
               current_setting('port')::int as port`;
      assertEquals(row, { db: pg.database, addr: "127.0.0.1", listen: "127.0.0.1", port: pg.port });
    });

    await t.step("INSERT ... RETURNING gives back the new rows", async () => {
      await a`
        create table jobs (
          id bigint generated always as identity primary key,
          name text not null,
          claimed_by text
        )`;
      const rows = await a`
        insert into jobs ${a([{ name: "first" }, { name: "second" }])}
        returning id, name`;
      assertEquals(rows.map((row) => row.name), ["first", "second"]);
      assertEquals(rows.map((row) => Number(row.id)), [1, 2]);
    });

    await t.step("a second connection skips the row the first has locked", async () => {
      const claim = `
        select id, name from jobs where claimed_by is null
        order by id limit 1 for update skip locked`;
      await a.begin(async (txA) => {
        const [first] = await txA.unsafe(claim);
        assertEquals(first.name, "first");
        await b.begin(async (txB) => {
          const [second] = await txB.unsafe(claim);
          assertEquals(second.name, "second");
        });
        // The first row is really locked, not merely passed over.
        const error = await assertRejects(() =>
          b`select id from jobs where id = ${first.id} for update nowait`
        );
        assertEquals((error as { code?: string }).code, "55P03");
        await txA`update jobs set claimed_by = 'a' where id = ${first.id}`;
      });
      const [left] = await b.unsafe(
        "select count(*)::int as n from jobs where claimed_by is null",
      );
      assertEquals(left.n, 1);
    });

    await t.step("NOTIFY on one connection reaches LISTEN on the other", async () => {
      let listening: { unlisten(): Promise<void> } | undefined;
      const payload = await firstValue<string>("the notification", async (received) => {
        listening = await a.listen("jobs_changed", received);
        // As the store will do it: the notification is sent when the write commits.
        await b.begin(async (tx) => {
          await tx`insert into jobs (name) values ('third')`;
          await tx`select pg_notify('jobs_changed', 'third')`;
        });
      });
      assertEquals(payload, "third");
      await listening?.unlisten();
    });
  } finally {
    await Promise.all([a.end({ timeout: 5 }), b.end({ timeout: 5 })]);
  }
});
