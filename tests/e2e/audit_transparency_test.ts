/**
 * The verifiable audit log from outside, through the real server over HTTP:
 * checkpoints, receipts and proofs checked by the independent verifier
 * (tests/audit/_independent_verifier.ts, which imports nothing of toolgate).
 *
 * @module
 */
import { assert, assertEquals } from "../_asserts.ts";
import { tempHome, until } from "../_helpers.ts";
import { startHttpServer } from "./_http_server.ts";
import { leavesOf, memorySet } from "./_audit.ts";
import {
  fromBase64,
  openCheckpoint,
  rootFromLeaves,
  verifyConsistency,
  verifyInclusion,
  verifyReceipt,
} from "../audit/_independent_verifier.ts";

interface Entry {
  seq: number;
  entry_hash: string;
  timestamp: string;
}

async function json(url: string): Promise<Record<string, unknown>> {
  const response = await fetch(url);
  assertEquals(response.status, 200, url);
  return await response.json();
}

async function checkpointOf(url: string, keys: string[], size: number) {
  let note = "";
  await until(async () => {
    const response = await fetch(`${url}/audit/checkpoint`);
    note = await response.text();
    return response.status === 200 && (await openCheckpoint(note, keys)).size === size;
  }, `a checkpoint of ${size} entries`);
  return { note, checkpoint: await openCheckpoint(note, keys) };
}

Deno.test("checkpoints, receipts and proofs served over HTTP verify with an independent verifier", async () => {
  await using tmp = await tempHome();
  await using server = await startHttpServer({ home: tmp.home });
  const key = await json(`${server.url}/audit/key`);
  const keys = [key.verifier_key as string];
  assert(String(key.origin).startsWith("toolgate/dep_"));
  assert(keys[0].startsWith(`${key.origin}+`));
  // A checkpoint of the empty log is made at start.
  const empty = await checkpointOf(server.url, keys, 0);
  assertEquals(
    empty.checkpoint.root,
    new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array())),
  );

  const receipts: Record<string, unknown>[] = [];
  for (let i = 0; i < 21; i++) {
    const response = await memorySet(server.url, i);
    assertEquals(response.status, 200);
    const header = response.headers.get("toolgate-receipt");
    assert(header, "a receipt header");
    receipts.push(JSON.parse(new TextDecoder().decode(fromBase64(header))));
  }
  const first = await checkpointOf(server.url, keys, 21);
  assertEquals(first.checkpoint.origin, key.origin);
  const page = await json(`${server.url}/audit?limit=1000`);
  const entries = page.entries as Entry[];
  assertEquals(entries.length, 21);
  const leaves = await leavesOf(server.url);
  assertEquals(first.checkpoint.root, await rootFromLeaves(leaves));

  for (const [i, receipt] of receipts.entries()) {
    assertEquals(receipt.seq, i + 1);
    assertEquals(receipt.entry_hash, entries[i].entry_hash);
    assertEquals(receipt.timestamp, entries[i].timestamp);
    assertEquals(await verifyReceipt(receipt as never, keys), true, `receipt ${i + 1}`);
    // Its entry is in the checkpointed tree.
    const proof = await json(`${server.url}/audit/proof/inclusion?seq=${i + 1}&size=21`);
    assertEquals(proof.leaf_index, i);
    assertEquals(proof.tree_size, 21);
    const hashes = (proof.hashes as string[]).map(fromBase64);
    assertEquals(await verifyInclusion(i, 21, leaves[i], hashes, first.checkpoint.root), true);
  }
  // A failed call is audited too, and carries its receipt.
  const failed = await fetch(`${server.url}/tools/memory_set`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ value: 1 }),
  });
  assertEquals(failed.status, 400);
  await failed.body?.cancel();
  const failedReceipt = JSON.parse(
    new TextDecoder().decode(fromBase64(failed.headers.get("toolgate-receipt")!)),
  );
  assertEquals(failedReceipt.seq, 22);
  assertEquals(await verifyReceipt(failedReceipt, keys), true);
  // A forged receipt fails.
  assertEquals(await verifyReceipt({ ...receipts[0], seq: 2 } as never, keys), false);

  for (let i = 0; i < 12; i++) {
    const response = await fetch(`${server.url}/tools/memory_get`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: `k${i}` }),
    });
    await response.body?.cancel();
  }
  const second = await checkpointOf(server.url, keys, 34);
  const all = await leavesOf(server.url);
  for (const from of [0, 1, 7, 16, 21, 22, 32, 34]) {
    const proof = await json(`${server.url}/audit/proof/consistency?from=${from}&to=34`);
    const root = from === 21 ? first.checkpoint.root : await rootFromLeaves(all.slice(0, from));
    const hashes = (proof.hashes as string[]).map(fromBase64);
    assertEquals(
      await verifyConsistency(from, 34, root, second.checkpoint.root, hashes),
      true,
      `consistency ${from} → 34`,
    );
  }
  // Defaults: the latest checkpoint's size.
  assertEquals((await json(`${server.url}/audit/proof/inclusion?seq=3`)).tree_size, 34);
  // Bad and out-of-range requests.
  assertEquals((await fetch(`${server.url}/audit/proof/inclusion?seq=40&size=33`)).status, 400);
  assertEquals((await fetch(`${server.url}/audit/proof/inclusion?seq=1&size=40`)).status, 404);
  assertEquals((await fetch(`${server.url}/audit/proof/consistency?from=5&to=4`)).status, 400);
  const openapi = await json(`${server.url}/openapi.json`);
  for (
    const path of [
      "/audit/key",
      "/audit/checkpoint",
      "/audit/proof/inclusion",
      "/audit/proof/consistency",
    ]
  ) {
    assert(path in (openapi.paths as Record<string, unknown>), path);
  }
});
