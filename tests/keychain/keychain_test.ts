import { assert, assertEquals, assertStringIncludes } from "../_asserts.ts";
import { GatewayError } from "../../src/errors/mod.ts";
import {
  createKeychain,
  KEY_FILE,
  type Keychain,
  type KeychainOptions,
  secretEnvName,
  secretReaderFor,
} from "../../src/keychain/mod.ts";
import { openStore, type Store } from "../../src/store/mod.ts";

const SECRET = "xoxb-plaintext-canary-7f3a9c";

interface Fixture extends AsyncDisposable {
  home: string;
  store: Store;
  keychain(options?: Partial<KeychainOptions>): Keychain;
}

async function fixture(): Promise<Fixture> {
  const home = await Deno.makeTempDir({ prefix: "toolgate-keychain-" });
  const store = await openStore({ dataDir: home });
  return {
    home,
    store,
    keychain: (options = {}) =>
      createKeychain({
        store,
        dataDir: home,
        env: { TOOLGATE_KEYCHAIN: "file" },
        ...options,
      }),
    [Symbol.asyncDispose]: async () => {
      store.close();
      await Deno.remove(home, { recursive: true });
    },
  };
}

async function expectError(fn: () => Promise<unknown>, code: string): Promise<GatewayError> {
  try {
    await fn();
  } catch (error) {
    assert(error instanceof GatewayError, `expected a GatewayError, got ${error}`);
    assertEquals(error.code, code, error.message);
    return error;
  }
  throw new Error(`expected ${code}, but it succeeded`);
}

/** Whether `needle` occurs in any file of `dir` (the KV file, its WAL, the key file). */
async function foundInFiles(dir: string, needle: string): Promise<string[]> {
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

Deno.test("the file backend sets, gets, lists names and deletes secrets", async () => {
  await using fx = await fixture();
  const keychain = fx.keychain();
  assertEquals(await keychain.backend(), "file");
  assertEquals(await keychain.get("slack.bot_token"), undefined);
  await keychain.set("slack.bot_token", SECRET);
  await keychain.set("github.token", "ghp-1\nsecond line");
  assertEquals(await keychain.get("slack.bot_token"), SECRET);
  assertEquals(await keychain.get("github.token"), "ghp-1\nsecond line");
  assertEquals(await keychain.list(), ["github.token", "slack.bot_token"]);
  const entries = await keychain.entries();
  assertEquals(entries.map((e) => [e.name, e.backend, e.overridden_by_env]), [
    ["github.token", "file", false],
    ["slack.bot_token", "file", false],
  ]);
  assert(!JSON.stringify(entries).includes(SECRET));

  await keychain.set("slack.bot_token", "replaced");
  assertEquals(await keychain.get("slack.bot_token"), "replaced");
  assertEquals(await keychain.delete("slack.bot_token"), true);
  assertEquals(await keychain.delete("slack.bot_token"), false);
  assertEquals(await keychain.get("slack.bot_token"), undefined);
  assertEquals(await keychain.list(), ["github.token"]);
});

Deno.test("the encrypted file store never holds the value in plaintext", async () => {
  await using fx = await fixture();
  await fx.keychain().set("slack.bot_token", SECRET);
  assertEquals(await foundInFiles(fx.home, SECRET), []);
  const record = await fx.store.keychain.get("slack.bot_token");
  assertEquals(record?.backend, "file");
  // A second handle on the same data directory decrypts it.
  assertEquals(await fx.keychain().get("slack.bot_token"), SECRET);
});

Deno.test("keychain.key is 32 random bytes with mode 0600, created on first set", async () => {
  await using fx = await fixture();
  const path = `${fx.home}/${KEY_FILE}`;
  await fx.keychain().list();
  await fx.keychain().get("slack.bot_token");
  assertEquals(await Deno.stat(path).then(() => true, () => false), false, "not created by reads");
  await fx.keychain().set("slack.bot_token", SECRET);
  const info = await Deno.stat(path);
  assertEquals(info.size, 32);
  if (Deno.build.os !== "windows") assertEquals(info.mode! & 0o777, 0o600);
  const before = await Deno.readFile(path);
  await fx.keychain().set("slack.other", "x");
  assertEquals(await Deno.readFile(path), before, "an existing key is reused, never replaced");
});

Deno.test("a corrupt or unreadable keychain.key is a clear error and is never overwritten", async () => {
  await using fx = await fixture();
  const path = `${fx.home}/${KEY_FILE}`;
  await Deno.writeFile(path, new Uint8Array([1, 2, 3, 4, 5]));
  const corrupt = await expectError(
    () => fx.keychain().set("slack.bot_token", "v"),
    "STORE_CORRUPT",
  );
  assertEquals(
    corrupt.message,
    `Cannot use ${path}: expected a 32-byte key, found 5 bytes; the file was left untouched (moving it away loses the stored secrets)`,
  );
  assertEquals(await Deno.readFile(path), new Uint8Array([1, 2, 3, 4, 5]));

  await Deno.remove(path);
  await Deno.mkdir(path);
  const unreadable = await expectError(
    () => fx.keychain().set("slack.bot_token", "v"),
    "STORE_CORRUPT",
  );
  assertStringIncludes(unreadable.message, `Cannot read ${path}: `);
  assertStringIncludes(unreadable.message, "the file was left untouched");
  assert((await Deno.stat(path)).isDirectory);
});

Deno.test("a replaced or missing keychain.key cannot decrypt: the error says what to do", async () => {
  await using fx = await fixture();
  const path = `${fx.home}/${KEY_FILE}`;
  await fx.keychain().set("slack.bot_token", SECRET);
  await Deno.writeFile(path, crypto.getRandomValues(new Uint8Array(32)));
  const replaced = await expectError(
    () => fx.keychain().get("slack.bot_token"),
    "STORE_CORRUPT",
  );
  assertStringIncludes(replaced.message, "Cannot decrypt keychain entry slack.bot_token: ");
  assertStringIncludes(replaced.message, "toolgate keychain set slack.bot_token");
  assert(!replaced.message.includes(SECRET));

  await Deno.remove(path);
  const missing = await expectError(() => fx.keychain().get("slack.bot_token"), "STORE_CORRUPT");
  assertStringIncludes(missing.message, `${path} is missing`);
});

Deno.test("a ciphertext is bound to its name: moved to another name it does not decrypt", async () => {
  await using fx = await fixture();
  const keychain = fx.keychain();
  await keychain.set("slack.bot_token", SECRET);
  const record = await fx.store.keychain.get("slack.bot_token");
  await fx.store.keychain.put("evil.token", record!);
  await expectError(() => keychain.get("evil.token"), "STORE_CORRUPT");
});

Deno.test("TOOLGATE_SECRET_<PLUGIN>_<KEY> overrides the stored value", async () => {
  await using fx = await fixture();
  await fx.keychain().set("slack.bot_token", SECRET);
  const env = { TOOLGATE_KEYCHAIN: "file", TOOLGATE_SECRET_SLACK_BOT_TOKEN: "from-env" };
  const keychain = fx.keychain({ env });
  assertEquals(await keychain.get("slack.bot_token"), "from-env");
  assertEquals((await keychain.entries())[0].overridden_by_env, true);
  // Works without any stored entry, and an empty variable does not override.
  const only = fx.keychain({ env: { TOOLGATE_SECRET_MY_PLUGIN_API_KEY: "k" } });
  assertEquals(await only.get("my-plugin.api-key"), "k");
  const empty = fx.keychain({ env: { TOOLGATE_SECRET_SLACK_BOT_TOKEN: "" } });
  assertEquals(await empty.get("slack.bot_token"), SECRET);
});

Deno.test("secretEnvName() upper-cases and maps . and - to _", () => {
  assertEquals(secretEnvName("slack.bot_token"), "TOOLGATE_SECRET_SLACK_BOT_TOKEN");
  assertEquals(secretEnvName("my-plugin.api-key.v2"), "TOOLGATE_SECRET_MY_PLUGIN_API_KEY_V2");
});

Deno.test("secretReaderFor() reads <plugin>.<key> for one plugin", async () => {
  await using fx = await fixture();
  const keychain = fx.keychain();
  await keychain.set("slack.bot_token", SECRET);
  assertEquals(await secretReaderFor(keychain, "slack").get("bot_token"), SECRET);
  assertEquals(await secretReaderFor(keychain, "github").get("bot_token"), undefined);
});

Deno.test("bad names and empty or huge values are rejected with USAGE", async () => {
  await using fx = await fixture();
  const keychain = fx.keychain();
  for (const name of ["slack", "Slack.token", ".token", "slack.", "a b.c", "slack/x.y", ""]) {
    const error = await expectError(() => keychain.set(name, "v"), "USAGE");
    assertStringIncludes(error.message, `Invalid secret name ${JSON.stringify(name)}: expected`);
    await expectError(() => keychain.get(name), "USAGE");
    await expectError(() => keychain.delete(name), "USAGE");
  }
  const empty = await expectError(() => keychain.set("slack.bot_token", ""), "USAGE");
  assertEquals(empty.message, "Invalid value for secret slack.bot_token: it is empty");
  await expectError(() => keychain.set("slack.bot_token", "x".repeat(40_000)), "USAGE");
  assertEquals(await keychain.list(), []);
});

Deno.test("TOOLGATE_KEYCHAIN must name a known, available backend", async () => {
  await using fx = await fixture();
  const bogus = await expectError(
    () => fx.keychain({ env: { TOOLGATE_KEYCHAIN: "vault" } }).set("slack.bot_token", "v"),
    "CONFIG_INVALID",
  );
  assertEquals(
    bogus.message,
    'Invalid TOOLGATE_KEYCHAIN "vault": expected file, secret-tool, security',
  );
  const absent = await expectError(
    () =>
      fx.keychain({ env: { TOOLGATE_KEYCHAIN: "secret-tool", PATH: "/nonexistent" } }).set(
        "slack.bot_token",
        "v",
      ),
    "CONFIG_INVALID",
  );
  assertStringIncludes(
    absent.message,
    "Keychain backend secret-tool is not available: secret-tool was not found on PATH",
  );
});

/** A stand-in for libsecret's secret-tool keeping secrets as files; logs its argv. */
const FAKE_SECRET_TOOL = `#!/bin/bash
dir="$FAKE_SECRET_DIR"
if [ -n "$FAKE_SECRET_BROKEN" ]; then
  echo "secret-tool: Cannot autolaunch D-Bus without X11 \\$DISPLAY" >&2
  exit 1
fi
echo "$*" >> "$dir/argv.log"
cmd="$1"; shift
name=""
while [ $# -gt 0 ]; do
  case "$1" in
    --label=*) shift ;;
    *) if [ "$1" = name ]; then name="$2"; fi; shift 2 ;;
  esac
done
case "$cmd" in
  store) cat > "$dir/secret.$name" ;;
  lookup) if [ -n "$name" ] && [ -f "$dir/secret.$name" ]; then cat "$dir/secret.$name"; exit 0; fi; exit 1 ;;
  clear) rm -f "$dir/secret.$name" ;;
  *) echo "secret-tool: unknown command $cmd" >&2; exit 2 ;;
esac
`;

async function fakeSecretTool(
  home: string,
): Promise<{ PATH: string; FAKE_SECRET_DIR: string }> {
  const bin = `${home}/bin`;
  const secrets = `${home}/secrets`;
  await Deno.mkdir(bin);
  await Deno.mkdir(secrets);
  await Deno.writeTextFile(`${bin}/secret-tool`, FAKE_SECRET_TOOL, { mode: 0o755 });
  return { PATH: `${bin}:/usr/bin:/bin`, FAKE_SECRET_DIR: secrets };
}

Deno.test({
  name: "the secret-tool backend passes values on stdin, keeps only the name in KV",
  ignore: Deno.build.os === "windows",
  fn: async () => {
    await using fx = await fixture();
    const env = { ...(await fakeSecretTool(fx.home)), TOOLGATE_KEYCHAIN: "secret-tool" };
    const keychain = fx.keychain({ env });
    assertEquals(await keychain.backend(), "secret-tool");
    await keychain.set("slack.bot_token", `${SECRET}\nwith a newline`);
    assertEquals(await keychain.get("slack.bot_token"), `${SECRET}\nwith a newline`);
    assertEquals(
      await Deno.readTextFile(`${env.FAKE_SECRET_DIR}/secret.slack.bot_token`),
      `${SECRET}\nwith a newline`,
    );
    const argv = await Deno.readTextFile(`${env.FAKE_SECRET_DIR}/argv.log`);
    assertStringIncludes(argv, "store --label=toolgate slack.bot_token service toolgate name");
    assert(!argv.includes(SECRET), "the value was passed in argv");
    assertEquals(
      await fx.store.keychain.get("slack.bot_token").then((r) => r?.backend),
      "secret-tool",
    );
    assertEquals(await foundInFiles(fx.home, SECRET), []);
    assertEquals((await keychain.entries())[0].backend, "secret-tool");
    assertEquals(await keychain.delete("slack.bot_token"), true);
    assertEquals(await keychain.get("slack.bot_token"), undefined);
    assertEquals(
      await Deno.stat(`${env.FAKE_SECRET_DIR}/secret.slack.bot_token`).then(
        () => true,
        () => false,
      ),
      false,
    );
  },
});

Deno.test({
  name:
    "without TOOLGATE_KEYCHAIN, Linux uses secret-tool when a secret service answers, else the file",
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    await using fx = await fixture();
    const env = await fakeSecretTool(fx.home);
    assertEquals(await fx.keychain({ env }).backend(), "secret-tool");
    const broken = { ...env, FAKE_SECRET_BROKEN: "1" };
    assertEquals(await fx.keychain({ env: broken }).backend(), "file");
    assertEquals(await fx.keychain({ env: { PATH: "/nonexistent" } }).backend(), "file");
    const forced = await expectError(
      () => fx.keychain({ env: { ...broken, TOOLGATE_KEYCHAIN: "secret-tool" } }).backend(),
      "CONFIG_INVALID",
    );
    assertStringIncludes(forced.message, "no D-Bus secret service answered (secret-tool: Cannot");
  },
});

Deno.test({
  name: "a secret moved to the file backend is removed from the OS keychain",
  ignore: Deno.build.os === "windows",
  fn: async () => {
    await using fx = await fixture();
    const env = await fakeSecretTool(fx.home);
    await fx.keychain({ env: { ...env, TOOLGATE_KEYCHAIN: "secret-tool" } }).set("a.b", "one");
    const file = fx.keychain({ env: { ...env, TOOLGATE_KEYCHAIN: "file" } });
    // Entries are read from where they were stored, whatever the current backend.
    assertEquals(await file.get("a.b"), "one");
    await file.set("a.b", "two");
    assertEquals(await file.get("a.b"), "two");
    assertEquals(await Deno.stat(`${env.FAKE_SECRET_DIR}/secret.a.b`).then(() => 1, () => 0), 0);
  },
});
