import { assert, assertEquals, assertMatch } from "../_asserts.ts";
import { MAIN, ROOT, runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "../e2e/_http_server.ts";
import { ensureDataDir } from "../../src/store/_data_dir.ts";
import { KV_FILE, openKvStore } from "../../src/store/kv/kv_store.ts";

const POSIX = Deno.build.os !== "windows";

/** `name -> mode` of the data dir itself (`.`) and every entry in it. */
async function modes(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = { ".": mode((await Deno.stat(dir)).mode!) };
  for await (const entry of Deno.readDir(dir)) {
    out[entry.name] = mode((await Deno.lstat(`${dir}/${entry.name}`)).mode!);
  }
  return out;
}

function mode(bits: number): string {
  return (bits & 0o777).toString(8).padStart(4, "0");
}

/**
 * A data dir as an earlier release (or a umask of 022) left it: the dir 0755,
 * a real KV database and the other files 0644.
 */
async function openDataDir(home: string): Promise<void> {
  await Deno.chmod(home, 0o755);
  const kv = await Deno.openKv(`${home}/${KV_FILE}`);
  await kv.set(["meta", "schema_version"], 2);
  kv.close();
  for (const name of ["dlq.json", ".dlq.json.lock", "config.json"]) {
    await Deno.writeTextFile(`${home}/${name}`, name === "config.json" ? "{}" : "x");
  }
  // A real key: a server checks it against the store as it starts.
  await Deno.writeFile(`${home}/keychain.key`, crypto.getRandomValues(new Uint8Array(32)));
  for await (const entry of Deno.readDir(home)) await Deno.chmod(`${home}/${entry.name}`, 0o644);
  assertEquals((await modes(home))["."], "0755");
  assertEquals((await modes(home))[KV_FILE], "0644");
}

function allPrivate(found: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.keys(found).map((name) => [name, name === "." ? "0700" : "0600"]),
  );
}

Deno.test({
  name: "ensureDataDir() makes an existing 0755 dir 0700 and its 0644 files 0600, naming each",
  ignore: !POSIX,
  fn: async () => {
    await using tmp = await tempHome();
    await openDataDir(tmp.home);
    await Deno.mkdir(`${tmp.home}/sub`, { mode: 0o755 });
    await Deno.chmod(`${tmp.home}/sub`, 0o755);
    await Deno.symlink("/etc/hostname", `${tmp.home}/link`);
    const logged: string[] = [];
    await ensureDataDir(tmp.home, { log: (line) => logged.push(line) });
    const found = await modes(tmp.home);
    assertEquals(found["sub"], "0755", "subdirectories are not its files");
    assertEquals((await Deno.stat("/etc/hostname")).mode! & 0o044, 0o044, "links not followed");
    delete found["sub"], delete found["link"];
    assertEquals(found, allPrivate(found));
    assertEquals(logged.length, 6);
    assertEquals(
      logged[0],
      `${tmp.home} was readable by other users (mode 0755): changed to 0700`,
    );
    assert(
      logged.includes(
        `${tmp.home}/dlq.json was readable by other users (mode 0644): changed to 0600`,
      ),
    );
    const again: string[] = [];
    await ensureDataDir(tmp.home, { log: (line) => again.push(line) });
    assertEquals(again, [], "nothing to fix the second time");
  },
});

Deno.test({
  name: "ensureDataDir() keeps the owner's bits of a file and only removes group and other",
  ignore: !POSIX,
  fn: async () => {
    await using tmp = await tempHome();
    await Deno.writeTextFile(`${tmp.home}/a`, "");
    await Deno.chmod(`${tmp.home}/a`, 0o400);
    await Deno.writeTextFile(`${tmp.home}/b`, "");
    await Deno.chmod(`${tmp.home}/b`, 0o777);
    await ensureDataDir(tmp.home, { log: () => {} });
    const found = await modes(tmp.home);
    assertEquals([found.a, found.b], ["0400", "0700"]);
  },
});

Deno.test({
  name: "openKvStore() on a fresh dir creates it 0700 and toolgate.kv, -wal and -shm 0600",
  ignore: !POSIX,
  fn: async () => {
    await using tmp = await tempHome();
    const dataDir = `${tmp.home}/fresh`;
    const store = await openKvStore({ dataDir });
    try {
      await store.kv.set(["probe"], 1);
      const found = await modes(dataDir);
      assertEquals(Object.keys(found).sort(), [
        ".",
        KV_FILE,
        `${KV_FILE}-shm`,
        `${KV_FILE}-wal`,
        `${KV_FILE}.id`,
      ]);
      assertEquals(found, allPrivate(found));
    } finally {
      store.close();
    }
  },
});

Deno.test({
  name: "openKvStore() fixes an existing 0755 dir and 0644 files, and keeps the data",
  ignore: !POSIX,
  fn: async () => {
    await using tmp = await tempHome();
    await openDataDir(tmp.home);
    const kv = await Deno.openKv(`${tmp.home}/${KV_FILE}`);
    await kv.set(["kept"], "yes");
    kv.close();
    await Deno.chmod(`${tmp.home}/${KV_FILE}`, 0o644);
    const store = await openKvStore({ dataDir: tmp.home });
    try {
      assertEquals((await store.kv.get(["kept"])).value, "yes");
      const found = await modes(tmp.home);
      assert(found[`${KV_FILE}-wal`], "the WAL exists while the store is open");
      assertEquals(found, allPrivate(found));
    } finally {
      store.close();
    }
  },
});

Deno.test({
  name: "a CLI command that opens the store fixes the modes and says so on stderr",
  ignore: !POSIX,
  fn: async () => {
    await using tmp = await tempHome();
    await openDataDir(tmp.home);
    const run = await runCli(["webhooks", "list", "--json"], { home: tmp.home });
    assertEquals(run.code, 0, run.stderr);
    assertEquals(JSON.parse(run.stdout), { outgoing: [], incoming: [] });
    assertMatch(
      run.stderr,
      /WARN {2}\[store\] .*toolgate\.kv was readable by other users \(mode 0644\)/,
    );
    const found = await modes(tmp.home);
    assertEquals(found, allPrivate(found));
  },
});

Deno.test({
  name: "keychain set in a 0755 data dir leaves the dir 0700 and keychain.key 0600",
  ignore: !POSIX,
  fn: async () => {
    await using tmp = await tempHome();
    await Deno.chmod(tmp.home, 0o755);
    const run = await runCli(["keychain", "set", "slack.bot_token"], {
      home: tmp.home,
      stdin: "xoxb-1",
    });
    assertEquals(run.code, 0, run.stderr);
    const found = await modes(tmp.home);
    assertEquals(found["keychain.key"], "0600");
    assertEquals(found, allPrivate(found));
  },
});

Deno.test({
  name: "mcp start fixes the modes of an existing data dir before serving",
  ignore: !POSIX,
  fn: async () => {
    await using tmp = await tempHome();
    await openDataDir(tmp.home);
    await using server = await startHttpServer({ home: tmp.home });
    const health = await fetch(`${server.url}/health`);
    await health.body?.cancel();
    assertEquals(health.status, 200);
    const found = await modes(tmp.home);
    assert(found[`${KV_FILE}-wal`] && found[`${KV_FILE}-shm`]);
    assertEquals(found, allPrivate(found));
    const stopped = await server.stop();
    assertMatch(stopped.stderr, /dlq\.json was readable by other users \(mode 0644\)/);
  },
});

/** Whether this test process may start a child as another user (uid 65534). */
const canDropPrivileges = POSIX && Deno.uid() === 0 &&
  (await Deno.stat("/usr/bin/setpriv").then(() => true, () => false));

/** `toolgate <args>` as uid/gid 65534 (`nobody`) through `setpriv`. */
async function asNobody(args: string[], home: string): Promise<Deno.CommandOutput> {
  return await new Deno.Command("/usr/bin/setpriv", {
    args: [
      "--reuid=65534",
      "--regid=65534",
      "--clear-groups",
      Deno.execPath(),
      "run",
      "-A",
      "--cached-only",
      MAIN,
      ...args,
    ],
    cwd: ROOT,
    env: { TOOLGATE_HOME: home, TOOLGATE_KEYCHAIN: "file", NO_COLOR: "1", HOME: home },
    stdout: "piped",
    stderr: "piped",
  }).output();
}

Deno.test({
  name: "a data dir of another user that is not private stops start-up, naming the path and fix",
  ignore: !canDropPrivileges,
  fn: async () => {
    await using tmp = await tempHome();
    await Deno.chmod(tmp.home, 0o755);
    const output = await asNobody(["webhooks", "list"], tmp.home);
    assertEquals(output.code, 1);
    assertEquals(
      new TextDecoder().decode(output.stderr),
      `toolgate: STORE_CORRUPT: Cannot make data directory ${tmp.home} private (mode 0755): it belongs to uid 0, ` +
        `not to this user (uid 65534); run: sudo chown 65534 ${tmp.home} && chmod 700 ${tmp.home}, ` +
        "or set TOOLGATE_HOME to a directory of your own\n",
    );
    assertEquals((await modes(tmp.home))["."], "0755", "nothing changed");
  },
});

Deno.test({
  name: "a 0644 file of another user in the data dir stops start-up, naming the file",
  ignore: !canDropPrivileges,
  fn: async () => {
    await using tmp = await tempHome();
    await Deno.chown(tmp.home, 65534, 65534);
    await Deno.writeTextFile(`${tmp.home}/dlq.json`, "[]\n");
    await Deno.chmod(`${tmp.home}/dlq.json`, 0o644);
    const output = await asNobody(["webhooks", "list"], tmp.home);
    assertEquals(output.code, 1);
    const file = `${tmp.home}/dlq.json`;
    assertEquals(
      new TextDecoder().decode(output.stderr),
      `toolgate: STORE_CORRUPT: Cannot make data file ${file} private (mode 0644): it belongs to uid 0, ` +
        `not to this user (uid 65534); run: sudo chown 65534 ${file} && chmod 600 ${file}, ` +
        "or set TOOLGATE_HOME to a directory of your own\n",
    );
    assert(!(await modes(tmp.home))[KV_FILE], "no database created");
  },
});

Deno.test({
  name: "doctor names a data dir of another user as a failed check, with the fix",
  ignore: !canDropPrivileges,
  fn: async () => {
    await using tmp = await tempHome();
    await Deno.chmod(tmp.home, 0o755);
    const output = await asNobody(["doctor", "--json"], tmp.home);
    assertEquals(output.code, 1);
    const report = JSON.parse(new TextDecoder().decode(output.stdout));
    const check = report.checks.find((c: { name: string }) => c.name === "data_dir");
    assertEquals(check.status, "fail", JSON.stringify(check));
    assertMatch(check.message, /belongs to uid 0, not to this user \(uid 65534\)/);
    assertMatch(check.fix, /chown -R 65534/);
    assertEquals((await modes(tmp.home))["."], "0755", "nothing changed");
  },
});
