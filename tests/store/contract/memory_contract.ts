/**
 * Contract: the memory notebook. Values read back as set (the JSON text's
 * size exact), keys and values are refused alike with `TOOL_INPUT_INVALID`,
 * and a listing is in the byte order of the keys' UTF-8, whatever a prefix
 * holds (`%`, `_`, `\`, NUL, characters beyond the BMP).
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import {
  MEMORY_KEY_MAX_BYTES,
  MEMORY_KEY_MAX_CHARS,
  MEMORY_VALUE_MAX_BYTES,
  type Store,
} from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

const encoder = new TextEncoder();

/** Compares strings by their UTF-8 bytes (Deno KV's key order). */
function byteOrder(a: string, b: string): number {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i] - y[i];
  }
  return x.length - y.length;
}

async function keysOf(store: Store, options: { prefix?: string; limit?: number } = {}) {
  const { entries, truncated } = await store.memory.list(options);
  return { keys: entries.map((entry) => entry.key), truncated };
}

async function invalid(promise: Promise<unknown>): Promise<GatewayError> {
  const error = await assertRejects(() => promise, GatewayError);
  assertEquals(error.code, "TOOL_INPUT_INVALID");
  return error;
}

/** Keys whose order differs between byte order, UTF-16 order and a linguistic collation. */
const KEYS = [
  "b",
  "a/2",
  "ab",
  "a/1",
  "a",
  "A",
  "B",
  "a%",
  "a%b",
  "a_",
  "a_b",
  "a\\",
  "a\\b",
  "a\u0000",
  "a\u0000b",
  "a\u0001",
  "é",
  "e",
  "f",
  "\uFEFFbom",
  "\uFFFD",
  "\u{1F600}",
  "\u{1F600}x",
  "z z",
];

/** Cases of the memory notebook. */
export const MEMORY_CONTRACT: readonly ContractCase[] = [
  {
    name: "memory: set() stores JSON values that read back as set from another handle",
    async run({ store, another }) {
      const at = new Date("2026-01-01T00:00:00.000Z");
      const value = { b: 1, a: [true, null, "é字\u{1F600}"], nested: { z: 0.5, y: "\u0000" } };
      const text = JSON.stringify(value);
      const first = await store.memory.set("note", value, at);
      assertEquals(first, {
        created: true,
        updated_at: at.toISOString(),
        size_bytes: encoder.encode(text).length,
      });
      const other = await another();
      const read = await other.memory.get("note");
      assertEquals(read, {
        key: "note",
        value,
        updated_at: at.toISOString(),
        size_bytes: encoder.encode(text).length,
      });
      assertEquals(Object.keys(read?.value as object), ["b", "a", "nested"], "key order is kept");
      assertEquals(await other.memory.get("missing"), null);

      const later = new Date("2026-01-02T00:00:00.000Z");
      assertEquals(await other.memory.set("note", "replaced", later), {
        created: false,
        updated_at: later.toISOString(),
        size_bytes: 10,
      });
      assertEquals((await store.memory.get("note"))?.value, "replaced");

      // Falsy values are values.
      for (const [key, falsy] of [["null", null], ["zero", 0], ["false", false], ["empty", ""]]) {
        assertEquals((await store.memory.set(key as string, falsy)).created, true);
        const entry = await other.memory.get(key as string);
        assert(entry, `${key} is stored`);
        assertEquals(entry.value, falsy);
      }
      // Keys are compared exactly; odd characters are fine.
      for (const key of ["a\u0000b", "\uFEFFbom", "\u{1F600}", " ", "Note"]) {
        assertEquals((await store.memory.set(key, key)).created, true, JSON.stringify(key));
        assertEquals((await other.memory.get(key))?.value, key, JSON.stringify(key));
      }
      assertEquals((await other.memory.get("note"))?.value, "replaced");

      assertEquals(await other.memory.delete("note"), true);
      assertEquals(await store.memory.delete("note"), false);
      assertEquals(await store.memory.get("note"), null);
      assertEquals(await store.memory.delete("never"), false);
    },
  },
  {
    name: "memory: values up to 60 KiB of JSON are taken; larger ones and non-JSON are refused",
    async run({ store }) {
      const ascii = "x".repeat(MEMORY_VALUE_MAX_BYTES - 2);
      assertEquals((await store.memory.set("big", ascii)).size_bytes, MEMORY_VALUE_MAX_BYTES);
      assertEquals((await store.memory.get("big"))?.value, ascii);
      const mixed = "é".repeat(10_000) + "字".repeat(10_000) +
        "a".repeat(MEMORY_VALUE_MAX_BYTES - 50_002);
      assertEquals((await store.memory.set("mixed", mixed)).size_bytes, MEMORY_VALUE_MAX_BYTES);
      assertEquals((await store.memory.get("mixed"))?.size_bytes, MEMORY_VALUE_MAX_BYTES);

      const over = await invalid(store.memory.set("big", "x".repeat(MEMORY_VALUE_MAX_BYTES)));
      const problem = `its JSON is ${
        MEMORY_VALUE_MAX_BYTES + 2
      } bytes; the limit is ${MEMORY_VALUE_MAX_BYTES} (60 KiB)`;
      assertEquals(over.message, `Invalid memory value: ${problem}`);
      assertEquals(over.details, {
        fields: [{ path: "value", message: problem }],
        size_bytes: MEMORY_VALUE_MAX_BYTES + 2,
        limit: MEMORY_VALUE_MAX_BYTES,
      });
      assertEquals((await store.memory.get("big"))?.value, ascii, "a refused set changes nothing");

      for (const notJson of [undefined, () => 1, Symbol("s")]) {
        const error = await invalid(store.memory.set("k", notJson));
        assertEquals(error.message, "Invalid memory value: it is not a JSON value");
        assertEquals(error.details, {
          fields: [{ path: "value", message: "it is not a JSON value" }],
        });
      }
      assertEquals(await store.memory.get("k"), null);
    },
  },
  {
    name: "memory: bad keys are refused alike by set, get and delete",
    async run({ store }) {
      const cases: [string, string][] = [
        ["", "the key is empty"],
        [
          "k".repeat(MEMORY_KEY_MAX_CHARS + 1),
          `the key has ${
            MEMORY_KEY_MAX_CHARS + 1
          } characters; the limit is ${MEMORY_KEY_MAX_CHARS}`,
        ],
        [
          "字".repeat(342),
          `the key has ${342 * 3} bytes in UTF-8; the limit is ${MEMORY_KEY_MAX_BYTES}`,
        ],
      ];
      for (const [key, problem] of cases) {
        for (
          const call of [
            () => store.memory.set(key, 1),
            () => store.memory.get(key),
            () => store.memory.delete(key),
          ]
        ) {
          const error = await invalid(call());
          assertEquals(error.message, `Invalid memory key: ${problem}`);
          assertEquals(error.details, { fields: [{ path: "key", message: problem }] });
        }
      }
      // At the limits: taken.
      const longest = "k".repeat(MEMORY_KEY_MAX_CHARS);
      assertEquals((await store.memory.set(longest, 1)).created, true);
      const widest = "\u{1F600}".repeat(MEMORY_KEY_MAX_BYTES / 4);
      assertEquals((await store.memory.set(widest, 2)).created, true);
      assertEquals((await store.memory.get(widest))?.value, 2);
      assertEquals((await store.memory.list()).entries.length, 2);
      await assertRejects(() => store.memory.list({ limit: 0 }), RangeError);
      await assertRejects(() => store.memory.list({ limit: 1.5 }), RangeError);
    },
  },
  {
    name: "memory: list() is in UTF-8 byte order, by exact prefix, with limit and truncated",
    async run({ store, another }) {
      for (const key of KEYS) await store.memory.set(key, { key });
      const sorted = [...KEYS].sort(byteOrder);
      const other = await another();
      assertEquals(await keysOf(other), { keys: sorted, truncated: false });
      assertEquals(await keysOf(other, { prefix: "" }), { keys: sorted, truncated: false });
      const { entries } = await other.memory.list({ prefix: "a\\" });
      assertEquals(entries.map(({ key, value }) => ({ key, value })), [
        { key: "a\\", value: { key: "a\\" } },
        { key: "a\\b", value: { key: "a\\b" } },
      ]);

      const expect = (prefix: string) => sorted.filter((key) => key.startsWith(prefix));
      for (
        const prefix of [
          "a",
          "a/",
          "a%",
          "a_",
          "a\\",
          "a\u0000",
          "%",
          "_",
          "A",
          "é",
          "\u{1F600}",
          "\uFEFF",
          "\uFFFD",
          "z z",
          "zzz",
        ]
      ) {
        assertEquals(
          await keysOf(other, { prefix }),
          { keys: expect(prefix), truncated: false },
          `prefix ${JSON.stringify(prefix)}`,
        );
      }
      // limit: exactly as many as match is not truncated, fewer is.
      const a = expect("a");
      assertEquals(await keysOf(store, { prefix: "a", limit: a.length }), {
        keys: a,
        truncated: false,
      });
      assertEquals(await keysOf(store, { prefix: "a", limit: 3 }), {
        keys: a.slice(0, 3),
        truncated: true,
      });
      assertEquals(await keysOf(store, { limit: 1 }), {
        keys: sorted.slice(0, 1),
        truncated: true,
      });
      assertEquals(await keysOf(store, { limit: 1000 }), { keys: sorted, truncated: false });
      // Entries carry what get() does.
      const [first] = (await store.memory.list({ prefix: "é" })).entries;
      assertEquals(first, await store.memory.get("é"));
    },
  },
  {
    name: "memory: handles setting one new key at once: exactly one creates it",
    async run({ store, another }) {
      const handles = [store, await another(), await another()];
      const results = await Promise.all(
        Array.from({ length: 9 }, (_, n) => handles[n % 3].memory.set("race", n)),
      );
      assertEquals(results.filter((result) => result.created).length, 1);
      const entry = await store.memory.get("race");
      assert(entry && typeof entry.value === "number");
      const deleted = await Promise.all(handles.map((handle) => handle.memory.delete("race")));
      assertEquals(deleted.filter(Boolean).length, 1, "one delete finds it");
    },
  },
];
