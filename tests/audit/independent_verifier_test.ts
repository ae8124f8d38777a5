/**
 * Pins the independent verifier to known answers: Go's sumdb/note reference
 * key and note, the Certificate Transparency (RFC 6962 / RFC 9162) tree
 * vectors, proofs from a small RFC 9162 reference prover kept here (not in the
 * verifier), and checkpoints and receipts signed here with fresh keys.
 */
import { assert, assertEquals, assertRejects, assertThrows } from "../_asserts.ts";
import {
  entryLeaf,
  fromBase64,
  leafHash,
  nodeHash,
  openCheckpoint,
  parseVerifierKey,
  type Receipt,
  rootFromLeaves,
  toBase64,
  verifyConsistency,
  verifyInclusion,
  verifyNoteSignatures,
  verifyReceipt,
} from "./_independent_verifier.ts";

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
const flip = (b: Uint8Array, at = 0) => b.map((x, i) => i === at ? x ^ 1 : x);
const enc = new TextEncoder();

// ------------------------------------------------------------ signed notes

const PETER_KEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const PETER_TEXT = "If you think cryptography is the answer to your problem,\n" +
  "then you don't know what your problem is.\n";
const PETER_SIG =
  "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
const PETER_NOTE = PETER_TEXT + "\n" + PETER_SIG;

Deno.test("verifier key: the Go reference key parses; malformed keys throw", async () => {
  const key = await parseVerifierKey(PETER_KEY);
  assertEquals(key.name, "PeterNeumann");
  assertEquals(hex(key.keyId), "c74f20a3");
  assertEquals(key.publicKey.length, 32);
  const [name, id, b64] = PETER_KEY.split("+");
  const raw = fromBase64(b64);
  for (
    const bad of [
      "",
      "PeterNeumann",
      `${name}+${id}`,
      `${name}+c74f20a4+${b64}`, // wrong key id
      `${name}+c74f20a+${b64}`,
      `Peter Neumann+${id}+${b64}`,
      `+${id}+${b64}`,
      `${name}+${id}+${toBase64(Uint8Array.of(2, ...raw.subarray(1)))}`, // algorithm byte
      `${name}+${id}+${toBase64(raw.subarray(0, 32))}`, // short key
      `${name}+${id}+${b64.slice(0, -1)}`, // bad base64
      `Peter+${id}+${b64}`, // id is bound to the name
    ]
  ) {
    await assertRejects(() => parseVerifierKey(bad));
  }
  // Algorithm byte 0x02 with a key id that is right for it: still not an Ed25519 key.
  const alg2 = Uint8Array.of(2, ...raw.subarray(1));
  const id2 = new Uint8Array(
    await crypto.subtle.digest("SHA-256", Uint8Array.of(...enc.encode(name + "\n"), ...alg2)),
  ).subarray(0, 4);
  await assertRejects(
    () => parseVerifierKey(`${name}+${hex(id2)}+${toBase64(alg2)}`),
    Error,
    "algorithm",
  );
});

Deno.test("signed note: Go's PeterNeumann note verifies; any changed byte is refused", async () => {
  assertEquals(await verifyNoteSignatures(PETER_NOTE, [PETER_KEY]), {
    text: PETER_TEXT,
    signedBy: ["PeterNeumann"],
  });
  await assertRejects(() =>
    verifyNoteSignatures(PETER_NOTE.replace("problem,", "problem."), [PETER_KEY])
  );
  await assertRejects(() =>
    verifyNoteSignatures(PETER_NOTE.replace("x08go", "x08gp"), [PETER_KEY])
  );
  await assertRejects(() => verifyNoteSignatures(PETER_NOTE.replace("— ", "- "), [PETER_KEY]));
  await assertRejects(() => verifyNoteSignatures(PETER_NOTE.slice(0, -1), [PETER_KEY]));
  await assertRejects(() => verifyNoteSignatures(PETER_TEXT + PETER_SIG, [PETER_KEY]));
  await assertRejects(() => verifyNoteSignatures(PETER_NOTE.replace("If", "I\tf"), [PETER_KEY]));
  // Every byte of the note, changed one at a time, breaks it.
  const bytes = enc.encode(PETER_NOTE);
  for (let i = 0; i < bytes.length; i++) {
    const changed = new TextDecoder().decode(flip(bytes, i));
    await assertRejects(() => verifyNoteSignatures(changed, [PETER_KEY]));
  }
});

Deno.test("signed note: other keys' signatures are skipped, but one known signature is needed", async () => {
  const other = await newSigner("Other");
  const cosigned = PETER_NOTE + await signatureLine(other, PETER_TEXT);
  assertEquals((await verifyNoteSignatures(cosigned, [PETER_KEY])).signedBy, ["PeterNeumann"]);
  assertEquals((await verifyNoteSignatures(cosigned, [other.vkey])).signedBy, ["Other"]);
  assertEquals((await verifyNoteSignatures(cosigned, [PETER_KEY, other.vkey])).signedBy, [
    "PeterNeumann",
    "Other",
  ]);
  await assertRejects(() => verifyNoteSignatures(PETER_NOTE, [other.vkey]), Error, "no signature");
  await assertRejects(() => verifyNoteSignatures(PETER_NOTE, []), Error, "no signature");
  // A same-named key with another id is a different key: skipped, not accepted.
  const impostor = await newSigner("PeterNeumann");
  await assertRejects(
    () => verifyNoteSignatures(PETER_NOTE, [impostor.vkey]),
    Error,
    "no signature",
  );
  // A bad signature by a given key is an error even when another given key's verifies.
  const spoiled = cosigned.replace("ZJkuBS9UG", "ZJkuBS9UH"); // a signature byte, not the key id
  await assertRejects(
    () => verifyNoteSignatures(spoiled, [PETER_KEY, other.vkey]),
    Error,
    "invalid signature by PeterNeumann",
  );
  assertEquals((await verifyNoteSignatures(spoiled, [other.vkey])).signedBy, ["Other"]);
  // The same signature twice is one signer.
  const twice = PETER_NOTE + PETER_SIG;
  assertEquals((await verifyNoteSignatures(twice, [PETER_KEY])).signedBy, ["PeterNeumann"]);
});

// ------------------------------------------------------------ Merkle trees

const CT_LEAVES = [
  "",
  "00",
  "10",
  "2021",
  "3031",
  "40414243",
  "5051525354555657",
  "606162636465666768696a6b6c6d6e6f",
].map(unhex);
const CT_ROOTS = [
  "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
  "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
  "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
  "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
  "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
  "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
  "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
  "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
];
const EMPTY_ROOT = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/** MTH of a run of distinct leaves, memoized by its first leaf and length (a test speed-up). */
const mthMemo = new Map<string, Promise<Uint8Array>>();
function mth(d: Uint8Array[]): Promise<Uint8Array> {
  const key = `${d.length ? hex(d[0]) : ""}/${d.length}`;
  if (!mthMemo.has(key)) mthMemo.set(key, rootFromLeaves(d));
  return mthMemo.get(key)!;
}

/** RFC 9162 §2.1.3.1 PATH(m, D[n]) over leaf hashes. */
async function refPath(m: number, d: Uint8Array[]): Promise<Uint8Array[]> {
  if (d.length === 1) return [];
  const k = splitPoint(d.length);
  return m < k
    ? [...await refPath(m, d.slice(0, k)), await mth(d.slice(k))]
    : [...await refPath(m - k, d.slice(k)), await mth(d.slice(0, k))];
}

/** RFC 9162 §2.1.4.1 SUBPROOF(m, D[n], b) over leaf hashes. */
async function refSubproof(m: number, d: Uint8Array[], b: boolean): Promise<Uint8Array[]> {
  if (m === d.length) return b ? [] : [await mth(d)];
  const k = splitPoint(d.length);
  return m <= k
    ? [...await refSubproof(m, d.slice(0, k), b), await mth(d.slice(k))]
    : [...await refSubproof(m - k, d.slice(k), false), await mth(d.slice(0, k))];
}

function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** The CT leaves, then more, to 40. */
async function leafHashes(): Promise<Uint8Array[]> {
  const data = [...CT_LEAVES];
  for (let i = data.length; i < 40; i++) data.push(enc.encode(`leaf ${i}`));
  return await Promise.all(data.map(leafHash));
}

Deno.test("Merkle: the CT reference roots for sizes 1..8, and the empty tree", async () => {
  const leaves = await leafHashes();
  for (let n = 1; n <= 8; n++) {
    assertEquals(hex(await rootFromLeaves(leaves.slice(0, n))), CT_ROOTS[n - 1], `size ${n}`);
  }
  assertEquals(hex(await rootFromLeaves([])), EMPTY_ROOT);
  assertEquals(
    hex(await nodeHash(leaves[0], leaves[1])),
    CT_ROOTS[1],
  );
});

Deno.test("Merkle: the CT reference inclusion and consistency proofs", async () => {
  const leaves = (await leafHashes()).slice(0, 8);
  const roots = CT_ROOTS.map(unhex);
  const inclusion: [number, number, string[]][] = [
    [0, 8, [
      "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ]],
    [5, 8, [
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]],
    [2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]],
    [1, 5, [
      "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ]],
  ];
  for (const [m, n, path] of inclusion) {
    assertEquals((await refPath(m, leaves.slice(0, n))).map(hex), path);
    assert(await verifyInclusion(m, n, leaves[m], path.map(unhex), roots[n - 1]), `${m}@${n}`);
  }
  const consistency: [number, number, string[]][] = [
    [1, 1, []],
    [1, 8, inclusion[0][2]],
    [6, 8, [
      "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]],
    [2, 5, [
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ]],
  ];
  for (const [m, n, proof] of consistency) {
    assertEquals((await refSubproof(m, leaves.slice(0, n), true)).map(hex), proof);
    const ok = await verifyConsistency(m, n, roots[m - 1], roots[n - 1], proof.map(unhex));
    assert(ok, `${m}->${n}`);
  }
});

Deno.test("Merkle: every inclusion proof up to size 40 verifies; tampered ones do not", async () => {
  const all = await leafHashes();
  let checked = 0;
  for (let n = 1; n <= 40; n++) {
    const leaves = all.slice(0, n);
    const root = await rootFromLeaves(leaves);
    const otherRoot = await rootFromLeaves(all.slice(0, n - 1));
    for (let m = 0; m < n; m++) {
      const proof = await refPath(m, leaves);
      assert(await verifyInclusion(m, n, leaves[m], proof, root), `${m}@${n}`);
      checked++;
      const refused = async (
        i: number,
        size: number,
        leaf: Uint8Array,
        p: Uint8Array[],
        r = root,
      ) => assert(!(await verifyInclusion(i, size, leaf, p, r)), `tampered ${m}@${n}`);
      for (let j = 0; j < proof.length; j++) {
        await refused(m, n, leaves[m], proof.map((h, k) => k === j ? flip(h, j) : h));
      }
      if (proof.length > 0) {
        await refused(m, n, leaves[m], proof.slice(0, -1));
        await refused(m, n, leaves[m], proof.slice(1));
      }
      await refused(m, n, leaves[m], [...proof, root]);
      await refused(m, n, flip(leaves[m], 31), proof);
      await refused(m, n, leaves[m], proof, flip(root, 5));
      await refused(m, n, leaves[m], proof, otherRoot);
      if (n > 1) await refused((m + 1) % n, n, leaves[m], proof);
      await refused(n, n, leaves[m], proof);
      await refused(m, m, leaves[m], proof);
      await refused(-1, n, leaves[m], proof);
      await refused(m + 0.5, n, leaves[m], proof);
    }
  }
  assertEquals(checked, 820);
  assert(!(await verifyInclusion(0, 0, all[0], [], unhex(EMPTY_ROOT))));
  assert(!(await verifyInclusion(0, 1, all[0], [], all[0].subarray(1))));
  // A proof too short for the tree size (sn not 0 at the end, §2.1.3.2 step 5).
  assert(!(await verifyInclusion(0, 2, all[0], [], all[0])));
  assert(!(await verifyInclusion(2, 3, all[2], [], all[2])));
  // A proof too long for the tree size (sn reaches 0 early, step 4a): the size-2 root as size 1's.
  assert(!(await verifyInclusion(0, 1, all[1], [all[0]], await nodeHash(all[0], all[1]))));
  assert(!(await verifyInclusion(4, 6, all[4], [all[5]], await nodeHash(all[4], all[5]))));
});

Deno.test("Merkle: every consistency proof up to size 40 verifies; tampered ones do not", async () => {
  const all = await leafHashes();
  const roots: Uint8Array[] = [unhex(EMPTY_ROOT)];
  for (let n = 1; n <= 40; n++) roots.push(await rootFromLeaves(all.slice(0, n)));
  let checked = 0;
  for (let n = 1; n <= 40; n++) {
    const leaves = all.slice(0, n);
    for (let m = 0; m <= n; m++) {
      const proof = m === 0 ? [] : await refSubproof(m, leaves, true);
      assert(await verifyConsistency(m, n, roots[m], roots[n], proof), `${m}->${n}`);
      checked++;
      const refused = async (
        s1: number,
        s2: number,
        r1: Uint8Array,
        r2: Uint8Array,
        p: Uint8Array[],
      ) => assert(!(await verifyConsistency(s1, s2, r1, r2, p)), `tampered ${m}->${n}`);
      for (let j = 0; j < proof.length; j++) {
        await refused(m, n, roots[m], roots[n], proof.map((h, k) => k === j ? flip(h, 7) : h));
      }
      if (proof.length > 0) {
        await refused(m, n, roots[m], roots[n], proof.slice(0, -1));
        await refused(m, n, roots[m], roots[n], proof.slice(1));
      }
      await refused(m, n, roots[m], roots[n], [...proof, roots[n]]);
      await refused(m, n, flip(roots[m]), roots[n], proof);
      // (The empty tree is a prefix of every tree: size 0 does not constrain root2.)
      if (m > 0) await refused(m, n, roots[m], flip(roots[n], 31), proof);
      if (m !== n) {
        await refused(m, n, roots[n], roots[n], proof);
        await refused(n, m, roots[n], roots[m], proof);
      }
      // (0 -> 1 with no proof is genuinely consistent, so skip that one.)
      if (m > 1 || (m === 1 && n > 1)) await refused(m - 1, n, roots[m - 1], roots[n], proof);
      if (m > 0 && m < n) await refused(m, n - 1, roots[m], roots[n - 1], proof);
    }
  }
  assertEquals(checked, 860);
  // A proof too short for the sizes (sn not 0 at the end, §2.1.4.2 step 7): PROOF(1, 2) as 1 -> 3.
  assert(!(await verifyConsistency(1, 3, all[0], roots[2], [all[1]])));
  // A proof too long for the sizes (sn reaches 0 early, step 6a): without that check these four
  // hashes would "prove" 6 -> 7 for a forged root2.
  const [l4, l5, m03, junk] = [all[4], all[5], roots[4], all[9]];
  const forged = await nodeHash(m03, await nodeHash(l4, await nodeHash(l5, junk)));
  assertEquals(await nodeHash(m03, await nodeHash(l4, l5)), roots[6]);
  assert(!(await verifyConsistency(6, 7, roots[6], forged, [l5, junk, l4, m03])));
});

// ------------------------------------------------------------ checkpoints

interface Signer {
  name: string;
  vkey: string;
  keyId: Uint8Array;
  privateKey: CryptoKey;
}

async function newSigner(name: string): Promise<Signer> {
  const pair = await crypto.subtle.generateKey("Ed25519", true, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const pub = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  const key = Uint8Array.of(0x01, ...pub);
  const digest = await crypto.subtle.digest(
    "SHA-256",
    Uint8Array.of(...enc.encode(name + "\n"), ...key),
  );
  const keyId = new Uint8Array(digest).slice(0, 4);
  return {
    name,
    vkey: `${name}+${hex(keyId)}+${toBase64(key)}`,
    keyId,
    privateKey: pair.privateKey,
  };
}

async function sign(signer: Signer, message: string): Promise<string> {
  const sig = await crypto.subtle.sign("Ed25519", signer.privateKey, enc.encode(message));
  return toBase64(Uint8Array.of(...signer.keyId, ...new Uint8Array(sig)));
}

async function signatureLine(signer: Signer, text: string): Promise<string> {
  return `— ${signer.name} ${await sign(signer, text)}\n`;
}

async function signNote(text: string, ...signers: Signer[]): Promise<string> {
  let note = text + "\n";
  for (const s of signers) note += await signatureLine(s, text);
  return note;
}

Deno.test("checkpoint: a C2SP checkpoint signed here opens; changed ones are refused", async () => {
  const log = await newSigner("example.com/toolgate");
  const root = unhex(CT_ROOTS[4]);
  const body = `example.com/toolgate\n5\n${toBase64(root)}\n`;
  const text = body + "— note: an extension line\n";
  const note = await signNote(text, log);
  assertEquals(await openCheckpoint(note, [log.vkey]), {
    origin: "example.com/toolgate",
    size: 5,
    root,
    extensions: ["— note: an extension line"],
    signedBy: ["example.com/toolgate"],
  });
  assertEquals((await openCheckpoint(await signNote(body, log), [log.vkey])).extensions, []);

  await assertRejects(() =>
    openCheckpoint(note.replace("example.com/", "example.org/"), [log.vkey])
  );
  await assertRejects(() => openCheckpoint(note.replace("\n5\n", "\n6\n"), [log.vkey]));
  const otherRoot = toBase64(unhex(CT_ROOTS[5]));
  await assertRejects(() => openCheckpoint(note.replace(toBase64(root), otherRoot), [log.vkey]));
  await assertRejects(() => openCheckpoint(note.replace("extension", "Extension"), [log.vkey]));
  const other = await newSigner("example.com/toolgate");
  const byOther = await signNote(text, other);
  await assertRejects(
    () => openCheckpoint(byOther, [log.vkey]),
    Error,
    "no signature",
  );
  await assertRejects(() => openCheckpoint(note, [other.vkey]), Error, "no signature");
  // A cosignature by a second key is reported when that key is given too.
  const witness = await newSigner("witness.example");
  const cosigned = await signNote(text, log, witness);
  assertEquals((await openCheckpoint(cosigned, [log.vkey, witness.vkey])).signedBy, [
    "example.com/toolgate",
    "witness.example",
  ]);
  assertEquals((await openCheckpoint(cosigned, [log.vkey])).signedBy, ["example.com/toolgate"]);
});

Deno.test("checkpoint: properly signed but malformed bodies are refused", async () => {
  const log = await newSigner("log");
  const r = toBase64(unhex(CT_ROOTS[0]));
  for (
    const bad of [
      `log\n1\n`,
      `\n1\n${r}\n`,
      `log\n01\n${r}\n`,
      `log\n-1\n${r}\n`,
      `log\n1.0\n${r}\n`,
      `log\n 1\n${r}\n`,
      `log\n99999999999999999999\n${r}\n`,
      `log\n1\n${r.slice(0, -1)}\n`,
      `log\n1\n${toBase64(new Uint8Array(31))}\n`,
      `log\n1\n${unhex(CT_ROOTS[0]).length}\n`,
      `log\n1\n${r}\next\n\next\n`,
    ]
  ) {
    const signed = await signNote(bad, log);
    await assertRejects(() => openCheckpoint(signed, [log.vkey]), Error);
  }
  const zero = await openCheckpoint(
    await signNote(`log\n0\n${toBase64(unhex(EMPTY_ROOT))}\n`, log),
    [
      log.vkey,
    ],
  );
  assertEquals(zero.size, 0);
});

// ------------------------------------------------------------ toolgate

Deno.test("entryLeaf: the 32 digest bytes of a sha256: entry hash; malformed ones throw", async () => {
  const digest = "ab".repeat(32);
  assertEquals(hex(entryLeaf(`sha256:${digest}`)), digest);
  assertEquals(
    hex(await leafHash(entryLeaf(`sha256:${digest}`))),
    hex(await leafHash(unhex(digest))),
  );
  for (
    const bad of [
      digest,
      `sha256:${"AB".repeat(32)}`,
      `sha256:${digest}0`,
      `sha256:${digest.slice(2)}`,
      "",
    ]
  ) {
    assertThrows(() => entryLeaf(bad));
  }
});

function receiptMessage(f: Omit<Receipt, "signature">): string {
  return `toolgate-receipt/v1\n${f.log}\n${f.seq}\n${f.entry_hash}\n${f.timestamp}\n`;
}

Deno.test("receipt: one signed here verifies; each field changed is refused", async () => {
  const log = await newSigner("toolgate.example/audit");
  const fields = {
    log: "toolgate.example/audit",
    seq: 41,
    entry_hash: `sha256:${"0f".repeat(32)}`,
    timestamp: "2025-01-02T03:04:05.678Z",
  };
  const signature = await sign(log, receiptMessage(fields));
  const receipt: Receipt = { ...fields, signature };
  assert(await verifyReceipt(receipt, [log.vkey]));
  const other = await newSigner("other");
  assert(await verifyReceipt(receipt, [other.vkey, log.vkey]));
  const changed: Receipt[] = [
    { ...receipt, log: "toolgate.example/audit2" },
    { ...receipt, seq: 42 },
    { ...receipt, seq: -41 },
    { ...receipt, entry_hash: `sha256:${"0f".repeat(31)}0e` },
    { ...receipt, entry_hash: `sha256:${"0F".repeat(32)}` },
    { ...receipt, timestamp: "2025-01-02T03:04:05.679Z" },
    { ...receipt, signature: toBase64(flip(fromBase64(signature), 10)) },
    { ...receipt, signature: toBase64(flip(fromBase64(signature), 0)) },
    { ...receipt, signature: signature.slice(0, -4) },
    { ...receipt, signature: "not base64" },
  ];
  for (const r of changed) assert(!(await verifyReceipt(r, [log.vkey])), JSON.stringify(r));
  assert(!(await verifyReceipt(receipt, [other.vkey])));
  // The same key under another name is not the log's key.
  const renamed = log.vkey.replace("toolgate.example/audit", "other");
  await assertRejects(() => verifyReceipt(receipt, [renamed]));
  // A valid signature by a key named otherwise than the receipt's log is refused.
  const asOther = { ...fields, log: "other" };
  assert(
    await verifyReceipt({ ...asOther, signature: await sign(other, receiptMessage(asOther)) }, [
      other.vkey,
    ]),
  );
  const misnamed = { ...receipt, signature: await sign(other, receiptMessage(fields)) };
  assert(!(await verifyReceipt(misnamed, [other.vkey])));
});

Deno.test("base64: standard padded round trip; invalid input is rejected", () => {
  for (const n of [0, 1, 2, 3, 4, 32, 68]) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 37 + 250) % 256);
    assertEquals(fromBase64(toBase64(bytes)), bytes);
  }
  assertEquals(toBase64(Uint8Array.of(0xfb, 0xff)), "+/8=");
  for (const bad of ["abc", "ab=c", "ab==c", "QR==", "-_8=", "+/8", " +/8=", "+/8=\n", "===="]) {
    assertThrows(() => fromBase64(bad));
  }
});
