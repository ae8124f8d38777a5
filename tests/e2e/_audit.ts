/**
 * Helpers of the verifiable-audit end-to-end tests: a REST call that makes
 * one entry, and the leaf hashes of every entry the server serves, computed
 * by the independent verifier.
 *
 * @module
 */
import { assertEquals } from "../_asserts.ts";
import { entryLeaf, leafHash } from "../audit/_independent_verifier.ts";

/** `memory_set` of key `k<i>` over REST: one audit entry. */
export async function memorySet(url: string, i: number): Promise<Response> {
  const response = await fetch(`${url}/tools/memory_set`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key: `k${i}`, value: i }),
  });
  await response.body?.cancel();
  return response;
}

/** The leaf hash of every entry of `GET /audit`, in seq order. */
export async function leavesOf(url: string): Promise<Uint8Array[]> {
  const leaves: Uint8Array[] = [];
  let after = 0;
  for (;;) {
    const response = await fetch(`${url}/audit?after=${after}&limit=1000`);
    assertEquals(response.status, 200);
    const page = await response.json();
    for (const entry of page.entries) leaves.push(await leafHash(entryLeaf(entry.entry_hash)));
    if (page.next === null) return leaves;
    after = page.next;
  }
}
