import { assertEquals } from "../_asserts.ts";
import { createHmac } from "node:crypto";
import { HmacSha256Key } from "../../src/webhooks/_hmac_sha256.ts";

const encoder = new TextEncoder();

function bytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + seed * 17 + (i >> 3)) & 0xff;
  return out;
}

function reference(key: Uint8Array, text: string, body: Uint8Array, encoding: "hex" | "base64") {
  return createHmac("sha256", key).update(text).update(body).digest(encoding);
}

Deno.test("HmacSha256Key matches RFC 4231 test cases 1, 2 and 6 (a key longer than a block)", () => {
  const case1 = new HmacSha256Key(new Uint8Array(20).fill(0x0b));
  assertEquals(
    case1.digest("Hi There", new Uint8Array(), "hex"),
    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
  );
  const case2 = new HmacSha256Key(encoder.encode("Jefe"));
  assertEquals(
    case2.digest("", encoder.encode("what do ya want for nothing?"), "hex"),
    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
  );
  const case6 = new HmacSha256Key(new Uint8Array(131).fill(0xaa));
  assertEquals(
    case6.digest("Test Using Larger Than Block-Size Key - Hash Key First", new Uint8Array(), "hex"),
    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
  );
});

Deno.test("HmacSha256Key equals node:crypto for keys and messages around every block boundary", () => {
  const keyLengths = [0, 1, 32, 63, 64, 65, 100, 200];
  const bodyLengths = [0, 1, 54, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 300, 1000];
  const texts = ["", "evt_01j.1764240000.", "é→漢字.", "x".repeat(600)];
  for (const keyLength of keyLengths) {
    const keyBytes = bytes(keyLength, keyLength);
    const key = new HmacSha256Key(keyBytes);
    for (const bodyLength of bodyLengths) {
      const body = bytes(bodyLength, bodyLength + 1);
      for (const text of texts) {
        for (const encoding of ["hex", "base64"] as const) {
          assertEquals(
            key.digest(text, body, encoding),
            reference(keyBytes, text, body, encoding),
            `key ${keyLength} B, text ${text.length} chars, body ${bodyLength} B, ${encoding}`,
          );
        }
      }
    }
  }
});

Deno.test("HmacSha256Key keeps no state between digests, and copies its key", () => {
  const keyBytes = encoder.encode("whsec-key");
  const key = new HmacSha256Key(keyBytes);
  const other = new HmacSha256Key(encoder.encode("another key"));
  const body = bytes(77, 3);
  const first = key.digest("a.", body, "base64");
  other.digest("b.", bytes(200, 9), "hex");
  keyBytes.fill(0);
  assertEquals(key.digest("a.", body, "base64"), first);
  assertEquals(first, reference(encoder.encode("whsec-key"), "a.", body, "base64"));
});
