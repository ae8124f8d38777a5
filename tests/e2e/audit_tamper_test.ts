/**
 * Rewriting the store is caught from what was published before: a real
 * server writes checkpoints to its history file, then the store is rolled
 * back, truncated or rewritten and re-chained, and `toolgate audit verify`
 * (against the history, or `--checkpoint` a file) fails saying which.
 *
 * @module
 */
import { assertEquals, assertStringIncludes } from "../_asserts.ts";
import { runCli, tempHome } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";
import { memorySet } from "./_audit.ts";
import { createAuditLog } from "../../src/audit/mod.ts";
import { openKvStore } from "../../src/store/kv/kv_store.ts";
import { auditEntryKey, auditHeadKey } from "../../src/store/kv/keys.ts";

async function calls(home: string, from: number, count: number): Promise<void> {
  await using server = await startHttpServer({ home });
  for (let i = from; i < from + count; i++) {
    assertEquals((await memorySet(server.url, i)).status, 200);
  }
  // Stopping makes the last checkpoint.
  assertEquals((await server.stop("SIGTERM")).code, 0);
}

async function copyKv(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const file of Deno.readDir(from)) {
    if (file.name.startsWith("toolgate.kv")) {
      await Deno.copyFile(`${from}/${file.name}`, `${to}/${file.name}`);
    }
  }
}

Deno.test("audit verify catches a rollback, a rewrite and an emptied store from the checkpoint history", async () => {
  await using tmp = await tempHome();
  const home = tmp.home;
  await calls(home, 0, 20);
  const earlier = `${home}-copy`;
  await copyKv(home, earlier);
  await calls(home, 20, 15);
  const history = await Deno.readTextFile(`${home}/checkpoints.log`);
  const sizes = history.trim().split("\n").map((line) => JSON.parse(line).size);
  assertEquals(sizes.at(-1), 35);
  assertEquals((await Deno.stat(`${home}/checkpoints.log`)).mode! & 0o777, 0o600);
  // Untouched: passes, against the history and a checkpoint file alike.
  const ok = await runCli(["audit", "verify"], { home });
  assertEquals(ok.code, 0, ok.stderr);
  assertStringIncludes(ok.stdout, "Audit tree intact: 35 entries");
  await Deno.writeTextFile(`${home}-cp.txt`, JSON.parse(history.trim().split("\n").at(-1)!).note);
  const fromFile = await runCli(["audit", "verify", "--checkpoint", `${home}-cp.txt`], { home });
  assertEquals(fromFile.code, 0, fromFile.stderr);

  // Rolled back to the copy taken at 20 entries: smaller than what was published.
  const saved = `${home}-saved`;
  await copyKv(home, saved);
  await copyKv(earlier, home);
  const rolledBack = await runCli(["audit", "verify"], { home });
  assertEquals(rolledBack.code, 1);
  assertStringIncludes(rolledBack.stderr, "truncated");
  assertStringIncludes(rolledBack.stderr, "covers 35 entries, the store holds 20");
  await copyKv(saved, home);

  // Rewritten from seq 10 and re-chained, the tree rebuilt to match: another root.
  {
    const store = await openKvStore({ dataDir: home });
    const log = createAuditLog({ store });
    const ninth = await log.get(9);
    for (let seq = 10; seq <= 35; seq++) {
      for await (const part of store.kv.list({ prefix: auditEntryKey(seq) })) {
        await store.kv.delete(part.key);
      }
    }
    for await (const tile of store.kv.list({ prefix: ["audit", "tile"] })) {
      await store.kv.delete(tile.key);
    }
    await store.kv.set(auditHeadKey(), {
      seq: 9,
      hash: ninth!.entry_hash,
      timestamp: ninth!.timestamp,
    });
    const forged = createAuditLog({ store });
    for (let i = 0; i < 26; i++) {
      await forged.append({
        kind: "tool.call",
        tool: "memory_set",
        input: { forged: i },
        outcome: { ok: true, latency_ms: 1 },
      });
    }
    await forged.close();
    assertEquals((await forged.verify()).ok, true, "the chain alone still verifies");
    await log.close();
    store.close();
  }
  const rewritten = await runCli(["audit", "verify", "--checkpoint", `${home}-cp.txt`], { home });
  assertEquals(rewritten.code, 1);
  assertStringIncludes(rewritten.stderr, "does not extend the checkpoint");
  assertStringIncludes(rewritten.stderr, "rolled back, forked or rewritten");
  // Emptied: the store and its marker gone, a fresh one in their place; the history remains.
  for await (const file of Deno.readDir(home)) {
    if (file.name.startsWith("toolgate.kv")) await Deno.remove(`${home}/${file.name}`);
  }
  const emptied = await runCli(["audit", "verify"], { home });
  assertEquals(emptied.code, 1);
  assertStringIncludes(emptied.stderr, "covers 35 entries, the store holds 0");
  for (const dir of [earlier, saved]) await Deno.remove(dir, { recursive: true });
  await Deno.remove(`${home}-cp.txt`);
});
