/**
 * The PostgreSQL schema migrations against a real throwaway server
 * (tests/_postgres.ts): applied once, in order, each in its own transaction,
 * once only when two instances start together; the status; a newer schema
 * refused; a failed migration rolled back.
 */
import postgres from "postgres";
import { assert, assertEquals, assertMatch, assertRejects } from "../_asserts.ts";
import { startPostgres, type ThrowawayPostgres } from "../_postgres.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { openPostgres, type Sql } from "../../src/store/postgres/connection.ts";
import {
  migrate,
  type Migration,
  MIGRATIONS,
  MIGRATIONS_TABLE,
  migrationStatus,
} from "../../src/store/postgres/migrations.ts";

/** Three migrations of a test schema; the second takes a moment, to widen any race. */
const THREE: readonly Migration[] = [
  { version: 1, name: "first", sql: "create table one (id int primary key)" },
  {
    version: 2,
    name: "second",
    sql: "create table two (id int primary key); select pg_sleep(0.2); insert into one values (2)",
  },
  { version: 3, name: "third", sql: "create table three (id int primary key)" },
];

/** Creates an empty database on the server and returns its URL. */
async function freshDatabase(pg: ThrowawayPostgres, admin: Sql, name: string): Promise<string> {
  await admin.unsafe(`create database ${name}`);
  return pg.url.replace(/\/[^/]+$/, `/${name}`);
}

/** The versions recorded in the migrations table. */
async function recorded(sql: Sql): Promise<number[]> {
  const rows = await sql`select version from ${sql(MIGRATIONS_TABLE)} order by version`;
  return rows.map((row) => row.version as number);
}

Deno.test("migrations of a real PostgreSQL database", async (t) => {
  await using pg = await startPostgres();
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  const pools: Sql[] = [];
  /** A pool on a new empty database, closed at the end. */
  const open = async (name: string, max = 2) => {
    const sql = openPostgres(await freshDatabase(pg, admin, name), { max });
    pools.push(sql);
    return sql;
  };
  try {
    await t.step(
      "migrate() applies the release's migrations once; a second run applies nothing",
      async () => {
        const sql = await open("once");
        assertEquals(await migrate(sql), MIGRATIONS.map((m) => m.version));
        assertEquals(await migrate(sql), []);
        assertEquals(await recorded(sql), MIGRATIONS.map((m) => m.version));
        await sql`insert into toolgate_meta (key, value) values ('k', ${sql.json({ a: 1 })})`;
        const [row] = await sql`select value from toolgate_meta where key = 'k'`;
        assertEquals(row.value, { a: 1 });
      },
    );

    await t.step(
      "a user that may not create tables runs on a database already migrated",
      async () => {
        const owner = await open("restricted");
        await migrate(owner, { migrations: THREE });
        await admin.unsafe("create role toolgate_app login");
        await owner.unsafe(`grant select on ${MIGRATIONS_TABLE} to toolgate_app`);
        const app = openPostgres(
          pg.url.replace("//postgres@", "//toolgate_app@").replace(/\/[^/]+$/, "/restricted"),
          { max: 1 },
        );
        pools.push(app);
        const [{ may }] = await app`select has_schema_privilege('public', 'create') as may`;
        assertEquals(may, false);
        assertEquals(await migrate(app, { migrations: THREE }), []);
        assertEquals((await migrationStatus(app, { migrations: THREE })).current, 3);
      },
    );

    await t.step(
      "migrationStatus() of a database never migrated: all pending, nothing created",
      async () => {
        const sql = await open("never");
        assertEquals(await migrationStatus(sql, { migrations: THREE }), {
          current: 0,
          latest: 3,
          applied: [],
          pending: [
            { version: 1, name: "first" },
            { version: 2, name: "second" },
            { version: 3, name: "third" },
          ],
        });
        const [row] = await sql`select to_regclass(${MIGRATIONS_TABLE}) is null as absent`;
        assert(row.absent, "status creates no table");
      },
    );

    await t.step("migrationStatus() reports what was applied and what is pending", async () => {
      const sql = await open("partly");
      const before = new Date(Date.now() - 60_000);
      assertEquals(await migrate(sql, { migrations: THREE.slice(0, 2) }), [1, 2]);
      const status = await migrationStatus(sql, { migrations: THREE });
      assertEquals(status.current, 2);
      assertEquals(status.latest, 3);
      assertEquals(status.pending, [{ version: 3, name: "third" }]);
      assertEquals(status.applied.map(({ version, name }) => ({ version, name })), [
        { version: 1, name: "first" },
        { version: 2, name: "second" },
      ]);
      for (const { applied_at } of status.applied) {
        assert(applied_at instanceof Date && applied_at > before, String(applied_at));
      }
      assertEquals(await migrate(sql, { migrations: THREE }), [3]);
      const done = await migrationStatus(sql, { migrations: THREE });
      assertEquals([done.current, done.latest, done.pending], [3, 3, []]);
    });

    await t.step(
      "two instances migrating at once apply each migration once, in order",
      async () => {
        const a = await open("together");
        const b = openPostgres(pg.url.replace(/\/[^/]+$/, "/together"), { max: 2 });
        pools.push(b);
        const [fromA, fromB] = await Promise.all([
          migrate(a, { migrations: THREE }),
          migrate(b, { migrations: THREE }),
        ]);
        assertEquals([...fromA, ...fromB].sort(), [1, 2, 3]);
        assertEquals(await recorded(a), [1, 2, 3]);
        // Migration 2's insert ran once (a second run would have hit the primary key anyway).
        assertEquals((await a`select id from one`).map((row) => row.id), [2]);
      },
    );

    await t.step(
      "a database migrated by a newer release is refused with STORE_CORRUPT and left as it is",
      async () => {
        const sql = await open("newer");
        await migrate(sql, { migrations: THREE });
        const older = THREE.slice(0, 1);
        const error = await assertRejects(() => migrate(sql, { migrations: older }), GatewayError);
        assertEquals(error.code, "STORE_CORRUPT");
        assertMatch(
          error.message,
          /^Cannot use the database at postgres:\/\/postgres@127\.0\.0\.1:\d+\/newer: it was migrated by a newer toolgate \(schema 3, this release knows 1\)$/,
        );
        assertEquals(error.details, { current: 3, latest: 1 });
        assertEquals(await recorded(sql), [1, 2, 3]);
        const status = await migrationStatus(sql, { migrations: older });
        assertEquals([status.current, status.latest, status.pending], [3, 1, []]);
      },
    );

    await t.step(
      "a failing migration is rolled back whole, with STORE_CORRUPT; the earlier ones stay",
      async () => {
        const sql = await open("failing");
        const broken: Migration[] = [
          THREE[0],
          {
            version: 2,
            name: "broken",
            sql: "create table half_done (id int); select no_such_function()",
          },
        ];
        const error = await assertRejects(() => migrate(sql, { migrations: broken }), GatewayError);
        assertEquals(error.code, "STORE_CORRUPT");
        assertMatch(
          error.message,
          /^Cannot migrate the database at postgres:\/\/postgres@127\.0\.0\.1:\d+\/failing to schema 2 \(broken\): function no_such_function\(\) does not exist$/,
        );
        assertEquals(await recorded(sql), [1]);
        const [row] = await sql`select to_regclass('half_done') is null as absent`;
        assert(row.absent, "the failed migration's table was rolled back");
      },
    );

    await t.step(
      "migrations numbered other than 1, 2, 3… are refused before touching the database",
      async () => {
        const sql = await open("invalid");
        for (
          const migrations of [
            [THREE[1]],
            [THREE[0], THREE[2]],
            [THREE[0], THREE[0]],
            [{ version: 1, name: "Bad Name", sql: "select 1" }],
            [{ version: 1, name: "empty", sql: "  " }],
          ]
        ) {
          await assertRejects(() => migrate(sql, { migrations }), RangeError);
        }
        const [row] = await sql`select to_regclass(${MIGRATIONS_TABLE}) is null as absent`;
        assert(row.absent);
      },
    );

    await t.step(
      "migrate() on a database that cannot be reached fails with STORE_UNAVAILABLE",
      async () => {
        const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        const { port } = listener.addr as Deno.NetAddr;
        listener.close();
        const sql = openPostgres(`postgres://toolgate:s3cret@127.0.0.1:${port}/toolgate`);
        pools.push(sql);
        const error = await assertRejects(() => migrate(sql), GatewayError);
        assertEquals(error.code, "STORE_UNAVAILABLE");
        assert(!error.message.includes("s3cret"), error.message);
      },
    );
  } finally {
    await Promise.all([...pools.map((sql) => sql.end({ timeout: 5 })), admin.end({ timeout: 5 })]);
  }
});
