/**
 * One secret key per deployment, checked: the store records the key check
 * value of the key that first seals a secret; a process with another key,
 * or with none, refuses to seal (nothing stored changes); a store without a
 * record gets one from the first process that can open its secrets. On real
 * KV files and a real PostgreSQL server shared by two data directories.
 */
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../_asserts.ts";
import { startPostgres } from "../_postgres.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import { createKeychain } from "../../src/keychain/mod.ts";
import {
  ensureKey,
  KEY_FILE,
  keyCheckValue,
  openStore,
  readKeyStatus,
  type Store,
} from "../../src/store/mod.ts";
import { keyCheckKey } from "../../src/store/kv/keys.ts";

const SECRET = "whsec_c2VjcmV0LWNhbmFyeS03ZjNhOWMtYWJjZGVm";

async function tempDir(): Promise<{ dir: string } & AsyncDisposable> {
  const dir = await Deno.makeTempDir({ prefix: "toolgate-keycheck-" });
  return { dir, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

function randomKey(): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(32));
}

function addHook(store: Store, url = "https://x.test/") {
  return store.webhooks.addOutgoing({ url, events: "*", secret: SECRET });
}

async function assertKeyMismatch(
  attempt: Promise<unknown>,
  fingerprints: { key: string | null; store: string | null },
): Promise<GatewayError> {
  const error = await assertRejects(() => attempt, GatewayError);
  assertEquals(error.code, "KEY_MISMATCH");
  assertEquals(error.details, {
    key_fingerprint: fingerprints.key,
    store_fingerprint: fingerprints.store,
    key_source: (error.details as { key_source: string }).key_source,
  });
  for (const fingerprint of [fingerprints.key, fingerprints.store]) {
    if (fingerprint) assertStringIncludes(error.message, fingerprint);
  }
  assertStringIncludes(error.message, "TOOLGATE_SECRET_KEY");
  assertStringIncludes(error.message, "nothing was sealed");
  return error;
}

Deno.test("the key check value is HMAC-SHA256 of the fixed label, its fingerprint the first 16 hex digits", async () => {
  // Known answer for a key of 32 zero bytes:
  // printf 'toolgate key check v1' | openssl dgst -sha256 -mac HMAC -macopt hexkey:00…00
  const hex = "0a25f610a02b8a616f3b2bb0f359c197a0f19919cdb58e872e7068ae77558f46";
  const value = await keyCheckValue(new Uint8Array(32));
  assertEquals(value.fingerprint, hex.slice(0, 16));
  const bytes = Uint8Array.from(hex.match(/../g)!, (pair) => parseInt(pair, 16));
  assertEquals(value.check, btoa(String.fromCharCode(...bytes)));
});

Deno.test("kv: the first seal records the key; another key refuses to seal and nothing stored changes", async () => {
  await using tmp = await tempDir();
  const first = await openStore({ dataDir: tmp.dir });
  assertEquals((await readKeyStatus(first)).state, "unset");
  await addHook(first);
  const status = await readKeyStatus(first);
  assertEquals(status.state, "match");
  assertEquals(status.key_fingerprint, status.store_fingerprint);
  await first.close();

  const other = randomKey();
  const otherFingerprint = (await keyCheckValue(other)).fingerprint;
  const second = await openStore({ dataDir: tmp.dir, secretKey: other });
  try {
    assertEquals((await readKeyStatus(second)).state, "mismatch");
    await assertKeyMismatch(addHook(second, "https://y.test/"), {
      key: otherFingerprint,
      store: status.store_fingerprint,
    });
    // A keychain entry of the file backend is refused the same way.
    const keychain = createKeychain({
      store: second,
      dataDir: tmp.dir,
      env: { TOOLGATE_KEYCHAIN: "file" },
    });
    await assertRejects(() => keychain.set("slack.bot_token", "xoxb-1"), GatewayError);
    assertEquals(await second.keychain.list(), []);
    const listed = await second.webhooks.listOutgoing({ unreadableSecrets: "report" });
    assertEquals(listed.map((hook) => hook.url), ["https://x.test/"]);
  } finally {
    await second.close();
  }
  // The first key still reads everything.
  const again = await openStore({ dataDir: tmp.dir });
  try {
    assertEquals((await again.webhooks.listOutgoing()).map((hook) => hook.secret), [SECRET]);
  } finally {
    await again.close();
  }
});

Deno.test("kv: a process without its key file neither seals nor makes a new key", async () => {
  await using tmp = await tempDir();
  const first = await openStore({ dataDir: tmp.dir });
  await addHook(first);
  const recorded = await first.keyCheck.read();
  await first.close();
  await Deno.rename(`${tmp.dir}/${KEY_FILE}`, `${tmp.dir}/${KEY_FILE}.away`);
  const second = await openStore({ dataDir: tmp.dir });
  try {
    assertEquals((await readKeyStatus(second)).state, "no_key");
    const error = await assertKeyMismatch(addHook(second, "https://y.test/"), {
      key: null,
      store: recorded!.fingerprint,
    });
    assertStringIncludes(error.message, "is missing");
    await assertRejects(() => Deno.stat(`${tmp.dir}/${KEY_FILE}`), Deno.errors.NotFound);
    assertEquals((await second.webhooks.listOutgoing({ unreadableSecrets: "report" })).length, 1);
  } finally {
    await second.close();
  }
});

Deno.test("kv: a store sealed before check values existed gets one from the first process that opens its secrets", async () => {
  await using tmp = await tempDir();
  const first = await openStore({ dataDir: tmp.dir });
  await addHook(first);
  const fingerprint = (await first.keyCheck.read())!.fingerprint;
  // As an earlier release left it: sealed secrets, no record.
  await (first as unknown as { kv: Deno.Kv }).kv.delete(keyCheckKey());
  await first.close();

  const wrong = await openStore({ dataDir: tmp.dir, secretKey: randomKey() });
  try {
    const status = await readKeyStatus(wrong);
    assertEquals([status.state, status.store_fingerprint], ["mismatch", null]);
    const error = await assertRejects(() => ensureKey(wrong), GatewayError);
    assertEquals(error.code, "KEY_MISMATCH");
    assertStringIncludes(error.message, "sealed before key check values were recorded");
    assertEquals(await wrong.keyCheck.read(), null, "a wrong key records nothing");
  } finally {
    await wrong.close();
  }
  const right = await openStore({ dataDir: tmp.dir });
  try {
    assertEquals((await readKeyStatus(right)).state, "unrecorded");
    assertEquals(await right.keyCheck.read(), null, "reading the status writes nothing");
    assertEquals((await ensureKey(right, { claim: false })).state, "match");
    assertEquals((await right.keyCheck.read())?.fingerprint, fingerprint);
  } finally {
    await right.close();
  }
});

Deno.test("kv: a keychain entry of the file backend is a sealed secret the check opens", async () => {
  await using tmp = await tempDir();
  const first = await openStore({ dataDir: tmp.dir });
  const keychain = createKeychain({
    store: first,
    dataDir: tmp.dir,
    env: { TOOLGATE_KEYCHAIN: "file" },
  });
  await keychain.set("slack.bot_token", "xoxb-1");
  assertEquals((await readKeyStatus(first)).state, "match");
  await (first as unknown as { kv: Deno.Kv }).kv.delete(keyCheckKey());
  await first.close();
  const wrong = await openStore({ dataDir: tmp.dir, secretKey: randomKey() });
  try {
    assertEquals((await readKeyStatus(wrong)).state, "mismatch");
  } finally {
    await wrong.close();
  }
});

Deno.test("kv: two processes with different keys racing to claim an empty store: one wins, the other is refused", async () => {
  await using tmp = await tempDir();
  const a = await openStore({ dataDir: tmp.dir, secretKey: randomKey() });
  const b = await openStore({ dataDir: tmp.dir, secretKey: randomKey() });
  try {
    const results = await Promise.allSettled([ensureKey(a), ensureKey(b)]);
    assertEquals(results.filter((r) => r.status === "fulfilled").length, 1);
    const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    assertEquals((refused.reason as GatewayError).code, "KEY_MISMATCH");
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("postgres: two data directories with different keys on one database: the second is refused, nothing sealed", async () => {
  await using pg = await startPostgres({ database: "toolgate_keycheck" });
  await using one = await tempDir();
  await using two = await tempDir();
  const first = await openStore({ dataDir: one.dir, url: pg.url });
  let fingerprint: string;
  try {
    await addHook(first);
    fingerprint = (await readKeyStatus(first)).key_fingerprint!;
    assertEquals((await first.keyCheck.read())?.fingerprint, fingerprint);
  } finally {
    await first.close();
  }
  // The docs' mistake: a CLI in a third data directory without TOOLGATE_SECRET_KEY.
  const second = await openStore({ dataDir: two.dir, url: pg.url });
  try {
    assertEquals((await readKeyStatus(second)).state, "no_key");
    await assertKeyMismatch(addHook(second, "https://y.test/"), {
      key: null,
      store: fingerprint,
    });
    await assertRejects(() => Deno.stat(`${two.dir}/${KEY_FILE}`), Deno.errors.NotFound);
  } finally {
    await second.close();
  }
  const other = randomKey();
  const third = await openStore({ dataDir: two.dir, url: pg.url, secretKey: other });
  try {
    await assertKeyMismatch(addHook(third, "https://z.test/"), {
      key: (await keyCheckValue(other)).fingerprint,
      store: fingerprint,
    });
    const hooks = await third.webhooks.listOutgoing({ unreadableSecrets: "report" });
    assertEquals(hooks.map((hook) => hook.url), ["https://x.test/"]);
    assert(hooks[0].secret_error);
  } finally {
    await third.close();
  }
  // The same key as the first, given as TOOLGATE_SECRET_KEY: it seals.
  const shared = await Deno.readFile(`${one.dir}/${KEY_FILE}`);
  const fourth = await openStore({ dataDir: two.dir, url: pg.url, secretKey: shared });
  try {
    await addHook(fourth, "https://w.test/");
    assertEquals((await fourth.webhooks.listOutgoing()).length, 2);
  } finally {
    await fourth.close();
  }
});
