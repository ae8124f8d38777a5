/**
 * C2SP signed notes against Go's `sumdb/note` reference vector (the
 * PeterNeumann key and note), then round trips and one change at a time.
 */
import { Buffer } from "node:buffer";
import { assertEquals, assertRejects, assertThrows } from "../_asserts.ts";
import { noteSigner, openNote, parseVerifierKey, signNote } from "../../src/audit/signed_note.ts";

const VERIFIER_KEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const SIGNER_SEED = new Uint8Array(
  Buffer.from("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz", "base64").subarray(1),
);
const TEXT = "If you think cryptography is the answer to your problem,\n" +
  "then you don't know what your problem is.\n";
const NOTE = TEXT + "\n" +
  "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

Deno.test("the reference key and note: same verifier key, same signature, and it opens", async () => {
  const signer = await noteSigner("PeterNeumann", SIGNER_SEED);
  assertEquals(signer.verifierKey, VERIFIER_KEY);
  assertEquals(signer.id, 0xc74f20a3);
  // Ed25519 is deterministic: the same key signs the same bytes.
  assertEquals(await signNote(TEXT, [signer]), NOTE);
  const opened = await openNote(NOTE, [parseVerifierKey(VERIFIER_KEY)]);
  assertEquals(opened, { text: TEXT, verifiedBy: ["PeterNeumann"] });
});

Deno.test("a changed text, signature, or key is refused; unknown keys' signatures are skipped", async () => {
  const verifier = parseVerifierKey(VERIFIER_KEY);
  await assertRejects(() => openNote(NOTE.replace("cryptography", "Cryptography"), [verifier]));
  await assertRejects(() => openNote(NOTE.replace("x08go", "x08gp"), [verifier]));
  const other = await noteSigner("Other", new Uint8Array(32).fill(3));
  await assertRejects(() => openNote(NOTE, [parseVerifierKey(other.verifierKey)]));
  // Two signatures: the one of a known key verifies, the other is skipped.
  const both = await signNote(TEXT, [other, await noteSigner("PeterNeumann", SIGNER_SEED)]);
  assertEquals((await openNote(both, [verifier])).verifiedBy, ["PeterNeumann"]);
  await assertRejects(() => signNote("no newline", [other]));
  await assertRejects(() => openNote(TEXT, [verifier]), Error, "Malformed note");
});

Deno.test("parseVerifierKey() refuses a wrong key ID, another key type, or a malformed key", () => {
  assertThrows(
    () => parseVerifierKey(VERIFIER_KEY.replace("c74f20a3", "c74f20a4")),
    "does not match",
  );
  const typed = Buffer.from("ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "base64");
  typed[0] = 0x04;
  assertThrows(
    () => parseVerifierKey(`PeterNeumann+c74f20a3+${typed.toString("base64")}`),
    "not an Ed25519",
  );
  assertThrows(() => parseVerifierKey("no-plus-signs"), "Invalid verifier key");
});
