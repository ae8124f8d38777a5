import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startPostgres } from "../_postgres.ts";

Deno.test("db status and db migrate report the embedded KV store, up to date", async () => {
  await using tmp = await tempHome();
  const status = await runCli(["db", "status"], { home: tmp.home });
  assertEquals(status.code, 0, status.stderr);
  assertStringIncludes(status.stdout, `Deno KV (embedded) at ${tmp.home}/toolgate.kv`);
  assertStringIncludes(status.stdout, "Up to date.");
  const migrated = await runCli(["db", "migrate", "--json"], { home: tmp.home });
  assertEquals(migrated.code, 0, migrated.stderr);
  const json = JSON.parse(migrated.stdout);
  assertEquals([json.kind, json.current, json.latest, json.migrated], ["kv", 2, 2, []]);
});

Deno.test("db migrate brings a new PostgreSQL database to this release's schema, once", async () => {
  await using tmp = await tempHome();
  await using pg = await startPostgres();
  const env = { TOOLGATE_DATABASE_URL: pg.url };
  const before = await runCli(["db", "status", "--json"], { home: tmp.home, env });
  assertEquals(before.code, 0, before.stderr);
  const pending = JSON.parse(before.stdout);
  assertEquals(pending.kind, "postgres");
  assertEquals(pending.current, 0);
  assert(pending.pending.length >= 1);
  assertEquals(pending.location, pg.url);

  const first = await runCli(["db", "migrate"], { home: tmp.home, env });
  assertEquals(first.code, 0, first.stderr);
  assertMatch(first.stdout, /^Applied migration/);
  assertStringIncludes(first.stdout, "Up to date.");
  const again = await runCli(["db", "migrate", "--json"], { home: tmp.home, env });
  assertEquals(again.code, 0, again.stderr);
  const done = JSON.parse(again.stdout);
  assertEquals(done.migrated, []);
  assertEquals(done.current, done.latest);
  assertEquals(done.pending, []);
});

Deno.test("a bad or unreachable database URL fails with a message naming it, never its password", async () => {
  await using tmp = await tempHome();
  const bad = await runCli(["db", "status"], {
    home: tmp.home,
    env: { TOOLGATE_DATABASE_URL: "mysql://u:p@h/d" },
  });
  assertEquals(bad.code, 1);
  assertStringIncludes(bad.stderr, "Invalid TOOLGATE_DATABASE_URL");
  const flag = await runCli(["mcp", "start", "--database-url", "sqlite:x"], { home: tmp.home });
  assertEquals(flag.code, 2);
  assertStringIncludes(flag.stderr, "Invalid --database-url");
  const down = await runCli(["db", "status"], {
    home: tmp.home,
    env: { TOOLGATE_DATABASE_URL: "postgres://toolgate:s3cret@127.0.0.1:1/toolgate" },
  });
  assertEquals(down.code, 1);
  assertStringIncludes(
    down.stderr,
    "Cannot reach the database at postgres://toolgate@127.0.0.1:1/",
  );
  assert(!down.stderr.includes("s3cret"));
});
