/**
 * Contract: keychain entries. Both record shapes (the file backend's
 * encrypted bytes, an OS keychain's name only) read back as written, bytes
 * as plain `Uint8Array`s; entries list by name; a put replaces.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import type { KeychainRecord } from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

function randomBytes(length: number): Uint8Array<ArrayBuffer> {
  return crypto.getRandomValues(new Uint8Array(length));
}

function fileRecord(dataBytes = 48): KeychainRecord {
  return {
    backend: "file",
    iv: randomBytes(12),
    data: randomBytes(dataBytes),
    updated_at: "2026-01-01T00:00:00.000Z",
  };
}

/** Asserts that `value` is a plain `Uint8Array` (not a subclass such as a driver's `Buffer`). */
function assertPlainBytes(value: unknown, what: string): void {
  assert(value instanceof Uint8Array, `${what} is a Uint8Array`);
  assertEquals(Object.getPrototypeOf(value), Uint8Array.prototype, `${what} is a plain Uint8Array`);
}

/** Cases of the keychain entries. */
export const KEYCHAIN_CONTRACT: readonly ContractCase[] = [
  {
    name: "keychain: entries of both backends read back as written, bytes as plain Uint8Arrays",
    async run({ store, another }) {
      assertEquals(await store.keychain.list(), []);
      assertEquals(await store.keychain.get("slack.token"), null);
      const file = fileRecord();
      const big = fileRecord(60_000); // Deno KV values are limited to 64 KiB
      const os: KeychainRecord = { backend: "secret-tool", updated_at: "2026-01-02T00:00:00.000Z" };
      const mac: KeychainRecord = { backend: "security", updated_at: "2026-01-03T00:00:00.000Z" };
      await store.keychain.put("slack.token", file);
      await store.keychain.put("github.token", os);
      await store.keychain.put("Zed.key", mac);
      await store.keychain.put("big.blob", big);

      const other = await another();
      const read = await other.keychain.get("slack.token");
      assertEquals(read, file);
      assert(read?.backend === "file");
      assertPlainBytes(read.iv, "iv");
      assertPlainBytes(read.data, "data");
      assertEquals(await other.keychain.get("github.token"), os);
      assertEquals(await other.keychain.get("big.blob"), big);

      // By name, byte order (upper case before lower case).
      const listed = await other.keychain.list();
      assertEquals(listed, [
        { name: "Zed.key", record: mac },
        { name: "big.blob", record: big },
        { name: "github.token", record: os },
        { name: "slack.token", record: file },
      ]);
      for (const { record } of listed) {
        if (record.backend !== "file") continue;
        assertPlainBytes(record.iv, "a listed iv");
        assertPlainBytes(record.data, "listed data");
      }
    },
  },
  {
    name:
      "keychain: put() replaces an entry, also across backends; delete() says whether it existed",
    async run({ store, another }) {
      const other = await another();
      await store.keychain.put("slack.token", fileRecord());
      const replaced = fileRecord();
      await other.keychain.put("slack.token", replaced);
      assertEquals(await store.keychain.get("slack.token"), replaced);
      const os: KeychainRecord = { backend: "secret-tool", updated_at: "2026-02-01T00:00:00.000Z" };
      await store.keychain.put("slack.token", os);
      assertEquals(await other.keychain.get("slack.token"), os, "no bytes are left over");
      const back = fileRecord(16);
      await other.keychain.put("slack.token", back);
      assertEquals(await store.keychain.get("slack.token"), back);
      assertEquals((await store.keychain.list()).length, 1);

      assertEquals(await other.keychain.delete("slack.token"), true);
      assertEquals(await store.keychain.delete("slack.token"), false);
      assertEquals(await store.keychain.delete("never.set"), false);
      assertEquals(await store.keychain.get("slack.token"), null);
      assertEquals(await other.keychain.list(), []);
    },
  },
  {
    name: "keychain: put() refuses a record that does not match its backend's shape",
    async run({ store }) {
      const noBytes = { backend: "file", updated_at: "2026-01-01T00:00:00.000Z" };
      await assertRejects(() => store.keychain.put("a.b", noBytes as unknown as KeychainRecord));
      const bytesAsArray = { ...fileRecord(), iv: [1, 2, 3] };
      await assertRejects(() =>
        store.keychain.put("a.b", bytesAsArray as unknown as KeychainRecord)
      );
      const unknownBackend = { backend: "vault", updated_at: "2026-01-01T00:00:00.000Z" };
      await assertRejects(() =>
        store.keychain.put("a.b", unknownBackend as unknown as KeychainRecord)
      );
      assertEquals(await store.keychain.list(), []);
    },
  },
];
