import { assertEquals, assertThrows } from "../_asserts.ts";
import { canonicalJson } from "../../src/audit/mod.ts";

Deno.test("canonicalJson() sorts keys recursively and writes no whitespace", () => {
  assertEquals(
    canonicalJson({ b: [1, { d: 1, c: { z: null, a: true } }], a: "x" }),
    '{"a":"x","b":[1,{"c":{"a":true,"z":null},"d":1}]}',
  );
});

Deno.test("canonicalJson() orders keys by UTF-16 code units", () => {
  assertEquals(
    canonicalJson({ a: 1, B: 2, "é": 3, "😀": 4, "": 5 }),
    '{"":5,"B":2,"a":1,"é":3,"😀":4}',
  );
});

Deno.test("canonicalJson() writes strings and numbers exactly as JSON.stringify does", () => {
  const value = {
    s: 'quote " slash \\ nl \n tab \t ctl \u0001 lone \ud800',
    n: [0.1, -0, 1e21, 5e-7, 12],
  };
  assertEquals(canonicalJson(value), JSON.stringify({ n: value.n, s: value.s }));
  assertEquals(canonicalJson([NaN, Infinity]), "[null,null]");
});

Deno.test("canonicalJson() follows JSON.stringify for undefined, functions and toJSON", () => {
  const date = new Date(Date.UTC(2025, 0, 2));
  assertEquals(
    canonicalJson({ u: undefined, f: () => 1, a: [undefined, () => 1], d: date }),
    '{"a":[null,null],"d":"2025-01-02T00:00:00.000Z"}',
  );
});

Deno.test("canonicalJson() rejects bigints, cycles and a top-level undefined", () => {
  assertThrows(() => canonicalJson({ n: 1n }), "bigint");
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  assertThrows(() => canonicalJson(cycle), "cycle");
  assertThrows(() => canonicalJson(undefined), "not JSON");
});
