/**
 * Webhook secrets at rest, on real KV files and a real PostgreSQL server:
 * never written in plain text, sealed with the data directory's key (or
 * `TOOLGATE_SECRET_KEY`), bound to their webhook, and secrets an earlier
 * release stored in plain text still work and are sealed when a store opens.
 */
import postgres from "postgres";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { startPostgres } from "../_postgres.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { createKeychain } from "../../src/keychain/mod.ts";
import { KEY_FILE, openStore } from "../../src/store/mod.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import { incomingWebhookKey, outgoingWebhookKey } from "../../src/store/kv/keys.ts";
import { openPostgresStore } from "../../src/store/postgres/postgres_store.ts";

const SECRET = "whsec_c2VjcmV0LWNhbmFyeS03ZjNhOWMtYWJjZGVm"; // "secret-canary-7f3a9c-abcdef"
const OLD_SECRET = "old-canary-secret-41d2";
const INCOMING_SECRET = "incoming-canary-secret-93b1";

/** Files of `dir` (the KV file, its WAL, the key file) holding `needle`'s bytes. */
async function filesHolding(dir: string, needle: string): Promise<string[]> {
  const bytes = new TextEncoder().encode(needle);
  const hits: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.isFile) continue;
    const data = await Deno.readFile(`${dir}/${entry.name}`);
    outer: for (let i = 0; i + bytes.length <= data.length; i++) {
      for (let j = 0; j < bytes.length; j++) if (data[i + j] !== bytes[j]) continue outer;
      hits.push(entry.name);
      break;
    }
  }
  return hits;
}

async function tempDir(): Promise<{ dir: string } & AsyncDisposable> {
  const dir = await Deno.makeTempDir({ prefix: "toolgate-sealed-" });
  return { dir, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

function randomKey(): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(32));
}

Deno.test("kv: webhook secrets never reach the KV file in plain text, and read back plain", async () => {
  await using tmp = await tempDir();
  const store = await openStore({ dataDir: tmp.dir });
  const hook = await store.webhooks.addOutgoing({
    url: "https://x.test/",
    events: "*",
    secret: SECRET,
  });
  await store.webhooks.updateOutgoing(hook.id, {
    previous_secrets: [{ secret: OLD_SECRET, expires_at: "2099-01-01T00:00:00.000Z" }],
  });
  const endpoint = await store.webhooks.addIncoming({
    name: "n",
    path: "/hooks/n",
    handler: "echo",
    secret: INCOMING_SECRET,
  });
  const stored = await store.webhooks.getOutgoing(hook.id);
  assertEquals([stored?.secret, stored?.previous_secrets?.[0].secret], [SECRET, OLD_SECRET]);
  assertEquals((await store.webhooks.getIncoming(endpoint.id))?.secret, INCOMING_SECRET);
  const raw = await (store as unknown as { kv: Deno.Kv }).kv.get<Record<string, unknown>>(
    outgoingWebhookKey(hook.id),
  );
  assert(typeof (raw.value?.secret as { sealed?: string }).sealed === "string", "stored sealed");
  await store.close();
  for (const needle of [SECRET, SECRET.slice(6), OLD_SECRET, INCOMING_SECRET]) {
    assertEquals(await filesHolding(tmp.dir, needle), [], `${needle} found in plain text`);
  }
  assertEquals((await Deno.stat(`${tmp.dir}/${KEY_FILE}`)).size, 32);
  const again = await openStore({ dataDir: tmp.dir });
  try {
    assertEquals((await again.webhooks.listOutgoing())[0].secret, SECRET);
    assertEquals((await again.webhooks.listIncoming())[0].secret, INCOMING_SECRET);
  } finally {
    await again.close();
  }
});

Deno.test("kv: secrets stored in plain text by an earlier release still work and are sealed on open", async () => {
  await using tmp = await tempDir();
  const first = await openKvStore({ dataDir: tmp.dir });
  const created_at = "2026-01-01T00:00:00.000Z";
  // As an earlier release wrote them: plain records straight into KV.
  await first.kv.atomic()
    .set(outgoingWebhookKey("wh_legacy"), {
      id: "wh_legacy",
      url: "https://x.test/",
      events: "*",
      secret: SECRET,
      previous_secrets: [{ secret: OLD_SECRET, expires_at: "2099-01-01T00:00:00.000Z" }],
      created_at,
    })
    .set(incomingWebhookKey("in_legacy"), {
      id: "in_legacy",
      name: "legacy",
      path: "/hooks/legacy",
      handler: "echo",
      secret: INCOMING_SECRET,
      created_at,
    })
    .set(outgoingWebhookKey("wh_unsigned"), {
      id: "wh_unsigned",
      url: "https://y.test/",
      events: "*",
      created_at,
    })
    .commit();
  // Read as they are, before any migration.
  assertEquals((await first.webhooks.getOutgoing("wh_legacy"))?.secret, SECRET);
  assertEquals((await first.webhooks.getIncoming("in_legacy"))?.secret, INCOMING_SECRET);
  await first.close();

  const store = await openKvStore({ dataDir: tmp.dir });
  try {
    const raw = await store.kv.getMany<Record<string, unknown>[]>([
      outgoingWebhookKey("wh_legacy"),
      incomingWebhookKey("in_legacy"),
      outgoingWebhookKey("wh_unsigned"),
    ]);
    const [outgoing, incoming, unsigned] = raw.map((entry) => entry.value!);
    for (const sealed of [outgoing.secret, incoming.secret]) {
      assert(typeof (sealed as { sealed?: unknown }).sealed === "string", JSON.stringify(sealed));
    }
    const previous = outgoing.previous_secrets as { secret: unknown }[];
    assert(typeof previous[0].secret === "object", "previous secrets sealed too");
    assertEquals(unsigned.secret, undefined);
    const [legacy, other] = await store.webhooks.listOutgoing();
    assertEquals([legacy.secret, legacy.previous_secrets?.[0].secret], [SECRET, OLD_SECRET]);
    assertEquals(other.secret, undefined);
    assertEquals((await store.webhooks.getIncoming("in_legacy"))?.secret, INCOMING_SECRET);
    assertEquals(legacy.created_at, created_at);
  } finally {
    await store.close();
  }
});

Deno.test("TOOLGATE_SECRET_KEY replaces keychain.key: another key cannot open, the error says which key", async () => {
  await using tmp = await tempDir();
  const key = randomKey();
  const store = await openStore({ dataDir: tmp.dir, secretKey: key });
  const hook = await store.webhooks.addOutgoing({
    url: "https://x.test/",
    events: "*",
    secret: SECRET,
  });
  // The keychain's file backend uses the same key.
  const keychain = createKeychain({ store, dataDir: tmp.dir, env: { TOOLGATE_KEYCHAIN: "file" } });
  await keychain.set("slack.bot_token", "xoxb-canary");
  assertEquals(await keychain.get("slack.bot_token"), "xoxb-canary");
  await store.close();
  assertEquals(
    await Deno.stat(`${tmp.dir}/${KEY_FILE}`).then(() => true, () => false),
    false,
    "no key file is made when the key is given",
  );

  const same = await openStore({ dataDir: tmp.dir, secretKey: new Uint8Array(key) });
  try {
    assertEquals((await same.webhooks.getOutgoing(hook.id))?.secret, SECRET);
    const again = createKeychain({
      store: same,
      dataDir: tmp.dir,
      env: { TOOLGATE_KEYCHAIN: "file" },
    });
    assertEquals(await again.get("slack.bot_token"), "xoxb-canary");
  } finally {
    await same.close();
  }
  const other = await openStore({ dataDir: tmp.dir, secretKey: randomKey() });
  try {
    const error = await assertRejects(() => other.webhooks.listOutgoing(), GatewayError);
    assertEquals(error.code, "STORE_CORRUPT");
    assertStringIncludes(
      error.message,
      `Cannot decrypt the signing secret of ${hook.id}: TOOLGATE_SECRET_KEY is not the key it was sealed with`,
    );
    assert(!error.message.includes(SECRET));
  } finally {
    await other.close();
  }
  // Without the variable, the (missing) key file is asked for.
  const fileKey = await openStore({ dataDir: tmp.dir });
  try {
    const error = await assertRejects(() => fileKey.webhooks.getOutgoing(hook.id), GatewayError);
    assertStringIncludes(error.message, `${tmp.dir}/${KEY_FILE} is missing`);
  } finally {
    await fileKey.close();
  }
});

Deno.test("a sealed secret is bound to its webhook: copied to another record it does not open", async () => {
  await using tmp = await tempDir();
  const store = await openKvStore({ dataDir: tmp.dir });
  try {
    const a = await store.webhooks.addOutgoing({
      url: "https://a.test/",
      events: "*",
      secret: SECRET,
    });
    const b = await store.webhooks.addOutgoing({
      url: "https://b.test/",
      events: "*",
      secret: "b",
    });
    const rawA = await store.kv.get<Record<string, unknown>>(outgoingWebhookKey(a.id));
    const rawB = await store.kv.get<Record<string, unknown>>(outgoingWebhookKey(b.id));
    await store.kv.set(outgoingWebhookKey(b.id), { ...rawB.value, secret: rawA.value!.secret });
    const error = await assertRejects(() => store.webhooks.getOutgoing(b.id), GatewayError);
    assertEquals(error.code, "STORE_CORRUPT");
    assertEquals((await store.webhooks.getOutgoing(a.id))?.secret, SECRET);
  } finally {
    await store.close();
  }
});

Deno.test("postgres: secrets are sealed in the rows, plain ones from an earlier release are sealed on open", async () => {
  await using pg = await startPostgres({ database: "toolgate_sealed" });
  await using tmp = await tempDir();
  const key = randomKey();
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const first = await openPostgresStore({ url: pg.url, dataDir: tmp.dir, secretKey: key });
    let hook;
    try {
      hook = await first.webhooks.addOutgoing({
        url: "https://x.test/",
        events: "*",
        secret: SECRET,
      });
      await first.webhooks.updateOutgoing(hook.id, {
        previous_secrets: [{ secret: OLD_SECRET, expires_at: "2099-01-01T00:00:00.000Z" }],
      });
      await first.webhooks.addIncoming({
        name: "n",
        path: "/hooks/n",
        handler: "echo",
        secret: INCOMING_SECRET,
      });
      // As an earlier release wrote it.
      await sql`insert into toolgate_outgoing_webhooks (id, record) values ('wh_legacy', ${
        sql.json({
          id: "wh_legacy",
          url: "https://l.test/",
          events: "*",
          secret: "legacy-canary-secret",
          created_at: "2026-01-01T00:00:00.000Z",
        })
      })`;
      assertEquals((await first.webhooks.getOutgoing("wh_legacy"))?.secret, "legacy-canary-secret");
    } finally {
      await first.close();
    }
    const dump = async () => {
      const rows = await sql<{ record: string }[]>`
        select record::text as record from toolgate_outgoing_webhooks
        union all select record::text from toolgate_incoming_webhooks`;
      return rows.map((row) => row.record).join("\n");
    };
    const before = await dump();
    for (const needle of [SECRET, OLD_SECRET, INCOMING_SECRET]) {
      assert(!before.includes(needle), `${needle} in a row in plain text`);
    }
    assertStringIncludes(before, "legacy-canary-secret");

    const second = await openPostgresStore({ url: pg.url, dataDir: tmp.dir, secretKey: key });
    try {
      assert(!(await dump()).includes("legacy-canary-secret"), "sealed when the store opened");
      const secrets = (await second.webhooks.listOutgoing()).map((w) => w.secret);
      assertEquals(secrets.sort(), [SECRET, "legacy-canary-secret"].sort());
      assertEquals((await second.webhooks.listIncoming())[0].secret, INCOMING_SECRET);
      assertEquals(
        (await second.webhooks.getOutgoing(hook.id))?.previous_secrets?.[0].secret,
        OLD_SECRET,
      );
    } finally {
      await second.close();
    }
    // Another instance with another key cannot read them.
    const stranger = await openPostgresStore({
      url: pg.url,
      dataDir: tmp.dir,
      secretKey: randomKey(),
    });
    try {
      const error = await assertRejects(() => stranger.webhooks.listOutgoing(), GatewayError);
      assertStringIncludes(error.message, "TOOLGATE_SECRET_KEY is not the key it was sealed with");
    } finally {
      await stranger.close();
    }
  } finally {
    await sql.end();
  }
});
