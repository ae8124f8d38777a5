/**
 * The worked example of docs/audit.md, byte for byte: leaves, roots,
 * proofs and the signed checkpoint (so the document cannot drift).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { assertEquals, assertStringIncludes } from "../_asserts.ts";
import { formatCheckpoint } from "../../src/audit/checkpoint.ts";
import { consistencyProof, inclusionProof } from "../../src/audit/merkle.ts";
import { noteSigner, signNote } from "../../src/audit/signed_note.ts";
import { entryLeafHash, TreeEdge } from "../../src/audit/tiles.ts";

Deno.test("docs/audit.md's worked example is what the code makes", async () => {
  const doc = await Deno.readTextFile(new URL("../../docs/audit.md", import.meta.url));
  const hashes = ["a", "b", "c"].map((s) =>
    `sha256:${createHash("sha256").update(s).digest("hex")}`
  );
  const leaves = hashes.map(entryLeafHash);
  const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");
  for (const [i, leaf] of leaves.entries()) {
    const row = doc.split("\n").find((line) => line.includes(hashes[i])) ?? "";
    assertStringIncludes(row, `\`${Buffer.from(leaf).toString("hex")}\``);
  }
  const root = TreeEdge.empty().extend(leaves).edge.root();
  assertStringIncludes(doc, b64(root));
  assertEquals(inclusionProof(0, leaves).map(b64), [
    "oNnwpQs1uffX7cV/tk9Hcd3vD+/qyk5vlJoVFNtbE20=",
    "aj/BG3n4Nr2jQOdciQbpYbit9NagiiuZLj84zW/zjr8=",
  ]);
  assertEquals(inclusionProof(2, leaves).map(b64), [
    "rVymzdwLJ8aoPjMr8oARdpI25sah94br97UmezelvSI=",
  ]);
  assertEquals(consistencyProof(2, leaves).map(b64), [
    "aj/BG3n4Nr2jQOdciQbpYbit9NagiiuZLj84zW/zjr8=",
  ]);
  const signer = await noteSigner("toolgate.example/audit", new Uint8Array(32).fill(7));
  assertStringIncludes(doc, `\`${signer.verifierKey}\``);
  const note = await signNote(
    formatCheckpoint({ origin: "toolgate.example/audit", size: 3, root }),
    [signer],
  );
  assertStringIncludes(doc, "```\n" + note + "```");
});
