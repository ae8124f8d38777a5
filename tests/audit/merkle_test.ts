/**
 * The RFC 9162 tree hash and proofs against the Certificate Transparency
 * reference vectors (RFC 6962's test data, as the Go and C++ reference
 * implementations use it), then every proof of many tree sizes made and
 * verified, and one changed byte anywhere refused.
 */
import { Buffer } from "node:buffer";
import { assert, assertEquals } from "../_asserts.ts";
import {
  consistencyProof,
  inclusionProof,
  leafHash,
  rootOf,
  verifyConsistency,
  verifyInclusion,
} from "../../src/audit/merkle.ts";

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");
const unhex = (text: string) => new Uint8Array(Buffer.from(text, "hex"));

const DATA = [
  "",
  "00",
  "10",
  "2021",
  "3031",
  "40414243",
  "5051525354555657",
  "606162636465666768696a6b6c6d6e6f",
].map(unhex);
const LEAVES = DATA.map(leafHash);

/** Roots of the trees of 0 to 8 of those leaves. */
const ROOTS = [
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
  "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
  "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
  "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
  "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
  "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
  "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
  "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
];

Deno.test("rootOf() gives the reference root of every tree of 0 to 8 leaves", () => {
  for (let n = 0; n <= 8; n++) assertEquals(hex(rootOf(LEAVES.slice(0, n))), ROOTS[n], `size ${n}`);
});

Deno.test("inclusionProof() gives the reference proofs, and they verify", () => {
  const vectors = [
    {
      index: 0,
      proof: [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
      ],
    },
    {
      index: 5,
      proof: [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      ],
    },
  ];
  for (const { index, proof } of vectors) {
    const made = inclusionProof(index, LEAVES);
    assertEquals(made.map(hex), proof, `leaf ${index}`);
    assert(verifyInclusion(index, 8, LEAVES[index], made, unhex(ROOTS[8])));
  }
});

function leaves(n: number): Uint8Array[] {
  return Array.from({ length: n }, (_, i) => leafHash(new Uint8Array([i & 0xff, i >> 8, 7])));
}

function flip(bytes: Uint8Array, at = 0): Uint8Array {
  const copy = new Uint8Array(bytes);
  copy[at] ^= 1;
  return copy;
}

Deno.test("every leaf's inclusion proof verifies in trees of 1 to 40 leaves; a changed byte or index is refused", () => {
  for (let n = 1; n <= 40; n++) {
    const tree = leaves(n);
    const root = rootOf(tree);
    for (let i = 0; i < n; i++) {
      const proof = inclusionProof(i, tree);
      assert(verifyInclusion(i, n, tree[i], proof, root), `leaf ${i} of ${n}`);
      assertEquals(verifyInclusion(i, n, flip(tree[i]), proof, root), false);
      assertEquals(verifyInclusion(i, n, tree[i], proof, flip(root)), false);
      if (proof.length) {
        const bad = proof.map((p, j) => (j === proof.length - 1 ? flip(p, 31) : p));
        assertEquals(verifyInclusion(i, n, tree[i], bad, root), false);
      }
      if (n > 1) assertEquals(verifyInclusion((i + 1) % n, n, tree[i], proof, root), false);
    }
    assertEquals(verifyInclusion(n, n, tree[0], [], root), false, "an index past the size");
  }
});

Deno.test("consistency proofs verify between every pair of sizes up to 24; a rewritten or shorter history is refused", () => {
  for (let n = 1; n <= 24; n++) {
    const tree = leaves(n);
    const root = rootOf(tree);
    for (let m = 0; m <= n; m++) {
      const old = rootOf(tree.slice(0, m));
      const proof = consistencyProof(m, tree);
      assert(verifyConsistency(m, n, old, root, proof), `${m} → ${n}`);
      if (m > 0 && m < n) {
        assertEquals(verifyConsistency(m, n, flip(old), root, proof), false, "old root changed");
        assertEquals(verifyConsistency(m, n, old, flip(root), proof), false, "new root changed");
        // The first m leaves rewritten: the old root no longer matches what was proved.
        const rewritten = [...tree];
        rewritten[m - 1] = flip(rewritten[m - 1]);
        const forged = rootOf(rewritten);
        assertEquals(
          verifyConsistency(m, n, old, forged, consistencyProof(m, rewritten)),
          false,
          `history before ${m} rewritten`,
        );
      }
    }
    assertEquals(verifyConsistency(n, n - 1, root, root, []), false, "a tree that shrank");
  }
});
