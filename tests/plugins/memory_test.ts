import { assert, assertEquals, assertMatch, assertStringIncludes } from "../_asserts.ts";
import { memoryPlugin } from "../../src/plugins/mod.ts";
import { MEMORY_VALUE_MAX_BYTES } from "../../src/store/mod.ts";
import { expectCode, pluginGateway } from "./_gateway.ts";

Deno.test("memory_set, memory_get, memory_delete round-trip a JSON value", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  const value = { list: [1, "two", null, true], nested: { ok: 1.5 } };
  const set = await gw.gateway.call("memory_set", { key: "project/notes", value });
  assertEquals(set.output.key, "project/notes");
  assertEquals(set.output.created, true);
  assertEquals(set.output.size_bytes, JSON.stringify(value).length);
  assertMatch(String(set.output.updated_at), /^\d{4}-\d\d-\d\dT.*Z$/);

  const again = await gw.gateway.call("memory_set", { key: "project/notes", value: "replaced" });
  assertEquals(again.output.created, false);

  const got = await gw.gateway.call("memory_get", { key: "project/notes" });
  assertEquals(got.output.found, true);
  assertEquals(got.output.value, "replaced");

  assertEquals(
    (await gw.gateway.call("memory_delete", { key: "project/notes" })).output,
    { key: "project/notes", deleted: true },
  );
  assertEquals(
    (await gw.gateway.call("memory_delete", { key: "project/notes" })).output.deleted,
    false,
  );
});

Deno.test("memory_get of a missing key answers found=false, not an error", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  const got = await gw.gateway.call("memory_get", { key: "nothing-here" });
  assertEquals(got.output, { key: "nothing-here", found: false });
});

Deno.test("memory_set stores falsy JSON values (null, 0, false, empty string)", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  for (const [index, value] of [null, 0, false, ""].entries()) {
    await gw.gateway.call("memory_set", { key: `k${index}`, value });
    const got = await gw.gateway.call("memory_get", { key: `k${index}` });
    assertEquals(got.output.found, true);
    assertEquals(got.output.value, value);
  }
});

Deno.test("memory_list filters by prefix, orders by key and reports truncation", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  for (const key of ["b", "a/2", "ab", "a/1", "a/3", "a"]) {
    await gw.gateway.call("memory_set", { key, value: key.toUpperCase() });
  }
  const all = await gw.gateway.call("memory_list", {});
  assertEquals(
    (all.output.entries as { key: string }[]).map((e) => e.key),
    ["a", "a/1", "a/2", "a/3", "ab", "b"],
  );
  assertEquals(all.output.truncated, false);

  const prefixed = await gw.gateway.call("memory_list", { prefix: "a/", include_values: true });
  assertEquals(prefixed.output.entries, [
    {
      key: "a/1",
      updated_at: getAt(prefixed.output, 0),
      size_bytes: 5,
      value: "A/1",
    },
    { key: "a/2", updated_at: getAt(prefixed.output, 1), size_bytes: 5, value: "A/2" },
    { key: "a/3", updated_at: getAt(prefixed.output, 2), size_bytes: 5, value: "A/3" },
  ]);
  assertEquals(prefixed.output.count, 3);

  const limited = await gw.gateway.call("memory_list", { prefix: "a", limit: 2 });
  assertEquals((limited.output.entries as { key: string }[]).map((e) => e.key), ["a", "a/1"]);
  assertEquals(limited.output.truncated, true);
  assert(!("value" in (limited.output.entries as object[])[0]), "values only with include_values");

  const none = await gw.gateway.call("memory_list", { prefix: "zzz" });
  assertEquals(none.output, { entries: [], count: 0, truncated: false });
});

function getAt(output: Record<string, unknown>, index: number): string {
  return (output.entries as { updated_at: string }[])[index].updated_at;
}

Deno.test("memory_set accepts a value of exactly 60 KiB, also with multi-byte text", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  const ascii = "x".repeat(MEMORY_VALUE_MAX_BYTES - 2); // + 2 quotes
  const set = await gw.gateway.call("memory_set", { key: "big", value: ascii });
  assertEquals(set.output.size_bytes, MEMORY_VALUE_MAX_BYTES);
  const got = await gw.gateway.call("memory_get", { key: "big" });
  assertEquals(got.output.value, ascii);

  const mixed = "é".repeat(10_000) + "字".repeat(10_000) +
    "a".repeat(MEMORY_VALUE_MAX_BYTES - 50_002);
  const setMixed = await gw.gateway.call("memory_set", { key: "mixed", value: mixed });
  assertEquals(setMixed.output.size_bytes, MEMORY_VALUE_MAX_BYTES);
  assertEquals((await gw.gateway.call("memory_get", { key: "mixed" })).output.value, mixed);
});

Deno.test("memory_set rejects a value over 60 KiB with its size and the limit", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  const error = await expectCode(
    () => gw.gateway.call("memory_set", { key: "big", value: "x".repeat(MEMORY_VALUE_MAX_BYTES) }),
    "TOOL_INPUT_INVALID",
  );
  assertEquals(
    error.message,
    `Invalid memory value: its JSON is ${
      MEMORY_VALUE_MAX_BYTES + 2
    } bytes; the limit is ${MEMORY_VALUE_MAX_BYTES} (60 KiB)`,
  );
  // The same details shape as a schema failure: the tool and [{path, message}].
  assertEquals(error.details, {
    tool: "memory_set",
    fields: [{
      path: "value",
      message: `its JSON is ${
        MEMORY_VALUE_MAX_BYTES + 2
      } bytes; the limit is ${MEMORY_VALUE_MAX_BYTES} (60 KiB)`,
    }],
    size_bytes: MEMORY_VALUE_MAX_BYTES + 2,
    limit: MEMORY_VALUE_MAX_BYTES,
  });
  const failed = gw.events.find((e) => e.type === "tool.failed");
  assertEquals(failed?.data.error_code, "TOOL_INPUT_INVALID");
});

Deno.test("memory tools reject bad keys, wrong types, missing and unknown arguments", async () => {
  await using gw = await pluginGateway([memoryPlugin()]);
  const empty = await expectCode(
    () => gw.gateway.call("memory_get", { key: "" }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(empty.message, "Invalid arguments for memory_get: key: Too small");

  const long = await expectCode(
    () => gw.gateway.call("memory_set", { key: "k".repeat(513), value: 1 }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(long.message, "key: Too big: expected string to have <=512 characters");

  const wide = await expectCode(
    () => gw.gateway.call("memory_set", { key: "😀".repeat(300), value: 1 }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(wide.message, "key: the key has 1200 bytes in UTF-8; the limit is 1024");

  const wrongType = await expectCode(
    () => gw.gateway.call("memory_set", { key: 42, value: 1 }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(wrongType.message, "key: Invalid input: expected string, received number");

  const missing = await expectCode(
    () => gw.gateway.call("memory_set", { key: "a" }),
    "TOOL_INPUT_INVALID",
  );
  assertEquals(
    missing.message,
    "Invalid arguments for memory_set: value: Invalid input: expected a JSON value, received undefined",
  );

  const unknown = await expectCode(
    () => gw.gateway.call("memory_get", { key: "a", vaule: 1 }),
    "TOOL_INPUT_INVALID",
  );
  assertStringIncludes(unknown.message, 'Unrecognized key: "vaule"');

  await expectCode(() => gw.gateway.call("memory_list", { limit: 0 }), "TOOL_INPUT_INVALID");
  await expectCode(() => gw.gateway.call("memory_fetch", { key: "a" }), "TOOL_NOT_FOUND");
});

Deno.test("every memory tool is idempotent and the plugin is zero-config", () => {
  const plugin = memoryPlugin();
  assertEquals(plugin.zeroConfig, true);
  assertEquals(plugin.tools.map((t) => [t.name, t.idempotent]), [
    ["memory_set", true],
    ["memory_get", true],
    ["memory_list", true],
    ["memory_delete", true],
  ]);
});

Deno.test("memory values persist in the data directory's KV file across store handles", async () => {
  const home = await Deno.makeTempDir({ prefix: "toolgate-memory-" });
  try {
    const { openStore } = await import("../../src/store/mod.ts");
    const first = await openStore({ dataDir: home });
    await first.memory.set("persisted", { n: 1 });
    first.close();
    const second = await openStore({ dataDir: home });
    assertEquals((await second.memory.get("persisted"))?.value, { n: 1 });
    second.close();
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
