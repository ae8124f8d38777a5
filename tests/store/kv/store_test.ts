import { assert, assertEquals, assertMatch, assertRejects } from "../../_asserts.ts";
import { runCli, tempHome } from "../../_helpers.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import {
  KV_FILE,
  openKvStore as openStore,
  SCHEMA_VERSION,
} from "../../../src/store/kv/kv_store.ts";

Deno.test("openStore() creates the data dir with mode 0700 and records the schema version", async () => {
  await using tmp = await tempHome();
  const dataDir = `${tmp.home}/nested/data`;
  const store = await openStore({ dataDir });
  try {
    assertEquals((await Deno.stat(dataDir)).mode! & 0o777, 0o700);
    const entry = await store.kv.get(["meta", "schema_version"]);
    assertEquals(entry.value, SCHEMA_VERSION);
  } finally {
    store.close();
  }
});

Deno.test("openStore() refuses a KV file that is not a database and leaves it untouched", async () => {
  await using tmp = await tempHome();
  const garbage = new TextEncoder().encode("this is not a sqlite database\n".repeat(200));
  await Deno.writeFile(`${tmp.home}/${KV_FILE}`, garbage);
  const error = await assertRejects(() => openStore({ dataDir: tmp.home }), GatewayError);
  assertEquals((error as GatewayError).code, "STORE_CORRUPT");
  assertMatch(error.message, /left untouched/);
  assertEquals(await Deno.readFile(`${tmp.home}/${KV_FILE}`), garbage);
});

Deno.test("the CLI reports a corrupt data dir in one line, exit 1, and never repairs it", async () => {
  await using tmp = await tempHome();
  const garbage = new TextEncoder().encode("garbage".repeat(1000));
  // 0600, so that the only line is the refusal (not a fixed mode).
  await Deno.writeFile(`${tmp.home}/${KV_FILE}`, garbage, { mode: 0o600 });
  const run = await runCli(["webhooks", "list"], { home: tmp.home });
  assertEquals(run.code, 1);
  assertMatch(
    run.stderr,
    /^toolgate: STORE_CORRUPT: Cannot open .*toolgate\.kv.*left untouched\n$/,
  );
  assertEquals(await Deno.readFile(`${tmp.home}/${KV_FILE}`), garbage);
});

Deno.test("openStore() refuses a data dir path that is a file", async () => {
  await using tmp = await tempHome();
  await Deno.writeTextFile(`${tmp.home}/file`, "x");
  const error = await assertRejects(() => openStore({ dataDir: `${tmp.home}/file` }), GatewayError);
  assertMatch(error.message, /is not a directory/);
  assertEquals(await Deno.readTextFile(`${tmp.home}/file`), "x");
});

Deno.test("openStore() refuses a database written by a newer schema", async () => {
  await using tmp = await tempHome();
  const kv = await Deno.openKv(`${tmp.home}/${KV_FILE}`);
  await kv.set(["meta", "schema_version"], SCHEMA_VERSION + 1);
  kv.close();
  const error = await assertRejects(() => openStore({ dataDir: tmp.home }), GatewayError);
  assertMatch(error.message, /newer toolgate/);
});

Deno.test("stored records are validated on read: a corrupt registration is reported, not used", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    await store.webhooks.addOutgoing({ url: "http://127.0.0.1:9/x", events: "*" });
    await store.kv.set(["webhooks", "out", "wh_broken"], { id: "wh_broken", url: 42 });
    const error = await assertRejects(() => store.webhooks.listOutgoing(), GatewayError);
    assertEquals((error as GatewayError).code, "STORE_CORRUPT");
  } finally {
    store.close();
  }
});

Deno.test("registration changes bump the version counter polled by servers", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const before = await store.registrationsVersion();
    await store.webhooks.addOutgoing({ url: "http://127.0.0.1:9/x", events: ["tool.called"] });
    assert((await store.registrationsVersion()) > before);
  } finally {
    store.close();
  }
});
