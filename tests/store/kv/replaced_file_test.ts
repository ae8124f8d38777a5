/**
 * A KV file emptied, lost, replaced or damaged where a store was: refused
 * with `STORE_CORRUPT` (the data directory's marker file remembers which
 * store it held), never re-initialised in its place; `audit verify` fails
 * on it, naming the entry it could not read, never `internal error`.
 */
import {
  assert,
  assertEquals,
  assertMatch,
  assertRejects,
  assertStringIncludes,
} from "../../_asserts.ts";
import { runCli, tempHome } from "../../_helpers.ts";
import { startHttpServer } from "../../e2e/_http_server.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import { openStore } from "../../../src/store/mod.ts";
import { KV_FILE, STORE_MARKER_FILE } from "../../../src/store/kv/kv_store.ts";

async function storeWithEntries(home: string, count = 3): Promise<void> {
  for (let i = 0; i < count; i++) {
    const run = await runCli([
      "tools",
      "call",
      "memory_set",
      "--args",
      JSON.stringify({ key: `k${i}`, value: i }),
    ], { home });
    assertEquals(run.code, 0, run.stderr);
  }
}

async function removeWal(home: string): Promise<void> {
  for (const suffix of ["-wal", "-shm"]) {
    await Deno.remove(`${home}/${KV_FILE}${suffix}`).catch(() => {});
  }
}

Deno.test("a fresh data directory gets a marker naming its store; reopening it works", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  await store.close();
  const marker = (await Deno.readTextFile(`${tmp.home}/${STORE_MARKER_FILE}`)).trim();
  assertMatch(marker, /^kvs_[0-9a-z]{26}$/);
  assertEquals((await Deno.stat(`${tmp.home}/${STORE_MARKER_FILE}`)).mode! & 0o777, 0o600);
  const again = await openStore({ dataDir: tmp.home });
  await again.close();
  // A data directory of an earlier release (no marker) gets one, with the same id.
  await Deno.remove(`${tmp.home}/${STORE_MARKER_FILE}`);
  await (await openStore({ dataDir: tmp.home })).close();
  assertEquals((await Deno.readTextFile(`${tmp.home}/${STORE_MARKER_FILE}`)).trim(), marker);
});

Deno.test("an emptied or missing KV file is STORE_CORRUPT, never re-initialised, and audit verify fails", async () => {
  await using tmp = await tempHome();
  await storeWithEntries(tmp.home);
  assertEquals((await runCli(["audit", "verify"], { home: tmp.home })).code, 0);
  await Deno.writeFile(`${tmp.home}/${KV_FILE}`, new Uint8Array());
  await removeWal(tmp.home);
  const error = await assertRejects(() => openStore({ dataDir: tmp.home }), GatewayError);
  assertEquals(error.code, "STORE_CORRUPT");
  assertStringIncludes(error.message, "the file is empty (0 bytes)");
  assertEquals((await Deno.stat(`${tmp.home}/${KV_FILE}`)).size, 0, "nothing was created");
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 1);
  assertMatch(
    verify.stderr,
    /^toolgate: STORE_CORRUPT: Cannot use .*toolgate\.kv: the file is empty/,
  );
  await Deno.remove(`${tmp.home}/${KV_FILE}`);
  const lost = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(lost.code, 1);
  assertStringIncludes(lost.stderr, "the file is missing");
  await assertRejects(() => Deno.stat(`${tmp.home}/${KV_FILE}`), Deno.errors.NotFound);
});

Deno.test("a KV file replaced by another store is STORE_CORRUPT naming both; the file is left as it is", async () => {
  await using one = await tempHome();
  await using two = await tempHome();
  await storeWithEntries(one.home, 1);
  await storeWithEntries(two.home, 1);
  await removeWal(one.home);
  await removeWal(two.home);
  await Deno.copyFile(`${two.home}/${KV_FILE}`, `${one.home}/${KV_FILE}`);
  const before = await Deno.readFile(`${one.home}/${KV_FILE}`);
  const error = await assertRejects(() => openStore({ dataDir: one.home }), GatewayError);
  assertEquals(error.code, "STORE_CORRUPT");
  const theirs = (await Deno.readTextFile(`${two.home}/${STORE_MARKER_FILE}`)).trim();
  const ours = (await Deno.readTextFile(`${one.home}/${STORE_MARKER_FILE}`)).trim();
  assertStringIncludes(error.message, `it is another store (${theirs})`);
  assertStringIncludes(error.message, `held store ${ours}`);
  await removeWal(one.home);
  assertEquals(await Deno.readFile(`${one.home}/${KV_FILE}`), before);
});

Deno.test("random bytes over the KV file's pages: STORE_CORRUPT or an unreadable entry, never an internal error", async () => {
  await using tmp = await tempHome();
  const server = await startHttpServer({ home: tmp.home });
  for (let i = 0; i < 60; i++) {
    const response = await fetch(`${server.url}/tools/memory_set`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: `k${i}`, value: "x".repeat(500) }),
    });
    assertEquals(response.status, 200);
    await response.body?.cancel();
  }
  await server.stop();
  // Fold the WAL into the file, so that the pages overwritten hold the entries.
  const kv = await Deno.openKv(`${tmp.home}/${KV_FILE}`);
  kv.close();
  await removeWal(tmp.home);
  const file = await Deno.open(`${tmp.home}/${KV_FILE}`, { read: true, write: true });
  const size = (await file.stat()).size;
  assert(size > 8192, `${size} bytes`);
  await file.seek(4096, Deno.SeekMode.Start);
  await file.write(crypto.getRandomValues(new Uint8Array(Math.min(size - 4096, 16384))));
  file.close();
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 1, verify.stdout + verify.stderr);
  assertEquals(verify.stderr.includes("internal error"), false, verify.stderr);
  assertMatch(
    verify.stdout + verify.stderr,
    /STORE_CORRUPT|unreadable|cannot be read|does not match/i,
  );
});

/** Overwrites the middle of the live copy of `marker` in the KV file (after folding the WAL in). */
async function damage(home: string, marker: string): Promise<void> {
  const kv = await Deno.openKv(`${home}/${KV_FILE}`);
  kv.close();
  await removeWal(home);
  const path = `${home}/${KV_FILE}`;
  const data = await Deno.readFile(path);
  const needle = new TextEncoder().encode(marker);
  const hits: number[] = [];
  outer: for (let i = 0; i + needle.length <= data.length; i++) {
    for (let j = 0; j < needle.length; j++) if (data[i + j] !== needle[j]) continue outer;
    hits.push(i);
  }
  assert(hits.length > 0, `${marker} not found in the file`);
  const at = hits[Math.floor(hits.length / 2)];
  // Control characters: no longer JSON, as a damaged page would leave it.
  data.set(new Uint8Array(64).fill(0x01), at);
  await Deno.writeFile(path, data);
}

Deno.test("a damaged record: start-up goes on, the record is STORE_CORRUPT naming its key, the rest reads", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  for (let i = 0; i < 20; i++) await store.memory.set(`note${i}`, "filler".repeat(50));
  await store.memory.set("victim", "MARKERMARKER".repeat(800));
  await store.close();
  await damage(tmp.home, "MARKERMARKER");
  await using server = await startHttpServer({ home: tmp.home });
  const ready = await fetch(`${server.url}/health/ready`);
  assertEquals(ready.status, 200, await ready.text());
  const call = (key: string) =>
    fetch(`${server.url}/tools/memory_get`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key }),
    }).then(async (r) => ({ status: r.status, body: await r.json() }));
  const victim = await call("victim");
  assertEquals([victim.status, victim.body.error.code], [500, "STORE_CORRUPT"]);
  assertStringIncludes(victim.body.error.message, '"victim"');
  const other = await call("note3");
  assertEquals([other.status, other.body.structuredContent.found], [200, true]);
});

Deno.test("a damaged audit entry: audit verify names its seq, the server still starts", async () => {
  await using tmp = await tempHome();
  const first = await startHttpServer({ home: tmp.home });
  const post = (url: string, body: unknown) =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    }).then((r) => r.body?.cancel());
  for (let i = 0; i < 5; i++) await post(`${first.url}/tools/memory_get`, { key: `k${i}` });
  // A call whose arguments only the audit entry keeps (the request is refused, and audited).
  await post(`${first.url}/tools/http_request`, {
    url: `http://127.0.0.1:9/${"AUDITMARK".repeat(300)}`,
  });
  for (let i = 5; i < 8; i++) await post(`${first.url}/tools/memory_get`, { key: `k${i}` });
  await first.stop();
  await damage(tmp.home, "AUDITMARK");
  const verify = await runCli(["audit", "verify"], { home: tmp.home });
  assertEquals(verify.code, 1, verify.stdout + verify.stderr);
  assertMatch(verify.stdout + verify.stderr, /seq 6\b|[Ee]ntry 6\b/);
  assertEquals(verify.stderr.includes("internal error"), false, verify.stderr);
  await using again = await startHttpServer({ home: tmp.home });
  const ready = await fetch(`${again.url}/health/ready`);
  assertEquals(ready.status, 200, await ready.text());
});
